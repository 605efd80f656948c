// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "quaked",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "quaked", targets: ["quaked"]),
        .executable(name: "quakectl", targets: ["quakectl"]),
        .executable(name: "quake-bench", targets: ["quake-bench"]),
        // For the fuzz targets (Fuzz/Package.swift), which test these modules from another package.
        .library(name: "QuakeFeed", targets: ["QuakeFeed"]),
        .library(name: "Varlink", targets: ["Varlink"]),
        .library(name: "QuakeProtocol", targets: ["QuakeProtocol"]),
        .library(name: "QuakeSources", targets: ["QuakeSources"]),
        .library(name: "QuakeHTTPQuery", targets: ["QuakeHTTPQuery"]),
        .library(name: "QuakeConfigValues", targets: ["QuakeConfigValues"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // TLS settings for sslmode (postgres-nio's own dependency).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // EMSC's real-time websocket (QuakeStreams): the client and its framing, pings and TLS.
        .package(url: "https://github.com/hummingbird-project/swift-websocket", from: "1.6.2"),
    ],
    targets: [
        // libsystemd: sd_notify, sd_listen_fds, sd_journal_sendv.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // sd_notify for quaked and quakectl's services (READY=1, STATUS=, WATCHDOG=1).
        .target(name: "QuakeSystemd", dependencies: ["CSystemd"]),
        // sqlite3_config, which is variadic and so out of Swift's reach (links with GRDB's SQLite).
        .target(name: "CSQLiteConfig"),
        // The domain's vocabulary, shared by every layer: the quake record's fields, declared once
        // (QuakeRecord.fields); instants in epoch milliseconds and their UTC text (QuakeTime,
        // CivilDate); the duration grammar of the configuration and the CLI; a catalog query's
        // circle or box (CatalogRegion). No dependencies, no I/O.
        .target(name: "QuakeModel"),
        // What each layer needs of the quake record, generated from its declaration at build time.
        .executableTarget(name: "quake-model-gen", dependencies: ["QuakeModel"]),
        .plugin(name: "QuakeModelGenerator", capability: .buildTool(), dependencies: ["quake-model-gen"]),
        // The feed format: a strict streaming JSON tokenizer, the USGS GeoJSON feature decoder and
        // the parse pipeline (FeedSink, ChunkPipe) that turns a document's bytes into decoded features.
        // No I/O; QuakeModel only, so that every layer above has it.
        .target(name: "QuakeFeed", dependencies: ["QuakeModel"], plugins: ["QuakeModelGenerator"]),
        // libxml2's SAX2 push parser (xmlCreatePushParserCtxt, xmlParseChunk), for QuakeMLReader.
        .systemLibrary(
            name: "CLibXML2",
            pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"])]
        ),
        // Agencies' answers as reports (QuakeModel's SourceReport): QuakeML 1.0/1.2 parsed as it
        // streams in (libxml2's SAX2 push parser), the FDSN text format, EMSC's and GeoNet's JSON.
        .target(name: "QuakeSources", dependencies: ["QuakeModel", "QuakeFeed", "CLibXML2"]),
        // Association: which reports of different agencies are one physical quake, and which of
        // them is preferred. Pure and order-independent; QuakeModel, and QuakeFeed for polygon regions.
        .target(name: "QuakeAssociation", dependencies: ["QuakeModel", "QuakeFeed"]),
        // quaked.conf's values: ConfigValue (durations, sizes, circles and boxes, and their text)
        // and the `prefer` line (PreferenceConfiguration, which reads its polygon file). Out of
        // QuakeDaemon so that the fuzz package's prefer-line builds these, not the daemon.
        .target(name: "QuakeConfigValues", dependencies: ["QuakeModel", "QuakeFeed", "QuakeAssociation"]),
        // Pushed reports: EMSC's real-time websocket (swift-websocket's WSClient), kept open with
        // pings, reconnected with capped, jittered backoff, its messages read as SourceReports.
        .target(
            name: "QuakeStreams",
            dependencies: [
                "QuakeModel",
                "QuakeSources",
                .product(name: "WSClient", package: "swift-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The catalog service's query parameters: the query string (QueryString), the FDSN event
        // service's (FDSNQuery) and a summary feed's (SummaryFeed), read into a QuakeSelection or a
        // ParameterError. No store, no NIO, so that the fuzz package's http-query builds neither.
        .target(name: "QuakeHTTPQuery", dependencies: ["QuakeModel", "QuakeFeed", "QuakeSources"]),
        // The merged catalog served back over HTTP (http-listen): the USGS summary feeds and an FDSN
        // event service (QuakeML, text, GeoJSON) streamed from the store, with ETags and gzip.
        .target(
            name: "QuakeHTTP",
            dependencies: [
                "QuakeModel",
                "QuakeFeed",
                "QuakeSources",
                "QuakeStore",
                "QuakeHTTPQuery",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
            ]
        ),
        // The SQLite store: schema, import with dedupe, persistent history, purge.
        .target(
            name: "QuakeStore",
            dependencies: [
                "QuakeModel",
                "QuakeFeed",
                "QuakeAssociation",
                "CSQLiteConfig",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            plugins: ["QuakeModelGenerator"]
        ),
        // The Varlink interface-file parser and the Swift generator behind the build-tool plugin.
        // No dependencies.
        .target(name: "VarlinkIDL"),
        .executableTarget(name: "varlink-swift-gen", dependencies: ["VarlinkIDL"]),
        .plugin(name: "VarlinkGenerator", capability: .buildTool(), dependencies: ["varlink-swift-gen"]),
        // Generic Varlink: strict JSON values, messages, framing and limits, peer credentials, the
        // server's connection loop and org.varlink.service, the client. No io.quaked names.
        .target(
            name: "Varlink",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            plugins: ["VarlinkGenerator"]
        ),
        // io.quaked.varlink and the types generated from it; the default socket paths.
        // The filter conversions use QuakeFeed's QuakeFilter, the one filter of daemon and client.
        .target(
            name: "QuakeProtocol", dependencies: ["Varlink", "QuakeFeed", "QuakeModel"],
            plugins: ["VarlinkGenerator", "QuakeModelGenerator"]),
        // The daemon's services: configuration, feed pulls, scheduling, systemd integration.
        .target(
            name: "QuakeDaemon",
            dependencies: [
                "QuakeModel",
                "QuakeFeed",
                "QuakeStore",
                "QuakeProtocol",
                "Varlink",
                // quaked.conf's values and the prefer line
                "QuakeConfigValues",
                // the fdsn sources: the agencies' readers, and the association settings
                "QuakeSources",
                "QuakeAssociation",
                // the emsc sources: EMSC's websocket
                "QuakeStreams",
                // http-listen: the merged catalog served back
                "QuakeHTTP",
                "CSystemd",
                "QuakeSystemd",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // gzip for plain-HTTP feeds forwarded through a proxy (ProxyForwarding)
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // The `quaked` command line: options, --once, daemon start-up.
        .target(
            name: "QuakedCLI",
            dependencies: [
                "QuakeDaemon",
                "QuakeStore",
                "QuakeProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(name: "quaked", dependencies: ["QuakedCLI"]),
        // The client library: the connection and typed io.quaked API (over the Unix socket, or over
        // `ssh HOST quakectl bridge`), the Watcher (emits events, prints nothing), the local cache and
        // the stdio-to-socket bridge.
        .target(
            name: "QuakeClient",
            dependencies: [
                "QuakeProtocol",
                "QuakeFeed",
                "Varlink",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // `quakectl sync`: the PostgreSQL/PostGIS sink, a WatchCache whose rows and position are a
        // PostgreSQL table and a row of quaked_sync_state, and the libpq-style connection settings.
        .target(
            name: "QuakePostgres",
            dependencies: [
                "QuakeModel",
                "QuakeClient",
                "QuakeFeed",
                "QuakeProtocol",
                "Varlink",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // World coastlines (Natural Earth 1:110m, shipped), the equirectangular projection and a
        // braille rasterizer: `quakectl map` and the SVG export.
        .target(name: "QuakeMap", exclude: ["NATURAL_EARTH.md"]),
        // The `quakectl` command line: commands, options and output.
        .target(
            name: "QuakeCtl",
            dependencies: [
                "QuakeModel",
                "QuakeClient",
                "QuakePostgres",
                "QuakeMap",
                "QuakeFeed",
                "QuakeProtocol",
                "Varlink",
                // watch and sync under systemd: READY=1 and WATCHDOG=1 (Type=notify, WatchdogSec=)
                "QuakeSystemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // watch: finishing the change in hand on a stop signal, and --exec
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Subprocess", package: "swift-subprocess"),
            ]
        ),
        .executableTarget(name: "quakectl", dependencies: ["QuakeCtl"]),
        .executableTarget(
            name: "quake-bench",
            dependencies: [
                "QuakeModel",
                "QuakeFeed",
                "QuakeStore",
                "QuakeClient",
                "QuakePostgres",
                "QuakeProtocol",
                "Varlink",
                "QuakeTestSupport",
                "QuakeModelCheck",
                "QuakeAssociation",
                "QuakeSources",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The model-based checker of the store's history: seeded random feed documents, deletes and
        // retention passes, checked after every step and shrunk on failure. Run by the store tests
        // (a few hundred cases) and by `quake-bench model` (any number).
        .target(
            name: "QuakeModelCheck",
            dependencies: [
                "QuakeStore", "QuakeFeed", "QuakeTestSupport", "QuakeAssociation", "QuakeModel",
                // PushModelCheck reads what it pushes with the daemon's readers.
                "QuakeSources",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Shared by the test targets: temp dirs, fixtures, a real HTTP server, process runner.
        .target(
            name: "QuakeTestSupport",
            dependencies: [
                // FDSNTestService splits feed files into features with the streaming parser.
                "QuakeFeed",
                "QuakeSources",
                // withHTTPClient, the tests' client of the test servers
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // UnixSocketClient's typed calls: a generated method's parameters out, its reply in.
                "Varlink",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                // PushTestServer, the websocket server of the emsc source tests (NIOWebSocket's upgrader)
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "VarlinkTests",
            dependencies: [
                "Varlink",
                "QuakeProtocol",
                "QuakeModel",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "VarlinkIDLTests",
            dependencies: ["VarlinkIDL", "Varlink", "QuakeProtocol"],
            // Interface files the parser tests read.
            resources: [.copy("Interfaces")]
        ),
        .testTarget(
            name: "QuakeProtocolTests",
            dependencies: ["QuakeProtocol", "VarlinkIDL", "Varlink"]
        ),
        .testTarget(
            name: "QuakeSystemdTests",
            dependencies: ["QuakeSystemd"]
        ),
        .testTarget(
            name: "QuakedCLITests",
            dependencies: ["QuakedCLI", "QuakeDaemon", "QuakeTestSupport"]
        ),
        .testTarget(
            name: "QuakeMapTests",
            dependencies: ["QuakeMap"]
        ),
        .testTarget(
            name: "QuakeClientTests",
            dependencies: [
                "QuakeClient", "QuakeProtocol", "QuakeModelCheck", "QuakeTestSupport",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "QuakePostgresTests",
            dependencies: ["QuakePostgres", "QuakeProtocol", "QuakeModelCheck", "QuakeTestSupport"]
        ),
        .testTarget(
            name: "QuakeModelCheckTests",
            dependencies: ["QuakeModelCheck", "QuakeFeed", "QuakeTestSupport"]
        ),
        // The test doubles themselves: the HTTP server that misbehaves on purpose and the FDSN service.
        .testTarget(
            name: "QuakeTestSupportTests",
            dependencies: [
                "QuakeTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "QuakeSourcesTests",
            dependencies: ["QuakeSources", "QuakeModel", "QuakeFeed"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(name: "QuakeHTTPQueryTests", dependencies: ["QuakeHTTPQuery", "QuakeFeed"]),
        .testTarget(
            name: "QuakeConfigValuesTests", dependencies: ["QuakeConfigValues", "QuakeModel", "QuakeTestSupport"]),
        .testTarget(
            name: "QuakeHTTPTests",
            dependencies: [
                "QuakeHTTP", "QuakeHTTPQuery", "QuakeStore", "QuakeSources", "QuakeFeed", "QuakeModel",
                "QuakeAssociation", "QuakeTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "QuakeStreamsTests",
            dependencies: [
                "QuakeStreams", "QuakeSources", "QuakeModel", "QuakeTestSupport",
                // a real websocket server on 127.0.0.1 that misbehaves on purpose (NIOWebSocket's upgrader)
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "QuakeAssociationTests",
            dependencies: ["QuakeAssociation", "QuakeModel", "QuakeFeed"]
        ),
        .testTarget(
            name: "QuakeModelTests",
            dependencies: ["QuakeModel", "VarlinkIDL", "QuakeTestSupport"]
        ),
        .testTarget(
            name: "QuakeFeedTests",
            dependencies: ["QuakeFeed", "QuakeTestSupport"]
        ),
        .testTarget(
            name: "QuakeCtlTests",
            dependencies: [
                "QuakeCtl", "QuakeClient", "QuakePostgres", "QuakeProtocol", "QuakeFeed", "Varlink", "QuakeStore", "QuakeTestSupport",
                "QuakeModelCheck", "QuakeMap",
                // The real sshd of the --host test, run as a child Foundation's Process cannot follow
                // (sshd closes the descriptors it inherits, which Process takes for an exit).
                .product(name: "Subprocess", package: "swift-subprocess"),
            ],
            // The stored `--help` copies the help tests compare against.
            exclude: ["Help"]
        ),
        .testTarget(
            name: "QuakeStoreTests",
            dependencies: [
                "QuakeStore", "QuakeFeed", "QuakeTestSupport", "QuakeModelCheck",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "QuakeDaemonTests",
            dependencies: [
                "QuakeDaemon",
                "QuakeConfigValues",
                // quaked --help, against the configuration's defaults
                "QuakedCLI",
                "QuakeSystemd",
                "QuakeFeed",
                "QuakeStore",
                "QuakeProtocol",
                "Varlink",
                "QuakeTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
    ]
)

// Fuzzing (Fuzz/Package.swift, scripts/fuzz): built with QUAKED_FUZZ set, the modules the fuzz
// targets test are compiled with libFuzzer's coverage instrumentation and AddressSanitizer, and
// testable (a few of the targets read internals). Per target rather than with -Xswiftc, which would
// also reach varlink-swift-gen, the code generator the build-tool plugin runs.
if Context.environment["QUAKED_FUZZ"] != nil {
    let fuzzed = ["QuakeFeed", "Varlink", "QuakeProtocol", "QuakeSources", "QuakeHTTPQuery", "QuakeConfigValues"]
    for target in package.targets where fuzzed.contains(target.name) {
        target.swiftSettings = (target.swiftSettings ?? []) + [
            .unsafeFlags(["-sanitize=fuzzer,address", "-enable-testing"])
        ]
    }
}
