import Foundation

/// An error reported by SQLite, with its result code and message.
public struct SQLiteError: Error, Equatable, CustomStringConvertible {
    /// SQLite's (extended) result code, such as 26 (`SQLITE_NOTADB`) or 8 (`SQLITE_READONLY`).
    public let code: Int32
    /// SQLite's message for the error.
    public let message: String
    /// What the store was doing: "open", "migrate", "replace all"...
    public let operation: String

    /// Creates an error.
    public init(code: Int32, message: String, operation: String) {
        self.code = code
        self.message = message
        self.operation = operation
    }

    /// The primary result code (the low byte of ``code``).
    public var primaryCode: Int32 { code & 0xFF }

    /// The file is not a database (`SQLITE_NOTADB`).
    public var isNotADatabase: Bool { primaryCode == 26 }
    /// The database cannot be written (`SQLITE_READONLY`).
    public var isReadOnly: Bool { primaryCode == 8 }
    /// Whether the file is not a readable database: not a database (26) or corrupt (11).
    public var isUnreadableDatabase: Bool { primaryCode == 26 || primaryCode == 11 }

    public var description: String {
        let message = message.hasSuffix(".") ? String(message.dropLast()) : message
        return "The database failed to \(operation) (SQLite error \(code)): \(message)."
    }
}

extension SQLiteError: LocalizedError {
    public var errorDescription: String? { description }
}
