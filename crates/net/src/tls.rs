//! Frontend TLS for both data ports: the certificate from `<prefix>-ssl_cert`/`<prefix>-ssl_key`,
//! or a self-signed pair generated into the datadir on first start (kept, so clients can pin it).

use crate::Error;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// File names of the generated pair in the datadir.
pub const GENERATED_CERT: &str = "sluice-cert.pem";
/// Key file name of the generated pair.
pub const GENERATED_KEY: &str = "sluice-key.pem";

/// Builds a TLS acceptor. `cert`/`key` are PEM paths (both empty = use or create the
/// generated pair in `datadir`; no datadir = a pair kept in memory only); `prefix` names the
/// variables they came from (`mysql` or `pgsql`) in errors.
pub fn acceptor(
    prefix: &str,
    cert: &str,
    key: &str,
    datadir: Option<&Path>,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
) -> Result<TlsAcceptor, Error> {
    let (cert_pem, key_pem) = match (cert.is_empty(), key.is_empty()) {
        (false, false) => (
            std::fs::read(cert).map_err(|e| tls_err(format!("{prefix}-ssl_cert {cert}"), e))?,
            std::fs::read(key).map_err(|e| tls_err(format!("{prefix}-ssl_key {key}"), e))?,
        ),
        (true, true) => generated_pair(datadir)?,
        _ => {
            return Err(Error::Tls {
                setting: format!("{prefix}-ssl_cert/{prefix}-ssl_key"),
                why: "both must be set, or neither".into(),
            });
        }
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| tls_err(format!("{prefix}-ssl_cert {cert}"), e))?;
    if chain.is_empty() {
        return Err(Error::Tls {
            setting: format!("{prefix}-ssl_cert {cert}"),
            why: "the file holds no certificate".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| tls_err(format!("{prefix}-ssl_key {key}"), e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("TLS setup".into(), e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| tls_err(format!("{prefix}-ssl_cert/{prefix}-ssl_key"), e))?;
    if let Some(log) = key_log {
        config.key_log = log;
    }
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// `setting` could not be used, for reason `e`.
fn tls_err(setting: String, e: impl std::fmt::Display) -> Error {
    Error::Tls {
        setting,
        why: e.to_string(),
    }
}

fn generated_pair(datadir: Option<&Path>) -> Result<(Vec<u8>, Vec<u8>), Error> {
    if let Some(dir) = datadir {
        let (c, k) = (dir.join(GENERATED_CERT), dir.join(GENERATED_KEY));
        if c.exists() && k.exists() {
            let cert = std::fs::read(&c).map_err(|e| tls_err(c.display().to_string(), e))?;
            let key = std::fs::read(&k).map_err(|e| tls_err(k.display().to_string(), e))?;
            return Ok((cert, key));
        }
    }
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .map_err(|e| tls_err("generating a TLS certificate".into(), e))?;
    let cert = ck.cert.pem().into_bytes();
    let key = ck.signing_key.serialize_pem().into_bytes();
    if let Some(dir) = datadir {
        std::fs::create_dir_all(dir).map_err(|e| tls_err(dir.display().to_string(), e))?;
        let (c, k) = (dir.join(GENERATED_CERT), dir.join(GENERATED_KEY));
        std::fs::write(&c, &cert).map_err(|e| tls_err(c.display().to_string(), e))?;
        write_private(&k, &key)?;
        tracing::info!("generated a self-signed TLS certificate in {}", c.display());
    }
    Ok((cert, key))
}

fn write_private(path: &Path, data: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| tls_err(path.display().to_string(), e))?;
    f.write_all(data)
        .map_err(|e| tls_err(path.display().to_string(), e))
}

/// A frontend's TLS acceptor that `PROXYSQL RELOAD TLS` can replace: new handshakes use the
/// current one, sessions already encrypted keep theirs, and a reload that fails (a missing or
/// bad file) leaves the current one in place.
pub struct ReloadableAcceptor {
    current: arc_swap::ArcSwap<TlsAcceptor>,
    prefix: &'static str,
    datadir: Option<std::path::PathBuf>,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
}

impl std::fmt::Debug for ReloadableAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadableAcceptor")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl ReloadableAcceptor {
    /// Builds the first acceptor as [`acceptor`] does, remembering how to build the next.
    pub fn new(
        prefix: &'static str,
        cert: &str,
        key: &str,
        datadir: Option<&Path>,
        key_log: Option<Arc<dyn rustls::KeyLog>>,
    ) -> Result<ReloadableAcceptor, Error> {
        let first = acceptor(prefix, cert, key, datadir, key_log.clone())?;
        Ok(ReloadableAcceptor {
            current: arc_swap::ArcSwap::from_pointee(first),
            prefix,
            datadir: datadir.map(Path::to_path_buf),
            key_log,
        })
    }

    /// An acceptor built elsewhere (an embedding service's own); reloads rebuild it from files.
    pub fn fixed(prefix: &'static str, acceptor: TlsAcceptor) -> ReloadableAcceptor {
        ReloadableAcceptor {
            current: arc_swap::ArcSwap::from_pointee(acceptor),
            prefix,
            datadir: None,
            key_log: None,
        }
    }

    /// The acceptor new handshakes use.
    pub fn current(&self) -> Arc<TlsAcceptor> {
        self.current.load_full()
    }

    /// Reads `cert` and `key` again (empty: the generated pair in the datadir) and, when they
    /// make a valid acceptor, swaps it in for new handshakes. On error nothing changes.
    pub fn reload(&self, cert: &str, key: &str) -> Result<(), Error> {
        let next = acceptor(
            self.prefix,
            cert,
            key,
            self.datadir.as_deref(),
            self.key_log.clone(),
        )?;
        self.current.store(Arc::new(next));
        Ok(())
    }
}
