//! Frontend TLS for both data ports: the certificate from `<prefix>-ssl_cert`/`<prefix>-ssl_key`,
//! or a self-signed pair generated into the datadir on first start (kept, so clients can pin it),
//! with the protocol versions and cipher suites of [`FrontendTls`].

use crate::Error;
use rustls::SupportedCipherSuite;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sluice_core::config::FrontendTls;
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// File names of the generated pair in the datadir.
pub const GENERATED_CERT: &str = "sluice-cert.pem";
/// Key file name of the generated pair.
pub const GENERATED_KEY: &str = "sluice-key.pem";

/// Builds a TLS acceptor from `tls`: its `cert`/`key` PEM paths (both empty = use or create
/// the generated pair in `datadir`; no datadir = a pair kept in memory only), versions and
/// cipher suites; `prefix` names the variables they came from (`mysql` or `pgsql`) in errors.
pub fn acceptor(
    prefix: &str,
    tls: &FrontendTls,
    datadir: Option<&Path>,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
) -> Result<TlsAcceptor, Error> {
    let (cert, key) = (tls.cert.as_str(), tls.key.as_str());
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
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = cipher_suites(prefix, &tls.ciphers, provider.cipher_suites)?;
    let mut versions = Vec::new();
    if tls.versions.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if tls.versions.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| tls_err(format!("{prefix} TLS versions/ciphers"), e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| tls_err(format!("{prefix}-ssl_cert/{prefix}-ssl_key"), e))?;
    if let Some(log) = key_log {
        config.key_log = log;
    }
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// OpenSSL's names of the suites Sluice offers, beside their IANA names.
const OPENSSL_NAMES: [(&str, &str); 6] = [
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
];

/// The IANA name of a suite (`TLS_AES_128_GCM_SHA256`, `TLS_ECDHE_RSA_WITH_…`).
fn iana_name(s: &SupportedCipherSuite) -> String {
    format!("{:?}", s.suite()).replacen("TLS13_", "TLS_", 1)
}

/// The suites of `all` that `list` names (`:`, `,` or space separated; IANA or OpenSSL names,
/// any case). A list naming no suite of one TLS version keeps all of that version's, as
/// MySQL's `ssl_cipher` does not touch TLS 1.3; an unknown name is an error listing the known.
fn cipher_suites(
    prefix: &str,
    list: &str,
    all: Vec<SupportedCipherSuite>,
) -> Result<Vec<SupportedCipherSuite>, Error> {
    let wanted: Vec<String> = list
        .split([':', ',', ' '])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let upper = w.to_ascii_uppercase();
            OPENSSL_NAMES
                .iter()
                .find(|(openssl, _)| *openssl == upper)
                .map_or(upper, |(_, iana)| (*iana).to_string())
        })
        .collect();
    if wanted.is_empty() {
        return Ok(all);
    }
    let setting = if prefix == "mysql" {
        "mysql-ssl_cipher"
    } else {
        "pgsql-ssl_ciphers"
    };
    if let Some(unknown) = wanted
        .iter()
        .find(|w| !all.iter().any(|s| iana_name(s) == **w))
    {
        let known: Vec<String> = all.iter().map(iana_name).collect();
        return Err(Error::Tls {
            setting: format!("{setting} {list}"),
            why: format!(
                "unknown cipher suite {unknown}; offered: {}",
                known.join(":")
            ),
        });
    }
    let is13 = |s: &SupportedCipherSuite| matches!(s, SupportedCipherSuite::Tls13(_));
    let names_13 = all
        .iter()
        .any(|s| is13(s) && wanted.contains(&iana_name(s)));
    let names_12 = all
        .iter()
        .any(|s| !is13(s) && wanted.contains(&iana_name(s)));
    Ok(all
        .into_iter()
        .filter(|s| {
            let named = if is13(s) { names_13 } else { names_12 };
            !named || wanted.contains(&iana_name(s))
        })
        .collect())
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
        tls: &FrontendTls,
        datadir: Option<&Path>,
        key_log: Option<Arc<dyn rustls::KeyLog>>,
    ) -> Result<ReloadableAcceptor, Error> {
        let first = acceptor(prefix, tls, datadir, key_log.clone())?;
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

    /// Reads the certificate and key of `tls` again (empty: the generated pair in the datadir)
    /// and, when they make a valid acceptor with its versions and ciphers, swaps it in for new
    /// handshakes. On error nothing changes.
    pub fn reload(&self, tls: &FrontendTls) -> Result<(), Error> {
        let next = acceptor(
            self.prefix,
            tls,
            self.datadir.as_deref(),
            self.key_log.clone(),
        )?;
        self.current.store(Arc::new(next));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &str) -> Result<Vec<String>, Error> {
        let all = rustls::crypto::ring::default_provider().cipher_suites;
        cipher_suites("mysql", list, all).map(|v| v.iter().map(iana_name).collect())
    }

    #[test]
    fn cipher_lists_take_iana_and_openssl_names_per_tls_version() {
        let all = names("").expect("all");
        assert_eq!(all.len(), 9, "{all:?}");
        // Only TLS 1.2 suites named: those are kept, every TLS 1.3 suite stays.
        let v = names("ECDHE-ECDSA-AES256-GCM-SHA384").expect("alias");
        assert!(v.contains(&"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".to_string()));
        assert!(!v.contains(&"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_string()));
        assert_eq!(
            v.iter().filter(|n| !n.contains("_WITH_")).count(),
            3,
            "{v:?}"
        );
        // A TLS 1.3 name narrows TLS 1.3 only.
        let v = names("tls_aes_256_gcm_sha384").expect("iana, any case");
        assert_eq!(
            v.iter().filter(|n| !n.contains("_WITH_")).count(),
            1,
            "{v:?}"
        );
        assert_eq!(v.len(), 7);
        let e = names("RC4-MD5").expect_err("unknown");
        assert!(
            e.to_string().contains("unknown cipher suite RC4-MD5"),
            "{e}"
        );
    }
}
