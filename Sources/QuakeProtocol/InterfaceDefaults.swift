import Varlink

extension IOQuaked {
    /// The defaults and limits io.quaked.varlink documents for optional parameters, defined once
    /// for quaked (which applies them) and its clients (which ask for them). The interface's
    /// comments state the same numbers; a test (VarlinkTests, InterfaceDefaultsTests) checks them.
    public enum Defaults {
        /// Subscribe: seconds between heartbeats while nothing changes (`heartbeatSeconds`).
        public static let heartbeatSeconds = 30
        /// Subscribe: the heartbeats quaked agrees to; others are brought within.
        public static let heartbeatSecondsRange = 1...3600
        /// FetchHistory: transactions per page (`limit`).
        public static let historyLimit = 100
        /// FetchHistory: the most transactions a page holds, whatever `limit` asks.
        public static let historyLimitMaximum = 1000
        /// FetchHistory: about the most changes a page holds (`maxChanges`).
        public static let historyMaxChanges = 10_000
        /// Snapshot: quakes per reply (`pageSize`).
        public static let snapshotPageSize = 1000
        /// Snapshot: the most quakes a reply holds, whatever `pageSize` asks.
        public static let snapshotPageSizeMaximum = 10_000

        /// The heartbeat quaked sends for a `heartbeatSeconds` parameter.
        public static func heartbeat(_ requested: Int?) -> Duration {
            .seconds(min(max(requested ?? heartbeatSeconds, heartbeatSecondsRange.lowerBound), heartbeatSecondsRange.upperBound))
        }

        /// The transactions per page quaked serves for a `limit` parameter.
        public static func historyLimit(_ requested: Int?) -> Int {
            min(max(requested ?? historyLimit, 1), historyLimitMaximum)
        }

        /// The changes per page quaked aims at for a `maxChanges` parameter.
        public static func historyMaxChanges(_ requested: Int?) -> Int {
            max(requested ?? historyMaxChanges, 1)
        }

        /// The quakes per reply quaked sends for a `pageSize` parameter.
        public static func snapshotPageSize(_ requested: Int?) -> Int {
            min(max(requested ?? snapshotPageSize, 1), snapshotPageSizeMaximum)
        }
    }
}
