//! A StartupMessage's parameters, split into who the client is (`user`, `database`) and the
//! settings it asked for. Every setting — `application_name`, `client_encoding`, `DateStyle`,
//! `TimeZone`, the `-c name=value` switches of `options` and any other GUC — becomes part of the
//! session's state: server connections are opened with neutral startup parameters and the
//! session's settings are applied to whichever connection serves it, so no connection carries
//! one client's startup values to another.

use std::collections::BTreeMap;

/// Largest `options` value parsed (PostgreSQL's own startup packet is bounded at 10,000 bytes).
const MAX_OPTIONS: usize = 10_000;

/// What a StartupMessage asked for.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct StartupParams {
    /// `user`.
    pub user: String,
    /// `database` (the user name when absent, as PostgreSQL does).
    pub database: String,
    /// GUC settings by lower-cased name, raw values as the client sent them. Explicit parameters
    /// override the same name given in `options` (PostgreSQL applies `options` first).
    pub settings: BTreeMap<String, String>,
}

/// Why a startup packet is refused (the client gets the text with SQLSTATE 08P01).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StartupRefusal {
    /// `replication=true|database`: walsender connections do not pool.
    #[error(
        "replication connections are not supported through Sluice; connect to the server directly"
    )]
    Replication,
    /// An `options` value over the bound.
    #[error("the options startup parameter is longer than {MAX_OPTIONS} bytes")]
    OptionsTooLong,
    /// `-c` last in `options`.
    #[error("-c in the options startup parameter needs name=value")]
    DashCWithoutSetting,
    /// A server switch other than `-c`/`--name=value`.
    #[error(
        "unsupported switch {0:?} in the options startup parameter: Sluice accepts -c name=value and --name=value"
    )]
    UnsupportedSwitch(String),
    /// `-c name` without `=value`.
    #[error("{0:?} in the options startup parameter needs a value (name=value)")]
    NoValue(String),
    /// `-c =value`.
    #[error("{0:?} in the options startup parameter has no name")]
    NoName(String),
}

/// Splits startup `pairs`; names listed in `ignore` (comma-separated,
/// `pgsql-ignore_startup_parameters`) are dropped. An error is the message a client gets.
pub(crate) fn parse(
    pairs: &[(String, String)],
    ignore: &str,
) -> Result<StartupParams, StartupRefusal> {
    let ignored = |name: &str| {
        ignore
            .split(',')
            .map(str::trim)
            .any(|i| !i.is_empty() && i.eq_ignore_ascii_case(name))
    };
    let mut p = StartupParams::default();
    let mut explicit = Vec::new();
    let mut database = None;
    for (name, value) in pairs {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "user" => p.user = value.clone(),
            "database" => database = Some(value.clone()),
            "replication" => {
                if !matches!(
                    value.to_ascii_lowercase().as_str(),
                    "false" | "off" | "no" | "0"
                ) && !ignored("replication")
                {
                    return Err(StartupRefusal::Replication);
                }
            }
            // Protocol extensions (`_pq_.*`) are not GUCs; none is supported.
            n if n.starts_with("_pq_.") => {}
            "options" if !ignored("options") => {
                for (n, v) in split_options(value)? {
                    if !ignored(&n) {
                        p.settings.insert(n, v);
                    }
                }
            }
            n if ignored(n) => {}
            _ => explicit.push((lower, value.clone())),
        }
    }
    for (n, v) in explicit {
        p.settings.insert(n, v);
    }
    p.database = database
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| p.user.clone());
    Ok(p)
}

/// The settings in an `options` value: `-c name=value`, `-cname=value` and `--name=value`
/// switches, split on unescaped whitespace with libpq's backslash escapes (`\ ` is a space,
/// `\\` a backslash). Other server switches are refused: they are not session settings.
fn split_options(options: &str) -> Result<Vec<(String, String)>, StartupRefusal> {
    if options.len() > MAX_OPTIONS {
        return Err(StartupRefusal::OptionsTooLong);
    }
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    let mut in_word = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            c if c.is_ascii_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    let mut out = Vec::new();
    let mut words = words.into_iter();
    while let Some(w) = words.next() {
        let setting = if let Some(rest) = w.strip_prefix("--") {
            rest.to_string()
        } else if w == "-c" {
            words.next().ok_or(StartupRefusal::DashCWithoutSetting)?
        } else if let Some(rest) = w.strip_prefix("-c") {
            rest.to_string()
        } else {
            return Err(StartupRefusal::UnsupportedSwitch(w));
        };
        let Some((name, value)) = setting.split_once('=') else {
            return Err(StartupRefusal::NoValue(setting));
        };
        // PostgreSQL reads `--work-mem=…` as work_mem.
        let name = name.replace('-', "_").to_ascii_lowercase();
        if name.is_empty() {
            return Err(StartupRefusal::NoName(setting));
        }
        out.push((name, value.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn settings(p: &StartupParams) -> Vec<(&str, &str)> {
        p.settings
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect()
    }

    #[test]
    fn settings_are_every_parameter_but_identity_with_names_folded() {
        let p = parse(
            &pairs(&[
                ("user", "app"),
                ("database", "shop"),
                ("application_name", "myapp"),
                ("TimeZone", "Europe/Paris"),
                ("DateStyle", "ISO, DMY"),
                ("client_encoding", "UTF8"),
                ("extra_float_digits", "3"),
                ("_pq_.command_tag", "x"),
                ("replication", "false"),
            ]),
            "",
        )
        .expect("parsed");
        assert_eq!(p.user, "app");
        assert_eq!(p.database, "shop");
        assert_eq!(
            settings(&p),
            [
                ("application_name", "myapp"),
                ("client_encoding", "UTF8"),
                ("datestyle", "ISO, DMY"),
                ("extra_float_digits", "3"),
                ("timezone", "Europe/Paris"),
            ]
        );
    }

    #[test]
    fn the_database_defaults_to_the_user() {
        let p = parse(&pairs(&[("user", "app")]), "").expect("parsed");
        assert_eq!(p.database, "app");
    }

    #[test]
    fn options_switches_with_escapes_and_explicit_parameters_winning() {
        let p = parse(
            &pairs(&[
                ("user", "app"),
                ("statement_timeout", "99"),
                (
                    "options",
                    r"-c search_path=foo,public  -cstatement_timeout=1234 --work-mem=8MB -c application_name=a\ b\\c",
                ),
            ]),
            "",
        )
        .expect("parsed");
        assert_eq!(
            settings(&p),
            [
                ("application_name", r"a b\c"),
                ("search_path", "foo,public"),
                ("statement_timeout", "99"),
                ("work_mem", "8MB"),
            ]
        );
    }

    #[test]
    fn ignored_names_are_dropped_case_insensitively() {
        let p = parse(
            &pairs(&[
                ("user", "app"),
                ("extra_float_digits", "3"),
                ("options", "-c Search_Path=x -c jit=off"),
            ]),
            " Extra_Float_Digits , search_path",
        )
        .expect("parsed");
        assert_eq!(settings(&p), [("jit", "off")]);
        let p = parse(
            &pairs(&[("user", "app"), ("options", "-X")]),
            "options,replication",
        )
        .expect("ignored options are not parsed");
        assert!(p.settings.is_empty());
    }

    #[test]
    fn refuses_what_is_not_a_session_setting() {
        for (name, value) in [
            ("replication", "database"),
            ("replication", "true"),
            ("options", "-B 100"),
            ("options", "-c"),
            ("options", "-c nameonly"),
            ("options", "--=x"),
        ] {
            let r = parse(&pairs(&[("user", "app"), (name, value)]), "");
            assert!(r.is_err(), "{name}={value} accepted");
        }
        let long = "-c a=b ".repeat(2000);
        assert!(parse(&pairs(&[("user", "app"), ("options", &long)]), "").is_err());
    }
}
