import QuakeClient
import QuakeProtocol
import Varlink
import Testing

/// The suites that run real quaked and quakectl processes, one test at a time (see
/// QuakeDaemonTests' EndToEnd for why).
@Suite(.serialized) struct ClientEndToEnd {}
