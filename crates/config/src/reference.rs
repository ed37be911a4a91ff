//! The variables' reference table (`docs/variables.md`), made from their declarations.

use super::declared::VariableRow;
use super::{AdminVariables, McpVariables, MysqlVariables, PgsqlVariables};

/// Every variable Sluice implements, by prefix (`mysql`, `pgsql`, `admin`, `mcp`), with its
/// default, what it takes, whether it needs a restart, and its documentation: the rows of
/// `docs/variables.md`, from the same declarations the setter and the listings are made from.
pub fn variables_reference() -> Vec<(&'static str, Vec<VariableRow>)> {
    let mut mysql = Vec::new();
    MysqlVariables::describe_variables("mysql", &mut mysql);
    let mut pgsql = Vec::new();
    PgsqlVariables::describe_variables("pgsql", &mut pgsql);
    let mut admin = Vec::new();
    AdminVariables::describe(&mut admin);
    let mut mcp = Vec::new();
    McpVariables::describe_variables("mcp", &mut mcp);
    vec![
        ("mysql", mysql),
        ("pgsql", pgsql),
        ("admin", admin),
        ("mcp", mcp),
    ]
}

/// `docs/variables.md` as [`variables_reference`] makes it.
pub fn variables_markdown() -> String {
    let mut out = String::from(
        "# Variables\n\n\
         Every variable Sluice implements, made from the declarations in `crates/config` (the \
         same ones the setter, `global_variables` and `SHOW … VARIABLES` are made from): do not \
         edit by hand; `SLUICE_BLESS=1 cargo test -p sluice-config reference` rewrites it. \
         Set them in the config file's `[mysql_variables]`, `[pgsql_variables]`, \
         `[admin_variables]` and `[mcp_variables]` sections, or through the admin port \
         (`SET mysql-max_connections = 2000; LOAD MYSQL VARIABLES TO RUNTIME;`). Variables \
         marked *restart* are read at start. ProxySQL variables Sluice does not implement are \
         accepted and listed without effect (see docs/migrating.md).\n",
    );
    for (prefix, rows) in variables_reference() {
        out.push_str(&format!(
            "\n## `{prefix}-`\n\n| variable | default | takes | what it does |\n|---|---|---|---|\n"
        ));
        for r in rows {
            let default = if r.default.is_empty() {
                "(empty)".to_string()
            } else {
                format!("`{}`", r.default)
            };
            let restart = if r.restart { "*restart* " } else { "" };
            out.push_str(&format!(
                "| `{}` | {default} | {} | {restart}{} |\n",
                r.name,
                r.takes,
                r.doc.replace('|', "\\|")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SetOutcome;

    /// `docs/variables.md` is what the declarations make (`SLUICE_BLESS=1` rewrites it).
    #[test]
    fn reference_doc_is_made_from_the_declarations() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/variables.md");
        let made = variables_markdown();
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::write(path, &made).expect("write docs/variables.md");
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == made,
            "docs/variables.md differs from the declarations: run \
             `SLUICE_BLESS=1 cargo test -p sluice-config reference`"
        );
    }

    /// docs/config.md explains the variables at length; every default it states is the
    /// declared one (a row naming several variables gives their defaults in the same order).
    #[test]
    fn the_narrative_docs_state_the_declared_defaults() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/config.md");
        let narrative = std::fs::read_to_string(path).expect("docs/config.md");
        let declared: Vec<(String, String)> = variables_reference()
            .into_iter()
            .flat_map(|(_, rows)| rows)
            .map(|r| (r.name, r.default))
            .collect();
        let mut section = None;
        let mut checked = 0;
        for line in narrative.lines() {
            if let Some(heading) = line.strip_prefix("## ") {
                section = heading
                    .split('`')
                    .find_map(|h| h.strip_prefix('[')?.strip_suffix("_variables]"))
                    .map(str::to_string);
                continue;
            }
            let (Some(prefix), Some(row)) = (&section, line.strip_prefix("| `")) else {
                continue;
            };
            let cells: Vec<&str> = row.split(" | ").collect();
            let names: Vec<&str> = cells[0]
                .split(['`', ',', ' ', '/'])
                .filter(|n| !n.is_empty())
                .collect();
            let stated = cells.get(1).map_or("", |d| d.trim_end_matches(" ms"));
            let defaults: Vec<&str> = if names.len() > 1 {
                stated.split([',', '/']).map(str::trim).collect()
            } else {
                vec![stated]
            };
            for (i, name) in names.iter().enumerate() {
                let full = format!("{prefix}-{name}");
                let Some((_, default)) = declared.iter().find(|(n, _)| *n == full) else {
                    continue;
                };
                let stated = defaults.get(i).or(defaults.first()).copied().unwrap_or("");
                let stated = stated.trim_matches('`');
                let stated = if stated == "empty" { "" } else { stated };
                assert_eq!(stated, default, "docs/config.md states {full}'s default");
                checked += 1;
            }
        }
        assert!(
            checked > 50,
            "only {checked} defaults found in docs/config.md"
        );
    }

    /// Every declared default is a value its own setter accepts, and listing then setting
    /// gives the same value: the declared ranges fit the fields and the defaults fit the ranges.
    #[test]
    fn every_default_is_accepted_and_round_trips() {
        macro_rules! round_trip {
            ($($group:ident $prefix:literal),*) => {$({
                let defaults = $group::default();
                let mut again = $group::default();
                for (k, v) in defaults.pairs() {
                    let r = again.set(&k, &v);
                    assert_eq!(r, Ok(SetOutcome::Applied), "{}-{k} = {v:?}", $prefix);
                }
                assert_eq!(again, defaults);
            })*};
        }
        round_trip!(MysqlVariables "mysql", PgsqlVariables "pgsql", AdminVariables "admin", McpVariables "mcp");
    }

    /// A listing names each variable once, and the reference has a row for each.
    #[test]
    fn each_variable_is_listed_once_and_documented() {
        let listed = [
            ("mysql", MysqlVariables::default().pairs()),
            ("pgsql", PgsqlVariables::default().pairs()),
            ("mcp", McpVariables::default().pairs()),
        ];
        let reference = variables_reference();
        for (prefix, pairs) in listed {
            let mut names: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
            let n = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), n, "{prefix}: a name listed twice");
            let rows = &reference
                .iter()
                .find(|(p, _)| *p == prefix)
                .expect("prefix")
                .1;
            assert_eq!(rows.len(), n, "{prefix}: one row per variable");
            assert!(
                rows.iter()
                    .all(|r| !r.doc.is_empty() && !r.takes.is_empty())
            );
        }
    }
}
