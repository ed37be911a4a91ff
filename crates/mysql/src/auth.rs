//! Checking a client's credentials against a `mysql_users` password (cleartext or native hash).
//! Pure functions: the exchange of packets lives in [`crate::handshake`].

use ring::rand::{SecureRandom, SystemRandom};
use sluice_mysql_backend::BackendSecret;
use sluice_mysql_proto::scramble::{self, CACHING_SHA2, NATIVE};

/// The outcome of checking a scramble.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Correct; this is what Sluice now knows to log in to backends as the user.
    Accept(BackendSecret),
    /// caching_sha2_password with only a native hash configured: the client must send the
    /// cleartext password (full authentication, over TLS).
    NeedFullAuth,
    /// Wrong password.
    Deny,
}

/// A 20-byte auth nonce of printable characters (it travels NUL-terminated in the greeting).
pub(crate) fn nonce() -> Vec<u8> {
    let mut b = [0u8; 20];
    if SystemRandom::new().fill(&mut b).is_err() {
        // The OS RNG failing is not recoverable in a meaningful way; fall back to a hash of time
        // so authentication still works, and say so.
        tracing::error!("system RNG failed; using a time-derived auth nonce");
        let t = sluice_core::hostgroup::random_u64().to_le_bytes();
        for (i, x) in b.iter_mut().enumerate() {
            *x = t[i % 8].wrapping_mul(31).wrapping_add(i as u8);
        }
    }
    b.iter().map(|x| 33 + (x % 94)).collect()
}

/// Checks `response`, computed by the client with `plugin` over `nonce`, against the configured
/// `password` (cleartext, or `*`-hex native hash).
pub(crate) fn verify(plugin: &str, nonce: &[u8], response: &[u8], password: &str) -> Verdict {
    let hash = scramble::parse_native_hash(password);
    match (plugin, hash) {
        (NATIVE, Some(stage2)) => match scramble::native_verify_stage2(nonce, response, &stage2) {
            Some(stage1) => Verdict::Accept(BackendSecret::NativeStage1(stage1)),
            None => Verdict::Deny,
        },
        (NATIVE, None) => check(
            scramble::native(nonce, password.as_bytes()),
            response,
            password,
        ),
        (CACHING_SHA2, Some(_)) => Verdict::NeedFullAuth,
        (CACHING_SHA2, None) => check(
            scramble::caching_sha2(nonce, password.as_bytes()),
            response,
            password,
        ),
        _ => Verdict::Deny,
    }
}

fn check(expected: Vec<u8>, response: &[u8], password: &str) -> Verdict {
    if scramble::ct_eq(&expected, response) {
        Verdict::Accept(BackendSecret::Clear(password.to_string()))
    } else {
        Verdict::Deny
    }
}

/// Checks a cleartext password sent during full authentication.
pub(crate) fn verify_cleartext(clear: &[u8], password: &str) -> Verdict {
    let clear = clear.strip_suffix(&[0]).unwrap_or(clear);
    let ok = match scramble::parse_native_hash(password) {
        Some(stage2) => scramble::ct_eq(
            &scramble::native_stage2(&scramble::native_stage1(clear)),
            &stage2,
        ),
        None => scramble::ct_eq(clear, password.as_bytes()),
    };
    match (ok, std::str::from_utf8(clear)) {
        (true, Ok(s)) => Verdict::Accept(BackendSecret::Clear(s.to_string())),
        _ => Verdict::Deny,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonce_is_printable_and_random() {
        let a = nonce();
        assert_eq!(a.len(), 20);
        assert!(a.iter().all(|b| (33..127).contains(b)));
        assert_ne!(a, nonce());
    }

    #[test]
    fn native_with_clear_and_hash() {
        let n = nonce();
        let resp = scramble::native(&n, b"pw");
        assert_eq!(
            verify(NATIVE, &n, &resp, "pw"),
            Verdict::Accept(BackendSecret::Clear("pw".into()))
        );
        assert_eq!(verify(NATIVE, &n, &resp, "other"), Verdict::Deny);
        let hash = scramble::format_native_hash("pw");
        assert!(matches!(
            verify(NATIVE, &n, &resp, &hash),
            Verdict::Accept(BackendSecret::NativeStage1(_))
        ));
        assert_eq!(verify(NATIVE, &n, b"", "pw"), Verdict::Deny);
        assert_eq!(
            verify(NATIVE, &n, b"", ""),
            Verdict::Accept(BackendSecret::Clear(String::new()))
        );
    }

    #[test]
    fn caching_sha2_fast_and_full() {
        let n = nonce();
        let resp = scramble::caching_sha2(&n, b"pw");
        assert_eq!(
            verify(CACHING_SHA2, &n, &resp, "pw"),
            Verdict::Accept(BackendSecret::Clear("pw".into()))
        );
        assert_eq!(verify(CACHING_SHA2, &n, &resp, "nope"), Verdict::Deny);
        let hash = scramble::format_native_hash("pw");
        assert_eq!(
            verify(CACHING_SHA2, &n, &resp, &hash),
            Verdict::NeedFullAuth
        );
        assert_eq!(
            verify_cleartext(b"pw\0", &hash),
            Verdict::Accept(BackendSecret::Clear("pw".into()))
        );
        assert_eq!(verify_cleartext(b"bad\0", &hash), Verdict::Deny);
        assert_eq!(
            verify_cleartext(b"pw", "pw"),
            Verdict::Accept(BackendSecret::Clear("pw".into()))
        );
        assert_eq!(verify("dialog", &n, &resp, "pw"), Verdict::Deny);
    }
}
