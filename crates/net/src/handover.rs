//! Handing listening sockets to another process (HAProxy's seamless reload, PgBouncer's online
//! restart): the running Sluice sends each listener's file descriptor, with a name saying which
//! port it is, over a Unix socket (`SCM_RIGHTS`); the new process accepts on the very same
//! sockets, so connections waiting in their accept queues are served by whichever process
//! accepts first and none is refused.
//!
//! The exchange on one Unix stream, started by the new process:
//!
//! 1. new → old: `SLUICE TAKEOVER 1\n`
//! 2. old → new: one message, its bytes the names (one per line), its ancillary data the
//!    descriptors in the same order
//! 3. new → old: `READY <pid>\n` once it accepts on them (the old one then stops accepting)
//! 4. old → new: `BYE\n`
//!
//! Blocking calls on `std` sockets: a handover happens once per upgrade.

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};
use std::io::{BufRead, BufReader, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// The request that opens a handover.
pub const REQUEST: &str = "SLUICE TAKEOVER 1";

/// At most this many listeners are handed over (Sluice has a handful).
pub const MAX_LISTENERS: usize = 64;

/// Names are short (`mysql 127.0.0.1:6033`); all of them fit in this.
const MAX_NAMES: usize = 16 * 1024;

/// Why a handover failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandoverError {
    /// The Unix socket failed.
    #[error("takeover socket: {0}")]
    Io(#[from] std::io::Error),
    /// The peer said something else than the exchange expects.
    #[error("takeover: unexpected message from the other process: {0:?}")]
    Protocol(String),
    /// More listeners, or longer names, than a handover carries.
    #[error("takeover: {0}")]
    TooMany(&'static str),
}

/// A listener received from the running process: its name and socket.
#[derive(Debug)]
pub struct Handed {
    /// What the sender called it (e.g. `mysql 127.0.0.1:6033`).
    pub name: String,
    /// The listening socket.
    pub fd: OwnedFd,
}

/// Sender side, step 2: after reading the [`REQUEST`] line, sends `listeners` (name, socket).
pub fn send_listeners<F: AsFd>(
    stream: &UnixStream,
    listeners: &[(String, F)],
) -> Result<(), HandoverError> {
    if listeners.len() > MAX_LISTENERS {
        return Err(HandoverError::TooMany(
            "more listeners than a handover carries",
        ));
    }
    let names: String = listeners.iter().map(|(n, _)| format!("{n}\n")).collect();
    if names.len() > MAX_NAMES || names.is_empty() {
        return Err(HandoverError::TooMany("listener names too long, or none"));
    }
    let fds: Vec<_> = listeners.iter().map(|(_, f)| f.as_fd()).collect();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_LISTENERS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(HandoverError::TooMany(
            "descriptors do not fit the control buffer",
        ));
    }
    let sent = sendmsg(
        stream,
        &[IoSlice::new(names.as_bytes())],
        &mut control,
        SendFlags::empty(),
    )
    .map_err(std::io::Error::from)?;
    if sent != names.len() {
        return Err(HandoverError::Protocol(
            "short write of the listener names".into(),
        ));
    }
    Ok(())
}

/// Receiver side, steps 1–2: asks for the listeners and receives them.
pub fn request_listeners(stream: &mut UnixStream) -> Result<Vec<Handed>, HandoverError> {
    stream.write_all(format!("{REQUEST}\n").as_bytes())?;
    let mut names = vec![0u8; MAX_NAMES];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_LISTENERS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        &*stream,
        &mut [IoSliceMut::new(&mut names)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = msg {
            fds.extend(received);
        }
    }
    let text = std::str::from_utf8(&names[..got.bytes])
        .map_err(|_| HandoverError::Protocol("listener names are not UTF-8".into()))?;
    let names: Vec<&str> = text.lines().collect();
    if names.len() != fds.len() || fds.is_empty() {
        return Err(HandoverError::Protocol(format!(
            "{} names for {} descriptors",
            names.len(),
            fds.len()
        )));
    }
    Ok(names
        .into_iter()
        .zip(fds)
        .map(|(name, fd)| Handed {
            name: name.to_string(),
            fd,
        })
        .collect())
}

/// Reads one line (at most 256 bytes) from the peer; `None` at end of stream.
pub fn read_line(stream: &UnixStream) -> Result<Option<String>, HandoverError> {
    let mut line = String::new();
    let n = BufReader::new(stream.take(256)).read_line(&mut line)?;
    if n == 0 {
        return Ok(None);
    }
    Ok(Some(line.trim_end().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn listeners_cross_a_unix_socket_and_keep_their_queue() {
        let (mut new, old) = UnixStream::pair().unwrap();
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr_a = a.local_addr().unwrap();
        // A connection queued before the handover is accepted by the receiver.
        let _client = std::net::TcpStream::connect(addr_a).unwrap();
        let sender = std::thread::spawn(move || {
            assert_eq!(read_line(&old).unwrap().as_deref(), Some(REQUEST));
            send_listeners(
                &old,
                &[("mysql a".to_string(), &a), ("pgsql b".to_string(), &b)],
            )
            .unwrap();
            read_line(&old).unwrap()
        });
        let handed = request_listeners(&mut new).unwrap();
        assert_eq!(handed.len(), 2);
        assert_eq!(handed[0].name, "mysql a");
        let received = TcpListener::from(handed.into_iter().next().unwrap().fd);
        assert_eq!(received.local_addr().unwrap(), addr_a);
        let (_conn, _) = received.accept().unwrap();
        new.write_all(b"READY 1\n").unwrap();
        assert_eq!(sender.join().unwrap().as_deref(), Some("READY 1"));
    }

    #[test]
    fn a_peer_that_sends_no_descriptors_is_an_error() {
        let (mut new, mut old) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let _ = read_line(&old);
            old.write_all(b"mysql x\n").unwrap();
        });
        assert!(matches!(
            request_listeners(&mut new),
            Err(HandoverError::Protocol(_))
        ));
        t.join().unwrap();
    }
}
