//! `cargo xtask package [--debug]`: a Debian package of Sluice, built with `dpkg-deb` from a
//! staged tree (no cargo-deb): `/usr/bin/sluice` (debug info stripped), the systemd unit, a
//! commented `/etc/sluice/sluice.toml` (a conffile), the docs, and maintainer scripts that create
//! the `sluice` system user and `/var/lib/sluice`. Files come from `packaging/`.

use crate::proc::{run_capture, step};
use crate::{Result, workspace_root};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Which build goes into the package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `target/release/sluice` (what users install).
    Release,
    /// `target/debug/sluice` (the tests' package: no second, optimised build).
    Debug,
}

impl Profile {
    fn dir(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Debug => "debug",
        }
    }
}

/// The package's version: the workspace version, Debian revision 1.
pub fn version() -> String {
    format!("{}-1", env!("CARGO_PKG_VERSION"))
}

/// Builds `target/debian/sluice_<version>_<arch>.deb` from the already built binary of
/// `profile` (or `binary` when given); returns its path.
pub fn build(profile: Profile, binary: Option<&Path>) -> Result<PathBuf> {
    let root = workspace_root();
    let bin = binary
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.join("target").join(profile.dir()).join("sluice"));
    if !bin.is_file() {
        return Err(format!("{} is not built", bin.display()));
    }
    let arch = run_capture(Command::new("dpkg").arg("--print-architecture"))?
        .trim()
        .to_string();
    let out_dir = root.join("target/debian");
    let stage = out_dir.join(format!("stage-{}", profile.dir()));
    let _ = std::fs::remove_dir_all(&stage);
    let src = root.join("packaging");
    let files: [(PathBuf, &str, u32); 9] = [
        (bin, "usr/bin/sluice", 0o755),
        (
            src.join("sluice.service"),
            "lib/systemd/system/sluice.service",
            0o644,
        ),
        (src.join("sluice.toml"), "etc/sluice/sluice.toml", 0o640),
        (
            root.join("docs/operations.md"),
            "usr/share/doc/sluice/operations.md",
            0o644,
        ),
        (
            root.join("docs/config.md"),
            "usr/share/doc/sluice/config.md",
            0o644,
        ),
        (
            root.join("docs/migrating.md"),
            "usr/share/doc/sluice/migrating.md",
            0o644,
        ),
        (src.join("postinst"), "DEBIAN/postinst", 0o755),
        (src.join("prerm"), "DEBIAN/prerm", 0o755),
        (src.join("postrm"), "DEBIAN/postrm", 0o755),
    ];
    for (from, to, mode) in &files {
        copy(from, &stage.join(to), *mode)?;
    }
    step("package: stripping debug info from usr/bin/sluice");
    run_capture(
        Command::new("strip")
            .arg("--strip-debug")
            .arg(stage.join("usr/bin/sluice")),
    )?;
    write(&stage.join("usr/share/doc/sluice/copyright"), COPYRIGHT)?;
    write(&stage.join("DEBIAN/conffiles"), "/etc/sluice/sluice.toml\n")?;
    write(&stage.join("DEBIAN/md5sums"), &md5sums(&stage, &files)?)?;
    let size_kib = dir_size(&stage)? / 1024;
    write(&stage.join("DEBIAN/control"), &control(&arch, size_kib))?;
    let deb = out_dir.join(format!("sluice_{}_{arch}.deb", version()));
    // xz for what users install; gzip for the tests' package (built on every test run).
    let compress = match profile {
        Profile::Release => "-Zxz",
        Profile::Debug => "-Zgzip",
    };
    step(&format!("package: dpkg-deb --build → {}", deb.display()));
    run_capture(
        Command::new("dpkg-deb")
            .args(["--build", "--root-owner-group", compress])
            .arg(&stage)
            .arg(&deb),
    )?;
    Ok(deb)
}

/// `DEBIAN/md5sums` of the installed files (what `dpkg --verify` checks).
fn md5sums(stage: &Path, files: &[(PathBuf, &str, u32)]) -> Result<String> {
    let mut installed: Vec<&str> = files
        .iter()
        .map(|(_, to, _)| *to)
        // Conffiles are tracked by dpkg on their own.
        .filter(|to| !to.starts_with("DEBIAN/") && !to.starts_with("etc/"))
        .collect();
    installed.push("usr/share/doc/sluice/copyright");
    let out = run_capture(Command::new("md5sum").current_dir(stage).args(&installed))?;
    Ok(out)
}

fn control(arch: &str, size_kib: u64) -> String {
    format!(
        "Package: sluice\n\
         Version: {}\n\
         Architecture: {arch}\n\
         Maintainer: Sluice developers <sluice@localhost>\n\
         Installed-Size: {size_kib}\n\
         Depends: libc6 (>= 2.34), libgcc-s1 (>= 4.2), passwd\n\
         Section: database\n\
         Priority: optional\n\
         Homepage: https://github.com/sluice-proxy/sluice\n\
         Description: SQL-aware proxy for MySQL/MariaDB and PostgreSQL\n \
         Sluice pools and multiplexes server connections, routes statements by\n \
         rules, watches the servers and fails over, and is run through ProxySQL's\n \
         SQL admin. One process serves MySQL and PostgreSQL clients.\n",
        version()
    )
}

const COPYRIGHT: &str = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
Upstream-Name: sluice\n\
Source: https://github.com/sluice-proxy/sluice\n\n\
Files: *\n\
License: Apache-2.0\n \
On Debian systems the full text of the Apache License 2.0 is in\n \
/usr/share/common-licenses/Apache-2.0.\n";

fn copy(from: &Path, to: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::copy(from, to).map_err(|e| format!("{} → {}: {e}", from.display(), to.display()))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("{}: {e}", to.display()))
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let meta = entry.metadata().map_err(|e| e.to_string())?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}
