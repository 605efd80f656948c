import QuakeClient
import Testing

/// How quakectl builds the ssh command line.
@Suite struct SSHRouteTests {
    @Test func theCommandLine() throws {
        let route = try SSHRoute(
            destination: "me@far.example", remoteSocket: "/run/it's here.sock",
            environment: ["QUAKECTL_SSH": "  ssh -p 2222\t-i /k  ", "QUAKECTL_REMOTE": "/opt/bin/quakectl"],
            interactive: true)
        #expect(route.program == "ssh")
        // A terminal: no BatchMode, so that ssh may ask for a passphrase or about a host key.
        #expect(
            route.arguments == [
                "-p", "2222", "-i", "/k", "-T", "-x", "-a", "--", "me@far.example",
                "/opt/bin/quakectl bridge --socket '/run/it'\\''s here.sock'",
            ])
        let plain = try SSHRoute(destination: "far", environment: [:], interactive: false)
        #expect(plain.program == "ssh")
        #expect(plain.arguments == ["-T", "-x", "-a", "-o", "BatchMode=yes", "--", "far", "quakectl bridge"])
        #expect(plain.description == "far")
    }

    @Test(arguments: ["", "-oProxyCommand=sh", "-p", "two words", "tab\there", "me@", "@far", "new\nline"])
    func refusedDestinations(_ destination: String) {
        #expect(throws: SSHRoute.InvalidDestination.self) {
            try SSHRoute(destination: destination, environment: [:], interactive: false)
        }
    }

    @Test(arguments: ["far", "me@far", "me@far.example.org", "192.0.2.1", "[::1]", "alias-from-ssh_config"])
    func acceptedDestinations(_ destination: String) throws {
        #expect(try SSHRoute(destination: destination, environment: [:], interactive: false).destination == destination)
    }
}
