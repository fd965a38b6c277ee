import Foundation
import Loading
import XCTest

/// Random histories of the store's operations, run on the real store and on ``StoreModel`` side by side: after every
/// step, what each observer was shown, what each caller was answered and what each level holds must agree. A history
/// that disagrees is shrunk to the shortest one that still does, and printed as a test to paste.
enum ModelCheck {
    /// A model or a system under test that a history runs on: it takes steps, and says what its observers, callers
    /// and storage were left with.
    protocol System<Step, Seen> {
        associatedtype Step: CustomStringConvertible
        associatedtype Seen: Equatable & CustomStringConvertible

        mutating func apply(_ step: Step)
        var checkpoint: Seen { get }
    }

    /// Where a history first disagreed with its model.
    struct Disagreement<Step: CustomStringConvertible, Seen: CustomStringConvertible>: CustomStringConvertible {
        let history: [Step]
        let step: Int
        let expected: Seen
        let actual: Seen

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

    /// Runs `history` on a new model and a new system; the first step after which they disagree, if any.
    static func run<Model: System, UnderTest: System>(
        _ history: [Model.Step], model makeModel: () -> Model, system makeSystem: () -> UnderTest
    ) -> Disagreement<Model.Step, Model.Seen>? where UnderTest.Step == Model.Step, UnderTest.Seen == Model.Seen {
        var model = makeModel()
        var system = makeSystem()
        for (index, step) in history.enumerated() {
            model.apply(step)
            system.apply(step)
            let expected = model.checkpoint
            let actual = system.checkpoint
            if expected != actual {
                return Disagreement(history: history, step: index, expected: expected, actual: actual)
            }
        }
        return nil
    }

    /// The shortest history found that still disagrees, from one that does (`run` runs a candidate): steps after
    /// the disagreement are cut, then chunks of steps and single steps removed while it still disagrees (a
    /// delta-debugging search), then each step made simpler where it still disagrees (`simpler` says how: a request
    /// or a mutation named by a smaller number, after the steps making earlier ones were removed), and again.
    static func shrink<Step, Seen>(
        _ failing: Disagreement<Step, Seen>, simpler: (Step) -> [Step] = { _ in [] },
        run: ([Step]) -> Disagreement<Step, Seen>?
    ) -> Disagreement<Step, Seen> {
        var best = failing
        func keep(_ candidate: [Step]) -> Bool {
            guard let disagreement = run(candidate) else { return false }
            best = Disagreement(
                history: Array(candidate.prefix(disagreement.step + 1)), step: disagreement.step,
                expected: disagreement.expected, actual: disagreement.actual)
            return true
        }
        _ = keep(Array(failing.history.prefix(failing.step + 1)))
        while true {
            let before = best.history.count
            var chunk = max(1, best.history.count / 2)
            while chunk >= 1 {
                var start = 0
                var removedAny = false
                while start < best.history.count {
                    var candidate = best.history
                    candidate.removeSubrange(start..<min(candidate.count, start + chunk))
                    if keep(candidate) { removedAny = true } else { start += chunk }
                }
                if !removedAny { chunk /= 2 }
            }
            var simplified = false
            for index in best.history.indices {
                for variant in simpler(best.history[index]) {
                    var candidate = best.history
                    candidate[index] = variant
                    if keep(candidate) {
                        simplified = true
                        break
                    }
                }
                if index >= best.history.count - 1 { break }
            }
            if !simplified, best.history.count == before { return best }
        }
    }

    /// `disagreement` as a test to paste, calling `assertion` (`ModelCheck.assertAgrees`, say) on its history, with
    /// `arguments` after it (`network: .waitsForNetwork`, say).
    static func testCase<Step, Seen>(
        _ disagreement: Disagreement<Step, Seen>, seed: UInt64, assertion: String, arguments: String = ""
    ) -> String {
        """
        func test_history_seed\(seed)() {
            \(assertion)(
                [
                    \(disagreement.history.map(\.description).joined(separator: ",\n            "))
                ]\(arguments.isEmpty ? "" : ", " + arguments))
        }
        """
    }

    /// Runs the store's histories: the real store against ``StoreModel``, both with the `network` mode, keeping the
    /// values of keys no longer in use (the default) or none.
    static func run(
        _ history: [Step], network: ModelNetwork = .always, keepsValues: Bool = true, levelMaxAge: Int? = nil
    ) -> Disagreement<Step, Checkpoint>? {
        run(
            history, model: { StoreModel(network: network, keepsValues: keepsValues, levelMaxAge: levelMaxAge) },
            system: { StoreUnderTest(network: network, keepsValues: keepsValues, levelMaxAge: levelMaxAge) })
    }

    /// Fails the test when `history` disagrees with the store's model, saying where and how; for a store that keeps
    /// the values of keys no longer in use and for one that keeps none, unless `keepsValues` says which.
    static func assertAgrees(
        _ history: [Step], network: ModelNetwork = .always, keepsValues: Bool? = nil, levelMaxAge: Int? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        for keeps in keepsValues.map({ [$0] }) ?? [false, true] {
            if let disagreement = run(history, network: network, keepsValues: keeps, levelMaxAge: levelMaxAge) {
                XCTFail("\(keeps ? "keeping values" : "keeping none"): \(disagreement)", file: file, line: line)
            }
        }
    }

    /// The network mode of the history of `seed`: each mode in turn.
    static func network(seed: UInt64) -> ModelNetwork {
        [.always, .waitsForNetwork, .answersFromCache][Int(seed % 3)]
    }

    /// Whether the store of the history of `seed` keeps the values of keys no longer in use: one history in two,
    /// in each network mode.
    static func keepsValues(seed: UInt64) -> Bool {
        (seed / 3) % 2 == 0
    }

    /// The age at which the levels of the history of `seed` expire what they hold: one history in three, 60 seconds
    /// (a few of the clock's steps); the others keep it for ever.
    static func levelMaxAge(seed: UInt64) -> Int? {
        (seed / 6) % 3 == 2 ? 60 : nil
    }

    // MARK: Histories

    static let keys = ["a", "b"]

    /// A random history of `length` steps from `seed`, for a store in the `network` mode (whose connectivity it
    /// toggles, unless `.always`). It is made with the model at hand, so that its answers name requests that are
    /// waiting, its settlements mutations that are pending, and so on.
    static func history(
        seed: UInt64, length: Int, network: ModelNetwork = .always, keepsValues: Bool = true, levelMaxAge: Int? = nil
    ) -> [Step] {
        var random = SeededRandom(seed: seed)
        var model = StoreModel(network: network, keepsValues: keepsValues, levelMaxAge: levelMaxAge)
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
            case 69..<88:
                // A waiting request answers (any of them: answers come in any order).
                let waiting = model.keys.flatMap { name, key in key.fetches.compactMap { $0.request.map { (name, $0) } }
                }
                guard let (name, request) = waiting.randomElement(using: &random) else { continue }
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<2: step = .fail(name, request: request)
                case 2:
                    step = .updateWhile(name, edit(&random), during: .answer(name, request: request, items(&random)))
                default: step = .answer(name, request: request, items(&random))
                }
            case 88..<90:
                // Something else comes for the key while a change of it runs.
                let policies: [ModelPolicy] = [.cacheFirst, .cacheOnly, .cacheThenNetwork, .networkOnly]
                let during: [Step] = [
                    .write(key, items(&random)), .update(key, edit(&random)), .remove(key), .clear, .invalidate(key),
                    .invalidateAll, .mutate(key, edit(&random)), .read(key, policies.randomElement(using: &random)!),
                    .refresh(key),
                ]
                let happens = during.randomElement(using: &random)!
                if case .mutate = happens { mutations += 1 }
                step = .updateWhile(key, edit(&random), during: happens)
            case 90..<95: step = .advanceClock(seconds: [-20, 10, 25, 40].randomElement(using: &random)!)
            case 95..<98 where network != .always: step = .connectivity(online: !model.isOnline)
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

extension ModelCheck {
    /// Runs `change` on another thread and, while it is held, `during` here: `change` calls the `hold` it is given from
    /// its transform, which holds it the first time; a change whose transform did not run is held once it returned,
    /// so that `during` comes after it all the same. Returns once the change returned.
    static func whileAChangeRuns(
        _ change: @escaping @Sendable (_ hold: @escaping @Sendable () -> Void) -> Void, during: () -> Void
    ) {
        let (running, release, finished) = (
            DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)
        )
        let held = Locked(false)
        let hold: @Sendable () -> Void = {
            guard !held.withLock({ exchange(&$0, with: true) }) else { return }
            running.signal()
            release.wait()
        }
        DispatchQueue.global().async {
            change(hold)
            hold()
            finished.signal()
        }
        running.wait()
        during()
        release.signal()
        finished.wait()
    }
}
