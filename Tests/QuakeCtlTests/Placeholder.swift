import Testing
@Test func quakectlPlaceholder() { #expect(Bool(true)) }
