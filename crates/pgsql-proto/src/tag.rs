//! Message type bytes and transaction status bytes, named. The same byte means different
//! messages in the two directions (`S` is Sync from a client, ParameterStatus from a server), so
//! each direction has its own module.
//!
//! ```
//! use sluice_pgsql_proto::frame::{message, ready};
//! use sluice_pgsql_proto::tag::{client, server, status};
//!
//! assert_eq!(message(client::QUERY, b"SELECT 1\0")[0], b'Q');
//! assert_eq!(ready(status::IDLE), message(server::READY_FOR_QUERY, b"I"));
//! ```

/// What a client sends (frontend messages).
pub mod client {
    /// Query: one or more statements in the simple protocol.
    pub const QUERY: u8 = b'Q';
    /// Parse: a statement prepared (named, or the unnamed one).
    pub const PARSE: u8 = b'P';
    /// Bind: a portal from a prepared statement and parameters.
    pub const BIND: u8 = b'B';
    /// Describe a statement (`S`) or portal (`P`).
    pub const DESCRIBE: u8 = b'D';
    /// Execute a portal.
    pub const EXECUTE: u8 = b'E';
    /// Close a statement (`S`) or portal (`P`).
    pub const CLOSE: u8 = b'C';
    /// Sync: the end of an extended-protocol batch; answered with ReadyForQuery.
    pub const SYNC: u8 = b'S';
    /// Flush: send what is pending without ending the batch.
    pub const FLUSH: u8 = b'H';
    /// FunctionCall; answered with its own ReadyForQuery, like a Query.
    pub const FUNCTION_CALL: u8 = b'F';
    /// Terminate: the client leaves.
    pub const TERMINATE: u8 = b'X';
    /// PasswordMessage, SASLInitialResponse and SASLResponse.
    pub const PASSWORD: u8 = b'p';
    /// CopyData (both directions).
    pub const COPY_DATA: u8 = b'd';
    /// CopyDone (both directions).
    pub const COPY_DONE: u8 = b'c';
    /// CopyFail.
    pub const COPY_FAIL: u8 = b'f';
}

/// What a server sends (backend messages).
pub mod server {
    /// Authentication request or result (`R` with a code).
    pub const AUTHENTICATION: u8 = b'R';
    /// ParameterStatus: a run-time parameter's value.
    pub const PARAMETER_STATUS: u8 = b'S';
    /// BackendKeyData: the pid and secret a CancelRequest names.
    pub const BACKEND_KEY_DATA: u8 = b'K';
    /// ReadyForQuery, with the transaction status.
    pub const READY_FOR_QUERY: u8 = b'Z';
    /// RowDescription.
    pub const ROW_DESCRIPTION: u8 = b'T';
    /// DataRow.
    pub const DATA_ROW: u8 = b'D';
    /// CommandComplete, with the command tag.
    pub const COMMAND_COMPLETE: u8 = b'C';
    /// EmptyQueryResponse.
    pub const EMPTY_QUERY: u8 = b'I';
    /// ErrorResponse.
    pub const ERROR_RESPONSE: u8 = b'E';
    /// NoticeResponse.
    pub const NOTICE_RESPONSE: u8 = b'N';
    /// NotificationResponse (LISTEN/NOTIFY).
    pub const NOTIFICATION_RESPONSE: u8 = b'A';
    /// ParseComplete.
    pub const PARSE_COMPLETE: u8 = b'1';
    /// BindComplete.
    pub const BIND_COMPLETE: u8 = b'2';
    /// CloseComplete.
    pub const CLOSE_COMPLETE: u8 = b'3';
    /// NoData.
    pub const NO_DATA: u8 = b'n';
    /// ParameterDescription.
    pub const PARAMETER_DESCRIPTION: u8 = b't';
    /// PortalSuspended.
    pub const PORTAL_SUSPENDED: u8 = b's';
    /// CopyInResponse.
    pub const COPY_IN: u8 = b'G';
    /// CopyOutResponse.
    pub const COPY_OUT: u8 = b'H';
}

/// The transaction status a ReadyForQuery carries.
pub mod status {
    /// Not in a transaction block.
    pub const IDLE: u8 = b'I';
    /// In a transaction block.
    pub const IN_TRANSACTION: u8 = b'T';
    /// In a failed transaction block (statements refused until it ends).
    pub const FAILED: u8 = b'E';
}

/// Whether a client message is answered with its own ReadyForQuery (Query, Sync,
/// FunctionCall): the messages a session counts to know when the server is done.
#[inline]
pub fn ends_with_ready(kind: u8) -> bool {
    matches!(kind, client::QUERY | client::SYNC | client::FUNCTION_CALL)
}
