import Testing

@testable import QuakeDaemon

/// How often quaked purges history and applies event retention between reloads.
@Suite struct StoreMaintenanceTests {
    @Test func aTenthOfTheShorterAgeBetweenAMinuteAndAnHour() {
        #expect(StoreMaintenance.interval(historyMaxAge: .seconds(7 * 86_400), eventRetention: nil) == .seconds(3600))
        #expect(StoreMaintenance.interval(historyMaxAge: .seconds(600), eventRetention: nil) == .seconds(60))
        #expect(StoreMaintenance.interval(historyMaxAge: .seconds(60), eventRetention: nil) == .seconds(60))
        #expect(StoreMaintenance.interval(historyMaxAge: .seconds(7200), eventRetention: nil) == .seconds(720))
        #expect(
            StoreMaintenance.interval(historyMaxAge: .seconds(7 * 86_400), eventRetention: .seconds(3000)) == .seconds(300))
    }
}
