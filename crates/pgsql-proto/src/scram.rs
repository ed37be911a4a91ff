//! SCRAM-SHA-256 (RFC 5802/7677) as PostgreSQL uses it, for both ends: Sluice verifies clients
//! against `pgsql_users` passwords — cleartext, or PostgreSQL's stored verifier
//! (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, as `pg_authid` holds it) — and
//! logs in to servers with the password or, for a verifier, with the ClientKey the client's own
//! proof revealed (PgBouncer's way: the server must hold the same verifier).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac, pbkdf2};
use std::num::NonZeroU32;

use crate::Error;

/// Iterations for the salted password Sluice derives for clients.
pub const ITERATIONS: u32 = 4096;

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

fn salted(password: &str, salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut out = [0u8; 32];
    let iters = NonZeroU32::new(iterations.max(1)).unwrap_or(NonZeroU32::MIN);
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        iters,
        salt,
        password.as_bytes(),
        &mut out,
    );
    out
}

fn nonce() -> String {
    let mut b = [0u8; 18];
    let _ = SystemRandom::new().fill(&mut b);
    B64.encode(b)
}

fn attr(msg: &str, key: char) -> Option<&str> {
    msg.split(',')
        .find_map(|p| p.strip_prefix(key)?.strip_prefix('='))
}

fn sha256(data: &[u8]) -> Vec<u8> {
    digest::digest(&digest::SHA256, data).as_ref().to_vec()
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A stored SCRAM-SHA-256 verifier: what a server keeps instead of the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Verifier {
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// The salt.
    pub salt: Vec<u8>,
    /// H(ClientKey).
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key").
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verifier(..)")
    }
}

impl Verifier {
    /// Reads PostgreSQL's format, `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`
    /// (base64 parts); `None` for anything else (a cleartext password, an MD5 hash).
    pub fn parse(s: &str) -> Option<Verifier> {
        let rest = s.strip_prefix("SCRAM-SHA-256$")?;
        let (params, keys) = rest.split_once('$')?;
        let (iterations, salt) = params.split_once(':')?;
        let (stored, server) = keys.split_once(':')?;
        let v = Verifier {
            iterations: iterations.parse().ok().filter(|i| *i > 0)?,
            salt: B64.decode(salt).ok()?,
            stored_key: B64.decode(stored).ok()?,
            server_key: B64.decode(server).ok()?,
        };
        (v.stored_key.len() == 32 && v.server_key.len() == 32).then_some(v)
    }

    /// The verifier of `password` with `salt` and `iterations` (what `pg_authid` would hold).
    pub fn from_password(password: &str, salt: &[u8], iterations: u32) -> Verifier {
        let salted = salted(password, salt, iterations);
        Verifier {
            iterations,
            salt: salt.to_vec(),
            stored_key: sha256(&hmac(&salted, b"Client Key")),
            server_key: hmac(&salted, b"Server Key"),
        }
    }

    /// PostgreSQL's text form.
    pub fn to_text(&self) -> String {
        format!(
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            B64.encode(&self.salt),
            B64.encode(&self.stored_key),
            B64.encode(&self.server_key)
        )
    }

    /// True when `password` is the one this verifier was made from.
    pub fn matches(&self, password: &str) -> bool {
        let v = Verifier::from_password(password, &self.salt, self.iterations);
        same(&v.stored_key, &self.stored_key)
    }
}

/// What Sluice logs in to a server with: the password, or the keys a client's SCRAM proof
/// revealed for a user stored as a verifier.
#[derive(Clone, PartialEq, Eq)]
pub enum ClientSecret {
    /// The cleartext password (SCRAM, MD5 and cleartext all work).
    Password(String),
    /// The verifier the user is stored with and the ClientKey recovered at the client's login:
    /// enough for SCRAM with a server whose verifier has the same salt and iterations.
    Keys {
        /// The stored verifier (salt, iterations, ServerKey to check the server).
        verifier: Verifier,
        /// The ClientKey.
        client_key: Vec<u8>,
    },
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientSecret::Password(_) => f.write_str("Password(..)"),
            ClientSecret::Keys { .. } => f.write_str("Keys(..)"),
        }
    }
}

/// The client side of the exchange (Sluice logging in to a server).
#[derive(Debug)]
pub struct Client {
    secret: ClientSecret,
    client_first_bare: String,
    auth_message: String,
    server_key: Vec<u8>,
}

impl Client {
    /// Starts with a password; returns the SASLInitialResponse payload (`n,,n=,r=<nonce>`).
    pub fn new(password: &str) -> (Client, String) {
        Client::with_secret(ClientSecret::Password(password.to_string()))
    }

    /// Starts with a password or recovered keys; returns the SASLInitialResponse payload.
    pub fn with_secret(secret: ClientSecret) -> (Client, String) {
        let bare = format!("n=,r={}", nonce());
        let first = format!("n,,{bare}");
        (
            Client {
                secret,
                client_first_bare: bare,
                auth_message: String::new(),
                server_key: Vec::new(),
            },
            first,
        )
    }

    /// Takes server-first, returns client-final.
    pub fn finish(&mut self, server_first: &str) -> Result<String, Error> {
        let r = attr(server_first, 'r').ok_or(Error::Scram("server-first without nonce"))?;
        let ours = attr(&self.client_first_bare, 'r').unwrap_or_default();
        if !r.starts_with(ours) {
            return Err(Error::Scram("server nonce does not extend ours"));
        }
        let salt = B64
            .decode(attr(server_first, 's').ok_or(Error::Scram("server-first without salt"))?)
            .map_err(|_| Error::Scram("salt is not base64"))?;
        let iters: u32 = attr(server_first, 'i')
            .and_then(|i| i.parse().ok())
            .ok_or(Error::Scram("bad iteration count"))?;
        let client_key = match &self.secret {
            ClientSecret::Password(password) => {
                let salted = salted(password, &salt, iters);
                self.server_key = hmac(&salted, b"Server Key");
                hmac(&salted, b"Client Key")
            }
            ClientSecret::Keys {
                verifier,
                client_key,
            } => {
                if verifier.salt != salt || verifier.iterations != iters {
                    return Err(Error::Scram(
                        "the server's SCRAM salt or iteration count differs from the verifier in \
                         pgsql_users: store the server's own verifier (from pg_authid)",
                    ));
                }
                self.server_key = verifier.server_key.clone();
                client_key.clone()
            }
        };
        let without_proof = format!("c=biws,r={r}");
        self.auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let sig = hmac(&sha256(&client_key), self.auth_message.as_bytes());
        let proof = xor(&client_key, &sig);
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Checks the server's final message (`v=<signature>`).
    pub fn verify(&self, server_final: &str) -> Result<(), Error> {
        let v = B64
            .decode(attr(server_final, 'v').ok_or(Error::Scram("server-final without signature"))?)
            .map_err(|_| Error::Scram("server signature is not base64"))?;
        if same(&v, &hmac(&self.server_key, self.auth_message.as_bytes())) {
            Ok(())
        } else {
            Err(Error::Scram("server signature mismatch"))
        }
    }
}

/// The server side (Sluice verifying a client).
#[derive(Debug)]
pub struct Server {
    verifier: Verifier,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl Server {
    /// Takes client-first (`n,,n=...,r=...`), returns server-first; checks against a cleartext
    /// password (with a fresh salt).
    pub fn new(password: &str, client_first: &str) -> Result<(Server, String), Error> {
        let mut salt = [0u8; 16];
        let _ = SystemRandom::new().fill(&mut salt);
        Server::with_verifier(
            Verifier::from_password(password, &salt, ITERATIONS),
            client_first,
        )
    }

    /// Takes client-first, returns server-first; checks against a stored verifier (its salt
    /// and iterations are what the client derives its keys with).
    pub fn with_verifier(
        verifier: Verifier,
        client_first: &str,
    ) -> Result<(Server, String), Error> {
        let Some(bare) = client_first
            .strip_prefix("n,,")
            .or_else(|| client_first.strip_prefix("y,,"))
        else {
            return Err(Error::Scram(
                "channel binding is not supported on this connection",
            ));
        };
        let cnonce = attr(bare, 'r').ok_or(Error::Scram("client-first without nonce"))?;
        let nonce = format!("{cnonce}{}", self::nonce());
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&verifier.salt),
            verifier.iterations
        );
        let s = Server {
            verifier,
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        };
        Ok((s, server_first))
    }

    /// Takes client-final; returns server-final (`v=...`) when the proof is right.
    pub fn finish(&self, client_final: &str) -> Result<String, Error> {
        self.finish_with_key(client_final).map(|(v, _)| v)
    }

    /// As [`Server::finish`], also returning the ClientKey the proof revealed (what Sluice logs
    /// in to servers with when the user is stored as a verifier).
    pub fn finish_with_key(&self, client_final: &str) -> Result<(String, Vec<u8>), Error> {
        if attr(client_final, 'r') != Some(self.nonce.as_str()) {
            return Err(Error::Scram("nonce mismatch"));
        }
        let (without_proof, proof) = client_final
            .rsplit_once(",p=")
            .ok_or(Error::Scram("client-final without proof"))?;
        let proof = B64
            .decode(proof)
            .map_err(|_| Error::Scram("proof is not base64"))?;
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let sig = hmac(&self.verifier.stored_key, auth_message.as_bytes());
        let client_key = xor(&proof, &sig);
        if proof.len() != sig.len() || !same(&sha256(&client_key), &self.verifier.stored_key) {
            return Err(Error::Scram("wrong password"));
        }
        let v = B64.encode(hmac(&self.verifier.server_key, auth_message.as_bytes()));
        Ok((format!("v={v}"), client_key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_and_server_agree() {
        let (mut c, first) = Client::new("pw");
        let (s, server_first) = Server::new("pw", &first).expect("server-first");
        let fin = c.finish(&server_first).expect("client-final");
        let v = s.finish(&fin).expect("proof accepted");
        c.verify(&v).expect("server verified");
        let (mut c2, first2) = Client::new("wrong");
        let (s2, sf2) = Server::new("pw", &first2).expect("server-first");
        assert!(s2.finish(&c2.finish(&sf2).expect("final")).is_err());
        assert!(Server::new("pw", "p=tls-server-end-point,,n=,r=x").is_err());
    }

    #[test]
    fn a_stored_verifier_checks_clients_and_its_keys_log_in_to_a_server_with_the_same() {
        let stored = Verifier::from_password("pw", b"0123456789abcdef", 4096);
        let text = stored.to_text();
        assert_eq!(Verifier::parse(&text), Some(stored.clone()));
        assert!(stored.matches("pw") && !stored.matches("px"));
        assert_eq!(Verifier::parse("md5abc"), None);
        // A client logs in to Sluice, which holds only the verifier...
        let (mut c, first) = Client::new("pw");
        let (s, server_first) = Server::with_verifier(stored.clone(), &first).expect("first");
        let (v, client_key) = s
            .finish_with_key(&c.finish(&server_first).expect("final"))
            .expect("proof accepted");
        c.verify(&v).expect("Sluice proved it holds the verifier");
        // ...and Sluice logs in to a server holding the same verifier with the recovered key.
        let secret = ClientSecret::Keys {
            verifier: stored.clone(),
            client_key,
        };
        let (mut sluice, first) = Client::with_secret(secret.clone());
        let (server, server_first) = Server::with_verifier(stored, &first).expect("first");
        let v = server
            .finish(&sluice.finish(&server_first).expect("final"))
            .expect("the server accepts the recovered key");
        sluice.verify(&v).expect("server verified");
        // A server with another salt is refused with the reason.
        let other = Verifier::from_password("pw", b"another salt....", 4096);
        let (mut sluice, first) = Client::with_secret(secret);
        let (_, server_first) = Server::with_verifier(other, &first).expect("first");
        let e = sluice.finish(&server_first).expect_err("different salt");
        assert!(e.to_string().contains("pg_authid"), "{e}");
    }
}
