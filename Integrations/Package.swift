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
        .testTarget(
            name: "LoadingObservabilityTests",
            dependencies: [
                "LoadingObservability",
                .product(name: "Loading", package: "Loading"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]),
        .testTarget(
            name: "LoadingPostgresTests",
            dependencies: [
                "LoadingPostgres",
                .product(name: "Loading", package: "Loading"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
