// swift-tools-version:6.0
import PackageDescription

// Runnable compositions of Loading and FriendsDomain, an embedded friends API to run them against, and end-to-end
// tests over real loopback HTTP. Its own package, so that the library keeps zero dependencies.
let package = Package(
    name: "LoadingExamples",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Loading", path: ".."),
    ],
    targets: [
        .target(name: "FriendsServer", dependencies: [.product(name: "FriendsDomain", package: "Loading")]),
        .executableTarget(name: "friends-demo", dependencies: [
            "FriendsServer",
            .product(name: "FriendsDomain", package: "Loading"),
            .product(name: "Loading", package: "Loading"),
        ]),
        .executableTarget(name: "friends-server", dependencies: [
            "FriendsServer", .product(name: "FriendsDomain", package: "Loading"),
        ]),
        .executableTarget(name: "example-fallback-caching", dependencies: [.product(name: "Loading", package: "Loading")]),
        .executableTarget(name: "example-retry-timeout", dependencies: [.product(name: "Loading", package: "Loading")]),
        .executableTarget(name: "example-seed-stream", dependencies: [.product(name: "Loading", package: "Loading")]),
        .executableTarget(name: "example-async-bridges", dependencies: [.product(name: "Loading", package: "Loading")]),
        .executableTarget(name: "example-live-merge", dependencies: [
            "FriendsServer",
            .product(name: "FriendsDomain", package: "Loading"),
            .product(name: "Loading", package: "Loading"),
        ]),
        .executableTarget(name: "example-sections", dependencies: [
            .product(name: "FriendsDomain", package: "Loading"),
            .product(name: "Loading", package: "Loading"),
        ]),
        .testTarget(name: "EndToEndTests", dependencies: [
            "FriendsServer",
            .product(name: "FriendsDomain", package: "Loading"),
            .product(name: "Loading", package: "Loading"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
