//! `cargo xtask bench instructions`: user-space instructions per statement, counted by
//! valgrind's callgrind, for Sluice and, in the same run, for the byte-copying peers (HAProxy in
//! TCP mode for the MySQL statements, PgBouncer in transaction pooling for the PostgreSQL ones).
//!
//! Throughput on this shared two-core machine moves ±15 % from run to run, more than most
//! changes to the statement path; an instruction count moves by less than 1 %. Each target runs
//! under callgrind (about fifty times slower, so the client never waits on anything else). For
//! each statement kind a client of our own (`bench_instructions.py`) opens its connections and
//! warms them up first — logins, server connections, PBKDF2 and statement preparation all happen
//! before the first counter dump, followed by one uncounted run — then runs a fifth of
//! `BENCH_INSTR_EVENTS` statements (default 5,000) and then all of them, each run between two
//! dumps. Each run's count divided by its statements is the
//! cost per statement; the two runs must agree (the table shows both), which shows that nothing
//! but statements was counted. The last column is how often per statement Sluice's event loops
//! parked (waited for events) in the larger run: a park is ~1,000 instructions of tokio's own,
//! and the count moves with timing, not code (a MySQL row of one build measured 2.0 and 2.5), so
//! two builds' rows compare at equal parks. Kernel time is not counted, and `rep movsb` (large copies) counts
//! one instruction per byte. `BENCH_BASELINE_BIN=/path/to/sluice` measures that binary the same
//! way in the same run; `BENCH_INSTR_FEATURES_IDLE=1` adds a `sluice-features-idle` column: the
//! same build with the MCP port, workload classes and a RAG source configured but idle.
//!
//! Before 2026-12-05 this bench took the difference of two pgbench/sysbench runs, each
//! connecting anew; the first PostgreSQL run also opened the server connections, so its logins
//! were subtracted from the statements and PostgreSQL rows came out about five times too low.

use crate::bench::env_num;
use crate::bench_alloc::{MYSQL_PORT, PGSQL_PORT, config};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;
use xtask::proc::{self, run_capture, step};

const HAPROXY_PORT: u16 = 16636;
const PGBOUNCER_PORT: u16 = 16637;
/// Connections per statement kind, opened before counting and used round-robin.
const CLIENTS: u32 = 4;

#[derive(Clone, Copy, PartialEq)]
enum Wire {
    Mysql,
    Pgsql,
}

/// One statement kind: what the client sends, and over which protocol.
pub(crate) struct Statement {
    pub(crate) name: &'static str,
    /// The client's workload argument (see `bench_instructions.py`).
    workload: &'static str,
    wire: Wire,
}

pub(crate) const STATEMENTS: [Statement; 5] = [
    Statement {
        name: "MySQL point select, prepared (COM_STMT_EXECUTE, sysbench's statement)",
        workload: "mysql-prepared",
        wire: Wire::Mysql,
    },
    Statement {
        name: "MySQL point select, text (COM_QUERY, sysbench's statement)",
        workload: "mysql-text",
        wire: Wire::Mysql,
    },
    Statement {
        name: "PostgreSQL point select, simple Query (pgbench -S's statement)",
        workload: "pgsql-simple",
        wire: Wire::Pgsql,
    },
    Statement {
        name: "PostgreSQL point select, extended (Parse/Bind/Describe/Execute/Sync)",
        workload: "pgsql-extended",
        wire: Wire::Pgsql,
    },
    Statement {
        name: "PostgreSQL point select, prepared (Bind/Describe/Execute/Sync)",
        workload: "pgsql-prepared",
        wire: Wire::Pgsql,
    },
];

/// The two counted runs of one statement kind: instructions per statement in each.
#[derive(Clone, Copy)]
pub(crate) struct Runs {
    pub(crate) small: f64,
    pub(crate) large: f64,
    /// Times per statement a tokio event loop parked (waited for events) in the large run:
    /// each park costs ~1,000 instructions of tokio's own, and how many a statement takes
    /// moves with timing (whether a reply arrived before the loop ran out of work), so rows
    /// of two builds are compared at equal parks.
    pub(crate) parks: f64,
}

impl Runs {
    /// The per-statement cost: the mean of the two runs.
    pub(crate) fn per_statement(self) -> f64 {
        (self.small + self.large) / 2.0
    }

    /// How far apart the two runs are, relative to their mean.
    fn disagreement(self) -> f64 {
        (self.small - self.large).abs() / self.per_statement()
    }
}

/// One process under callgrind.
struct Counted {
    child: Child,
    /// The process valgrind runs in (the child, or the pid a daemon wrote to its pid file).
    pid: u32,
    dir: PathBuf,
    /// Valgrind runs as the postgres user: its control pipes are found only by that user.
    as_postgres: bool,
}

/// `valgrind --tool=callgrind` writing its dumps to `dir`, to which `program` and its arguments
/// are appended.
fn callgrind(dir: &Path, as_postgres: bool) -> Command {
    let mut c = if as_postgres && proc::is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "valgrind"]);
        c
    } else {
        Command::new("valgrind")
    };
    c.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}/cg.%p", dir.display()));
    c
}

impl Counted {
    /// Starts `cmd` (a [`callgrind`] command) with its output in `dir/<name>.log` and waits for
    /// `ports` to open; `pidfile` names where a daemon writes the pid valgrind runs as.
    fn start(
        mut cmd: Command,
        dir: &Path,
        name: &str,
        ports: &[u16],
        pidfile: Option<&Path>,
    ) -> xtask::Result<Counted> {
        let log_path = dir.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let child = cmd
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start valgrind: {e}"))?;
        let up = proc::wait_until(Duration::from_secs(120), || {
            ports.iter().all(|p| proc::port_open(*p))
                && pidfile.is_none_or(|f| proc::read_pid(f).is_some())
        });
        let pid = match pidfile {
            Some(f) => proc::read_pid(f),
            None => Some(child.id()),
        };
        let counted = Counted {
            pid: pid.unwrap_or(child.id()),
            child,
            dir: dir.into(),
            as_postgres: cmd.get_program() == "runuser",
        };
        if !up || pid.is_none() {
            counted.stop();
            return Err(format!(
                "{name} under callgrind did not open {ports:?} in 120 s:\n{}",
                proc::tail(&log_path, 15)
            ));
        }
        Ok(counted)
    }

    /// Instructions and tokio event-loop parks since the last dump: dumps the counters and
    /// reads the new file.
    fn dump(&self) -> xtask::Result<(u64, u64)> {
        let before = self.dumps();
        let mut control = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", "callgrind_control"]);
            c
        } else {
            Command::new("callgrind_control")
        };
        run_capture(
            control
                .arg("-d")
                .arg(self.pid.to_string())
                .stdin(Stdio::null()),
        )?;
        let mut newest = None;
        proc::wait_until(Duration::from_secs(30), || {
            newest = self.dumps().into_iter().find(|p| !before.contains(p));
            newest.is_some()
        });
        let file = newest.ok_or("callgrind wrote no dump")?;
        // The file may still be being written: its summary line is near the top.
        let mut summary = None;
        proc::wait_until(Duration::from_secs(10), || {
            summary = std::fs::read_to_string(&file).ok().and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("summary: "))
                    .and_then(|v| v.trim().parse().ok())
            });
            summary.is_some()
        });
        let summary = summary.ok_or_else(|| format!("no summary in {}", file.display()))?;
        let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
        Ok((summary, park_calls(&text)))
    }

    fn dumps(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().contains("cg."))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn stop(mut self) {
        proc::signal(self.pid, "TERM");
        let _ = self.child.wait();
    }
}

/// The client of one statement kind, its connections open and warmed up.
struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    fn start(script: &Path, workload: &str, port: u16) -> xtask::Result<Client> {
        let mut child = Command::new("python3")
            .arg(script)
            .arg(workload)
            .arg(port.to_string())
            .arg(CLIENTS.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start python3: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("python3 has no pipes".into());
        };
        let mut client = Client {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        client.expect("ready")?;
        Ok(client)
    }

    fn expect(&mut self, what: &str) -> xtask::Result<()> {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if line.trim() == what {
            return Ok(());
        }
        let _ = self.child.kill();
        Err(format!(
            "the bench instructions client said {line:?}, not {what:?} (its error is above)"
        ))
    }

    /// Runs `n` statements and waits for them.
    fn run(&mut self, n: u64) -> xtask::Result<()> {
        writeln!(self.stdin, "{n}").map_err(|e| e.to_string())?;
        self.expect(&format!("done {n}"))
    }

    fn quit(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.wait();
    }
}

/// Counts each of `statements` through `counted`, whose ports are `mysql` and `pgsql`.
fn count(
    counted: &Counted,
    script: &Path,
    statements: &[&Statement],
    ports: (u16, u16),
    (small, large): (u64, u64),
) -> xtask::Result<Vec<Runs>> {
    let mut out = Vec::new();
    for s in statements {
        step(&format!(
            "{}: {small} then {large} statements under callgrind",
            s.name
        ));
        let port = if s.wire == Wire::Mysql {
            ports.0
        } else {
            ports.1
        };
        let mut client = Client::start(script, s.workload, port)?;
        let result: xtask::Result<Runs> = (|| {
            // One uncounted run first: what the target does once after its first statements
            // (PostgreSQL server connections Sluice opens as the sessions spread over its
            // threads) stays out of the counted runs.
            client.run(small)?;
            counted.dump()?;
            client.run(small)?;
            let (a, _) = counted.dump()?;
            client.run(large)?;
            let (b, parks) = counted.dump()?;
            Ok(Runs {
                small: a as f64 / small as f64,
                large: b as f64 / large as f64,
                parks: parks as f64 / large as f64,
            })
        })();
        client.quit();
        out.push(result?);
    }
    Ok(out)
}

/// Calls to a tokio scheduler's `Context::park` in a callgrind dump. Function names are
/// compressed: `fn=(12) name` / `cfn=(12) name` define id 12, later `(12)` refers to it; a
/// `calls=N …` line counts the calls to the `cfn` before it.
fn park_calls(dump: &str) -> u64 {
    let mut names: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    let mut to_park = false;
    let mut calls = 0;
    for line in dump.lines() {
        let (is_callee, tok) = match (line.strip_prefix("cfn="), line.strip_prefix("fn=")) {
            (Some(t), _) => (true, t),
            (None, Some(t)) => (false, t),
            (None, None) => {
                if to_park && let Some(n) = line.strip_prefix("calls=") {
                    calls += n
                        .split_whitespace()
                        .next()
                        .and_then(|c| c.parse::<u64>().ok())
                        .unwrap_or(0);
                    to_park = false;
                }
                continue;
            }
        };
        let name = match tok.strip_prefix('(').and_then(|t| t.split_once(')')) {
            Some((id, rest)) if !rest.trim().is_empty() => {
                names.insert(id, rest.trim());
                rest.trim()
            }
            Some((id, _)) => names.get(id).copied().unwrap_or(""),
            None => tok,
        };
        to_park = is_callee
            && name.starts_with("tokio::runtime::scheduler::")
            && name.ends_with("::Context::park");
    }
    calls
}

/// The client script, written where the bench keeps its state.
fn client_script(state: &Path) -> xtask::Result<PathBuf> {
    xtask::packages::ensure_python_module("mysql.connector", "mysql-connector-python")?;
    let script = state.join("bench_instructions.py");
    std::fs::write(&script, include_str!("bench_instructions.py")).map_err(|e| e.to_string())?;
    Ok(script)
}

/// Instructions per statement of every [`STATEMENTS`] kind, through `bin` running `config` (the
/// bench alloc config's ports), run under callgrind in `dir`.
pub(crate) fn measure(
    bin: &Path,
    dir: &Path,
    events: (u64, u64),
    config: &str,
) -> xtask::Result<Vec<Runs>> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let script = client_script(dir)?;
    let cfg = dir.join("sluice.toml");
    std::fs::write(&cfg, config).map_err(|e| e.to_string())?;
    let mut cmd = callgrind(dir, false);
    cmd.arg(bin)
        .arg("--config")
        .arg(&cfg)
        .arg("--initial")
        .arg("--datadir")
        .arg(dir.join("data"));
    let counted = Counted::start(cmd, dir, "sluice", &[MYSQL_PORT, PGSQL_PORT], None)?;
    let all: Vec<&Statement> = STATEMENTS.iter().collect();
    let result = count(&counted, &script, &all, (MYSQL_PORT, PGSQL_PORT), events);
    counted.stop();
    result
}

/// The peers' counts: HAProxy for the MySQL statements, PgBouncer for the PostgreSQL ones.
fn measure_peers(state: &Path, events: (u64, u64)) -> xtask::Result<Vec<Option<Runs>>> {
    let dir = state.join("bench-instructions").join("haproxy");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let script = client_script(&dir)?;
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(&cfg, crate::bench::haproxy_config(HAPROXY_PORT, 1))
        .map_err(|e| e.to_string())?;
    // One thread: under valgrind, whose threads take turns, HAProxy's two stall each other.
    let mut cmd = callgrind(&dir, false);
    cmd.arg("haproxy").arg("-db").arg("-f").arg(&cfg);
    let haproxy = Counted::start(cmd, &dir, "haproxy", &[HAPROXY_PORT], None)?;
    let mysql: Vec<&Statement> = STATEMENTS
        .iter()
        .filter(|s| s.wire == Wire::Mysql)
        .collect();
    let mysql_runs = count(&haproxy, &script, &mysql, (HAPROXY_PORT, 0), events);
    haproxy.stop();
    let mysql_runs = mysql_runs?;

    let dir = state.join("bench-instructions").join("pgbouncer");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let script = client_script(&dir)?;
    let ini = crate::bench_pgsql::pgbouncer_ini(&dir, PGBOUNCER_PORT)?;
    let pidfile = dir.join("pgbouncer.pid");
    let mut cmd = callgrind(&dir, true);
    cmd.arg("pgbouncer").arg(&ini);
    // Not pgbouncer.log: PgBouncer (as postgres) writes its own log there.
    let bouncer = Counted::start(cmd, &dir, "valgrind", &[PGBOUNCER_PORT], Some(&pidfile))?;
    // PgBouncer before 1.21 has no protocol-level prepared statements in transaction pooling
    // (Debian 12 ships 1.18): a named statement reaches another server connection.
    let pgsql: Vec<&Statement> = STATEMENTS
        .iter()
        .filter(|s| s.wire == Wire::Pgsql && s.workload != "pgsql-prepared")
        .collect();
    let pgsql_runs = count(&bouncer, &script, &pgsql, (0, PGBOUNCER_PORT), events);
    bouncer.stop();
    let mut measured = mysql
        .iter()
        .zip(mysql_runs)
        .chain(pgsql.iter().zip(pgsql_runs?));
    Ok(STATEMENTS
        .iter()
        .map(|s| {
            measured
                .by_ref()
                .find(|(m, _)| m.workload == s.workload)
                .map(|(_, r)| r)
        })
        .collect())
}

/// What `BENCH_INSTR_FEATURES_IDLE=1` adds to the config of a third column: every feature of
/// the AI-agent layer configured but idle — the MCP port listening, two workload classes (one
/// that no statement's rule names, one with a queue; the data path consults admission for
/// each), and a RAG source on the PostgreSQL side whose sync runs only when asked (its
/// embedding endpoint is never called). No agent, no sync: what is measured is what their
/// presence costs each statement.
fn features_idle() -> String {
    "[mcp_variables]\nenabled = \"true\"\nport = \"16399\"\nuse_ssl = \"false\"\n\
     [[workload_classes]]\nname = \"ingest\"\npriority = \"background\"\nmax_concurrency = 1\nmax_queue = 4\n\
     [[workload_classes]]\nname = \"reports\"\nmax_concurrency = 8\n\
     [[rag_sources]]\nsource_id = 1\nname = \"docs\"\nprotocol = \"pgsql\"\nhostgroup_id = 0\n\
     username = \"app\"\nschemaname = \"app\"\ntable_name = \"public.pgbench_branches\"\npk_column = \"bid\"\nchange_column = \"bid\"\n\
     text_template = \"{filler}\"\nworkload_class = \"ingest\"\nembedding_dimension = 384\n\
     embedding_base_url = \"http://127.0.0.1:9/v1\"\nembedding_model = \"none\"\nsync_interval_ms = 0\n"
        .to_string()
}

/// Runs the instruction benchmark and prints the table (also written to
/// target/bench-instructions.md).
pub(crate) fn instructions() -> xtask::Result<()> {
    xtask::packages::ensure_valgrind()?;
    xtask::packages::ensure_bench_tools()?;
    xtask::packages::ensure_pgbouncer()?;
    let state = crate::bench_alloc::prepare_workloads()?;
    crate::bench::build_release()?;
    let root = xtask::workspace_root();
    let large = env_num("BENCH_INSTR_EVENTS", 5_000);
    let small = (large / 5).max(u64::from(CLIENTS));
    let mut targets = vec![("sluice".to_string(), root.join("target/release/sluice"))];
    if let Some(b) = std::env::var_os("BENCH_BASELINE_BIN") {
        targets.push(("sluice-baseline".to_string(), PathBuf::from(b)));
    }
    let peers = measure_peers(&state, (small, large))?;
    let mut configs = vec![config(); targets.len()];
    if std::env::var_os("BENCH_INSTR_FEATURES_IDLE").is_some() {
        targets.push((
            "sluice-features-idle".to_string(),
            root.join("target/release/sluice"),
        ));
        configs.push(format!("{}{}", config(), features_idle()));
    }
    let mut columns = Vec::new();
    for ((name, bin), config) in targets.iter().zip(&configs) {
        let dir = state.join("bench-instructions").join(name);
        columns.push(measure(bin, &dir, (small, large), config)?);
    }
    let t = render(&targets, &peers, &columns, (small, large));
    println!("\n{t}");
    let out = root.join("target/bench-instructions.md");
    std::fs::write(&out, &t).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

fn render(
    targets: &[(String, PathBuf)],
    peers: &[Option<Runs>],
    columns: &[Vec<Runs>],
    (small, large): (u64, u64),
) -> String {
    let names: Vec<&str> = targets.iter().map(|(n, _)| n.as_str()).collect();
    let worst = peers
        .iter()
        .flatten()
        .chain(columns.iter().flatten())
        .map(|r| r.disagreement())
        .fold(0.0, f64::max);
    let mut t = format!(
        "User-space instructions per statement (callgrind; {CLIENTS} connections opened and warmed \
         up before counting; runs of {small} and {large} statements counted apart, each cell the \
         two runs' mean, the two runs within {:.2} % of each other everywhere; Sluice's monitors \
         off; peer: HAProxy (TCP) for MySQL, PgBouncer (transaction pooling) for PostgreSQL)\n\n\
         | statement | peer | {} | {} ÷ peer | runs ({small} / {large}) | event-loop parks per \
         statement ({}) |\n|---|---|{}---|---|---|\n",
        worst * 100.0,
        names.join(" | "),
        names[0],
        names.join("; "),
        "---|".repeat(names.len()),
    );
    for (i, s) in STATEMENTS.iter().enumerate() {
        let cells: Vec<String> = columns
            .iter()
            .map(|c| format!("{:.0}", c[i].per_statement()))
            .collect();
        let runs: Vec<String> = std::iter::once(peers[i].as_ref())
            .chain(columns.iter().map(|c| Some(&c[i])))
            .map(|r| r.map_or("—".into(), |r| format!("{:.0} / {:.0}", r.small, r.large)))
            .collect();
        let (peer, ratio) = match peers[i] {
            Some(p) => (
                format!("{:.0}", p.per_statement()),
                format!("{:.2}", columns[0][i].per_statement() / p.per_statement()),
            ),
            None => (
                "— (not run: no prepared statements in its transaction pooling)".into(),
                "—".into(),
            ),
        };
        let parks: Vec<String> = columns
            .iter()
            .map(|c| format!("{:.2}", c[i].parks))
            .collect();
        t.push_str(&format!(
            "| {} | {peer} | {} | {ratio} | {} | {} |\n",
            s.name,
            cells.join(" | "),
            runs.join("; "),
            parks.join("; "),
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::park_calls;

    #[test]
    fn park_calls_follow_compressed_names() {
        let dump = "\
fn=(1) tokio::runtime::scheduler::current_thread::CoreGuard::block_on
cfn=(2) tokio::runtime::scheduler::current_thread::Context::park
calls=7 0
0 700
cfn=(3) tokio::runtime::scheduler::current_thread::Context::park_yield
calls=5 0
0 50
fn=(4) other
cfn=(2)
calls=3 0
0 300
cfn=(5) tokio::runtime::scheduler::multi_thread::worker::Context::park
calls=2 0
0 20
";
        assert_eq!(park_calls(dump), 12);
    }
}
