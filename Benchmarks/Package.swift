// swift-tools-version:6.0
import PackageDescription

// Side-by-side ratios of Loading against OpenCombine, async/await and raw baselines, in release builds:
// swift run -c release --package-path Benchmarks [--quick]
let package = Package(
    name: "LoadingBenchmarks",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    dependencies: [
        .package(name: "Loading", path: ".."),
        .package(url: "https://github.com/OpenCombine/OpenCombine", exact: "0.14.0"),
    ],
    targets: [
        .systemLibrary(name: "CSQLiteBench", path: "Sources/CSQLiteBench", providers: [.apt(["libsqlite3-dev"])]),
        // The allocator's count of bytes in use (glibc), for the store's memory per key.
        .target(name: "CHeapStats"),
        .executableTarget(
            name: "Benchmarks",
            dependencies: [
                .product(name: "Loading", package: "Loading"),
                .product(name: "FriendsDomain", package: "Loading"),
                .product(name: "OpenCombine", package: "OpenCombine"),
                .target(name: "CSQLiteBench", condition: .when(platforms: [.linux])),
                "CHeapStats",
            ]),
    ],
    swiftLanguageModes: [.v6]
)
