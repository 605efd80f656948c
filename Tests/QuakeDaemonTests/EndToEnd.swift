import Testing

/// The suites that start real daemons, servers and processes. They run one test at a time: on
/// a two-core machine, many of them at once make each other's timeouts meaningless.
@Suite(.serialized) struct EndToEnd {}
