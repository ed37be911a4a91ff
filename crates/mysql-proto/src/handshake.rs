//! The connection-phase packets: the server greeting (HandshakeV10), the client's SSLRequest and
//! HandshakeResponse41, and COM_CHANGE_USER.

use crate::Error;
use crate::consts::cap;
use crate::lenenc::{Reader, put_lenenc_bytes};

/// The server greeting (protocol version 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    /// Server version string.
    pub server_version: String,
    /// Connection (thread) id.
    pub connection_id: u32,
    /// The 20-byte auth nonce.
    pub nonce: Vec<u8>,
    /// The server's capability flags (`CLIENT_*`): what the client may ask for.
    pub capabilities: u32,
    /// MariaDB's extended capabilities ([`crate::consts::mariadb_cap`]), sent only when
    /// `capabilities` lacks `CLIENT_MYSQL`; 0 from a MySQL server.
    pub mariadb_capabilities: u32,
    /// Default collation id.
    pub charset: u8,
    /// Server status flags at connect (`SERVER_STATUS_*`, e.g. autocommit).
    pub status: u16,
    /// Default auth plugin.
    pub auth_plugin: String,
}

impl Greeting {
    /// Encodes the greeting payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(96);
        p.push(10);
        p.extend_from_slice(self.server_version.as_bytes());
        p.push(0);
        p.extend_from_slice(&self.connection_id.to_le_bytes());
        let (head, tail) = self.nonce.split_at(self.nonce.len().min(8));
        p.extend_from_slice(head);
        p.push(0);
        p.extend_from_slice(&(self.capabilities as u16).to_le_bytes());
        p.push(self.charset);
        p.extend_from_slice(&self.status.to_le_bytes());
        p.extend_from_slice(&((self.capabilities >> 16) as u16).to_le_bytes());
        p.push((self.nonce.len() + 1) as u8);
        p.extend_from_slice(&[0u8; 6]);
        p.extend_from_slice(&self.mariadb_capabilities.to_le_bytes());
        p.extend_from_slice(tail);
        p.push(0);
        p.extend_from_slice(self.auth_plugin.as_bytes());
        p.push(0);
        p
    }

    /// Decodes a greeting sent by a backend.
    pub fn decode(payload: &[u8]) -> Result<Greeting, Error> {
        const W: &str = "handshake";
        let mut r = Reader::new(payload, W);
        let proto = r.u8()?;
        if proto != 10 {
            return Err(Error::malformed(W, "protocol version is not 10"));
        }
        let server_version = String::from_utf8_lossy(r.null_str()?).into_owned();
        let connection_id = r.u32()?;
        let mut nonce = r.bytes(8)?.to_vec();
        r.u8()?;
        let cap_low = u32::from(r.u16()?);
        let charset = r.u8().unwrap_or(0);
        let status = r.u16().unwrap_or(0);
        let cap_high = u32::from(r.u16().unwrap_or(0));
        let capabilities = cap_low | cap_high << 16;
        let auth_len = usize::from(r.u8().unwrap_or(0));
        let reserved = r.bytes(10).unwrap_or(&[]);
        let mariadb_capabilities = match reserved.get(6..10) {
            Some(b) if capabilities & cap::LONG_PASSWORD == 0 => {
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            }
            _ => 0,
        };
        if capabilities & cap::SECURE_CONNECTION != 0 {
            let n = auth_len.saturating_sub(8).max(13);
            let part2 = r.bytes(n.min(r.remaining().len()))?;
            let part2 = part2.strip_suffix(&[0]).unwrap_or(part2);
            nonce.extend_from_slice(part2);
        }
        let auth_plugin = if capabilities & cap::PLUGIN_AUTH != 0 {
            String::from_utf8_lossy(r.null_str()?).into_owned()
        } else {
            crate::scramble::NATIVE.to_string()
        };
        Ok(Greeting {
            server_version,
            connection_id,
            nonce,
            capabilities,
            mariadb_capabilities,
            charset,
            status,
            auth_plugin,
        })
    }
}

/// The client's reply to the greeting (also the fields of an SSLRequest).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandshakeResponse {
    /// Client capability flags.
    pub capabilities: u32,
    /// MariaDB's extended capabilities ([`crate::consts::mariadb_cap`]), read and sent only
    /// when `capabilities` lacks `CLIENT_MYSQL`.
    pub mariadb_capabilities: u32,
    /// Max packet size the client accepts.
    pub max_packet: u32,
    /// The character set (collation id) the client asked for.
    pub charset: u8,
    /// The account the client logs in as.
    pub username: String,
    /// Auth response bytes.
    pub auth_response: Vec<u8>,
    /// Initial schema, if any.
    pub database: Option<String>,
    /// Auth plugin the response was computed with.
    pub auth_plugin: Option<String>,
}

/// Length of an SSLRequest payload.
pub const SSL_REQUEST_LEN: usize = 32;

/// True when `payload` is an SSLRequest (a truncated response with CLIENT_SSL set).
pub fn is_ssl_request(payload: &[u8]) -> bool {
    payload.len() == SSL_REQUEST_LEN
        && u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]) & cap::SSL != 0
}

impl HandshakeResponse {
    /// Decodes a HandshakeResponse41 sent by a client.
    pub fn decode(payload: &[u8]) -> Result<HandshakeResponse, Error> {
        const W: &str = "handshake response";
        let mut r = Reader::new(payload, W);
        let capabilities = r.u32()?;
        if capabilities & cap::PROTOCOL_41 == 0 {
            return Err(Error::malformed(W, "client does not speak protocol 4.1"));
        }
        let max_packet = r.u32()?;
        let charset = r.u8()?;
        let filler = r.bytes(23)?;
        let mariadb_capabilities = match capabilities & cap::LONG_PASSWORD {
            0 => u32::from_le_bytes([filler[19], filler[20], filler[21], filler[22]]),
            _ => 0,
        };
        let username = String::from_utf8_lossy(r.null_str()?).into_owned();
        let auth_response = if capabilities & cap::PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
            r.lenenc_bytes()?.to_vec()
        } else if capabilities & cap::SECURE_CONNECTION != 0 {
            let n = usize::from(r.u8()?);
            r.bytes(n)?.to_vec()
        } else {
            r.null_str()?.to_vec()
        };
        let mut database = None;
        if capabilities & cap::CONNECT_WITH_DB != 0 && !r.is_empty() {
            let db = r.null_str()?;
            if !db.is_empty() {
                database = Some(String::from_utf8_lossy(db).into_owned());
            }
        }
        let mut auth_plugin = None;
        if capabilities & cap::PLUGIN_AUTH != 0 && !r.is_empty() {
            auth_plugin = Some(String::from_utf8_lossy(r.null_str()?).into_owned());
        }
        Ok(HandshakeResponse {
            capabilities,
            mariadb_capabilities,
            max_packet,
            charset,
            username,
            auth_response,
            database,
            auth_plugin,
        })
    }

    /// The first 32 bytes of the response: what an SSLRequest carries.
    fn encode_prefix(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.capabilities.to_le_bytes());
        out.extend_from_slice(&self.max_packet.to_le_bytes());
        out.push(self.charset);
        out.extend_from_slice(&[0u8; 19]);
        let extended = match self.capabilities & cap::LONG_PASSWORD {
            0 => self.mariadb_capabilities,
            _ => 0,
        };
        out.extend_from_slice(&extended.to_le_bytes());
    }

    /// Encodes the SSLRequest payload Sluice sends to a backend before TLS.
    pub fn encode_ssl_request(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(SSL_REQUEST_LEN);
        self.encode_prefix(&mut p);
        p
    }

    /// Encodes the full response Sluice sends to a backend.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(64 + self.username.len() + self.auth_response.len());
        self.encode_prefix(&mut p);
        p.extend_from_slice(self.username.as_bytes());
        p.push(0);
        if self.capabilities & cap::PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
            put_lenenc_bytes(&mut p, &self.auth_response);
        } else {
            p.push(self.auth_response.len() as u8);
            p.extend_from_slice(&self.auth_response);
        }
        if self.capabilities & cap::CONNECT_WITH_DB != 0 {
            p.extend_from_slice(self.database.as_deref().unwrap_or("").as_bytes());
            p.push(0);
        }
        if self.capabilities & cap::PLUGIN_AUTH != 0 {
            p.extend_from_slice(self.auth_plugin.as_deref().unwrap_or("").as_bytes());
            p.push(0);
        }
        p
    }
}

/// A decoded COM_CHANGE_USER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeUser {
    /// The account to switch to.
    pub username: String,
    /// Auth response (computed with the connection's original nonce).
    pub auth_response: Vec<u8>,
    /// The schema to select after the switch; `None` keeps none selected.
    pub database: Option<String>,
    /// New collation id, if sent.
    pub charset: Option<u16>,
    /// Plugin the response was computed with.
    pub auth_plugin: Option<String>,
}

impl ChangeUser {
    /// Decodes a COM_CHANGE_USER payload (first byte 0x11) given the client's capabilities.
    pub fn decode(payload: &[u8], client_caps: u32) -> Result<ChangeUser, Error> {
        const W: &str = "COM_CHANGE_USER";
        let mut r = Reader::new(payload, W);
        r.u8()?;
        let username = String::from_utf8_lossy(r.null_str()?).into_owned();
        let auth_response = if client_caps & cap::SECURE_CONNECTION != 0 {
            let n = usize::from(r.u8()?);
            r.bytes(n)?.to_vec()
        } else {
            r.null_str()?.to_vec()
        };
        let db = r.null_str()?;
        let database = (!db.is_empty()).then(|| String::from_utf8_lossy(db).into_owned());
        let charset = if r.remaining().len() >= 2 {
            Some(r.u16()?)
        } else {
            None
        };
        let auth_plugin = if client_caps & cap::PLUGIN_AUTH != 0 && !r.is_empty() {
            Some(String::from_utf8_lossy(r.null_str()?).into_owned())
        } else {
            None
        };
        Ok(ChangeUser {
            username,
            auth_response,
            database,
            charset,
            auth_plugin,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn greeting_roundtrip() {
        let g = Greeting {
            server_version: "8.0.36".into(),
            connection_id: 42,
            nonce: (1..=20).collect(),
            capabilities: cap::PROTOCOL_41
                | cap::SECURE_CONNECTION
                | cap::PLUGIN_AUTH
                | cap::DEPRECATE_EOF,
            mariadb_capabilities: 0,
            charset: 45,
            status: 2,
            auth_plugin: "mysql_native_password".into(),
        };
        assert_eq!(Greeting::decode(&g.encode()).expect("decode"), g);
        // A MariaDB greeting (no CLIENT_MYSQL) carries its extended capabilities.
        let mariadb = Greeting {
            mariadb_capabilities: crate::consts::mariadb_cap::EXTENDED_METADATA,
            ..g.clone()
        };
        assert_eq!(
            Greeting::decode(&mariadb.encode()).expect("decode"),
            mariadb
        );
        // With CLIENT_MYSQL set the reserved bytes are not read as capabilities.
        let mysql = Greeting {
            capabilities: g.capabilities | cap::LONG_PASSWORD,
            ..mariadb
        };
        assert_eq!(
            Greeting::decode(&mysql.encode())
                .expect("decode")
                .mariadb_capabilities,
            0
        );
    }

    #[test]
    fn response_roundtrip() {
        let r = HandshakeResponse {
            capabilities: cap::PROTOCOL_41
                | cap::SECURE_CONNECTION
                | cap::PLUGIN_AUTH
                | cap::PLUGIN_AUTH_LENENC_CLIENT_DATA
                | cap::CONNECT_WITH_DB,
            mariadb_capabilities: crate::consts::mariadb_cap::EXTENDED_METADATA,
            max_packet: 1 << 24,
            charset: 33,
            username: "app".into(),
            auth_response: vec![5; 20],
            database: Some("app".into()),
            auth_plugin: Some("mysql_native_password".into()),
        };
        assert_eq!(HandshakeResponse::decode(&r.encode()).expect("decode"), r);
        assert!(!is_ssl_request(&r.encode()));
        let mut ssl = r.clone();
        ssl.capabilities |= cap::SSL;
        assert!(is_ssl_request(&ssl.encode_ssl_request()));
        // A client that says it is MySQL sends no extended capabilities.
        let mysql = HandshakeResponse {
            capabilities: r.capabilities | cap::LONG_PASSWORD,
            ..r
        };
        let decoded = HandshakeResponse::decode(&mysql.encode()).expect("decode");
        assert_eq!(decoded.mariadb_capabilities, 0);
    }

    proptest! {
        #[test]
        fn decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Greeting::decode(&data);
            let _ = HandshakeResponse::decode(&data);
            let _ = ChangeUser::decode(&data, u32::MAX);
            let _ = ChangeUser::decode(&data, 0);
        }
    }
}
