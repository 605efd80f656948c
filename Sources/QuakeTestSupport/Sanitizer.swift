import Foundation

/// The sanitizer the tests run under (`swift test --sanitize=address|thread`, see
/// `scripts/test-asan` and `scripts/test-tsan`), found in the test process itself: SwiftPM builds
/// the whole package, the spawned `quaked` and `quakectl` included, with the same sanitizer.
///
/// Tests that measure memory skip those measurements under a sanitizer: its shadow memory,
/// redzones and quarantine of freed blocks are what they would measure, not quaked.
public enum Sanitizer {
    public static let address = linked("__asan_init")
    public static let thread = linked("__tsan_init")
    public static var isActive: Bool { address || thread }

    /// Whether the process has `symbol`: the sanitizer runtimes export their entry points.
    private static func linked(_ symbol: String) -> Bool {
        guard let process = dlopen(nil, RTLD_NOW) else { return false }
        return dlsym(process, symbol) != nil
    }
}
