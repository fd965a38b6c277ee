#if canImport(SQLite3)
    import SQLite3
#else
    import CSQLite
#endif

/// SQLite's "copy this buffer now" destructor, which does not import into Swift.
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection. Not thread-safe: the store uses it from one serial queue only.
final class SQLiteConnection {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    /// Opens (creating if needed) the database at `path`; ":memory:" for a private in-memory database. With
    /// `immutable`, opens an existing file read-only and tells SQLite it never changes, so that it makes no file
    /// beside it (no -wal, -shm or lock): a database in a folder that cannot be written, such as an app's bundle.
    init(path: String, immutable: Bool = false) throws(SQLiteError) {
        var handle: OpaquePointer?
        let flags =
            immutable
            ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX
            : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(immutable ? Self.immutableURI(path) : path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(handle)
            throw SQLiteError(code: code, message: message, operation: "open")
        }
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, 5_000)
        self.handle = handle
    }

    /// `file:` URI of `path` with `immutable=1`; the characters a URI gives a meaning to are escaped.
    private static func immutableURI(_ path: String) -> String {
        var escaped = ""
        for character in path.unicodeScalars {
            switch character {
            case "%", "?", "#": escaped += "%" + String(character.value, radix: 16, uppercase: true)
            default: escaped.unicodeScalars.append(character)
            }
        }
        return "file:\(escaped)?immutable=1"
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Runs SQL without parameters (schema, pragmas, transactions).
    func execute(_ sql: String, operation: String) throws(SQLiteError) {
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw error(code, operation) }
    }

    /// Runs `body` in a transaction: committed if it returns, rolled back if it throws.
    func transaction<R>(operation: String, _ body: () throws(SQLiteError) -> R) throws(SQLiteError) -> R {
        try execute("BEGIN IMMEDIATE", operation: operation)
        do {
            let result = try body()
            try execute("COMMIT", operation: operation)
            return result
        } catch {
            try? execute("ROLLBACK", operation: operation)
            throw error
        }
    }

    /// Runs a (cached) prepared statement with bound `values`, calling `row` for each result row.
    func run(
        _ sql: String,
        _ values: [SQLiteValue] = [],
        operation: String,
        row: ((SQLiteRow) throws(SQLiteError) -> Void)? = nil
    ) throws(SQLiteError) {
        try run(
            prepared(sql, operation: operation), operation: operation,
            bind: { (statement: OpaquePointer) throws(SQLiteError) in
                for (offset, value) in values.enumerated() {
                    try self.bind(value, at: Int32(offset + 1), in: statement, operation: operation)
                }
            }, row: row)
    }

    /// Runs `statement` (from ``prepared(_:operation:)``, looked up once for a loop of writes) after `bind` has bound
    /// its parameters, calling `row` for each result row; the statement is reset afterwards.
    func run(
        _ statement: OpaquePointer,
        operation: String,
        bind: (OpaquePointer) throws(SQLiteError) -> Void,
        row: ((SQLiteRow) throws(SQLiteError) -> Void)? = nil
    ) throws(SQLiteError) {
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        try bind(statement)
        while true {
            let code = sqlite3_step(statement)
            switch code {
            case SQLITE_ROW: try row?(SQLiteRow(statement: statement))
            case SQLITE_DONE: return
            default: throw error(code, operation)
            }
        }
    }

    /// Binds `value` to parameter `index` (1-based) of `statement`.
    func bind(_ value: SQLiteValue, at index: Int32, in statement: OpaquePointer, operation: String) throws(SQLiteError)
    {
        let code: Int32
        switch value {
        case .text(let text):
            // Bound with its byte length, so that a NUL inside the text is kept rather than ending it.
            var text = text
            code = text.withUTF8 { bytes -> Int32 in
                guard let start = bytes.baseAddress, !bytes.isEmpty else {
                    return sqlite3_bind_text(statement, index, "", 0, sqliteTransient)
                }
                return start.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text(statement, index, $0, Int32(bytes.count), sqliteTransient)
                }
            }
        case .integer(let integer): code = sqlite3_bind_int64(statement, index, integer)
        case .real(let real): code = sqlite3_bind_double(statement, index, real)
        case .null: code = sqlite3_bind_null(statement, index)
        }
        guard code == SQLITE_OK else { throw error(code, operation) }
    }

    /// The value of an integer pragma, such as `user_version`.
    func integerPragma(_ name: String, operation: String) throws(SQLiteError) -> Int64 {
        var value: Int64 = 0
        try run("PRAGMA \(name)", operation: operation) { row in value = row.integer(0) }
        return value
    }

    /// The prepared statement for `sql`, prepared once per connection and cached.
    func prepared(_ sql: String, operation: String) throws(SQLiteError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error(code, operation) }
        statements[sql] = statement
        return statement
    }

    private func error(_ code: Int32, _ operation: String) -> SQLiteError {
        let extended = sqlite3_extended_errcode(handle)
        return SQLiteError(
            code: extended != 0 ? extended : code,
            message: String(cString: sqlite3_errmsg(handle)),
            operation: operation)
    }
}

/// A value bound to a statement parameter.
enum SQLiteValue {
    case text(String)
    case integer(Int64)
    case real(Double)
    case null
}

/// The current row of a statement, read by column index.
struct SQLiteRow {
    let statement: OpaquePointer

    func text(_ column: Int32) -> String? {
        guard let text = sqlite3_column_text(statement, column) else { return nil }
        // The length SQLite already knows spares a strlen per value.
        let length = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self)
    }

    func integer(_ column: Int32) -> Int64 {
        sqlite3_column_int64(statement, column)
    }

    func real(_ column: Int32) -> Double {
        sqlite3_column_double(statement, column)
    }
}
