//! TLS material of the test servers: one test CA per state folder (`tls/ca.pem`), and server
//! certificates it signs for `localhost` (a DNS name only, no IP address), so Sluice's backend
//! verification can be tested both ways: `verify-ca` passes for `127.0.0.1`, `verify-full`
//! passes for `localhost` and fails for `127.0.0.1`.

use crate::Result;
use crate::proc::run_capture;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The test CA's certificate under `state`, created on first use.
pub fn test_ca(state: &Path) -> Result<PathBuf> {
    let dir = state.join("tls");
    let (cert, key) = (dir.join("ca.pem"), dir.join("ca.key"));
    if cert.exists() && key.exists() {
        return Ok(cert);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    run_capture(
        Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .args(["-subj", "/CN=sluice-test-ca"])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]),
    )?;
    Ok(cert)
}

/// A key and a certificate for `localhost` signed by the test CA of `state`.
pub fn server_cert(state: &Path, key: &Path, cert: &Path, cn: &str) -> Result<()> {
    let ca = test_ca(state)?;
    let ca_key = ca.with_file_name("ca.key");
    let csr = cert.with_extension("csr");
    let ext = cert.with_extension("ext");
    std::fs::write(
        &ext,
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| format!("{}: {e}", ext.display()))?;
    run_capture(
        Command::new("openssl")
            .args(["req", "-newkey", "rsa:2048", "-nodes", "-keyout"])
            .arg(key)
            .arg("-out")
            .arg(&csr)
            .arg("-subj")
            .arg(format!("/CN={cn}")),
    )?;
    run_capture(
        Command::new("openssl")
            .args(["x509", "-req", "-days", "3650", "-in"])
            .arg(&csr)
            .arg("-CA")
            .arg(&ca)
            .arg("-CAkey")
            .arg(&ca_key)
            .args(["-set_serial", &format!("{}", std::process::id())])
            .arg("-extfile")
            .arg(&ext)
            .arg("-out")
            .arg(cert),
    )?;
    let _ = std::fs::remove_file(&csr);
    let _ = std::fs::remove_file(&ext);
    Ok(())
}
