import QuakeModel

/// The source kinds' parsers: each turns an agency's answer into ``SourceItem``s.
public enum QuakeSources {}
