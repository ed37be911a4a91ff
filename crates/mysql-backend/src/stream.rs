//! A backend socket: plain TCP or client-side TLS over TCP, compressed or not.

use tokio::net::TcpStream;

/// Plain or TLS socket to a backend.
pub(crate) type BackendSocket = sluice_net::MaybeTls<tokio_rustls::client::TlsStream<TcpStream>>;

/// A backend socket, compressed when the server row has `compression=1` and the server agreed.
pub(crate) type BackendStream = sluice_mysql_proto::compress::MaybeCompressed<BackendSocket>;

pub(crate) use sluice_net::{KillHandle, with_kill_handle};
