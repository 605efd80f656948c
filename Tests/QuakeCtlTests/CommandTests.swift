import QuakeClient
import QuakeProtocol
import Varlink
import Foundation
import QuakeCtl
import QuakeStore
import QuakeTestSupport
import Testing

/// The one-shot commands against a real quaked, as real processes.
extension ClientEndToEnd {
    @Suite struct CommandTests {
        @Test func unreachableDaemonExits69WithAHint() async throws {
            try await withTemporaryDirectory { dir in
                let socket = dir.appendingPathComponent("nothing.sock").path
                for command in [["status"], ["list"], ["refresh"], ["reload"], ["show", "x"]] {
                    let result = try await quakectl(command + ["--socket", socket])
                    #expect(result.status == 69, "\(command)")
                    #expect(result.stderr.contains("cannot reach quaked at \(socket)"))
                    #expect(result.stderr.contains("quaked --socket"))
                    #expect(result.stdout.isEmpty)
                }
                // QUAKED_SOCKET is the default.
                let viaEnvironment = try await quakectl(["status"], environment: ["QUAKED_SOCKET": socket])
                #expect(viaEnvironment.status == 69)
                #expect(viaEnvironment.stderr.contains(socket))
            }
        }

        @Test func usageErrorsExit64() async throws {
            #expect(try await quakectl(["list", "--near", "north"]).status == 64)
            #expect(try await quakectl(["list", "--since", "whenever"]).status == 64)
            #expect(try await quakectl(["export", "--format", "xml"]).status == 64)
            #expect(try await quakectl(["delete"]).status == 64)
            #expect(try await quakectl(["watch", "--since", "yesterday"]).status == 64)
            #expect(try await quakectl(["frobnicate"]).status == 64)
        }

        @Test func listJSONMatchesTheStore() async throws {
            try await withQuaked { daemon in
                let result = try await quakectl(["list", "--json", "--socket", daemon.socketPath])
                #expect(result.status == 0, "\(result.stderr)")
                let reply = try JSONDecoder().decode(IOQuaked.Query.Reply.self, from: Data(result.stdout.utf8))
                let stored = try daemon.withStore { try $0.allQuakes() }.map(wire)
                #expect(reply.total == stored.count)
                #expect(reply.quakes.count == stored.count)
                #expect(byID(reply.quakes) == byID(stored))
                #expect(reply.quakes.map(\.time) == reply.quakes.map(\.time).sorted(by: >))
                #expect(reply.headToken == Int(try daemon.withStore { try $0.head() }))

                let filtered = try await quakectl([
                    "list", "--json", "--min-mag", "2", "--limit", "3", "--socket", daemon.socketPath,
                ])
                let small = try JSONDecoder().decode(IOQuaked.Query.Reply.self, from: Data(filtered.stdout.utf8))
                #expect(small.quakes.count == 3)
                #expect(small.total == stored.filter { ($0.mag ?? -1) >= 2 }.count)
                #expect(small.quakes.allSatisfy { ($0.mag ?? -1) >= 2 })

                // Plain text: one line per quake plus the footer, no escape codes off a terminal.
                let text = try await quakectl(["list", "--socket", daemon.socketPath])
                let lines = text.stdout.split(separator: "\n")
                #expect(lines.count == stored.count + 1)
                #expect(lines.last?.hasPrefix("146 earthquakes · updated ") == true)
                #expect(!text.stdout.contains("\u{1B}"))
            }
        }

        @Test func showPrintsEveryFieldAndUnknownIdsExit65() async throws {
            try await withQuaked { daemon in
                let stored = try #require(try daemon.withStore { try $0.allQuakes() }.first)
                let shown = try await quakectl(["show", stored.id, "--socket", daemon.socketPath])
                #expect(shown.status == 0)
                for name in QuakeFields.names { #expect(shown.stdout.contains("  \(name) ")) }
                #expect(shown.stdout.contains(stored.id))
                let json = try await quakectl(["show", stored.id, "--json", "--socket", daemon.socketPath])
                #expect(try JSONDecoder().decode(IOQuaked.Quake.self, from: Data(json.stdout.utf8)) == (try wire(stored)))

                let missing = try await quakectl(["show", "nope123", "--socket", daemon.socketPath])
                #expect(missing.status == 65)
                #expect(
                    missing.stderr
                        == "quakectl: no earthquake with id nope123 is stored; `quakectl list` shows the stored ids.\n")
            }
        }

        /// A deleted event that the feed still carries comes back on the next pull, as a new insert.
        @Test func deleteThenRefreshReinsertsWhatTheFeedStillCarries() async throws {
            try await withQuaked { daemon in
                let ids = try daemon.withStore { try $0.allQuakes() }.prefix(2).map(\.id)
                let deleted = try await quakectl(["delete"] + ids + ["missing-id", "--socket", daemon.socketPath])
                #expect(deleted.status == 0, "\(deleted.stderr)")
                #expect(deleted.stdout.hasPrefix("deleted 2 earthquakes · token "))
                #expect(deleted.stderr.contains("missing-id"))
                #expect(try daemon.withStore { try $0.count() } == 144)
                let deleteToken = try daemon.withStore { try $0.head() }
                let history = try daemon.withStore { try $0.history(after: deleteToken - 1) }
                #expect(history.transactions.last?.author == .delete)

                let refreshed = try await quakectl(["refresh", "--socket", daemon.socketPath])
                #expect(refreshed.status == 0, "\(refreshed.stderr)")
                #expect(refreshed.stdout.hasPrefix("+2 new, 0 updated, 0 removed · token "))
                let reinserted = try daemon.withStore { try $0.history(after: deleteToken) }
                #expect(Set(reinserted.transactions.flatMap(\.changes).map(\.quakeId)) == Set(ids))
                #expect(reinserted.transactions.flatMap(\.changes).allSatisfy { $0.kind == .insert })

                #expect(try await quakectl(["refresh", "--socket", daemon.socketPath]).stdout == "no changes\n")
                let none = try await quakectl(["delete", "missing-id", "--socket", daemon.socketPath])
                #expect(none.status == 65)
            }
        }

        @Test func refreshOfAnUnknownFeedFails() async throws {
            try await withQuaked { daemon in
                let result = try await quakectl(["refresh", "--feed", "no_such_feed", "--socket", daemon.socketPath])
                #expect(result.status == 64)
                #expect(result.stderr.contains("no feed named no_such_feed"))
            }
        }

        @Test func statusHistoryAndReload() async throws {
            try await withQuaked { daemon in
                let json = try await quakectl(["status", "--json", "--socket", daemon.socketPath])
                let status = try JSONDecoder().decode(IOQuaked.GetStatus.Reply.self, from: Data(json.stdout.utf8))
                #expect(status.quakeCount == 146)
                #expect(status.storeId == (try daemon.withStore { $0.storeID }))
                let text = try await quakectl(["status", "--socket", daemon.socketPath])
                #expect(text.stdout.contains("store        \(status.storeId)"))
                #expect(text.stdout.contains("146 · database "))
                #expect(text.stdout.contains("last pull "))
                #expect(text.stdout.contains("next pull in "))

                let history = try await quakectl(["history", "--json", "--socket", daemon.socketPath])
                let transactions = try history.stdout.split(separator: "\n").map {
                    try JSONDecoder().decode(IOQuaked.Transaction.self, from: Data($0.utf8))
                }
                #expect(transactions.count == 1)
                #expect(transactions.first?.changes.count == 146)
                let summary = try await quakectl([
                    "history", "--summary", "--after", "0", "--socket", daemon.socketPath,
                ])
                #expect(summary.stdout.split(separator: "\n").count == 1)
                #expect(summary.stdout.contains("import · "))

                let reload = try await quakectl(["reload", "--socket", daemon.socketPath])
                #expect(reload.status == 0, "\(reload.stderr)")
                #expect(reload.stdout == "quaked reloaded its configuration\n")
            }
        }

        @Test func noEscapeCodesWithNoColorOrOffATerminal() async throws {
            try await withQuaked { daemon in
                // On a terminal (script(1) gives the command a pty) there are colours...
                let command = "\(BuiltProducts.path("quakectl")) list --limit 3 --socket \(daemon.socketPath)"
                let colored = try await ChildProcess.run(
                    "/usr/bin/script", ["-qec", command, "/dev/null"], environment: ["NO_COLOR": "", "TERM": "xterm"])
                #expect(colored.stdout.contains("\u{1B}["))
                // ...but never with NO_COLOR set,
                let noColor = try await ChildProcess.run(
                    "/usr/bin/script", ["-qec", command, "/dev/null"], environment: ["NO_COLOR": "1", "TERM": "xterm"])
                #expect(noColor.stdout.contains("M "))
                #expect(!noColor.stdout.contains("\u{1B}["))
                // ...nor into a pipe.
                for arguments in [["list"], ["status"], ["history"], ["show", "nc72199065"]] {
                    let piped = try await quakectl(
                        arguments + ["--socket", daemon.socketPath], environment: ["TERM": "xterm"])
                    #expect(!piped.stdout.contains("\u{1B}"), "\(arguments)")
                    #expect(!piped.stderr.contains("\u{1B}"), "\(arguments)")
                }
            }
        }
    }
}
