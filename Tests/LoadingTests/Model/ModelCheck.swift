import Foundation
import XCTest

/// Random histories of the store's operations, run on the real store and on ``StoreModel`` side by side: after every
/// step, what each observer was shown, what each caller was answered and what each level holds must agree. A history
/// that disagrees is shrunk to the shortest one that still does, and printed as a test to paste.
enum ModelCheck {
    /// Where a history first disagreed with the model.
    struct Disagreement: CustomStringConvertible {
        let history: [Step]
        let step: Int
        let expected: Checkpoint
        let actual: Checkpoint

        var description: String {
            """
            after step \(step + 1) of \(history.count), \(history[step]):
            the model says:
            \(expected)
            the store shows:
            \(actual)
            """
        }
    }

    /// Runs `history` on both; the first step after which they disagree, if any.
    static func run(_ history: [Step]) -> Disagreement? {
        var model = StoreModel()
        let store = StoreUnderTest()
        for (index, step) in history.enumerated() {
            model.apply(step)
            store.apply(step)
            let expected = model.checkpoint
            let actual = store.checkpoint
            if expected != actual {
                return Disagreement(history: history, step: index, expected: expected, actual: actual)
            }
        }
        return nil
    }

    /// The shortest history found that still disagrees, from one that does: steps after the disagreement are cut,
    /// then chunks of steps and single steps removed while it still disagrees (a delta-debugging search).
    static func shrink(_ failing: Disagreement) -> Disagreement {
        var best = failing
        var history = Array(failing.history.prefix(failing.step + 1))
        var chunk = max(1, history.count / 2)
        while chunk >= 1 {
            var start = 0
            var removedAny = false
            while start < history.count {
                var candidate = history
                candidate.removeSubrange(start..<min(history.count, start + chunk))
                if let disagreement = run(candidate) {
                    history = Array(candidate.prefix(disagreement.step + 1))
                    best = Disagreement(
                        history: history, step: disagreement.step, expected: disagreement.expected,
                        actual: disagreement.actual)
                    removedAny = true
                } else {
                    start += chunk
                }
            }
            if !removedAny { chunk /= 2 }
        }
        return best
    }

    /// `disagreement` as a test to paste into ``StoreModelCheckTests``.
    static func testCase(_ disagreement: Disagreement, seed: UInt64) -> String {
        """
        func test_history_seed\(seed)() {
            ModelCheck.assertAgrees([
                \(disagreement.history.map(\.description).joined(separator: ",\n        "))
            ])
        }
        """
    }

    /// Fails the test when `history` disagrees with the model, saying where and how.
    static func assertAgrees(_ history: [Step], file: StaticString = #filePath, line: UInt = #line) {
        if let disagreement = run(history) { XCTFail("\(disagreement)", file: file, line: line) }
    }

    // MARK: Histories

    static let keys = ["a", "b"]

    /// A random history of `length` steps from `seed`. It is made with the model at hand, so that its answers name
    /// requests that are waiting, its settlements mutations that are pending, and so on.
    static func history(seed: UInt64, length: Int) -> [Step] {
        var random = SeededRandom(seed: seed)
        var model = StoreModel()
        var steps: [Step] = []
        var invalidations = 0
        var mutations = 0
        var observers: [Int] = []
        var observerCount = 0
        while steps.count < length {
            let key = keys.randomElement(using: &random)!
            let roll = Int.random(in: 0..<100, using: &random)
            let step: Step
            switch roll {
            case 0..<8: step = .write(key, items(&random))
            case 8..<16: step = .update(key, edit(&random))
            case 16..<24:
                mutations += 1
                step = .mutate(key, edit(&random))
            case 24..<32:
                guard mutations > 0 else { continue }
                let settlement = [Settlement.accept, .accept, .refuse, .cancel].randomElement(using: &random)!
                step = .settle(mutation: Int.random(in: 1...mutations, using: &random), settlement)
            case 32..<35: step = .remove(key)
            case 35..<37: step = .clear
            case 37..<43:
                // The store remembers 64 invalidations; a history stays well below.
                guard invalidations < 12 else { continue }
                invalidations += 1
                let kinds: [Step] = [.invalidate(key), .invalidateWhere([key]), .invalidateAll]
                step = kinds.randomElement(using: &random)!
            case 43..<45: step = .revalidate
            case 45..<58:
                let policies: [ModelPolicy] = [
                    .cacheFirst, .cacheFirstYoungerThan(30), .cacheOnly, .cacheThenNetwork, .networkFirst,
                    .networkOnly,
                ]
                step = .read(key, policies.randomElement(using: &random)!)
            case 58..<61: step = .refresh(key)
            case 61..<66:
                observerCount += 1
                observers.append(observerCount)
                step = .observe(key)
            case 66..<69:
                guard let observer = observers.randomElement(using: &random) else { continue }
                observers.removeAll { $0 == observer }
                step = .stopObserving(observer: observer)
            case 69..<90:
                // A waiting request answers (any of them: answers come in any order).
                let waiting = model.keys.flatMap { name, key in key.fetches.map { (name, $0.request) } }
                guard let (name, request) = waiting.randomElement(using: &random) else { continue }
                step =
                    Int.random(in: 0..<5, using: &random) == 0
                    ? .fail(name, request: request) : .answer(name, request: request, items(&random))
            case 90..<95: step = .advanceClock(seconds: [-20, 10, 25, 40].randomElement(using: &random)!)
            default: step = .levelsFail(Int.random(in: 0..<3, using: &random) == 0)
            }
            model.apply(step)
            steps.append(step)
        }
        return steps
    }

    private static func items(_ random: inout SeededRandom) -> Items {
        Array(Set((0..<Int.random(in: 0...2, using: &random)).map { _ in Int.random(in: 0..<4, using: &random) }))
            .sorted()
    }

    private static func edit(_ random: inout SeededRandom) -> Edit {
        let number = Int.random(in: 0..<4, using: &random)
        return Bool.random(using: &random) ? .insert(number) : .delete(number)
    }
}
