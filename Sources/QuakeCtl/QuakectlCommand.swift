import QuakeClient
import QuakeProtocol
import ArgumentParser

/// `quakectl`: the command-line client of quaked.
public struct QuakectlCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "quakectl",
        abstract: "Watch, query and manage the quaked earthquake store.",
        discussion: """
            quakectl talks to quaked over its control socket (Varlink interface io.quaked), or with \
            --host [USER@]HOST over `ssh HOST quakectl bridge` to a quaked on another host \
            ($QUAKECTL_SSH replaces ssh, $QUAKECTL_REMOTE the remote quakectl). Every command takes \
            --socket (default: $QUAKED_SOCKET, else quaked's default for this user), --host, --json \
            and --absolute, before or after the command's name. Exit codes: 0 success, 64 usage, 65 bad data, 69 quaked unreachable, \
            77 permission denied, 1 other failures.
            """,
        subcommands: [
            WatchCommand.self, RefreshCommand.self, ListCommand.self, ShowCommand.self, DeleteCommand.self,
            ExportCommand.self, StatusCommand.self, HistoryCommand.self, ReloadCommand.self, BridgeCommand.self,
            MetricsCommand.self, MapCommand.self, BackfillCommand.self, SyncCommand.self,
        ])
    public init() {}
}
