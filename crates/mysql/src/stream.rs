//! A client socket: plain TCP or TLS over TCP, compressed or not.

use sluice_net::ServerTls;
use tokio::net::TcpStream;

/// Plain or TLS stream from a client, compressed once the client and Sluice agreed to
/// CLIENT_COMPRESS.
pub(crate) type ClientStream = sluice_mysql_proto::compress::MaybeCompressed<ClientSocket>;

/// Plain or TLS socket from a client. TLS is [`ServerTls`]: an idle client's TLS holds no
/// buffer.
pub(crate) type ClientSocket = sluice_net::MaybeTls<ServerTls<TcpStream>>;
