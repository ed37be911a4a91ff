//! `mysql_servers_ssl_params` / `pgsql_servers_ssl_params` (ProxySQL 2.6's table): backend TLS
//! material per server (and optionally per backend user), overriding the protocol's
//! `ssl_p2s_*` variables for connections to `use_ssl=1` servers — the data path's and the
//! monitor's. Sluice adds `ssl_verify` (`none`, `verify-ca`, `verify-full`; empty: the
//! variable's).

use super::tls_settings::{BackendTls, BackendVerify};
use serde::{Deserialize, Serialize};

/// One row: TLS settings for `hostname:port`, for `username` (empty: every user).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSslParams {
    /// The server's host name, as in `*_servers`.
    pub hostname: String,
    /// The server's port.
    pub port: u16,
    /// The backend user the row applies to; empty for every user.
    #[serde(default)]
    pub username: String,
    /// CA bundle (PEM path); empty: the variable's.
    #[serde(default)]
    pub ssl_ca: String,
    /// Client certificate (PEM path); empty: the variable's.
    #[serde(default)]
    pub ssl_cert: String,
    /// Its key.
    #[serde(default)]
    pub ssl_key: String,
    /// Folder of CA certificates; empty: the variable's.
    #[serde(default)]
    pub ssl_capath: String,
    /// Certificate revocation list (accepted; not checked in this version).
    #[serde(default)]
    pub ssl_crl: String,
    /// Folder of revocation lists (accepted; not checked in this version).
    #[serde(default)]
    pub ssl_crlpath: String,
    /// Cipher list (accepted; Sluice offers rustls' suites).
    #[serde(default)]
    pub ssl_cipher: String,
    /// TLS version (accepted; Sluice offers TLS 1.2 and 1.3).
    #[serde(default)]
    pub tls_version: String,
    /// How the server's certificate is checked (Sluice addition); empty: `<prefix>-ssl_p2s_verify`.
    #[serde(default)]
    pub ssl_verify: String,
    /// Free text.
    #[serde(default)]
    pub comment: String,
}

impl ServerSslParams {
    /// The settings for a connection: each non-empty column replaces the variable's value.
    pub fn over(&self, global: &BackendTls) -> BackendTls {
        let pick = |row: &str, var: &str| {
            if row.is_empty() {
                var.to_string()
            } else {
                row.to_string()
            }
        };
        BackendTls {
            ca: pick(&self.ssl_ca, &global.ca),
            capath: pick(&self.ssl_capath, &global.capath),
            cert: pick(&self.ssl_cert, &global.cert),
            key: pick(&self.ssl_key, &global.key),
            verify: BackendVerify::parse("", "ssl_verify", &self.ssl_verify)
                .ok()
                .filter(|v| *v != BackendVerify::Auto)
                .unwrap_or(global.verify),
        }
    }

    /// The row of `rows` for `user`: its own, else the one for every user.
    pub fn for_user<'a>(
        rows: &'a [std::sync::Arc<ServerSslParams>],
        user: &str,
    ) -> Option<&'a ServerSslParams> {
        rows.iter()
            .find(|r| r.username == user)
            .or_else(|| rows.iter().find(|r| r.username.is_empty()))
            .map(|r| r.as_ref())
    }

    /// Columns set that this version does not use, for a warning.
    pub fn unused_columns(&self) -> Vec<&'static str> {
        [
            ("ssl_crl", &self.ssl_crl),
            ("ssl_crlpath", &self.ssl_crlpath),
            ("ssl_cipher", &self.ssl_cipher),
            ("tls_version", &self.tls_version),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, _)| n)
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn row(user: &str, ca: &str, verify: &str) -> Arc<ServerSslParams> {
        Arc::new(ServerSslParams {
            hostname: "db1".into(),
            port: 3306,
            username: user.into(),
            ssl_ca: ca.into(),
            ssl_cert: String::new(),
            ssl_key: String::new(),
            ssl_capath: String::new(),
            ssl_crl: String::new(),
            ssl_crlpath: String::new(),
            ssl_cipher: String::new(),
            tls_version: String::new(),
            ssl_verify: verify.into(),
            comment: String::new(),
        })
    }

    #[test]
    fn a_row_overrides_the_variables_column_by_column_and_per_user() {
        let global = BackendTls {
            ca: "/etc/ca.pem".into(),
            cert: "/etc/client.pem".into(),
            ..BackendTls::default()
        };
        let rows = [
            row("", "/etc/db1-ca.pem", ""),
            row("app", "", "verify-full"),
        ];
        let any = ServerSslParams::for_user(&rows, "other").expect("the row for every user");
        let t = any.over(&global);
        assert_eq!(
            (t.ca.as_str(), t.cert.as_str()),
            ("/etc/db1-ca.pem", "/etc/client.pem")
        );
        assert_eq!(t.verify, BackendVerify::Auto);
        let app = ServerSslParams::for_user(&rows, "app").expect("app's own row");
        assert_eq!(app.over(&global).verify, BackendVerify::VerifyFull);
        assert_eq!(app.over(&global).ca, "/etc/ca.pem");
        assert!(ServerSslParams::for_user(&rows[1..], "other").is_none());
    }
}
