import Testing

@testable import QuakeHTTP
