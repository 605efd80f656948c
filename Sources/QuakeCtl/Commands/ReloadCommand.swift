import QuakeClient
import QuakeProtocol
import ArgumentParser

/// `quakectl reload`: what systemd's `ExecReload=` runs.
public struct ReloadCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Ask quaked to re-read its configuration and wait.",
        discussion: """
            Exits 1 when quaked rejects the configuration (it keeps the running one), 77 without \
            the right to reload. Suits systemd's ExecReload=.
            """)

    @OptionGroup public var options: ClientOptions

    public init() {}

    public func run() async throws {
        try await options.withConnection { try await $0.reload() }
        Console.line(options.json ? #"{"reloaded":true}"# : "quaked reloaded its configuration")
    }
}
