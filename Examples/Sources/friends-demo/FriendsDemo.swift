import Foundation
import FriendsDomain
import FriendsServer
import Loading

/// `swift run --package-path Examples friends-demo [--base-url URL] [--database PATH] [--quiet]`
///
/// Starts an embedded friends API on a loopback port (unless `--base-url` points at a real one), keeps friends in an
/// SQLite file in a temporary folder (or `--database`), and runs `FriendsComposer` through a story, printing the
/// source and time of each result. Exits 0 when every step behaved as expected.
@main
struct FriendsDemo {
    static func main() async {
        let options: Options
        do {
            options = try Options(CommandLine.arguments.dropFirst())
        } catch {
            FileHandle.standardError.write(Data("friends-demo: \(error)\n\(Options.usage)\n".utf8))
            exit(2)
        }
        if let database = options.childLoadDatabase, let baseURL = options.baseURL {
            // The child process of the story's kill step: load, say so, and wait to be killed.
            await KillStep.runChild(baseURL: baseURL, databaseURL: database)
        }
        if let database = options.widgetDatabase, let baseURL = options.baseURL {
            // The child process of the story's widget step: show the list and its changes until killed.
            await WidgetStep.runChild(baseURL: baseURL, databaseURL: database)
        }
        do {
            let story = try Story(options: options)
            let passed = await story.run()
            exit(passed ? 0 : 1)
        } catch {
            FileHandle.standardError.write(Data("friends-demo: could not start: \(error)\n".utf8))
            exit(1)
        }
    }
}

struct Options {
    var baseURL: URL?
    var databaseURL: URL?
    var quiet = false
    /// Set in the child process the kill step starts (`--child-load PATH`).
    var childLoadDatabase: URL?
    /// Set in the child process the widget step starts (`--widget PATH`).
    var widgetDatabase: URL?

    static let usage = "usage: friends-demo [--base-url URL] [--database PATH] [--quiet]"

    struct InvalidArgument: Error, CustomStringConvertible {
        let description: String
    }

    init(_ arguments: ArraySlice<String>) throws {
        var arguments = arguments
        while let argument = arguments.popFirst() {
            switch argument {
            case "--base-url":
                guard let value = arguments.popFirst(), let url = URL(string: value), url.scheme != nil else {
                    throw InvalidArgument(description: "--base-url needs a URL such as http://127.0.0.1:8080")
                }
                baseURL = url
            case "--database":
                guard let value = arguments.popFirst() else {
                    throw InvalidArgument(description: "--database needs a path")
                }
                databaseURL = URL(fileURLWithPath: value)
            case "--quiet":
                quiet = true
            case "--child-load":
                guard let value = arguments.popFirst() else {
                    throw InvalidArgument(description: "--child-load needs a path")
                }
                childLoadDatabase = URL(fileURLWithPath: value)
            case "--widget":
                guard let value = arguments.popFirst() else {
                    throw InvalidArgument(description: "--widget needs a path")
                }
                widgetDatabase = URL(fileURLWithPath: value)
            case "--help", "-h":
                print(Options.usage)
                exit(0)
            default:
                throw InvalidArgument(description: "unknown argument \(argument)")
            }
        }
    }
}
