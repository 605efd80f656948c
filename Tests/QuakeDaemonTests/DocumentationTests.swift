import Foundation
import QuakeTestSupport
import Testing

/// README is the front door and docs/ holds the rest: README gives the two commands of the quick
/// start exactly as CI and scripts/check-fresh-debian run them, and every relative link in README
/// and docs/ leads to a file that exists and, with a `#fragment`, to a heading in it. The tables
/// docs/ keeps beside a man page name what the page names (the metrics: QuakedMetricsTests).
@Suite struct DocumentationTests {
    static func text(_ path: String) throws -> String {
        try String(contentsOf: Fixtures.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// The Markdown files that link: README.md and every docs/*.md.
    static func markdownFiles() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(
            atPath: Fixtures.packageRoot.appendingPathComponent("docs").path)
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
    }

    /// The lines of `text` outside fenced code blocks.
    static func proseLines(_ text: String) -> [Substring] {
        var inFence = false
        var lines: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                inFence.toggle()
            } else if !inFence {
                lines.append(line)
            }
        }
        return lines
    }

    /// GitHub's anchors for the headings of `text`: lower case, punctuation other than `-` and `_`
    /// dropped, spaces to `-`, and `-1`, `-2` ... after a repeated one.
    static func anchors(_ text: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        for line in proseLines(text) where line.hasPrefix("#") {
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
            var slug = ""
            for character in title.lowercased() {
                if character.isLetter || character.isNumber || character == "-" || character == "_" {
                    slug.append(character)
                } else if character == " " {
                    slug.append("-")
                }
            }
            let count = seen[slug, default: 0]
            seen[slug] = count + 1
            anchors.insert(count == 0 ? slug : "\(slug)-\(count)")
        }
        return anchors
    }

    @Test func readmeGivesTheTwoCommandsAsCIAndTheFreshDebianCheckRunThem() throws {
        let readme = try Self.text("README.md")
        let run = "scripts/install-deps && swift run quaked"
        let test = "scripts/install-deps && scripts/test"
        // Each is a code block of its own, in the quick start.
        let quickStart = try #require(readme.components(separatedBy: "## Quick start").dropFirst().first)
            .components(separatedBy: "\n## ").first ?? ""
        #expect(quickStart.contains("```sh\n\(run)\n```"), "README's quick start does not give `\(run)`")
        #expect(quickStart.contains("```sh\n\(test)\n```"), "README's quick start does not give `\(test)`")
        #expect(try Self.text(".ci/run").contains("bash -c '\(test)'"), ".ci/run does not run `\(test)`")
        let fresh = try Self.text("scripts/check-fresh-debian")
        #expect(fresh.contains("in_root '\(test)'"), "check-fresh-debian does not run `\(test)`")
        #expect(fresh.contains("scripts/install-deps && timeout $quaked_seconds swift run quaked"))
    }

    @Test func readmeStaysAFrontDoor() throws {
        let readme = try Self.text("README.md")
        #expect(readme.utf8.count < 12 * 1024, "README.md is \(readme.utf8.count) bytes: move the details to docs/")
    }

    /// operations.md's table of keys is a summary of quaked.conf(5), which a test checks against the
    /// code: it has a row for every key the page documents.
    @Test func theOperationsGuideHasARowForEveryKeyOfQuakedConf5() throws {
        let keys = Mdoc.section("KEYS", of: try ManPageTests.page("quaked.conf.5"))
            .split(separator: "\n")
            .filter { $0.hasPrefix(".It Cm ") }
            .compactMap { $0.split(separator: " ").dropFirst(2).first.map(String.init) }
        #expect(keys.count >= 25)
        let guide = try Self.text("docs/operations.md")
        for key in keys {
            #expect(guide.contains("\n| `\(key)` |"), "docs/operations.md has no row for \(key)")
        }
    }

    @Test func everyRelativeLinkLeadsSomewhere() throws {
        let link = try Regex(#"\]\(([^)\s]+)\)"#)
        var checked = 0
        for file in try Self.markdownFiles() {
            let text = try Self.text(file)
            let directory = (file as NSString).deletingLastPathComponent
            for line in Self.proseLines(text) {
                for match in line.matches(of: link) {
                    guard let target = match.output[1].substring.map(String.init),
                        !target.contains("://"), !target.hasPrefix("mailto:")
                    else { continue }
                    let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                    let path = String(parts[0])
                    let url =
                        path.isEmpty
                        ? Fixtures.packageRoot.appendingPathComponent(file)
                        : Fixtures.packageRoot.appendingPathComponent(directory).appendingPathComponent(path).standardized
                    #expect(FileManager.default.fileExists(atPath: url.path), "\(file): \(target) does not exist")
                    if parts.count == 2, url.pathExtension == "md" {
                        let anchors = Self.anchors(try String(contentsOf: url, encoding: .utf8))
                        #expect(anchors.contains(String(parts[1])), "\(file): \(target) names no heading there")
                    }
                    checked += 1
                }
            }
        }
        #expect(checked > 40)
    }
}
