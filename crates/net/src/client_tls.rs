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
use sluice_core::config::{BackendTls, BackendVerify};
use std::sync::Arc;

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
