// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Loading",
    // `Duration` sets the floor: macOS 13 / iOS 16. The lock box is built on os_unfair_lock and pthread_mutex,
    // which exist everywhere, so nothing else raises it.
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "Loading", targets: ["Loading"]),
        .library(name: "LoadingTestSupport", targets: ["LoadingTestSupport"]),
    ],
    targets: [
        .target(name: "Loading"),
        .target(name: "LoadingTestSupport", dependencies: ["Loading"]),
        .testTarget(name: "LoadingTests", dependencies: ["Loading", "LoadingTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
