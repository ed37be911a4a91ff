//! The rustls client configuration for backend TLS (`use_ssl=1`).
//!
//! Like ProxySQL, certificates are not verified unless `mysql-ssl_p2s_ca` names a CA bundle; then
//! the chain is verified against it (host names are not, since servers are often addressed by IP).

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
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

/// Builds the backend TLS client config from `ssl_p2s_ca` / `ssl_p2s_cert` / `ssl_p2s_key`
/// (empty strings mean unset).
pub fn client_config(
    ca: &str,
    cert: &str,
    key: &str,
    key_log: Option<Arc<dyn rustls::KeyLog>>,
) -> Result<Arc<rustls::ClientConfig>, crate::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_config("TLS setup", e))?;
    let builder = if ca.is_empty() {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca)
            .map_err(|e| tls_config(format!("mysql-ssl_p2s_ca {ca}"), e))?
        {
            let c = c.map_err(|e| tls_config(format!("mysql-ssl_p2s_ca {ca}"), e))?;
            roots
                .add(c)
                .map_err(|e| tls_config(format!("mysql-ssl_p2s_ca {ca}"), e))?;
        }
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| tls_config(format!("mysql-ssl_p2s_ca {ca}"), e))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)))
    };
    let mut config = if cert.is_empty() {
        builder.with_no_client_auth()
    } else {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| tls_config(format!("mysql-ssl_p2s_cert {cert}"), e))?
            .collect::<Result<_, _>>()
            .map_err(|e| tls_config(format!("mysql-ssl_p2s_cert {cert}"), e))?;
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| tls_config(format!("mysql-ssl_p2s_key {key}"), e))?;
        builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| tls_config("mysql-ssl_p2s_cert", e))?
    };
    if let Some(log) = key_log {
        config.key_log = log;
    }
    Ok(Arc::new(config))
}

/// `setting` cannot be used, for reason `e`.
fn tls_config(setting: impl Into<String>, e: impl std::fmt::Display) -> crate::Error {
    crate::Error::TlsConfig {
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
