//! The rustls client configuration for backend TLS (`use_ssl=1`) of both protocols and their
//! monitors, from `<prefix>-ssl_p2s_*` ([`BackendTls`]).
//!
//! Like ProxySQL, certificates are not verified unless a CA is configured (`ssl_p2s_ca` bundle
//! or `ssl_p2s_capath` folder); then the chain is (`verify-ca`: host names are not, since servers
//! are often addressed by IP), and with `ssl_p2s_verify = verify-full` the server's `hostname`
//! must be in its certificate too.

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use sluice_core::config::{BackendTls, BackendVerify, ServerSslParams};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Accepts any certificate but checks handshake signatures (TLS without authentication).
#[derive(Debug)]
struct AcceptAnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The CA certificates of `tls`: its bundle and every `.pem`/`.crt` file of its folder.
fn roots(p: &str, tls: &BackendTls) -> Result<rustls::RootCertStore, crate::Error> {
    let mut files = Vec::new();
    if !tls.ca.is_empty() {
        files.push((
            format!("{p}-ssl_p2s_ca {}", tls.ca),
            std::path::PathBuf::from(&tls.ca),
        ));
    }
    if !tls.capath.is_empty() {
        let dir = std::fs::read_dir(&tls.capath)
            .map_err(|e| tls_config(format!("{p}-ssl_p2s_capath {}", tls.capath), e))?;
        for entry in dir.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "pem" || e == "crt") {
                files.push((format!("{p}-ssl_p2s_capath {}", path.display()), path));
            }
        }
    }
    let mut roots = rustls::RootCertStore::empty();
    for (setting, path) in files {
        for c in CertificateDer::pem_file_iter(&path).map_err(|e| tls_config(&setting, e))? {
            let c = c.map_err(|e| tls_config(&setting, e))?;
            roots.add(c).map_err(|e| tls_config(&setting, e))?;
        }
    }
    Ok(roots)
}

/// Builds the backend TLS client config from `tls` (empty strings mean unset), whose variables
/// carry `prefix` (`mysql`, `pgsql`) in messages; `key_log` receives the session secrets
/// (`admin-ssl_keylog_file`).
pub fn client_config(
    p: &str,
    tls: &BackendTls,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
) -> Result<Arc<rustls::ClientConfig>, crate::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_config("TLS setup", e))?;
    let has_ca = !tls.ca.is_empty() || !tls.capath.is_empty();
    let verify = match (tls.verify, has_ca) {
        (BackendVerify::Auto, true) => BackendVerify::VerifyCa,
        (BackendVerify::Auto, false) => BackendVerify::None,
        (BackendVerify::VerifyCa | BackendVerify::VerifyFull, false) => {
            return Err(tls_config(
                format!("{p}-ssl_p2s_verify"),
                "verify-ca and verify-full need a CA: set ssl_p2s_ca or ssl_p2s_capath",
            ));
        }
        (v, _) => v,
    };
    let builder = if verify == BackendVerify::None {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
    } else {
        let roots = roots(p, tls)?;
        if roots.is_empty() {
            return Err(tls_config(
                format!("{p}-ssl_p2s_ca/{p}-ssl_p2s_capath"),
                "no CA certificate found",
            ));
        }
        let webpki =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| tls_config(format!("{p}-ssl_p2s_ca"), e))?;
        if verify == BackendVerify::VerifyFull {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
        }
    };
    let mut config = if tls.cert.is_empty() {
        builder.with_no_client_auth()
    } else {
        let (cert, key) = (&tls.cert, &tls.key);
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| tls_config(format!("{p}-ssl_p2s_cert {cert}"), e))?
            .collect::<Result<_, _>>()
            .map_err(|e| tls_config(format!("{p}-ssl_p2s_cert {cert}"), e))?;
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| tls_config(format!("{p}-ssl_p2s_key {key}"), e))?;
        builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| tls_config(format!("{p}-ssl_p2s_cert"), e))?
    };
    if let Some(log) = key_log {
        config.key_log = log;
    }
    Ok(Arc::new(config))
}

/// The TLS client configurations of one protocol's backend connections: the one of its
/// `ssl_p2s_*` variables, and one per distinct `*_servers_ssl_params` row, built on first use
/// and kept (a row that cannot be used is an error for connections to that server only).
pub struct TlsSource {
    prefix: &'static str,
    global: BackendTls,
    default: Arc<rustls::ClientConfig>,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
    per_server: Mutex<HashMap<BackendTls, Arc<rustls::ClientConfig>>>,
}

impl std::fmt::Debug for TlsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSource")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl TlsSource {
    /// The source of `prefix`'s (`mysql`, `pgsql`) backend TLS, from its variables; their
    /// configuration is built now (an error names the variable).
    pub fn new(
        prefix: &'static str,
        global: &BackendTls,
        key_log: Option<Arc<dyn rustls::KeyLog>>,
    ) -> Result<TlsSource, crate::Error> {
        Ok(TlsSource {
            prefix,
            default: client_config(prefix, global, key_log.clone())?,
            global: global.clone(),
            key_log,
            per_server: Mutex::new(HashMap::new()),
        })
    }

    /// A source with one configuration for every server (an embedding service's own).
    pub fn fixed(config: Arc<rustls::ClientConfig>) -> TlsSource {
        TlsSource {
            prefix: "backend",
            global: BackendTls::default(),
            default: config,
            key_log: None,
            per_server: Mutex::new(HashMap::new()),
        }
    }

    /// The configuration of the variables.
    pub fn default_config(&self) -> &Arc<rustls::ClientConfig> {
        &self.default
    }

    /// The TLS a monitor check connects with as `user` to a server with `rows` (its
    /// `*_servers_ssl_params`): none unless the server has `use_ssl=1` and TLS is configured,
    /// else [`TlsSource::config_for`] the monitor user.
    pub fn for_check(
        source: Option<&TlsSource>,
        use_ssl: bool,
        rows: &[Arc<ServerSslParams>],
        user: &str,
    ) -> Result<Option<Arc<rustls::ClientConfig>>, crate::Error> {
        match source {
            Some(src) if use_ssl => src.config_for(rows, user).map(Some),
            _ => Ok(None),
        }
    }

    /// The TLS a data-path connection to `server` opens with as `user`: none for `use_ssl=0`,
    /// else [`TlsSource::config_for`] the user — and an error when the server asks for TLS
    /// and no client TLS is configured (a connection must not fall back to plain text).
    pub fn for_server(
        source: Option<&TlsSource>,
        server: &sluice_core::runtime::HostgroupServer,
        user: &str,
    ) -> Result<Option<Arc<rustls::ClientConfig>>, crate::Error> {
        match source {
            None if server.use_ssl => Err(crate::Error::Tls {
                setting: "use_ssl=1".into(),
                why: "no TLS client configuration".into(),
            }),
            _ => Self::for_check(source, server.use_ssl, &server.ssl_params, user),
        }
    }

    /// The configuration for a connection as `user` to a server with `rows` (its
    /// `*_servers_ssl_params`): the user's row, else the row for every user, else the variables'.
    pub fn config_for(
        &self,
        rows: &[Arc<ServerSslParams>],
        user: &str,
    ) -> Result<Arc<rustls::ClientConfig>, crate::Error> {
        let Some(row) = ServerSslParams::for_user(rows, user) else {
            return Ok(self.default.clone());
        };
        let tls = row.over(&self.global);
        let mut cache = sluice_core::util::lock(&self.per_server);
        if let Some(c) = cache.get(&tls) {
            return Ok(c.clone());
        }
        let table = format!(
            "{}_servers_ssl_params {}:{}",
            self.prefix, row.hostname, row.port
        );
        let built = client_config(self.prefix, &tls, self.key_log.clone()).map_err(|e| {
            crate::Error::Tls {
                setting: table,
                why: e.to_string(),
            }
        })?;
        cache.insert(tls, built.clone());
        Ok(built)
    }
}

/// `setting` cannot be used, for reason `e`.
fn tls_config(setting: impl Into<String>, e: impl std::fmt::Display) -> crate::Error {
    crate::Error::Tls {
        setting: setting.into(),
        why: e.to_string(),
    }
}

/// Verifies the chain against the configured CA but not the host name.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
