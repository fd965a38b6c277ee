// swift-tools-version:6.0
import PackageDescription

// Loading on servers: store levels and services over the ecosystem's packages. Its own package, so that the library
// keeps zero dependencies.
let package = Package(
    name: "LoadingIntegrations",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "LoadingPostgres", targets: ["LoadingPostgres"])
    ],
    dependencies: [
        .package(name: "Loading", path: ".."),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        .target(
            name: "LoadingPostgres",
            dependencies: [
                .product(name: "Loading", package: "Loading"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
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
