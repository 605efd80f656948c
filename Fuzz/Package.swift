// swift-tools-version: 6.1
import PackageDescription

// libFuzzer targets for quaked's parsers: build and run them with `scripts/fuzz` (see
// docs/development.md, "Fuzzing"), which builds with QUAKED_FUZZ set so that the root package
// instruments the modules under test (see the end of ../Package.swift: QuakeHTTPQuery and
// QuakeConfigValues are libraries there for http-query and prefer-line alone, small targets
// without the store, NIO or the daemon). A package of its own, so the normal build never
// compiles them. Each target is one main.swift defining
// `LLVMFuzzerTestOneInput` and running libFuzzer's driver.
// The harness itself is checked by AddressSanitizer but not instrumented for coverage: its
// branches would only distract the fuzzer from those of the code under test.
var harness: [SwiftSetting] { [.unsafeFlags(["-sanitize=address"])] }
// libFuzzer and the sanitizer runtime. lld, because gold fails on AddressSanitizer's objects
// with debug information ("internal error in format_file_lineno").
var fuzzer: [LinkerSetting] { [.unsafeFlags(["-sanitize=fuzzer,address", "-use-ld=lld"])] }

let package = Package(
    name: "quaked-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "quaked", path: ".."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        // libFuzzer's driver, for a main of our own.
        .target(name: "CLibFuzzer"),
        // What the targets share: running libFuzzer, checks that stop it, cutting an input into chunks.
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer"], swiftSettings: harness),
        // JSON trees from Varlink's JSONScanner, to compare with; round-trip checks of every type
        // generated from the interfaces.
        .target(
            name: "VarlinkFuzzSupport",
            dependencies: [
                "FuzzSupport",
                .product(name: "Varlink", package: "quaked"),
                .product(name: "QuakeProtocol", package: "quaked"),
            ],
            swiftSettings: harness
        ),
        .executableTarget(
            name: "json-reader",
            dependencies: [
                "FuzzSupport",
                "VarlinkFuzzSupport",
                .product(name: "QuakeFeed", package: "quaked"),
                .product(name: "Varlink", package: "quaked"),
            ],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "feed-parser",
            dependencies: [
                "FuzzSupport",
                "VarlinkFuzzSupport",
                .product(name: "QuakeFeed", package: "quaked"),
                .product(name: "Varlink", package: "quaked"),
            ],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "geojson-region",
            dependencies: ["FuzzSupport", .product(name: "QuakeFeed", package: "quaked")],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "quakeml",
            dependencies: ["FuzzSupport", .product(name: "QuakeSources", package: "quaked")],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "fdsn-text",
            dependencies: ["FuzzSupport", .product(name: "QuakeSources", package: "quaked")],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "emsc-message",
            dependencies: ["FuzzSupport", .product(name: "QuakeSources", package: "quaked")],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "geonet",
            dependencies: ["FuzzSupport", .product(name: "QuakeSources", package: "quaked")],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "http-query",
            dependencies: [
                "FuzzSupport",
                .product(name: "QuakeHTTPQuery", package: "quaked"),
                .product(name: "QuakeFeed", package: "quaked"),
            ],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "prefer-line",
            dependencies: [
                "FuzzSupport",
                .product(name: "QuakeConfigValues", package: "quaked"),
                .product(name: "QuakeFeed", package: "quaked"),
            ],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "varlink-json",
            dependencies: [
                "FuzzSupport",
                "VarlinkFuzzSupport",
                .product(name: "Varlink", package: "quaked"),
                .product(name: "QuakeProtocol", package: "quaked"),
            ],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
        .executableTarget(
            name: "varlink-message",
            dependencies: [
                "FuzzSupport",
                "VarlinkFuzzSupport",
                .product(name: "Varlink", package: "quaked"),
                .product(name: "QuakeProtocol", package: "quaked"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: harness,
            linkerSettings: fuzzer
        ),
    ]
)
