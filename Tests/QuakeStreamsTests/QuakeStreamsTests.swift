import Testing

@testable import QuakeStreams
