//! PostgreSQL's MD5 password exchange: `"md5" + md5hex(md5hex(password + user) + salt)`.
//! Kept for servers and clients that still use it; SCRAM-SHA-256 is the default both ways.

fn hex_md5(parts: &[&[u8]]) -> String {
    let mut ctx = md5::Context::new();
    for p in parts {
        ctx.consume(p);
    }
    format!("{:x}", ctx.finalize())
}

/// The stored form PostgreSQL keeps in `pg_authid`: `"md5" + md5hex(password + user)`. A password
/// already in that form is returned as is, so `pgsql_users` may hold either.
pub fn stored_hash(user: &str, password: &str) -> String {
    if is_stored_hash(password) {
        // md5hex is lower case; a hash copied in upper case is the same hash.
        return password.to_ascii_lowercase();
    }
    format!("md5{}", hex_md5(&[password.as_bytes(), user.as_bytes()]))
}

/// `"md5" + md5hex(cleartext + user)` for a cleartext password, whatever it looks like (a client
/// typing a stored hash as its password gets the hash of that text, not a match).
pub fn hash_of_cleartext(user: &str, cleartext: &str) -> String {
    format!("md5{}", hex_md5(&[cleartext.as_bytes(), user.as_bytes()]))
}

/// True for a password already in PostgreSQL's stored MD5 form (`md5` + 32 hex digits), as
/// PgBouncer's `userlist.txt` and `pg_authid` hold them.
pub fn is_stored_hash(password: &str) -> bool {
    password.len() == 35
        && password.starts_with("md5")
        && password[3..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// What the client sends for `salt`: `"md5" + md5hex(md5hex(password + user) + salt)`.
pub fn response(user: &str, password: &str, salt: &[u8]) -> String {
    let stored = stored_hash(user, password);
    format!("md5{}", hex_md5(&[&stored.as_bytes()[3..], salt]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_values_computed_independently() {
        // Values from Python's hashlib for user "app", password "app", salt 01 02 03 04.
        let stored = stored_hash("app", "app");
        assert_eq!(stored, "md5fe63fea7be31b0200b496d08bc6b517d");
        assert_eq!(stored_hash("app", &stored), stored);
        let r = response("app", "app", &[1, 2, 3, 4]);
        assert_eq!(r, "md5c1007ebbc6ecc151a46d7e2af0f47b66");
        assert_eq!(r, response("app", &stored, &[1, 2, 3, 4]));
        assert_ne!(r, response("app", "other", &[1, 2, 3, 4]));
    }
}
