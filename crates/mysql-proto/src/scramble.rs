//! Authentication scrambles for `mysql_native_password` and `caching_sha2_password`.

use ring::digest::{Context, SHA1_FOR_LEGACY_USE_ONLY, SHA256, digest};

/// `mysql_native_password` plugin name.
pub const NATIVE: &str = "mysql_native_password";
/// `caching_sha2_password` plugin name.
pub const CACHING_SHA2: &str = "caching_sha2_password";

fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut c = Context::new(&SHA1_FOR_LEGACY_USE_ONLY);
    for p in parts {
        c.update(p);
    }
    let mut out = [0u8; 20];
    out.copy_from_slice(c.finish().as_ref());
    out
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut c = Context::new(&SHA256);
    for p in parts {
        c.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(c.finish().as_ref());
    out
}

fn xor<const N: usize>(a: &[u8; N], b: &[u8; N]) -> [u8; N] {
    let mut out = [0u8; N];
    for i in 0..N {
        out[i] = a[i] ^ b[i];
    }
    out
}

/// Compares two byte strings in time that depends only on their lengths, so a password check leaks
/// nothing through timing.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// SHA1(password): the "stage 1" hash a native scramble reveals to whoever knows stage 2.
pub fn native_stage1(password: &[u8]) -> [u8; 20] {
    sha1(&[password])
}

/// SHA1(SHA1(password)): what MySQL stores (`*` + hex) for `mysql_native_password`.
pub fn native_stage2(stage1: &[u8; 20]) -> [u8; 20] {
    sha1(&[stage1])
}

/// The native scramble from stage 1: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))).
pub fn native_from_stage1(nonce: &[u8], stage1: &[u8; 20]) -> [u8; 20] {
    let stage2 = native_stage2(stage1);
    xor(stage1, &sha1(&[nonce, &stage2]))
}

/// The native scramble of a cleartext password (empty for an empty password).
pub fn native(nonce: &[u8], password: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    native_from_stage1(nonce, &native_stage1(password)).to_vec()
}

/// Checks a native response against a stored stage-2 hash; returns stage 1 when it matches.
pub fn native_verify_stage2(nonce: &[u8], response: &[u8], stage2: &[u8; 20]) -> Option<[u8; 20]> {
    let resp: &[u8; 20] = response.try_into().ok()?;
    let candidate = xor(resp, &sha1(&[nonce, stage2]));
    ct_eq(&native_stage2(&candidate), stage2).then_some(candidate)
}

/// The `caching_sha2_password` fast-path scramble:
/// SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce). Empty for an empty password.
pub fn caching_sha2(nonce: &[u8], password: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let h1 = sha256(&[password]);
    let h2 = sha256(&[&h1]);
    xor(&h1, &sha256(&[&h2, nonce])).to_vec()
}

/// Decodes a `*`-prefixed hex native hash into stage 2.
pub fn parse_native_hash(s: &str) -> Option<[u8; 20]> {
    let hex = s.strip_prefix('*')?;
    if hex.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Formats stage 2 the way MySQL shows it (`*` + upper-case hex), e.g. for docs and tests.
pub fn format_native_hash(password: &str) -> String {
    let s2 = native_stage2(&native_stage1(password.as_bytes()));
    let mut out = String::from("*");
    for b in s2 {
        out.push_str(&format!("{b:02X}"));
    }
    out
}

/// SHA-256 of bytes (exposed for callers that cache digests).
pub fn sha256_of(data: &[u8]) -> Vec<u8> {
    digest(&SHA256, data).as_ref().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_native_hash() {
        // MySQL: SELECT PASSWORD('app') / the hash of 'password' is well known.
        assert_eq!(
            format_native_hash("password"),
            "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
        );
    }

    #[test]
    fn native_verify_via_stage2_recovers_stage1() {
        let nonce = [9u8; 20];
        let resp = native(&nonce, b"secret");
        let stage2 = parse_native_hash(&format_native_hash("secret")).expect("hash");
        let s1 = native_verify_stage2(&nonce, &resp, &stage2).expect("matches");
        assert_eq!(s1, native_stage1(b"secret"));
        assert_eq!(native_from_stage1(&nonce, &s1).to_vec(), resp);
        assert!(native_verify_stage2(&nonce, &native(&nonce, b"wrong"), &stage2).is_none());
        assert!(native_verify_stage2(&nonce, b"short", &stage2).is_none());
    }

    #[test]
    fn sha2_scramble_shape() {
        let nonce = [1u8; 20];
        assert_eq!(caching_sha2(&nonce, b"pw").len(), 32);
        assert_ne!(caching_sha2(&nonce, b"pw"), caching_sha2(&[2u8; 20], b"pw"));
        assert!(caching_sha2(&nonce, b"").is_empty());
    }
}
