// swift-tools-version:6.0
import PackageDescription

// Loading on servers: store levels and services over the ecosystem's packages. Its own package, so that the library
// keeps zero dependencies.
let package = Package(
    name: "LoadingIntegrations",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "LoadingPostgres", targets: ["LoadingPostgres"]),
        .library(name: "LoadingObservability", targets: ["LoadingObservability"]),
    ],
    dependencies: [
        .package(name: "Loading", path: ".."),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .target(
            name: "LoadingPostgres",
            dependencies: [
                .product(name: "Loading", package: "Loading"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]),
        .target(
            name: "LoadingObservability",
            dependencies: [
                .product(name: "Loading", package: "Loading"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]),
        // A TCP proxy that turns faulty (slow, hung, stopped), for the tests and the fault runs.
        .target(
            name: "FaultInjection",
            dependencies: [.product(name: "NIOConcurrencyHelpers", package: "swift-nio")]),
        // A quote service over the store, the PostgreSQL level, the lease and the adapters, and the same service by
        // hand: what `Scripts/quote-load.sh` runs two instances of and measures.
        .executableTarget(
            name: "QuoteService",
            dependencies: [
                "LoadingPostgres", "LoadingObservability",
                .product(name: "Loading", package: "Loading"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]),
        // The fake upstream that counts its calls per key, and the load that a second process sends.
        .executableTarget(
            name: "QuoteBench",
            dependencies: [
                "FaultInjection",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]),
        .testTarget(
            name: "LoadingObservabilityTests",
            dependencies: [
                "LoadingObservability",
                .product(name: "Loading", package: "Loading"),
                .product(name: "LoadingTestSupport", package: "Loading"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]),
        .testTarget(
            name: "LoadingPostgresTests",
            dependencies: [
                "LoadingPostgres", "FaultInjection",
                .product(name: "Loading", package: "Loading"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
