//! Whether the test servers an end-to-end test needs are up, and the lock that keeps a test
//! that stops or reconfigures them apart from the others.

use crate::ports;
use std::io::Write;

/// The test servers an end-to-end test talks to, each a primary + replica pair started by
/// `cargo xtask backends up`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Servers {
    /// MariaDB on :13306 / :13307.
    MariaDb,
    /// PostgreSQL on :15432 / :15433.
    Postgres,
    /// Both pairs.
    Both,
}

impl Servers {
    /// The pairs this value names, with their ports.
    fn pairs(self) -> &'static [(&'static str, u16, u16)] {
        const MARIADB: (&str, u16, u16) = ("MariaDB", ports::MY_PRIMARY, ports::MY_REPLICA);
        const POSTGRES: (&str, u16, u16) = ("PostgreSQL", ports::PG_PRIMARY, ports::PG_REPLICA);
        match self {
            Servers::MariaDb => &[MARIADB],
            Servers::Postgres => &[POSTGRES],
            Servers::Both => &[MARIADB, POSTGRES],
        }
    }
}

/// Whether the calling test should run: true when `servers` are reachable.
///
/// A missing server fails the test with the command that starts it — unless
/// `SLUICE_SKIP_BACKENDS=1` is set, when the test says on the terminal that it is skipped and
/// the caller returns. A test never passes by skipping unless it was asked to.
///
/// The calling test also takes a shared hold on the backends for as long as its thread runs, so
/// a test that stops or reconfigures them ([`backends_exclusive`]) waits for it and it waits
/// for such a test — across processes too, as under cargo-nextest.
pub fn backends_ready(servers: Servers) -> bool {
    backends_held(servers, Hold::Shared)
}

/// [`backends_ready`] for a test that stops, promotes or reconfigures the backends: it runs
/// alone, with no other backend test of any process running meanwhile.
pub fn backends_exclusive(servers: Servers) -> bool {
    backends_held(servers, Hold::Exclusive)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Hold {
    Shared,
    Exclusive,
}

thread_local! {
    /// The lock file this test thread holds, and how.
    static HELD: std::cell::RefCell<Option<(Hold, std::fs::File)>> = const { std::cell::RefCell::new(None) };
}

fn backends_held(servers: Servers, want: Hold) -> bool {
    // The hold comes first: a test that stops a server holds it exclusively until it is back.
    hold_backends(want);
    let missing: Vec<String> = servers
        .pairs()
        .iter()
        .filter(|(_, p, r)| !(xtask::proc::port_open(*p) && xtask::proc::port_open(*r)))
        .map(|(name, p, r)| format!("{name} on :{p}/:{r}"))
        .collect();
    if missing.is_empty() {
        return true;
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let missing = missing.join(" and ");
    if std::env::var("SLUICE_SKIP_BACKENDS").as_deref() != Ok("1") {
        panic!(
            "{test}: the test backends are not running ({missing} unreachable). \
             Start them with `cargo xtask backends up` (or run the whole suite with \
             `cargo xtask test`); set SLUICE_SKIP_BACKENDS=1 to skip end-to-end tests instead"
        );
    }
    // Straight to the terminal: libtest captures only the print macros.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {missing} unreachable and SLUICE_SKIP_BACKENDS=1"
    );
    false
}

/// Takes `want` on the backends' lock file for this test thread (kept until the thread ends).
fn hold_backends(want: Hold) {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        // One test thread may run several tests (--test-threads=1): a hold is kept or swapped.
        if held.as_ref().is_some_and(|(h, _)| *h == want) {
            return;
        }
        *held = None;
        let path = xtask::workspace_root().join("target/sluice-test-backends.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        match want {
            Hold::Shared => file.lock_shared(),
            Hold::Exclusive => file.lock(),
        }
        .unwrap_or_else(|e| panic!("locking {}: {e}", path.display()));
        *held = Some((want, file));
    });
}
