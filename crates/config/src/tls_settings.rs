//! What a frontend's TLS is built from: certificate and key files, the protocol versions and
//! the cipher suites offered. Each side keeps its own server's names: `mysql-tls_version` /
//! `mysql-ssl_cipher` as MySQL's `tls_version` / `ssl_cipher`, `pgsql-ssl_min_protocol_version`
//! / `pgsql-ssl_ciphers` as PostgreSQL's. Applied at start and by `PROXYSQL RELOAD TLS`.

use super::declared::{Codec, OneOf, Trimmed, Words, variables};
use super::values::VariableError;

/// TLS protocol versions a frontend offers (Sluice's TLS, rustls, implements 1.2 and 1.3 only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsVersions {
    /// TLS 1.2 offered.
    pub tls12: bool,
    /// TLS 1.3 offered.
    pub tls13: bool,
}

impl Default for TlsVersions {
    fn default() -> Self {
        TlsVersions {
            tls12: true,
            tls13: true,
        }
    }
}

fn unsupported(prefix: &str, name: &str, v: &str) -> VariableError {
    VariableError::malformed(
        prefix,
        name,
        v,
        "TLSv1.2 and/or TLSv1.3 (older versions are not offered: they are broken)",
    )
}

impl TlsVersions {
    /// A MySQL-style list: `TLSv1.2,TLSv1.3` (any case, commas or spaces).
    pub fn parse_list(prefix: &str, name: &str, v: &str) -> Result<TlsVersions, VariableError> {
        let mut out = TlsVersions {
            tls12: false,
            tls13: false,
        };
        for word in v.split([',', ' ']).filter(|w| !w.is_empty()) {
            match word.to_ascii_lowercase().as_str() {
                "tlsv1.2" => out.tls12 = true,
                "tlsv1.3" => out.tls13 = true,
                _ => return Err(unsupported(prefix, name, v)),
            }
        }
        if !out.tls12 && !out.tls13 {
            return Err(unsupported(prefix, name, v));
        }
        Ok(out)
    }

    /// A PostgreSQL-style minimum: `TLSv1.2` (1.2 and 1.3) or `TLSv1.3`; empty is `TLSv1.2`.
    pub fn parse_min(prefix: &str, name: &str, v: &str) -> Result<TlsVersions, VariableError> {
        match v.trim().to_ascii_lowercase().as_str() {
            "" | "tlsv1.2" => Ok(TlsVersions::default()),
            "tlsv1.3" => Ok(TlsVersions {
                tls12: false,
                tls13: true,
            }),
            _ => Err(unsupported(prefix, name, v)),
        }
    }
}

/// Everything a frontend TLS acceptor is built from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrontendTls {
    /// Certificate chain (PEM path); empty together with `key` = the generated pair.
    pub cert: String,
    /// Private key (PEM path).
    pub key: String,
    /// Versions offered.
    pub versions: TlsVersions,
    /// Cipher suites offered, `:`/`,`-separated IANA or OpenSSL names; empty = all. A list
    /// naming no TLS 1.3 suite leaves the 1.3 suites as they are (MySQL's `ssl_cipher` only
    /// governs TLS 1.2), and the same for 1.2.
    pub ciphers: String,
}

/// How a server's certificate is checked on backend TLS connections (`use_ssl=1`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum BackendVerify {
    /// `""`: `verify-ca` when a CA is configured, else `none` (ProxySQL's behaviour).
    #[default]
    Auto,
    /// Encrypted, not authenticated: any certificate is taken.
    None,
    /// The chain must lead to a configured CA; the name is not checked (servers are often
    /// addressed by IP).
    VerifyCa,
    /// The chain, and the server's `hostname` must be in the certificate (as libpq's
    /// `verify-full`).
    VerifyFull,
}

impl BackendVerify {
    /// `""`, `none`, `verify-ca` or `verify-full`.
    pub fn parse(prefix: &str, name: &str, v: &str) -> Result<BackendVerify, VariableError> {
        Codec::<BackendVerify>::parse(&OneOf, prefix, name, v)
    }

    /// The variable's text.
    pub fn as_str(self) -> &'static str {
        self.word()
    }
}

impl Words for BackendVerify {
    const WORDS: &'static [(&'static str, Self)] = &[
        ("", BackendVerify::Auto),
        ("none", BackendVerify::None),
        ("verify-ca", BackendVerify::VerifyCa),
        ("verify-full", BackendVerify::VerifyFull),
    ];
    const EXPECTED: &'static str =
        "none, verify-ca or verify-full (empty: verify-ca when a CA is set)";
}

variables! {
    /// What backend TLS connections (`use_ssl=1`) and the monitor's are built from: the
    /// `<prefix>-ssl_p2s_ca`, `_capath`, `_cert`, `_key` and `_verify` variables of each side.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
    pub struct BackendTls for _prefix {
        /// CA bundle that servers' certificates are checked against (PEM path).
        ca: String = String::new() => "ssl_p2s_ca", Trimmed;
        /// Folder of CA certificates (every `.pem`/`.crt` file in it).
        capath: String = String::new() => "ssl_p2s_capath", Trimmed;
        /// Client certificate presented to servers (PEM path).
        cert: String = String::new() => "ssl_p2s_cert", Trimmed;
        /// Its key (PEM path).
        key: String = String::new() => "ssl_p2s_key", Trimmed;
        /// How server certificates are checked: `none`, `verify-ca` (the chain, not the name),
        /// `verify-full` (the chain and the server's `hostname`); empty: `verify-ca` when a CA
        /// is set, else `none` (ProxySQL's behaviour).
        verify: BackendVerify = BackendVerify::Auto => "ssl_p2s_verify", OneOf;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_as_mysql_and_postgresql_write_them() {
        let both = TlsVersions::default();
        let only13 = TlsVersions {
            tls12: false,
            tls13: true,
        };
        assert_eq!(
            TlsVersions::parse_list("mysql", "tls_version", "TLSv1.2,TLSv1.3"),
            Ok(both)
        );
        assert_eq!(
            TlsVersions::parse_list("mysql", "tls_version", "tlsv1.3"),
            Ok(only13)
        );
        assert!(TlsVersions::parse_list("mysql", "tls_version", "TLSv1.1,TLSv1.2").is_err());
        assert!(TlsVersions::parse_list("mysql", "tls_version", "").is_err());
        assert_eq!(TlsVersions::parse_min("pgsql", "m", "TLSv1.3"), Ok(only13));
        assert_eq!(TlsVersions::parse_min("pgsql", "m", ""), Ok(both));
        assert!(TlsVersions::parse_min("pgsql", "m", "TLSv1").is_err());
    }
}
