import XCTest

extension XCTestCase {
    /// Fails the test if `instance` is still alive when the test's teardown runs: the leak check every `makeSUT`
    /// factory should apply to what it creates.
    ///
    /// ```swift
    /// let token = sut.load { _ in }
    /// trackForMemoryLeaks(token as AnyObject)
    /// ```
    public func trackForMemoryLeaks(_ instance: AnyObject, file: StaticString = #filePath, line: UInt = #line) {
        addTeardownBlock { [weak instance] in
            XCTAssertNil(
                instance, "Instance should have been deallocated. Potential memory leak.", file: file, line: line)
        }
    }
}
