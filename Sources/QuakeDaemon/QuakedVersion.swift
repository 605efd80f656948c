/// The version of quaked and quakectl, printed by `--version` and sent as the HTTP User-Agent.
public enum QuakedVersion {
    public static let string = "0.1.0"
    public static var userAgent: String {
        "quaked/\(string) (+https://github.com/quaked/quaked)"
    }
}
