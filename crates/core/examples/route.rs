//! Classifying and routing statements with Sluice's query processor, embedded in another
//! program: a rule set built in code (the classic read/write split, a rewrite and a block),
//! statements digested and evaluated — no sockets, no config file, no admin.
//!
//! ```sh
//! cargo run -p sluice-core --example route
//! ```

use sluice_core::config::QueryRule;
use sluice_core::query::{Dialect, QueryContext, RuleSet, digest};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rules = [
        // Writes and locking reads stay on the primary (hostgroup 0)...
        QueryRule::new(1)
            .match_digest("^SELECT .* FOR UPDATE")
            .destination_hostgroup(0)
            .apply(),
        // A legacy table name is rewritten (evaluation goes on: no apply)...
        QueryRule::new(2)
            .match_pattern("\\bFROM old_orders\\b")
            .replace_pattern("FROM orders"),
        // ...other reads go to the replicas (hostgroup 1).
        QueryRule::new(3)
            .match_digest("^SELECT")
            .destination_hostgroup(1)
            .apply(),
        // A dangerous statement is refused.
        QueryRule::new(4)
            .match_digest("^DELETE FROM `?accounts`?$")
            .error_msg("DELETE without WHERE is not allowed here")
            .apply(),
    ];
    let set = RuleSet::compile(&rules, &[])?;
    let ctx = QueryContext {
        user: "app",
        schema: "shop",
        client_addr: "10.0.0.7",
        proxy_addr: "127.0.0.1",
        proxy_port: 6033,
        flag_in: 0,
    };
    for sql in [
        "SELECT balance FROM accounts WHERE id = 42",
        "SELECT balance FROM accounts WHERE id = 42 FOR UPDATE",
        "UPDATE accounts SET balance = balance - 10 WHERE id = 42",
        "DELETE FROM accounts",
        "SELECT * FROM old_orders WHERE id IN (1, 2, 3)",
    ] {
        let d = digest(sql, Dialect::Mysql, 2048);
        let action = set.evaluate(&ctx, sql, &d);
        let route = match (&action.error_msg, action.destination_hostgroup) {
            (Some(e), _) => format!("refused: {e}"),
            (None, Some(hg)) => format!("hostgroup {hg}"),
            (None, None) => "default hostgroup".to_string(),
        };
        println!("{} | {} | {route}", d.hex(), d.text);
        if let Some(text) = &action.rewritten {
            println!("  rewritten: {text}");
        }
    }
    Ok(())
}
