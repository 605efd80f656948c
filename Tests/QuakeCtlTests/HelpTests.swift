import QuakeClient
import QuakeProtocol
import Varlink
import Foundation
import QuakeTestSupport
import Testing

/// `--help` of every command against the stored copies in `Help/`. After an intended change,
/// regenerate them: `for c in "" watch ... metrics map backfill sync; do COLUMNS=80 quakectl $c --help > Help/${c:-quakectl}.txt; done`.
@Suite struct HelpTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Help")
    static let commands = [
        "quakectl", "watch", "refresh", "list", "show", "delete", "export", "status", "history", "reload", "bridge",
        "metrics", "map", "backfill", "sync",
    ]

    @Test(arguments: commands) func helpMatchesTheStoredCopy(command: String) async throws {
        let arguments = command == "quakectl" ? ["--help"] : [command, "--help"]
        let result = try await quakectl(arguments, environment: ["COLUMNS": "80"])
        #expect(result.status == 0)
        let stored = try String(contentsOf: Self.directory.appendingPathComponent("\(command).txt"), encoding: .utf8)
        #expect(result.stdout == stored)
    }

    /// ArgumentParser appends an option's default itself, `(default: 60s)`: a help text saying it
    /// as well printed it twice.
    @Test(arguments: commands) func noDefaultIsGivenTwice(command: String) throws {
        let stored = try String(contentsOf: Self.directory.appendingPathComponent("\(command).txt"), encoding: .utf8)
        let words = stored.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let doubled = try Regex(#"\((?i:default)[ :][^()]*\)\.? \(default: "#)
        #expect(words.firstMatch(of: doubled) == nil, "\(command): \(words.firstMatch(of: doubled).map { String(words[$0.range]) } ?? "")")
        let handWritten = try Regex(#"Default: [^.]*\. \(default: "#)
        #expect(words.firstMatch(of: handWritten) == nil, "\(command)")
    }

    @Test func completionScriptsAreGenerated() async throws {
        for shell in ["bash", "zsh", "fish"] {
            let result = try await quakectl(["--generate-completion-script", shell])
            #expect(result.status == 0)
            #expect(result.stdout.contains("watch"))
        }
    }
}
