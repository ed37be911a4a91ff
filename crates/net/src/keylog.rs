//! TLS key logging (`admin-ssl_keylog_file`): the secrets of every TLS session Sluice terminates
//! (clients) or originates (servers), in the NSS key log format Wireshark reads
//! (`<label> <client random hex> <secret hex>`), so traffic captured on either leg can be
//! decrypted while debugging. The file is created with mode 0600 and appended to; lines from
//! concurrent sessions never interleave.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Mutex;
use tracing::warn;

/// What a TLS configuration reports its secrets to (rustls's trait, re-exported so callers need
/// not depend on rustls).
pub use rustls::KeyLog;

/// Appends key log lines to one file, opened on the first line.
#[derive(Debug)]
pub struct KeyLogFile {
    path: PathBuf,
    file: Mutex<Option<std::fs::File>>,
}

impl KeyLogFile {
    /// A key log appending to `path` (created with mode 0600 when missing).
    pub fn new(path: impl Into<PathBuf>) -> KeyLogFile {
        KeyLogFile {
            path: path.into(),
            file: Mutex::new(None),
        }
    }

    fn append(&self, line: &str) {
        let mut g = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.path)
            {
                Ok(f) => *g = Some(f),
                Err(e) => {
                    warn!(path = %self.path.display(), "cannot open the TLS key log (admin-ssl_keylog_file): {e}");
                    return;
                }
            }
        }
        if let Some(f) = g.as_mut()
            && let Err(e) = f.write_all(line.as_bytes())
        {
            warn!(path = %self.path.display(), "cannot write the TLS key log: {e}");
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl rustls::KeyLog for KeyLogFile {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        // One write per line, under the lock: lines of concurrent sessions stay whole.
        self.append(&format!("{label} {} {}\n", hex(client_random), hex(secret)));
    }

    fn will_log(&self, _label: &str) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::KeyLog;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn lines_are_nss_format_in_a_private_file() {
        let dir = std::env::temp_dir().join(format!("sluice-keylog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("keys.log");
        let log = KeyLogFile::new(&path);
        log.log("CLIENT_TRAFFIC_SECRET_0", &[0xab; 32], &[0x01, 0x02]);
        log.log("SERVER_TRAFFIC_SECRET_0", &[0xab; 32], &[0xff]);
        let text = std::fs::read_to_string(&path).expect("written");
        let random = "ab".repeat(32);
        assert_eq!(
            text,
            format!("CLIENT_TRAFFIC_SECRET_0 {random} 0102\nSERVER_TRAFFIC_SECRET_0 {random} ff\n")
        );
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
