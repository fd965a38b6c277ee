import Foundation
import FriendsDomain
import Loading
import LoadingTestHelpers
import LoadingTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

final class RemoteFriendsLoaderTests: XCTestCase {
    private let baseURL = URL(string: "https://api.example.com/v1")!

    override func setUp() {
        super.setUp()
        URLProtocolStub.reset()
    }

    func test_load_requestsFriendsEndpointWithGET() {
        URLProtocolStub.stub(.response(status: 200, body: Data(#"{"friends": []}"#.utf8)))
        _ = load()
        XCTAssertEqual(URLProtocolStub.requests.map { $0.url?.absoluteString }, ["https://api.example.com/v1/friends"])
        XCTAssertEqual(URLProtocolStub.requests.first?.httpMethod, "GET")
    }

    func test_load_deliversFriendsOn200WithValidJSON() throws {
        let json = """
            {"friends": [
              {"id": "u1", "name": "Ada Lovelace", "status": "online", "avatar_url": "https://x.test/a.png",
               "updated_at": "2026-11-20T10:00:00Z", "unknown_field": [1, 2]},
              {"id": "u2", "name": "Grace Hopper", "status": "busy", "updated_at": "2026-11-20T10:00:00.250Z"}
            ], "next": null}
            """
        URLProtocolStub.stub(.response(status: 200, body: Data(json.utf8)))

        let friends = try XCTUnwrap(load()).get()

        XCTAssertEqual(friends.map(\.id), ["u1", "u2"])
        XCTAssertEqual(friends[0].avatarURL, URL(string: "https://x.test/a.png"))
        XCTAssertNil(friends[1].avatarURL, "avatar_url is optional")
        XCTAssertEqual(friends[1].status, "busy", "unknown statuses are kept")
        XCTAssertEqual(friends[0].updatedAt, Date(timeIntervalSince1970: 1_795_168_800))
        XCTAssertEqual(friends[1].updatedAt.timeIntervalSince1970, 1_795_168_800.25, accuracy: 0.001)
    }

    func test_load_deliversUnexpectedStatusForEveryStatusButOK() {
        for status in [199, 201, 204, 301, 400, 401, 404, 500, 503] {
            URLProtocolStub.stub(.response(status: status, body: Data(#"{"friends": []}"#.utf8)))
            guard case .failure(FriendsAPIError.unexpectedStatus(let code))? = load() else {
                return XCTFail("status \(status) should give unexpectedStatus")
            }
            XCTAssertEqual(code, status)
        }
    }

    func test_load_keepsOneFriendPerID_theLastOccurrenceAtTheFirstPosition() throws {
        let body = #"""
            {"friends": [
                {"id": "u1", "name": "Ada", "status": "online", "updated_at": "2026-11-20T10:00:00Z"},
                {"id": "u2", "name": "Grace", "status": "online", "updated_at": "2026-11-20T10:00:00Z"},
                {"id": "u1", "name": "Ada Lovelace", "status": "away", "updated_at": "2026-11-20T11:00:00Z"}
            ]}
            """#
        URLProtocolStub.stub(.response(status: 200, body: Data(body.utf8)))

        let friends = try XCTUnwrap(load()).get()

        XCTAssertEqual(friends.map(\.id), ["u1", "u2"])
        XCTAssertEqual(friends.first?.name, "Ada Lovelace")
    }

    func test_load_deliversInvalidDataOnBadBodies() {
        let bodies = [
            "",
            "not json",
            #"{"friends": [{"id": "u1", "name": "Ada"#,  // truncated
            #"{"friends": [{"id": "u1", "status": "online", "updated_at": "2026-11-20T10:00:00Z"}]}"#,  // no name
            #"{"friends": [{"id": "u1", "name": "A", "status": "online", "updated_at": "yesterday"}]}"#,
            #"{"people": []}"#,
            "[]",
        ]
        for body in bodies {
            URLProtocolStub.stub(.response(status: 200, body: Data(body.utf8)))
            guard case .failure(FriendsAPIError.invalidData)? = load() else {
                return XCTFail("body \(body.debugDescription) should give invalidData")
            }
        }
    }

    func test_load_deliversConnectivityErrorOnTransportFailure() {
        URLProtocolStub.stub(.failure(.notConnectedToInternet))
        guard case .failure(FriendsAPIError.connectivity(let underlying))? = load() else {
            return XCTFail("expected connectivity")
        }
        XCTAssertEqual(
            (underlying as? URLError)?.code ?? URLError.Code(rawValue: (underlying as NSError).code),
            .notConnectedToInternet)
    }

    func test_cancel_cancelsTheRequestAndNeverCompletes() {
        URLProtocolStub.stub(.hang)
        let sut = RemoteFriendsLoader(
            baseURL: baseURL, client: URLSessionHTTPClient(session: URLProtocolStub.makeSession()))
        let recorder = Locked<[Result<[Friend], any Error>]>([])
        let released = expectation(description: "the completion was let go: it can no longer be called")
        let token = sut.load { [probe = ReleaseProbe { released.fulfill() }] result in
            recorder.withLock { $0.append(result) }
            probe.touch()
        }
        waitUntil { URLProtocolStub.requests.count == 1 }

        token.cancel()

        waitUntil { URLProtocolStub.stoppedRequests == 1 }
        wait(for: [released], timeout: .watchdog)
        XCTAssertEqual(URLProtocolStub.stoppedRequests, 1, "cancelling must reach the stub")
        XCTAssertEqual(recorder.withLock { $0.count }, 0)
    }

    func test_delete_sendsDELETEAndMapsStatuses() {
        let deleter = RemoteFriendsDeleter(
            baseURL: baseURL, client: URLSessionHTTPClient(session: URLProtocolStub.makeSession()))
        URLProtocolStub.stub(.response(status: 204, body: Data()))
        XCTAssertNoThrow(try awaitResult { deleter.delete(id: "u 1", completion: $0) }?.get())
        XCTAssertEqual(URLProtocolStub.requests.last?.httpMethod, "DELETE")
        XCTAssertEqual(URLProtocolStub.requests.last?.url?.absoluteString, "https://api.example.com/v1/friends/u%201")

        URLProtocolStub.stub(.response(status: 404, body: Data()))
        guard case .failure(FriendsAPIError.notFound)? = awaitResult({ deleter.delete(id: "u1", completion: $0) })
        else {
            return XCTFail("404 should give notFound")
        }
        URLProtocolStub.stub(.response(status: 500, body: Data()))
        guard
            case .failure(FriendsAPIError.unexpectedStatus(500))? = awaitResult({
                deleter.delete(id: "u1", completion: $0)
            })
        else {
            return XCTFail("500 should give unexpectedStatus")
        }
    }

    func test_rename_sendsPATCHWithTheVersionItWasMadeAgainst_andMapsAConflictToTheServersFriend() throws {
        let renamer = RemoteFriendsRenamer(
            baseURL: baseURL, client: URLSessionHTTPClient(session: URLProtocolStub.makeSession()))
        let seen = Date(timeIntervalSince1970: 1_700_000_000.25)
        let rename = FriendRename(friendID: "u1", name: "Ada L.", basedOn: seen)
        let theirs = Friend(id: "u1", name: "Ada Lovelace", status: "online", updatedAt: seen.addingTimeInterval(60))
        let body = try Friend.makeEncoder().encode(theirs)

        URLProtocolStub.stub(.response(status: 200, body: body))
        XCTAssertEqual(try awaitResult { renamer.rename(rename, idempotencyKey: "k", completion: $0) }?.get(), theirs)
        let request = try XCTUnwrap(URLProtocolStub.requests.last)
        XCTAssertEqual(request.httpMethod, "PATCH")
        XCTAssertEqual(request.url?.absoluteString, "https://api.example.com/v1/friends/u1")
        XCTAssertEqual(request.value(forHTTPHeaderField: "If-Match"), "\"1700000000250\"")
        XCTAssertEqual(request.value(forHTTPHeaderField: "Idempotency-Key"), "k")

        URLProtocolStub.stub(.response(status: 409, body: body))
        let conflict = awaitResult { renamer.rename(rename, idempotencyKey: nil, completion: $0) }
        guard case .failure(let error as FriendRenameConflict)? = conflict else { return XCTFail("409: a conflict") }
        XCTAssertEqual(error.current, theirs)
        XCTAssertEqual(
            error.localizedDescription,
            "The friend was changed on the server meanwhile (now named Ada Lovelace): the rename was made against an "
                + "older copy.")

        URLProtocolStub.stub(.response(status: 409, body: Data("{}".utf8)))
        guard
            case .failure(FriendsAPIError.invalidData)? = awaitResult({
                renamer.rename(rename, idempotencyKey: nil, completion: $0)
            })
        else { return XCTFail("a 409 without the friend is invalid data") }
        URLProtocolStub.stub(.response(status: 404, body: Data()))
        guard
            case .failure(FriendsAPIError.notFound)? = awaitResult({
                renamer.rename(rename, idempotencyKey: nil, completion: $0)
            })
        else { return XCTFail("404 should give notFound") }
    }

    func test_load_busyServerThatSaysWhenToRetry_givesBusyWithTheWait() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        let inAMinute = formatter.string(from: Date().addingTimeInterval(60))
        let cases: [(Int, String?, String)] = [
            (429, "7", "busy 7"), (503, "0", "busy 0"), (429, nil, "status 429"), (503, "soon", "status 503"),
            (500, "7", "status 500"), (503, inAMinute, "busy about 60"),
        ]
        for (status, header, expected) in cases {
            URLProtocolStub.stub(
                .response(status: status, body: Data(), headers: header.map { ["Retry-After": $0] }))
            switch load() {
            case .failure(FriendsAPIError.busy(let code, let wait))?:
                let seconds = wait.components.seconds
                XCTAssertEqual(code, status)
                if expected == "busy about 60" {
                    XCTAssertTrue((59...61).contains(seconds), "\(seconds)")
                } else {
                    XCTAssertEqual("busy \(seconds)", expected)
                }
            case .failure(FriendsAPIError.unexpectedStatus(let code))?:
                XCTAssertEqual("status \(code)", expected)
            default:
                XCTFail("unexpected outcome for \(status) \(String(describing: header))")
            }
        }
    }

    func test_composer_retriesOnlyTransientFailures_andHonoursRetryAfter() {
        let cases: [(status: Int, headers: [String: String]?, requests: Int)] = [
            (404, nil, 1), (400, nil, 1), (401, nil, 1), (500, nil, 3), (503, nil, 3), (408, nil, 3), (429, nil, 3),
        ]
        for (status, headers, requests) in cases {
            URLProtocolStub.reset()
            URLProtocolStub.stub(.response(status: status, body: Data(), headers: headers))
            let outcome = loadThroughComposer()
            XCTAssertEqual(URLProtocolStub.requests.count, requests, "status \(status): \(String(describing: outcome))")
        }
        URLProtocolStub.reset()
        URLProtocolStub.stub(.response(status: 200, body: Data("not json".utf8)))
        _ = loadThroughComposer()
        XCTAssertEqual(URLProtocolStub.requests.count, 1, "invalid data is permanent")

        URLProtocolStub.reset()
        URLProtocolStub.stub(.response(status: 429, body: Data(), headers: ["Retry-After": "9"]))
        let scheduler = TestScheduler()
        let recorder = LoadRecorder<[Friend]>()
        recorder.load(makeComposer(scheduler: scheduler).friendsLoader.receive(on: .immediate))
        waitUntil { URLProtocolStub.requests.count == 1 && scheduler.scheduledDelays.contains(.seconds(2)) }
        XCTAssertTrue(
            scheduler.scheduledDelays.contains(.seconds(2)),
            "the wait is capped at the policy's 2 s maximum: \(scheduler.scheduledDelays)")
    }

    func test_delete_sendsTheIdAsExactlyOneEncodedPathSegment() {
        let deleter = RemoteFriendsDeleter(
            baseURL: baseURL, client: URLSessionHTTPClient(session: URLProtocolStub.makeSession()))
        let cases = [
            "../admin": "https://api.example.com/v1/friends/%2E%2E%2Fadmin",
            "..": "https://api.example.com/v1/friends/%2E%2E",
            ".": "https://api.example.com/v1/friends/%2E",
            "a/b": "https://api.example.com/v1/friends/a%2Fb",
            "a?b#c": "https://api.example.com/v1/friends/a%3Fb%23c",
            "é": "https://api.example.com/v1/friends/%C3%A9",
            "u-1_x~": "https://api.example.com/v1/friends/u-1_x~",
        ]
        for (id, expected) in cases {
            URLProtocolStub.stub(.response(status: 204, body: Data()))
            XCTAssertNoThrow(try awaitResult { deleter.delete(id: id, completion: $0) }?.get())
            XCTAssertEqual(URLProtocolStub.requests.last?.url?.absoluteString, expected, "id \(id.debugDescription)")
        }
    }

    func test_delete_rejectsAnEmptyIdBeforeAnyRequest() {
        let deleter = RemoteFriendsDeleter(
            baseURL: baseURL, client: URLSessionHTTPClient(session: URLProtocolStub.makeSession()))
        let before = URLProtocolStub.requests.count

        guard case .failure(FriendsAPIError.invalidID(""))? = awaitResult({ deleter.delete(id: "", completion: $0) })
        else {
            return XCTFail("an empty id should be rejected")
        }
        XCTAssertEqual(URLProtocolStub.requests.count, before)
    }

    // MARK: Response size

    func test_load_aDeclaredBodyLargerThanTheLimit_failsBeforeReadingIt() {
        URLProtocolStub.stub(.response(status: 200, body: Data(count: 2_000), headers: ["Content-Length": "2000"]))

        let result = load(maxResponseBytes: 1_000)

        XCTAssertEqual(apiError(result)?.isResponseTooLarge(limit: 1_000), true, "\(String(describing: result))")
        XCTAssertEqual(apiError(result)?.isTransient, false, "not retried: the next answer would be as large")
    }

    func test_load_aBodyThatGrowsPastTheLimit_failsAsItPassesIt() {
        URLProtocolStub.stub(.chunks(Array(repeating: Data(repeating: 0x20, count: 400), count: 5)))

        let result = load(maxResponseBytes: 1_000)

        XCTAssertEqual(apiError(result)?.isResponseTooLarge(limit: 1_000), true, "\(String(describing: result))")
    }

    func test_load_aBodyWithinTheLimit_isRead() throws {
        let body = Data(#"{"friends": []}"#.utf8)
        URLProtocolStub.stub(.response(status: 200, body: body))

        XCTAssertEqual(try load(maxResponseBytes: body.count)?.get(), [])
    }

    func test_load_anEndlessBodyFromARealServer_failsAtTheLimit_holdingNoMoreInMemory() throws {
        #if !os(Linux)
            throw XCTSkip("the process's peak memory is read from /proc")
        #endif
        // A real socket: a Python server that writes an endless body, at about 100 MB/s. (Faster, on loopback, it
        // outruns what FoundationNetworking on Linux drains of a cancelled task in a debug build, and its queue of
        // chunks for the delegate grows: the platform's, not this client's.)
        let server = try EndlessBodyServer()
        defer { server.stop() }
        let limit = 4 << 20
        let sut = RemoteFriendsLoader(
            baseURL: URL(string: "http://127.0.0.1:\(server.port)")!,
            client: URLSessionHTTPClient(session: URLSession(configuration: .ephemeral), maxResponseBytes: limit))
        let peakBefore = try peakMemory()

        let result = awaitResult(timeout: .watchdog) { sut.load(completion: $0) }

        XCTAssertEqual(apiError(result)?.isResponseTooLarge(limit: limit), true, "\(String(describing: result))")
        // A real socket: FoundationNetworking may go on reading for a while after the cancel; what it reads is
        // dropped as it arrives. The peak is read once the connection is closed (the server then ends): the body (at
        // most twice the limit, as it grows) and FoundationNetworking's own buffers (up to about 35 MB seen here).
        XCTAssertTrue(server.waitUntilTheClientLetsGo(), "the client closed the connection")
        XCTAssertLessThan(try peakMemory() - peakBefore, 2 * limit + (64 << 20), "the peak grew with the stream")
    }

    /// The process's peak resident memory, in bytes (Linux's VmHWM).
    private func peakMemory() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
        return try XCTUnwrap(Int(line.split(separator: " ").dropFirst().first ?? "")) * 1_024
    }

    private func apiError(_ result: Result<[Friend], any Error>?) -> FriendsAPIError? {
        guard case .failure(let error) = result else { return nil }
        return error as? FriendsAPIError
    }

    private func makeComposer(scheduler: some Scheduler = DispatchQueueScheduler.global()) -> FriendsComposer {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("retry-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        return FriendsComposer(
            configuration: .init(
                baseURL: baseURL, databaseURL: folder.appendingPathComponent("friends.sqlite"),
                retry: .exponential(initial: .milliseconds(1), maxDelay: .seconds(2), maxAttempts: 3)),
            session: URLProtocolStub.makeSession(), scheduler: scheduler)
    }

    private func loadThroughComposer() -> Result<[Friend], any Error>? {
        let outcome = Locked<Result<[Friend], any Error>?>(nil)
        let done = expectation(description: "load")
        let token = makeComposer().friendsLoader.receive(on: .immediate).load { result in
            outcome.withLock { $0 = result }
            done.fulfill()
        }
        wait(for: [done], timeout: .watchdog)
        withExtendedLifetime(token) {}
        return outcome.withLock { $0 }
    }

    private func load(maxResponseBytes: Int? = URLSessionHTTPClient.defaultMaxResponseBytes) -> Result<
        [Friend], any Error
    >? {
        let client = URLSessionHTTPClient(session: URLProtocolStub.makeSession(), maxResponseBytes: maxResponseBytes)
        let sut = RemoteFriendsLoader(baseURL: baseURL, client: client)
        return awaitResult { sut.load(completion: $0) }
    }

    private func waitUntil(_ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(
            eventually(condition), "the condition did not hold within the watchdog (60 s)", file: file, line: line)
    }
}

/// Runs `onRelease` when it is released: captured by a completion, it tells when that completion was let go.
private final class ReleaseProbe: Sendable {
    private let onRelease: @Sendable () -> Void

    init(_ onRelease: @escaping @Sendable () -> Void) {
        self.onRelease = onRelease
    }

    deinit { onRelease() }

    func touch() {}
}

extension FriendsAPIError {
    fileprivate func isResponseTooLarge(limit expected: Int) -> Bool {
        if case .responseTooLarge(let limit) = self { return limit == expected }
        return false
    }
}

/// A loopback HTTP server (Python) that answers its first request with 200 and an endless body (up to 4 GiB), 64 KiB
/// every half millisecond or so.
private final class EndlessBodyServer {
    let port: Int
    private let process = Process()
    private let output = Pipe()

    init() throws {
        let script = """
            import socket, sys
            server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
            print(server.getsockname()[1], flush=True)
            connection, _ = server.accept(); connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nConnection: close\\r\\n\\r\\n")
            import time
            sent, chunk = 0, b" " * 65536
            try:
                while sent < 4 << 30:
                    connection.sendall(chunk); sent += len(chunk); time.sleep(0.0005)  # a pace, not a wait
            except OSError:
                pass
            """
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-u", "-c", script]
        process.standardOutput = output
        try process.run()
        guard let line = Self.readLine(output), let port = Int(line) else {
            process.terminate()
            throw XCTSkip("python3 could not start a loopback server here")
        }
        self.port = port
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Waits until the client closed the connection (the server then ends), or the watchdog ran out; whether it did.
    func waitUntilTheClientLetsGo() -> Bool {
        let ended = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { [process] in
            process.waitUntilExit()
            ended.signal()
        }
        return ended.wait(timeout: .now() + .watchdog) == .success
    }

    private static func readLine(_ pipe: Pipe) -> String? {
        var line = Data()
        while true {
            guard let byte = try? pipe.fileHandleForReading.read(upToCount: 1), let first = byte.first else {
                return nil
            }
            if first == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(first)
        }
    }
}
