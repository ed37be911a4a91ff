//! The soak's commit ledgers: what each ledger writer reported (acknowledged, unknown and wrong
//! commits) and the check of every acknowledged commit against the surviving primary.

use crate::soak::pg_app;
use std::path::Path;

/// What a ledger writer reported.
#[derive(Debug, Default)]
pub(super) struct LedgerReport {
    pub(super) acked: Vec<u64>,
    pub(super) unknown: usize,
    pub(super) wrong: usize,
    pub(super) errors: String,
}

pub(super) fn read_report(path: &Path) -> xtask::Result<LedgerReport> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let list = |key: &str| -> Vec<u64> {
        text.find(&format!("\"{key}\": ["))
            .map(|i| &text[i + key.len() + 5..])
            .and_then(|rest| rest.split(']').next())
            .map(|body| {
                body.split(',')
                    .filter_map(|n| n.trim().parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let wrong = text
        .find("\"wrong\": [")
        .map(|i| &text[i + 10..])
        .is_some_and(|rest| !rest.starts_with(']'));
    Ok(LedgerReport {
        acked: list("acked"),
        unknown: list("unknown").len(),
        wrong: usize::from(wrong),
        errors: text
            .find("\"errors\": ")
            .map(|i| {
                let rest = text[i + 10..].trim_end();
                rest.strip_suffix('}').unwrap_or(rest).to_string()
            })
            .unwrap_or_default(),
    })
}

/// Every ledger against the surviving primary: the summary rows and the problems found.
pub(super) fn check_ledgers(
    reports: &[(&str, LedgerReport)],
) -> xtask::Result<(Vec<String>, Vec<String>)> {
    let state = xtask::state_dir();
    let survivor = xtask::mariadb::replica(&state);
    let mut problems = Vec::new();
    let mut rows = Vec::new();
    for (proto, report) in reports {
        let counts = match *proto {
            "mysql" => survivor
                .sql("SELECT seq, COUNT(*) FROM app.ledger WHERE writer = 1 GROUP BY seq")?,
            _ => pg_app("SELECT seq, COUNT(*) FROM ledger WHERE writer = 2 GROUP BY seq")?,
        };
        let present: std::collections::HashMap<u64, u64> = counts
            .lines()
            .filter_map(|l| {
                let mut f = l.split(['\t', '|']);
                Some((
                    f.next()?.trim().parse().ok()?,
                    f.next()?.trim().parse().ok()?,
                ))
            })
            .collect();
        let lost = report
            .acked
            .iter()
            .filter(|s| !present.contains_key(s))
            .count();
        let duplicated = present.values().filter(|n| **n > 1).count();
        let victims = match *proto {
            "mysql" => survivor.sql("SELECT COUNT(*) FROM app.ledger WHERE writer = 99")?,
            _ => pg_app("SELECT COUNT(*) FROM ledger WHERE writer = 99")?,
        };
        let victims: u64 = victims.trim().parse().unwrap_or(u64::MAX);
        if lost > 0 || duplicated > 0 || victims > 0 || report.wrong > 0 {
            problems.push(format!(
                "{proto}: {lost} lost, {duplicated} duplicated, {victims} uncommitted rows visible, {} wrong results",
                report.wrong
            ));
        }
        if report.acked.len() < 100 {
            problems.push(format!(
                "{proto}: only {} commits acknowledged",
                report.acked.len()
            ));
        }
        rows.push(format!(
            "| ledger {proto} | {} acknowledged, {} unknown (failed in flight) | {lost} lost, {duplicated} duplicated, {victims} of killed clients visible, {} wrong results | errors seen: {} |",
            report.acked.len(),
            report.unknown,
            report.wrong,
            report.errors
        ));
    }
    Ok((rows, problems))
}
