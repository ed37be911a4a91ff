//! sluice-mysql-proto: the MySQL client/server protocol pieces Sluice's frontend and backend share.
//!
//! Framing ([`framing`]), the handshake ([`handshake`]), OK/ERR/EOF packets ([`packets`]), auth
//! scrambles ([`scramble`]) and the reply tracker that finds where a backend reply ends without
//! decoding rows ([`reply`]). Every decoder is bounded and returns [`Error`] on malformed input.
//!
//! ```
//! use sluice_mysql_proto::framing::packet;
//! use sluice_mysql_proto::packets::{ok_payload, parse_ok};
//! use sluice_mysql_proto::reply::{ReplyKind, ReplyTracker};
//!
//! // A server's OK for an UPDATE that changed 3 rows, framed with sequence id 1.
//! let ok = ok_payload(3, 0, 0x0002, 0);
//! let wire = packet(1, &ok);
//! assert_eq!(&wire[..4], &[ok.len() as u8, 0, 0, 1]);
//! assert_eq!(parse_ok(&ok)?.affected_rows, 3);
//!
//! // The tracker sees where the reply ends, packet by packet, without decoding rows.
//! let mut reply = ReplyTracker::new(ReplyKind::ResultSets, true);
//! reply.feed(&ok, ok.len()).expect("a well-formed reply");
//! assert!(reply.done() && !reply.error);
//! assert_eq!(reply.affected_rows, 3);
//! # Ok::<(), sluice_mysql_proto::Error>(())
//! ```

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
pub mod session_track;

pub use error::Error;
