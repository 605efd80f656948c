import QuakeClient
import QuakeProtocol
import ArgumentParser

/// `quakectl metrics`: the daemon's metrics, as its HTTP listener serves them to Prometheus.
public struct MetricsCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Print quaked's metrics in the Prometheus text format.",
        discussion: """
            The same text quaked's optional HTTP listener (metrics-listen in quaked.conf(5)) \
            serves on /metrics: pulls by feed and result, durations, history changes, tokens, \
            quakes stored, subscribers, named clients' lag and Varlink calls. quaked(8) lists the \
            series. With --json: {"text": ...}.
            """)

    @OptionGroup public var options: ClientOptions

    public init() {}

    public func run() async throws {
        let reply = try await options.withConnection { try await $0.metrics() }
        if options.json {
            Console.line(JSONText.encode(reply))
        } else {
            Console.out(reply.text)
        }
    }
}
