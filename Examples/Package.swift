// swift-tools-version:6.0
import PackageDescription

// Runnable compositions of Loading and FriendsDomain, an embedded friends API to run them against, and end-to-end
// tests over real loopback HTTP. Its own package, so that the library keeps zero dependencies.
let loading = Target.Dependency.product(name: "Loading", package: "Loading")
let screens = Target.Dependency.product(name: "LoadingScreens", package: "Loading")
let friendsDomain = Target.Dependency.product(name: "FriendsDomain", package: "Loading")

let package = Package(
    name: "LoadingExamples",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    dependencies: [
        .package(name: "Loading", path: "..")
    ],
    targets: [
        .target(name: "FriendsServer", dependencies: [friendsDomain, loading]),
        .executableTarget(name: "friends-demo", dependencies: ["FriendsServer", friendsDomain, loading, screens]),
        .executableTarget(name: "friends-server", dependencies: ["FriendsServer", friendsDomain]),
        .executableTarget(name: "example-fallback-caching", dependencies: [loading]),
        .executableTarget(name: "example-retry-timeout", dependencies: [loading]),
        .executableTarget(name: "example-stream-composition", dependencies: [loading]),
        .executableTarget(name: "example-async-bridges", dependencies: [loading]),
        .executableTarget(name: "example-live-merge", dependencies: ["FriendsServer", friendsDomain, loading]),
        .executableTarget(name: "example-sections", dependencies: [friendsDomain, loading, screens]),
        .executableTarget(name: "example-keyed-store", dependencies: ["FriendsServer", friendsDomain, loading]),
        .executableTarget(name: "example-fresh-lists", dependencies: ["FriendsServer", friendsDomain, loading]),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "FriendsServer", friendsDomain, loading, .product(name: "LoadingTestSupport", package: "Loading"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
