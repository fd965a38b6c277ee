// swift-tools-version:6.0
import PackageDescription

// Upcoming language features the code builds clean with: `any` spelled out for existentials, and a member used only
// where its module is imported.
let upcomingFeatures: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Loading",
    // `Duration` sets the floor: macOS 13 / iOS 16. The lock box is built on os_unfair_lock and pthread_mutex,
    // which exist everywhere, so nothing else raises it.
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "Loading", targets: ["Loading"]),
        .library(name: "LoadingScreens", targets: ["LoadingScreens"]),
        .library(name: "LoadingTestSupport", targets: ["LoadingTestSupport"]),
        .library(name: "FriendsDomain", targets: ["FriendsDomain"]),
    ],
    targets: [
        // Two inline C functions (atomic load and store of a word): lock-free reads of hot flags.
        .target(name: "CLoadingAtomics"),
        .target(name: "Loading", dependencies: ["CLoadingAtomics"], swiftSettings: upcomingFeatures),
        // What a screen binds to (models on the main actor, loading states, sections): apps import it, servers do not.
        .target(name: "LoadingScreens", dependencies: ["Loading"], swiftSettings: upcomingFeatures),
        .target(name: "LoadingTestSupport", dependencies: ["Loading"], swiftSettings: upcomingFeatures),
        // The system's libsqlite3. On Apple platforms the SDK's `SQLite3` module is used instead.
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .target(
            name: "FriendsDomain",
            dependencies: [
                "Loading", "LoadingScreens",
                .target(name: "CSQLite", condition: .when(platforms: [.linux, .android, .windows, .openbsd, .wasi])),
            ],
            swiftSettings: upcomingFeatures),
        // What the test targets share (the watchdog, the heavy tests' size, waiting for a condition); not a product.
        .target(
            name: "LoadingTestHelpers", dependencies: ["Loading"], path: "Tests/LoadingTestHelpers",
            swiftSettings: upcomingFeatures),
        .testTarget(
            name: "LoadingTests",
            dependencies: ["Loading", "LoadingScreens", "LoadingTestSupport", "LoadingTestHelpers"],
            swiftSettings: upcomingFeatures),
        .testTarget(
            name: "FriendsDomainTests",
            dependencies: ["FriendsDomain", "Loading", "LoadingScreens", "LoadingTestSupport", "LoadingTestHelpers"],
            swiftSettings: upcomingFeatures),
    ],
    swiftLanguageModes: [.v6]
)
