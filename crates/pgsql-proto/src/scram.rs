//! SCRAM-SHA-256 (RFC 5802/7677) as PostgreSQL uses it, for both ends: Sluice verifies clients
//! against cleartext passwords from `pgsql_users`, and logs in to servers with them.

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

/// The client side of the exchange (Sluice logging in to a server).
#[derive(Debug)]
pub struct Client {
    password: String,
    client_first_bare: String,
    auth_message: String,
    salted: [u8; 32],
}

impl Client {
    /// Starts; returns the SASLInitialResponse payload (`n,,n=,r=<nonce>`).
    pub fn new(password: &str) -> (Client, String) {
        let bare = format!("n=,r={}", nonce());
        let first = format!("n,,{bare}");
        (
            Client {
                password: password.to_string(),
                client_first_bare: bare,
                auth_message: String::new(),
                salted: [0; 32],
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
        self.salted = salted(&self.password, &salt, iters);
        let without_proof = format!("c=biws,r={r}");
        self.auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_key = hmac(&self.salted, b"Client Key");
        let stored = digest::digest(&digest::SHA256, &client_key);
        let sig = hmac(stored.as_ref(), self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Checks the server's final message (`v=<signature>`).
    pub fn verify(&self, server_final: &str) -> Result<(), Error> {
        let v = B64
            .decode(attr(server_final, 'v').ok_or(Error::Scram("server-final without signature"))?)
            .map_err(|_| Error::Scram("server signature is not base64"))?;
        let server_key = hmac(&self.salted, b"Server Key");
        if v == hmac(&server_key, self.auth_message.as_bytes()) {
            Ok(())
        } else {
            Err(Error::Scram("server signature mismatch"))
        }
    }
}

/// The server side (Sluice verifying a client).
#[derive(Debug)]
pub struct Server {
    salted: [u8; 32],
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl Server {
    /// Takes client-first (`n,,n=...,r=...`), returns server-first.
    pub fn new(password: &str, client_first: &str) -> Result<(Server, String), Error> {
        let bare = if let Some(b) = client_first
            .strip_prefix("n,,")
            .or_else(|| client_first.strip_prefix("y,,"))
        {
            b
        } else {
            return Err(Error::Scram(
                "channel binding is not supported on this connection",
            ));
        };
        let cnonce = attr(bare, 'r').ok_or(Error::Scram("client-first without nonce"))?;
        let mut salt = [0u8; 16];
        let _ = SystemRandom::new().fill(&mut salt);
        let nonce = format!("{cnonce}{}", self::nonce());
        let server_first = format!("r={nonce},s={},i={ITERATIONS}", B64.encode(salt));
        let s = Server {
            salted: salted(password, &salt, ITERATIONS),
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        };
        Ok((s, server_first))
    }

    /// Takes client-final; returns server-final (`v=...`) when the proof is right.
    pub fn finish(&self, client_final: &str) -> Result<String, Error> {
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
        let client_key = hmac(&self.salted, b"Client Key");
        let stored = digest::digest(&digest::SHA256, &client_key);
        let sig = hmac(stored.as_ref(), auth_message.as_bytes());
        let expected: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        if proof.len() != expected.len()
            || proof
                .iter()
                .zip(&expected)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                != 0
        {
            return Err(Error::Scram("wrong password"));
        }
        let server_key = hmac(&self.salted, b"Server Key");
        Ok(format!(
            "v={}",
            B64.encode(hmac(&server_key, auth_message.as_bytes()))
        ))
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
}
