import QuakeClient
import QuakeProtocol
import ArgumentParser

/// `quakectl delete ID...`: one batch delete, recorded in history.
public struct DeleteCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete earthquakes from the store, as one history transaction.",
        discussion: """
            The delete is recorded in history (reason deleted-by-user), so watchers see it. It is \
            not a block list: a later pull of a feed that still carries a deleted event inserts \
            it again, as a new insert. Ids that are not stored are reported; when none of the ids \
            is stored the exit status is 65. Needs root, quaked's user or its admin group.
            """)

    @OptionGroup public var options: ClientOptions

    @Argument(help: ArgumentHelp("The ids of the earthquakes to delete.", valueName: "id"))
    public var ids: [String] = []

    public init() {}

    public func validate() throws {
        if ids.isEmpty { throw ValidationError("Name at least one earthquake id to delete.") }
    }

    public func run() async throws {
        let reply = try await options.withConnection { try await $0.delete(ids: ids) }
        if options.json {
            Console.line(JSONText.encode(reply))
        } else {
            var line = "deleted \(Formatting.earthquakes(reply.deleted.count))"
            if let token = reply.token { line += " · token \(token)" }
            Console.line(line)
            if !reply.notFound.isEmpty {
                Console.err("quakectl: not stored, so not deleted: \(reply.notFound.joined(separator: ", ")).\n")
            }
        }
        if reply.deleted.isEmpty {
            throw QuakectlError(
                QuakectlError.dataError, "none of the given ids is stored; `quakectl list` shows the stored ids.")
        }
    }
}
