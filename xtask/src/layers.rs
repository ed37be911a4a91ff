//! `cargo xtask check-layers`: the crate graph as docs/ARCHITECTURE.md draws it. Every
//! workspace crate sits on a floor; every dependency (normal or build, from `cargo metadata`)
//! must point to a lower floor, and none may be one of the never-edges below, whatever the
//! floors. The diagram's `floor N` lines in docs/ARCHITECTURE.md must list the same crates as
//! [`FLOORS`], so the picture and the check cannot drift apart.

use crate::proc::{run_capture, step};
use crate::{Result, workspace_root};
use std::collections::BTreeMap;
use std::process::Command;

/// The floors, lowest first. Tests and tools (`sluice-tests`, `xtask`) stand outside.
pub const FLOORS: &[&[&str]] = &[
    &["sluice-config", "sluice-mysql-proto", "sluice-pgsql-proto"],
    &["sluice-query"],
    &["sluice-core"],
    &[
        "sluice-net",
        "sluice-monitor",
        "sluice-rag",
        "sluice-import",
    ],
    &[
        "sluice-mysql-backend",
        "sluice-pgsql-backend",
        "sluice-admin",
    ],
    &[
        "sluice-mysql",
        "sluice-pgsql",
        "sluice-mcp",
        "sluice-cluster",
    ],
    &["sluice-app"],
    &["sluice-bin"],
];

/// Outside the floors: they may depend on anything.
const OUTSIDE: &[&str] = &["sluice-tests", "xtask"];

/// Edges never allowed, as (from, to) name patterns (`*` at the end matches any suffix),
/// with the reason.
pub const NEVER: &[(&str, &str, &str)] = &[
    (
        "sluice-config",
        "sluice-*",
        "the config model is pure data: it knows no other crate",
    ),
    (
        "sluice-query",
        "sluice-*",
        "the query processor knows no sockets, no runtime and no other crate but the config model",
    ),
    (
        "sluice-core",
        "sluice-*",
        "the core knows no sockets, no wire bytes and no other crate but the config model and \
         the query processor",
    ),
    ("sluice-mysql-proto", "sluice-*", "wire pieces are pure"),
    ("sluice-pgsql-proto", "sluice-*", "wire pieces are pure"),
    (
        "sluice-mysql*",
        "sluice-pgsql*",
        "the two protocol stacks do not know each other",
    ),
    (
        "sluice-pgsql*",
        "sluice-mysql*",
        "the two protocol stacks do not know each other",
    ),
    (
        "sluice-admin",
        "sluice-mysql-backend",
        "the admin reaches the data path through LiveStats",
    ),
    (
        "sluice-admin",
        "sluice-pgsql-backend",
        "the admin reaches the data path through LiveStats",
    ),
    (
        "sluice-import",
        "sluice-net",
        "translating a config file opens no socket",
    ),
    (
        "sluice-monitor",
        "sluice-net",
        "the monitor schedules and decides; the backend crates' checkers open the sockets",
    ),
    (
        "sluice-net",
        "sluice-monitor",
        "the shared networking knows no monitor: a checker maps its TLS errors",
    ),
    (
        "sluice-rag",
        "sluice-admin",
        "the index knows nothing of the admin",
    ),
];

/// Edges a never-edge above would catch but that are the design: (from, to).
const EXCEPT: &[(&str, &str)] = &[
    ("sluice-query", "sluice-config"),
    ("sluice-core", "sluice-config"),
    ("sluice-core", "sluice-query"),
];

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

fn floor_of(name: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&name))
}

/// The workspace's crates and their dependencies on each other (normal and build).
fn graph() -> Result<BTreeMap<String, Vec<String>>> {
    let out = run_capture(Command::new("cargo").current_dir(workspace_root()).args([
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
    ]))?;
    let meta: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("cargo metadata: {e}"))?;
    let packages = meta["packages"]
        .as_array()
        .ok_or("cargo metadata: no packages")?;
    let names: Vec<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    let mut graph = BTreeMap::new();
    for p in packages {
        let name = p["name"].as_str().unwrap_or_default().to_string();
        let mut deps: Vec<String> = p["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["kind"].is_null() || d["kind"] == "build")
            .filter_map(|d| d["name"].as_str())
            .filter(|d| names.iter().any(|n| n == d))
            .map(str::to_string)
            .collect();
        deps.sort();
        deps.dedup();
        graph.insert(name, deps);
    }
    Ok(graph)
}

/// What is wrong with `graph` against the floors and the never-edges.
pub fn violations(graph: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut bad = Vec::new();
    for (from, deps) in graph {
        if OUTSIDE.contains(&from.as_str()) {
            continue;
        }
        let Some(f) = floor_of(from) else {
            bad.push(format!(
                "{from} is on no floor: place it in xtask/src/layers.rs FLOORS and the diagram"
            ));
            continue;
        };
        for to in deps {
            let never = NEVER
                .iter()
                .find(|(a, b, _)| matches(a, from) && matches(b, to));
            if let Some((_, _, why)) = never.filter(|_| !EXCEPT.contains(&(from, to))) {
                bad.push(format!("{from} → {to} is never allowed: {why}"));
            } else if floor_of(to).is_none_or(|t| t >= f) {
                bad.push(format!(
                    "{from} (floor {}) → {to} ({}) does not point down",
                    f + 1,
                    floor_of(to).map_or("on no floor".into(), |t| format!("floor {}", t + 1))
                ));
            }
        }
    }
    bad
}

/// The crates each `floor N` line of the diagram in docs/ARCHITECTURE.md names.
fn drawn_floors(doc: &str) -> BTreeMap<usize, Vec<String>> {
    let mut floors = BTreeMap::new();
    for line in doc.lines() {
        let Some(rest) = line.strip_prefix("floor ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(n) = words.next().and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        let crates: Vec<String> = words
            .take_while(|w| w.starts_with("sluice-"))
            .map(str::to_string)
            .collect();
        floors.insert(n, crates);
    }
    floors
}

/// Checks the workspace; prints the graph by floor.
pub fn check() -> Result<()> {
    let graph = graph()?;
    let mut bad = violations(&graph);
    let doc_path = workspace_root().join("docs/ARCHITECTURE.md");
    let doc =
        std::fs::read_to_string(&doc_path).map_err(|e| format!("{}: {e}", doc_path.display()))?;
    let drawn = drawn_floors(&doc);
    for (i, floor) in FLOORS.iter().enumerate() {
        let mut want: Vec<String> = floor.iter().map(|s| s.to_string()).collect();
        let mut have = drawn.get(&(i + 1)).cloned().unwrap_or_default();
        want.sort();
        have.sort();
        if want != have {
            bad.push(format!(
                "docs/ARCHITECTURE.md draws floor {} as {have:?}; the check has {want:?}",
                i + 1
            ));
        }
    }
    for (i, floor) in FLOORS.iter().enumerate().rev() {
        for c in *floor {
            let deps = graph.get(*c).map(|d| d.join(", ")).unwrap_or_default();
            step(&format!("floor {}: {c} → {deps}", i + 1));
        }
    }
    if bad.is_empty() {
        step("check-layers: every arrow points down; no never-edge");
        Ok(())
    } else {
        Err(format!("check-layers:\n  {}", bad.join("\n  ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(edges: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        edges
            .iter()
            .map(|(a, b)| (a.to_string(), b.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn upward_and_never_edges_are_found() {
        assert!(violations(&g(&[("sluice-mysql", &["sluice-core", "sluice-net"])])).is_empty());
        assert!(violations(&g(&[("sluice-core", &["sluice-config"])])).is_empty());
        let config_up = violations(&g(&[("sluice-config", &["sluice-core"])]));
        assert!(config_up[0].contains("never allowed"), "{config_up:?}");
        let up = violations(&g(&[("sluice-net", &["sluice-admin"])]));
        assert!(up[0].contains("does not point down"), "{up:?}");
        let never = violations(&g(&[
            ("sluice-mcp", &["sluice-mysql-backend"]),
            ("sluice-mysql", &["sluice-pgsql-proto"]),
        ]));
        assert_eq!(never.len(), 1, "{never:?}");
        assert!(never[0].contains("never allowed"), "{never:?}");
        let lost = violations(&g(&[("sluice-new", &[])]));
        assert!(lost[0].contains("on no floor"), "{lost:?}");
    }

    #[test]
    fn the_diagrams_floor_lines_are_read() {
        let doc = "x\nfloor 2  sluice-net  sluice-rag   shared networking, sluice-core mentioned\nfloor 1  sluice-core  wire\n";
        let d = drawn_floors(doc);
        assert_eq!(d[&2], ["sluice-net", "sluice-rag"]);
        assert_eq!(d[&1], ["sluice-core"]);
    }
}
