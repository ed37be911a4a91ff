//! Capability flags, status flags and command bytes.

/// Capability flags (`CLIENT_*`).
pub mod cap {
    /// MySQL's CLIENT_LONG_PASSWORD; MariaDB reads it as "this is MySQL" (CLIENT_MYSQL).
    pub const LONG_PASSWORD: u32 = 1;
    /// Affected rows = found rows.
    pub const FOUND_ROWS: u32 = 1 << 1;
    /// Longer column flags.
    pub const LONG_FLAG: u32 = 1 << 2;
    /// Database name in the handshake response.
    pub const CONNECT_WITH_DB: u32 = 1 << 3;
    /// The compressed protocol (zlib).
    pub const COMPRESS: u32 = 1 << 5;
    /// LOAD DATA LOCAL.
    pub const LOCAL_FILES: u32 = 1 << 7;
    /// Parser ignores spaces before '('.
    pub const IGNORE_SPACE: u32 = 1 << 8;
    /// Protocol 4.1.
    pub const PROTOCOL_41: u32 = 1 << 9;
    /// Interactive client (interactive_timeout).
    pub const INTERACTIVE: u32 = 1 << 10;
    /// TLS.
    pub const SSL: u32 = 1 << 11;
    /// Transaction status in OK/EOF.
    pub const TRANSACTIONS: u32 = 1 << 13;
    /// 4.1 authentication.
    pub const SECURE_CONNECTION: u32 = 1 << 15;
    /// Multiple statements per COM_QUERY.
    pub const MULTI_STATEMENTS: u32 = 1 << 16;
    /// Multiple result sets.
    pub const MULTI_RESULTS: u32 = 1 << 17;
    /// Multiple result sets from COM_STMT_EXECUTE.
    pub const PS_MULTI_RESULTS: u32 = 1 << 18;
    /// Pluggable authentication.
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    /// Connection attributes.
    pub const CONNECT_ATTRS: u32 = 1 << 20;
    /// Length-encoded auth response.
    pub const PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 1 << 21;
    /// Session state tracking in OK packets.
    pub const SESSION_TRACK: u32 = 1 << 23;
    /// OK instead of EOF packets.
    pub const DEPRECATE_EOF: u32 = 1 << 24;
}

/// MariaDB's extended capability flags (`MARIADB_CLIENT_*` >> 32): the 4 bytes a MariaDB greeting
/// carries in its reserved area, and a client's response in its filler, when the other side
/// cleared `CLIENT_MYSQL` ([`cap::LONG_PASSWORD`]).
pub mod mariadb_cap {
    /// `MARIADB_CLIENT_EXTENDED_METADATA`: column definitions carry extended type information
    /// (`format=json`, geometry type names), so results differ byte for byte.
    pub const EXTENDED_METADATA: u32 = 1 << 3;
}

/// Server status flags (`SERVER_*`) in OK/EOF packets.
pub mod status {
    /// A transaction is open.
    pub const IN_TRANS: u16 = 1;
    /// Autocommit is on.
    pub const AUTOCOMMIT: u16 = 1 << 1;
    /// Another result set follows.
    pub const MORE_RESULTS_EXISTS: u16 = 1 << 3;
    /// A read-only cursor was opened (COM_STMT_EXECUTE).
    pub const CURSOR_EXISTS: u16 = 1 << 6;
    /// The cursor's last row was sent.
    pub const LAST_ROW_SENT: u16 = 1 << 7;
    /// Session-state items follow the OK packet's info (CLIENT_SESSION_TRACK).
    pub const SESSION_STATE_CHANGED: u16 = 1 << 14;
}

/// Command bytes (`COM_*`).
pub mod com {
    /// Close the connection.
    pub const QUIT: u8 = 0x01;
    /// Change default schema.
    pub const INIT_DB: u8 = 0x02;
    /// Text query.
    pub const QUERY: u8 = 0x03;
    /// Column list of a table.
    pub const FIELD_LIST: u8 = 0x04;
    /// Server statistics string.
    pub const STATISTICS: u8 = 0x09;
    /// Kill a thread.
    pub const PROCESS_KILL: u8 = 0x0c;
    /// Liveness.
    pub const PING: u8 = 0x0e;
    /// Re-authenticate as another user.
    pub const CHANGE_USER: u8 = 0x11;
    /// Prepare a statement.
    pub const STMT_PREPARE: u8 = 0x16;
    /// Execute a prepared statement.
    pub const STMT_EXECUTE: u8 = 0x17;
    /// Send a long parameter.
    pub const STMT_SEND_LONG_DATA: u8 = 0x18;
    /// Close a prepared statement.
    pub const STMT_CLOSE: u8 = 0x19;
    /// Reset a prepared statement.
    pub const STMT_RESET: u8 = 0x1a;
    /// Multi-statement on/off.
    pub const SET_OPTION: u8 = 0x1b;
    /// Fetch rows from a cursor.
    pub const STMT_FETCH: u8 = 0x1c;
    /// Reset session state.
    pub const RESET_CONNECTION: u8 = 0x1f;
}

/// The largest payload of one physical packet; bigger payloads continue in the next packet.
pub const MAX_CHUNK: usize = 0xFF_FFFF;
