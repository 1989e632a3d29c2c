//! How `apply` and its rollback fail: refused before any change, the journal
//! not written, a pin call that failed (and what the restore did), a
//! rollback that could not restore everything.

use super::Failure;
use crate::error::{Diagnostic, Exit};
use crate::interrupt::Signal;
use std::path::{Path, PathBuf};

/// A precondition that failed for one VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The VM.
    pub vm: String,
    /// Why it cannot be applied.
    pub reason: String,
}

/// Why `apply` (or its rollback) did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A precondition failed: nothing was changed.
    #[error("{} cannot be applied to {uri}; nothing was changed:\n{}", plan.display(), problems.iter().map(|p| format!("  {}: {}", p.vm, p.reason)).collect::<Vec<_>>().join("\n"))]
    Refused {
        /// The plan file.
        plan: PathBuf,
        /// The libvirt URI.
        uri: String,
        /// Every precondition that failed.
        problems: Vec<Problem>,
    },
    /// The plan places no VM: there is nothing to pin.
    #[error("nothing to apply: the plan {} places no VM{}", plan.display(), if unplaced.is_empty() { String::new() } else { format!(" (not placed: {})", unplaced.join(", ")) })]
    NothingToApply {
        /// The plan file.
        plan: PathBuf,
        /// The VMs it could not place.
        unplaced: Vec<String>,
    },
    /// An earlier apply (or rollback) on the host did not finish: its
    /// journal is still `applying` (killed, interrupted, its restore failed).
    /// A new journal would record the half-changed VMs as "before".
    #[error("an earlier apply on {uri} did not finish (journal {}{}): undo it first with {}{}", first(journals).path.display(), first(journals).started.map(|s| format!(", started {}", super::journal::utc(s))).unwrap_or_default(), rollback_command(&first(journals).path), more(journals))]
    Unfinished {
        /// The URI this apply was for.
        uri: String,
        /// The unfinished journals of the host, the latest first (never empty).
        journals: Vec<super::Unfinished>,
    },
    /// The state directory (where journals go) cannot be had.
    #[error("cannot find or create the journal directory; nothing was changed")]
    StateDir(#[source] crate::state::StateError),
    /// The journal could not be written: nothing was changed.
    #[error("cannot write the journal; nothing was changed")]
    Journal(#[source] crate::error::WriteError),
    /// A pin call or read-back failed; what was touched was restored.
    #[error("{}: {}\n{}", failure.vm, failure.error, restore_state(failure, &retry(journal, uri)))]
    Failed {
        /// What happened.
        failure: Box<Failure>,
        /// The journal written before the first change.
        journal: PathBuf,
        /// The libvirt URI.
        uri: String,
    },
    /// An interrupt request (SIGINT, SIGTERM) stopped the apply before it
    /// was done: what it had changed was restored from the journal, or, when
    /// a second request stopped that restore, the way to finish it is said.
    #[error("{}", interrupted_text(failure, &retry(journal, uri), journal))]
    Interrupted {
        /// What happened (its error is [`StepError::Interrupted`](super::StepError::Interrupted)).
        failure: Box<Failure>,
        /// The journal written before the first change.
        journal: PathBuf,
        /// The libvirt URI.
        uri: String,
    },
    /// A rollback that could not restore every VM.
    #[error("{}the rollback did not restore everything:\n  {}\nrestored: {}", interrupted.map(|_| format!("interrupted again: the host is partly restored; finish with: {}\n", retry(journal, uri))).unwrap_or_default(), errors.join("\n  "), if restored.is_empty() { "none".to_owned() } else { restored.join(", ") })]
    Rollback {
        /// The journal.
        journal: PathBuf,
        /// The libvirt URI.
        uri: String,
        /// VMs restored.
        restored: Vec<String>,
        /// What could not be restored.
        errors: Vec<String>,
        /// A second interrupt request stopped it.
        interrupted: Option<Signal>,
    },
}

impl ApplyError {
    /// The error of an apply that failed ([`ApplyError::Failed`]) or was
    /// interrupted ([`ApplyError::Interrupted`]).
    pub fn of_failure(failure: Box<Failure>, journal: &Path, uri: &str) -> ApplyError {
        let (journal, uri) = (journal.to_owned(), uri.to_owned());
        if failure.interrupted().is_some() {
            ApplyError::Interrupted {
                failure,
                journal,
                uri,
            }
        } else {
            ApplyError::Failed {
                failure,
                journal,
                uri,
            }
        }
    }
}

/// What an interrupted apply says: `interrupted (SIGINT): restored vm1, vm2
/// as they were; journal: J`, or how to finish a restore a second request
/// stopped.
fn interrupted_text(failure: &Failure, retry: &str, journal: &Path) -> String {
    let signal = failure.interrupted().unwrap_or(Signal::Int);
    if failure.restore_interrupted.is_some() {
        return format!(
            "interrupted again: the host is partly restored; finish with: {retry}\nnot restored:\n  {}\nrestored: {}",
            failure.restore_errors.join("\n  "),
            restored_list(failure)
        );
    }
    if !failure.changed {
        return format!(
            "interrupted ({signal}) before the first change: nothing was changed; journal: {}",
            journal.display()
        );
    }
    if failure.restore_errors.is_empty() {
        return format!(
            "interrupted ({signal}): restored {} as they were; journal: {}",
            failure.restored.join(", "),
            journal.display()
        );
    }
    format!(
        "interrupted ({signal}), and the restore failed, so these are NOT as they were:\n  {}\nrestored: {}\nretry with: {retry}",
        failure.restore_errors.join("\n  "),
        restored_list(failure)
    )
}

fn restored_list(failure: &Failure) -> String {
    if failure.restored.is_empty() {
        "none".to_owned()
    } else {
        failure.restored.join(", ")
    }
}

/// `NAME-2.EXT` (or -3, …): a name beside `taken` that does not exist yet.
fn free_name(taken: &Path) -> PathBuf {
    let stem = taken
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = taken
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (2u32..1000)
        .map(|n| taken.with_file_name(format!("{stem}-{n}{ext}")))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or_else(|| taken.with_file_name(format!("{stem}-new{ext}")))
}

/// Refuses a `--journal` path that exists (any file, link or directory)
/// before anything is read or changed.
pub fn check_journal_is_new(path: &Path) -> Result<(), ApplyError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Err(ApplyError::Journal(crate::error::WriteError {
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it already exists"),
        })),
        Err(_) => Ok(()),
    }
}

fn first(journals: &[super::Unfinished]) -> super::Unfinished {
    journals.first().cloned().unwrap_or(super::Unfinished {
        path: PathBuf::new(),
        uri: String::new(),
        started: None,
        status: super::JournalStatus::Applying,
    })
}

fn more(journals: &[super::Unfinished]) -> String {
    if journals.len() < 2 {
        return String::new();
    }
    let rest: Vec<String> = journals[1..]
        .iter()
        .map(|j| j.path.display().to_string())
        .collect();
    format!(
        " (then the older unfinished {}: {})",
        if rest.len() == 1 { "one" } else { "ones" },
        rest.join(", ")
    )
}

/// `pinplan apply --rollback J` (the journal names its URI).
pub fn rollback_command(journal: &Path) -> String {
    format!("pinplan apply --rollback {}", journal.display())
}

/// The command that puts the journalled VMs back.
pub fn retry(journal: &Path, uri: &str) -> String {
    format!(
        "pinplan apply --rollback {} --connect {uri}",
        journal.display()
    )
}

/// How the host stands after a failed apply.
fn restore_state(failure: &Failure, retry: &str) -> String {
    if failure.restore_interrupted.is_some() {
        format!(
            "interrupted again: the host is partly restored; finish with: {retry}\nnot restored:\n  {}\nrestored: {}",
            failure.restore_errors.join("\n  "),
            restored_list(failure)
        )
    } else if !failure.changed {
        "no pin call had succeeded: nothing was changed".to_owned()
    } else if failure.restore_errors.is_empty() {
        format!(
            "restored {} from the journal and verified: the host is back as it was",
            failure.restored.join(", ")
        )
    } else {
        format!(
            "the restore failed too, so these are NOT as they were:\n  {}\nrestored: {}\nretry with: {retry}",
            failure.restore_errors.join("\n  "),
            if failure.restored.is_empty() {
                "none".to_owned()
            } else {
                failure.restored.join(", ")
            }
        )
    }
}

impl Diagnostic for ApplyError {
    fn hint(&self) -> Option<String> {
        match self {
            ApplyError::Journal(e) if e.source.kind() == std::io::ErrorKind::AlreadyExists => {
                Some(format!(
                    "a journal is never overwritten (it may be the only record of how the VMs \
                     were): give a new name, e.g. --journal {}",
                    free_name(&e.path).display()
                ))
            }
            ApplyError::Journal(_) => Some("give a writable path with --journal FILE".to_owned()),
            ApplyError::Rollback { journal, uri, .. } => Some(format!(
                "fix the cause and run again: {}",
                retry(journal, uri)
            )),
            ApplyError::NothingToApply { .. } => Some(
                "see the plan's explanations (`pinplan plan SPEC`) for why no VM fits".to_owned(),
            ),
            ApplyError::Unfinished { .. } => Some(
                "see what it would restore with --rollback J --dry-run; --force applies anyway \
                 (the new journal records the VMs as they are now) and lets apply's other \
                 refusals through too: another host's plan whose CPUs and NUMA nodes this host \
                 has, domains on the planned cores (each said as a warning)"
                    .to_owned(),
            ),
            ApplyError::StateDir(e) => e.hint(),
            ApplyError::Refused { .. }
            | ApplyError::Failed { .. }
            | ApplyError::Interrupted { .. } => None,
        }
    }

    fn exit(&self) -> Exit {
        match self {
            ApplyError::Refused { .. }
            | ApplyError::Journal(_)
            | ApplyError::Unfinished { .. }
            | ApplyError::StateDir(_) => Exit::Error,
            ApplyError::Failed { failure, .. } | ApplyError::Interrupted { failure, .. } => {
                match (failure.restore_interrupted, failure.interrupted()) {
                    (Some(signal), _) | (None, Some(signal)) => Exit::Interrupted(signal),
                    (None, None) => Exit::No,
                }
            }
            ApplyError::Rollback {
                interrupted: Some(signal),
                ..
            } => Exit::Interrupted(*signal),
            ApplyError::Rollback { .. } | ApplyError::NothingToApply { .. } => Exit::No,
        }
    }
}
