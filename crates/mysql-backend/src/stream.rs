//! A backend socket: plain TCP or client-side TLS over TCP.

use tokio::net::TcpStream;

/// Plain or TLS stream to a backend.
pub type BackendStream =
    sluice_mysql_proto::stream::MaybeTls<tokio_rustls::client::TlsStream<TcpStream>>;
