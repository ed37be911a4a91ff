//! Stamps the binary with the commit it was built from (the checked-out one: edits not yet committed are not marked) and the build profile, for
//! `sluice --version` (`0.1.0 (1933525, release)`). A build outside a git checkout says `unknown`.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=10", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=SLUICE_COMMIT={commit}");
    println!("cargo:rustc-env=SLUICE_PROFILE={profile}");
    // Rebuilt when the checked-out commit moves (HEAD, or the branch it points to).
    let git_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.git");
    println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
    if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD"))
        && let Some(r) = head.trim().strip_prefix("ref: ")
    {
        println!("cargo:rerun-if-changed={}", git_dir.join(r).display());
    }
}
