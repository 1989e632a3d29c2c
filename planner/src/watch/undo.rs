//! `pinplan watch --undo`: every pin the watcher (and `repack`) set, put
//! back as it was, from their journals in the state directory, the latest
//! first — as `pinplan apply --rollback` does each one.

use super::pin::JOURNAL_PREFIX;
use super::WatchError;
use crate::interrupt::Interrupt;
use crate::libvirt::apply::{lock, Journal, JournalStatus, Session};
use std::path::{Path, PathBuf};

/// What one journal's undo did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    /// The journal.
    pub journal: PathBuf,
    /// The VMs put back (with `--dry-run`: what would be done, per VM).
    pub vms: Vec<String>,
    /// Why it could not be undone, when it could not.
    pub error: Option<String>,
}

/// The watcher's journals for `uri` in `dir` not rolled back yet, the
/// latest first (by the time and count in their names).
pub fn journals(dir: &Path, uri: &str) -> Vec<(PathBuf, Journal)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(Vec<u64>, PathBuf, Journal)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            let stem = name.strip_prefix(JOURNAL_PREFIX)?.strip_suffix(".json")?;
            let order: Vec<u64> = stem.split('-').filter_map(|n| n.parse().ok()).collect();
            let journal = Journal::load(&path, None).ok()?;
            let ours = lock::host_key(&journal.uri) == lock::host_key(uri);
            let undone = journal.status == JournalStatus::RolledBack;
            (ours && !undone).then_some((order, path, journal))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, p, j)| (p, j)).collect()
}

/// Undoes every journal of [`journals`] in order (with `dry_run` says what
/// it would do); stops at the first that cannot be undone, since the ones
/// before it restored what it changed from.
pub fn undo(uri: &str, dry_run: bool) -> Result<Vec<Undone>, WatchError> {
    let dir = crate::state::state_dir_path()?;
    let session = Session::open(uri)?;
    let _lock = if dry_run {
        None
    } else {
        Some(lock::lock(uri, &mut |_| {})?)
    };
    let mut out = Vec::new();
    for (path, journal) in journals(&dir, uri) {
        if dry_run {
            out.push(Undone {
                vms: session.rollback_preview(&journal),
                journal: path,
                error: None,
            });
            continue;
        }
        let _ = journal.mark(&path, JournalStatus::RollingBack);
        let done = session.rollback(&journal, false, &Interrupt::new());
        let failed = !done.errors.is_empty();
        if !failed {
            let _ = journal.mark(&path, JournalStatus::RolledBack);
        }
        out.push(Undone {
            journal: path,
            vms: done.restored,
            error: failed.then(|| done.errors.join("; ")),
        });
        if failed {
            break;
        }
    }
    Ok(out)
}
