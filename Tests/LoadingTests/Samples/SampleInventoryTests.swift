import Foundation
import XCTest

/// Every Swift sample of the README, the pages of `Docs/`, the DocC articles and the doc comments is compiled (and run) by a test: each
/// appears, as written (comments, spacing and trailing commas aside), between `// Sample: begin` and `// Sample: end`
/// in a test file of this repository. Exempt: package manifest fragments (first line `// Package.swift`) and SwiftUI,
/// UIKit or Combine code (it imports them), which is for reading on Linux; what it binds to is tested.
final class SampleInventoryTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func test_everySampleOfTheReadmeAndTheArticles_isCompiledByATest() throws {
        let articles = try FileManager.default.contentsOfDirectory(
            at: root.appendingPathComponent("Sources/Loading/Loading.docc"), includingPropertiesForKeys: nil
        ).filter { $0.pathExtension == "md" }
        let pages = try FileManager.default.contentsOfDirectory(
            at: root.appendingPathComponent("Docs"), includingPropertiesForKeys: nil
        ).filter { $0.pathExtension == "md" }
        let documents =
            [root.appendingPathComponent("README.md"), root.appendingPathComponent("Integrations/README.md")]
            + (pages + articles).sorted { $0.path < $1.path }
        let regions = try testFiles().flatMap { try Self.regions(in: String(contentsOf: $0, encoding: .utf8)) }
            .map(Self.normalized)
        XCTAssertFalse(regions.isEmpty)

        var checked = 0
        for document in documents {
            let text = try String(contentsOf: document, encoding: .utf8)
            for (line, block) in Self.swiftBlocks(in: text) where !Self.isExempt(block) {
                checked += 1
                let sample = Self.normalized(block)
                XCTAssertTrue(
                    regions.contains { $0.contains(sample) },
                    "\(document.lastPathComponent):\(line): no test compiles this sample:\n\(block)")
            }
        }
        XCTAssertGreaterThan(checked, 10)
    }

    func test_theReadme_staysAPageForTheFirstTenMinutes() throws {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false).count
        XCTAssertLessThanOrEqual(lines, 200, "the README's details belong in Docs/ or in the DocC articles")
    }

    func test_everySampleOfTheDocComments_isCompiledByATest() throws {
        let regions = try testFiles().flatMap { try Self.regions(in: String(contentsOf: $0, encoding: .utf8)) }
            .map(Self.normalized)
        var checked = 0
        let sources = [
            "Sources/Loading", "Sources/LoadingTestSupport", "Sources/FriendsDomain", "Integrations/Sources",
        ]
        for source in swiftFiles(under: sources) {
            let text = try String(contentsOf: source, encoding: .utf8)
            for (line, block) in Self.swiftBlocks(in: Self.docComments(of: text)) where !Self.isExempt(block) {
                checked += 1
                XCTAssertTrue(
                    regions.contains { $0.contains(Self.normalized(block)) },
                    "\(source.lastPathComponent):\(line): no test compiles this sample:\n\(block)")
            }
        }
        XCTAssertGreaterThan(checked, 50)
    }

    /// The text of the `///` comments of a source file, line for line (other lines are left empty).
    static func docComments(of source: String) -> String {
        source.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            let trimmed = line.drop { $0 == " " }
            guard trimmed.hasPrefix("///") else { return "" }
            let comment = trimmed.dropFirst(3)
            return comment.hasPrefix(" ") ? comment.dropFirst() : comment
        }
        .joined(separator: "\n")
    }

    private func testFiles() -> [URL] {
        swiftFiles(under: ["Tests", "Examples/Tests", "Integrations/Tests"])
    }

    private func swiftFiles(under folders: [String]) -> [URL] {
        folders.flatMap { folder -> [URL] in
            let enumerator = FileManager.default.enumerator(
                at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            return (enumerator?.allObjects as? [URL] ?? []).filter { $0.pathExtension == "swift" }
        }
    }

    /// The Swift code blocks of a Markdown text, with the line each starts on.
    static func swiftBlocks(in text: String) -> [(line: Int, code: String)] {
        var blocks: [(Int, String)] = []
        var current: (Int, [Substring])?
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if current == nil, line.trimmingCharacters(in: .whitespaces) == "```swift" {
                current = (index + 2, [])
            } else if let block = current, line.trimmingCharacters(in: .whitespaces) == "```" {
                blocks.append((block.0, block.1.joined(separator: "\n")))
                current = nil
            } else if current != nil {
                current!.1.append(line)
            }
        }
        return blocks
    }

    /// The text between `// Sample: begin` and `// Sample: end` lines.
    static func regions(in source: String) -> [String] {
        var regions: [String] = []
        var current: [Substring]?
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed == "// Sample: begin" {
                current = []
            } else if trimmed == "// Sample: end", let lines = current {
                regions.append(lines.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return regions
    }

    static func isExempt(_ block: String) -> Bool {
        block.hasPrefix("// Package.swift")
            || ["import SwiftUI", "import UIKit", "import Combine"].contains { block.contains($0) }
    }

    /// The code without imports, comments, whitespace and trailing commas.
    static func normalized(_ code: String) -> String {
        var result = ""
        var index = code.startIndex
        var inString = false
        while index < code.endIndex {
            let rest = code[index...]
            if !inString, rest.hasPrefix("//") {
                index = rest.firstIndex(of: "\n") ?? code.endIndex
                continue
            }
            if !inString, rest.hasPrefix("/*"), let end = rest.range(of: "*/") {
                index = end.upperBound
                continue
            }
            if !inString, rest.hasPrefix("import "), result.isEmpty || result.last == "\n" {
                index = rest.firstIndex(of: "\n") ?? code.endIndex
                continue
            }
            let character = code[index]
            if character == "\"" { inString.toggle() }
            if character == "\\", inString, code.index(after: index) < code.endIndex {
                result.append(character)
                index = code.index(after: index)
                result.append(code[index])
                index = code.index(after: index)
                continue
            }
            result.append(character)
            index = code.index(after: index)
        }
        let compact = result.filter { !$0.isWhitespace }
        return compact.replacingOccurrences(of: ",)", with: ")").replacingOccurrences(of: ",]", with: "]")
    }
}
