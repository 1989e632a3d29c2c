//! Build facts for `pinplan --version`: the git revision of the tree the
//! binary is built from (`PINPLAN_GIT_REVISION`: a 12-digit short hash, with
//! `-dirty` when the tree has changes, or `unknown` outside a git checkout or
//! without git) and the version of the CBC library it links
//! (`PINPLAN_CBC_VERSION`, from pkg-config as coin_cbc_sys links it; empty
//! when unknown or not built with CBC).
//!
//! It reruns only when the checked-out commit changes (`HEAD`, the branch it
//! points to, packed refs, the index) or a source the binary is built from
//! does, so a rebuild that happens anyway pays one `git status`, and a build
//! that has nothing to do pays nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let revision = revision(&manifest).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PINPLAN_GIT_REVISION={revision}");
    let cbc = std::env::var_os("CARGO_FEATURE_CBC")
        .and_then(|_| output(Command::new("pkg-config").args(["--modversion", "cbc"])))
        .unwrap_or_default();
    println!("cargo:rustc-env=PINPLAN_CBC_VERSION={cbc}");
    println!("cargo:rerun-if-changed=build.rs");
    for path in watched(&manifest) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// `git rev-parse --short=12 HEAD`, plus `-dirty` when `git status
/// --porcelain` lists anything; `None` outside a checkout or without git.
fn revision(manifest: &Path) -> Option<String> {
    let hash = output(git(manifest).args(["rev-parse", "--short=12", "HEAD"]))?;
    let status = output(git(manifest).args(["status", "--porcelain"]));
    Some(match status {
        Some(changes) if !changes.is_empty() => format!("{hash}-dirty"),
        _ => hash,
    })
}

/// What a change of the revision or of its cleanliness goes through: the
/// git files that move with a commit or a checkout, and the sources (the
/// workspace's manifests, both packages, the docs that `pinplan help`
/// embeds). Outside a checkout, only the sources.
fn watched(manifest: &Path) -> Vec<PathBuf> {
    let root = manifest.parent().unwrap_or(manifest);
    let mut paths: Vec<PathBuf> = ["Cargo.toml", "Cargo.lock", "cli/src", "planner", "docs"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    let mut git_paths = vec![
        "HEAD".to_owned(),
        "packed-refs".to_owned(),
        "index".to_owned(),
    ];
    if let Some(branch) = output(git(manifest).args(["symbolic-ref", "-q", "HEAD"])) {
        git_paths.push(branch);
    }
    for name in git_paths {
        // --git-path knows worktrees: HEAD and the index are the worktree's,
        // refs the repository's.
        if let Some(path) = output(git(manifest).args(["rev-parse", "--git-path", &name])) {
            let path = manifest.join(path);
            if path.exists() {
                paths.push(path);
            }
        }
    }
    paths
}

fn git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir);
    command
}

/// A command's standard output, trimmed, when it ran and succeeded.
fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
