import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import QuakeProtocol
import QuakeTestSupport
import Testing

@testable import QuakeDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// packaging/systemd/quaked-http.socket, the socket unit of the catalog's HTTP listener: what it
/// says against what quaked looks for, the packaging and pages that name it, and a real quaked
/// started with the sockets as the unit (and quaked-metrics.socket, and quaked.socket) pass them.
@Suite struct HTTPSocketUnitTests {
    static let packaging = Fixtures.packageRoot.appendingPathComponent("packaging")

    /// The unit's `key=value` lines (the last one of a key wins, as systemd reads a plain list).
    static func unit(_ path: String) throws -> [String: String] {
        let text = try String(contentsOf: packaging.appendingPathComponent(path), encoding: .utf8)
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    @Test func theUnitPassesALoopbackSocketToQuakedByTheNameItLooksFor() throws {
        let unit = try Self.unit("systemd/quaked-http.socket")
        #expect(unit["FileDescriptorName"] == CatalogListener.fileDescriptorName)
        #expect(unit["Service"] == "quaked.service")
        #expect(unit["WantedBy"] == "sockets.target")
        let listen = try #require(unit["ListenStream"])
        let address = try MetricsAddress(parsing: listen)
        #expect(address.host == "127.0.0.1", "not loopback by default: \(listen)")
        #expect(address.port != 0)
        // Not the metrics socket's address: both may be enabled at once.
        let metrics = try Self.unit("systemd/quaked-metrics.socket")
        #expect(metrics["ListenStream"] != listen)
        #expect(metrics["FileDescriptorName"] != unit["FileDescriptorName"])
        // quaked.service starts after it, when they start together.
        let service = try #require(try Self.unit("systemd/quaked.service")["After"])
        #expect(service.split(separator: " ").contains("quaked-http.socket"), "\(service)")
    }

    @Test func thePackageInstallsItOff() throws {
        let debian = Self.packaging.appendingPathComponent("debian/quaked.quaked-http.socket")
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: debian.path) == "../systemd/quaked-http.socket")
        let rules = try String(contentsOf: Self.packaging.appendingPathComponent("debian/rules"), encoding: .utf8)
        #expect(rules.contains("dh_installsystemd --name=quaked-http --no-enable --no-start"))
        let check = try String(
            contentsOf: Fixtures.packageRoot.appendingPathComponent("scripts/check-packaging"), encoding: .utf8)
        #expect(
            check.contains(
                "systemd-analyze verify quaked.socket quaked-metrics.socket quaked-http.socket quaked.service"))
        #expect(check.contains("for u in quaked-metrics.socket quaked-http.socket; do"))
    }

    @Test func theManPagesAndTheHTTPGuideNameIt() throws {
        let quaked = try ManPageTests.page("quaked.8")
        #expect(Mdoc.section("SYSTEMD INTEGRATION", of: quaked).contains("quaked-http.socket"))
        #expect(Mdoc.section("SERVING THE CATALOG", of: quaked).contains("quaked-http.socket"))
        #expect(Mdoc.section("FILES", of: quaked).contains("/lib/systemd/system/quaked-http.socket"))
        #expect(try ManPageTests.page("quaked.conf.5").contains("quaked-http.socket"))
        let guide = try String(contentsOf: Fixtures.packageRoot.appendingPathComponent("docs/http.md"), encoding: .utf8)
        #expect(guide.contains("quaked-http.socket"))
    }
}

extension EndToEnd {
    @Suite("quaked-http.socket", .serialized)
    struct HTTPSocketActivationTests {
        static let small = Fixtures.usgs("rodu__quakemap__all_day.geojson")

        @Test(
            "passed the sockets of quaked-http.socket, quaked-metrics.socket and quaked.socket by their names, quaked serves the catalog, the metrics and the control socket, each on its own"
        )
        func allThreeSockets() async throws {
            let http = try HTTPSocketUnitTests.unit("systemd/quaked-http.socket")
            let metrics = try HTTPSocketUnitTests.unit("systemd/quaked-metrics.socket")
            let httpName = try #require(http["FileDescriptorName"])
            let metricsName = try #require(metrics["FileDescriptorName"])
            // The units' hosts, on free ports (their own may be taken on this machine).
            let httpHost = try MetricsAddress(parsing: try #require(http["ListenStream"])).host
            let metricsHost = try MetricsAddress(parsing: try #require(metrics["ListenStream"])).host
            try await withTemporaryDirectory { dir in
                let socketPath = dir.appendingPathComponent("activated.sock").path
                let (httpPort, _) = try loopbackPort()
                let (metricsPort, _) = try loopbackPort()
                let activator = try ChildProcess(
                    "/usr/bin/systemd-socket-activate",
                    [
                        "-l", "\(httpHost):\(httpPort)", "-l", "\(metricsHost):\(metricsPort)", "-l", socketPath,
                        "--fdname=\(httpName):\(metricsName):varlink",
                        BuiltProducts.path("quaked"), "--state-dir", dir.appendingPathComponent("state").path,
                        "--socket", dir.appendingPathComponent("unused.sock").path,
                        "--feed", Self.small.absoluteString, "--interval", "1h",
                    ])
                try await waitUntil(timeout: .seconds(10)) { FileManager.default.fileExists(atPath: socketPath) }
                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    // The first request starts quaked.
                    let version = try await Self.get(client, "http://\(httpHost):\(httpPort)/fdsnws/event/1/version")
                    #expect(version.status == .ok)
                    #expect(version.body.trimmingCharacters(in: .whitespacesAndNewlines) == "1.2.0")
                    let feed = try await Self.get(client, "http://\(httpHost):\(httpPort)/feeds/all_month.geojson")
                    #expect(feed.status == .ok)
                    let document = try JSONSerialization.jsonObject(with: Data(feed.body.utf8)) as? [String: Any]
                    #expect(document?["type"] as? String == "FeatureCollection")
                    // The metrics have a socket of their own: the catalog's server does not answer them.
                    let scrape = try await Self.get(client, "http://\(metricsHost):\(metricsPort)/metrics")
                    #expect(scrape.status == .ok)
                    #expect(scrape.body.contains("quaked_history_head_token"))
                    let notHere = try await Self.get(client, "http://\(httpHost):\(httpPort)/metrics")
                    #expect(notHere.status == .notFound)
                }
                // The third is the control socket.
                let text = try UnixSocketClient(path: socketPath).call(IOQuaked.Metrics.self, .init()).text
                #expect(text.contains("quaked_history_head_token"), "\(text)")
                #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("unused.sock").path))
                activator.signal(SIGTERM)
                #expect(try await activator.wait() == 0)
            }
        }

        static func get(_ client: HTTPClient, _ url: String) async throws -> (status: HTTPResponseStatus, body: String)
        {
            let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 16 << 20)
            return (response.status, String(buffer: body))
        }
    }
}
