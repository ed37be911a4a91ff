//! sluice-mysql-proto: the MySQL client/server protocol pieces Sluice's frontend and backend share.
//!
//! Framing ([`framing`]), the handshake ([`handshake`]), OK/ERR/EOF packets ([`packets`]), auth
//! scrambles ([`scramble`]) and the reply tracker that finds where a backend reply ends without
//! decoding rows ([`reply`]). Every decoder is bounded and returns [`Error`] on malformed input.

pub mod compress;
pub mod consts;
pub mod error;
pub mod framing;
pub mod handshake;
pub mod lenenc;
pub mod packets;
pub mod reply;
pub mod resultset;
pub mod scramble;

pub use error::Error;
