import Testing

/// The suites of the test doubles: real servers, one test at a time, as QuakeDaemonTests' EndToEnd.
@Suite(.serialized) struct TestDoubles {}
