//! [`ServerTls`] against tokio-rustls's client over loopback TCP.

use super::*;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

fn configs(
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> (Arc<ServerConfig>, TlsConnector) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let cert = CertificateDer::from(ck.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .expect("server config");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).expect("root");
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), TlsConnector::from(Arc::new(client)))
}

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.expect("connect"), accepted.expect("accept").0)
}

async fn handshake(
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> (ServerTls<TcpStream>, TlsStream<TcpStream>) {
    let (server_config, connector) = configs(versions);
    let (client_tcp, server_tcp) = tcp_pair().await;
    let name = ServerName::try_from("localhost").expect("name");
    let (server, client) = tokio::join!(
        ServerTls::accept(server_config, server_tcp, &[]),
        connector.connect(name, client_tcp)
    );
    (
        server.expect("server handshake"),
        client.expect("client handshake"),
    )
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Polls one read; true when it would wait.
async fn read_would_wait(server: &mut ServerTls<TcpStream>) -> bool {
    let mut byte = [0u8; 1];
    poll_fn(|cx| {
        let mut buf = ReadBuf::new(&mut byte);
        Poll::Ready(Pin::new(&mut *server).poll_read(cx, &mut buf).is_pending())
    })
    .await
}

async fn round_trips(versions: &[&'static rustls::SupportedProtocolVersion]) {
    let (mut server, mut client) = handshake(versions).await;
    // Client to server, larger than a record, read through a small buffer: what does not fit
    // waits in the stream, in order.
    let up = pattern(200_000, 7);
    let writer = tokio::spawn(async move {
        client.write_all(&up).await.expect("client write");
        client.flush().await.expect("client flush");
        (client, up)
    });
    let mut got = Vec::new();
    let mut small = [0u8; 100];
    while got.len() < 200_000 {
        let n = server.read(&mut small).await.expect("server read");
        assert!(n > 0, "early end after {} bytes", got.len());
        got.extend_from_slice(&small[..n]);
    }
    let (mut client, up) = writer.await.expect("writer");
    assert!(got == up, "the bytes arrived changed");
    // Server to client, many records.
    let down = pattern(300_000, 3);
    let reader = tokio::spawn(async move {
        let mut back = vec![0u8; 300_000];
        client.read_exact(&mut back).await.expect("client read");
        (client, back)
    });
    server.write_all(&down).await.expect("server write");
    server.flush().await.expect("server flush");
    let (mut client, back) = reader.await.expect("reader");
    assert!(back == down, "the bytes sent back changed");
    // Quiet client: the stream gives its buffers back.
    assert!(read_would_wait(&mut server).await);
    assert_eq!(server.buffered(), 0);
    // And serves again after.
    client.write_all(b"again").await.expect("client write");
    let mut five = [0u8; 5];
    server.read_exact(&mut five).await.expect("server read");
    assert_eq!(&five, b"again");
    // The client's close_notify is the end of the stream.
    client.shutdown().await.expect("client shutdown");
    assert_eq!(server.read(&mut small).await.expect("read at end"), 0);
}

#[tokio::test]
async fn tls13_round_trips_and_an_idle_stream_holds_no_buffer() {
    round_trips(&[&rustls::version::TLS13]).await;
}

#[tokio::test]
async fn tls12_round_trips_and_an_idle_stream_holds_no_buffer() {
    round_trips(&[&rustls::version::TLS12]).await;
}

#[tokio::test]
async fn bytes_read_before_the_handshake_are_its_start() {
    let (server_config, connector) = configs(&[&rustls::version::TLS13]);
    let (client_tcp, mut server_tcp) = tcp_pair().await;
    let name = ServerName::try_from("localhost").expect("name");
    let client = tokio::spawn(async move {
        let mut tls = connector
            .connect(name, client_tcp)
            .await
            .expect("client handshake");
        tls.write_all(b"ping").await.expect("write");
        let mut pong = [0u8; 4];
        tls.read_exact(&mut pong).await.expect("read");
        pong
    });
    // What a protocol's TLS request may leave in its packet buffer: the ClientHello's start.
    let mut early = [0u8; 11];
    server_tcp
        .read_exact(&mut early)
        .await
        .expect("early bytes");
    let mut server = ServerTls::accept(server_config, server_tcp, &early)
        .await
        .expect("server handshake");
    let mut ping = [0u8; 4];
    server.read_exact(&mut ping).await.expect("server read");
    assert_eq!(&ping, b"ping");
    server.write_all(b"pong").await.expect("server write");
    assert_eq!(&client.await.expect("client"), b"pong");
}

#[tokio::test]
async fn not_tls_fails_the_handshake_with_an_error() {
    let (server_config, _) = configs(&[&rustls::version::TLS13]);
    let (mut client_tcp, server_tcp) = tcp_pair().await;
    client_tcp
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let err = ServerTls::accept(server_config, server_tcp, &[])
        .await
        .expect_err("not TLS");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
}

#[tokio::test]
async fn a_client_leaving_mid_handshake_is_an_error() {
    let (server_config, _) = configs(&[&rustls::version::TLS13]);
    let (mut client_tcp, server_tcp) = tcp_pair().await;
    client_tcp
        .write_all(&[0x16, 0x03, 0x01])
        .await
        .expect("write");
    drop(client_tcp);
    let err = ServerTls::accept(server_config, server_tcp, &[])
        .await
        .expect_err("cut short");
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
}

#[tokio::test]
async fn the_servers_shutdown_is_a_clean_end_for_the_client() {
    let (mut server, mut client) = handshake(&[&rustls::version::TLS13]).await;
    server.write_all(b"bye").await.expect("write");
    server.shutdown().await.expect("shutdown");
    let mut all = Vec::new();
    client.read_to_end(&mut all).await.expect("clean end");
    assert_eq!(all, b"bye");
}

#[tokio::test]
async fn a_client_without_a_shared_version_hears_why() {
    let (server_config, _) = configs(&[&rustls::version::TLS13]);
    let (_, tls12_only) = configs(&[&rustls::version::TLS12]);
    let (client_tcp, server_tcp) = tcp_pair().await;
    let name = ServerName::try_from("localhost").expect("name");
    let (server, client) = tokio::join!(
        ServerTls::accept(server_config, server_tcp, &[]),
        tls12_only.connect(name, client_tcp)
    );
    assert_eq!(
        server.expect_err("no shared version").kind(),
        io::ErrorKind::InvalidData
    );
    let why = client.expect_err("no shared version").to_string();
    assert!(why.contains("alert"), "the client saw: {why}");
}
