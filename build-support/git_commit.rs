// Shared by the build scripts of `flow` and `flow-operator` (`#[path]`-included): the git commit a
// binary is built from, for `flow version`, the operator's start-up log line and its build_info
// metric.

use std::path::Path;
use std::process::Command;

/// Sets `FLOW_GIT_COMMIT` for the crate: `$FLOW_GIT_COMMIT` when set (a build from a source archive
/// can say it), else `git rev-parse --short=12 HEAD`, else `unknown`. Asks cargo to run the script
/// again when HEAD moves. (Uncommitted changes are not marked: watching the index would rebuild the
/// binaries after every `git add`.)
pub fn emit() {
    println!("cargo:rerun-if-env-changed=FLOW_GIT_COMMIT");
    let commit = std::env::var("FLOW_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string()));
    println!("cargo:rustc-env=FLOW_GIT_COMMIT={commit}");
    // HEAD (a branch name or a commit) and the branch it names; in a worktree both live in its
    // own git directory and the common one.
    for dir in [git(&["rev-parse", "--git-dir"]), git(&["rev-parse", "--git-common-dir"])].into_iter().flatten() {
        let head = Path::new(&dir).join("HEAD");
        println!("cargo:rerun-if-changed={}", head.display());
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={}", Path::new(&dir).join(branch).display());
        }
    }
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
