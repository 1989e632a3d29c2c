//! How `apply` and its rollback fail: refused before any change, the journal
//! not written, a pin call that failed (and what the restore did), a
//! rollback that could not restore everything.

use super::Failure;
use crate::error::{Diagnostic, Exit};
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
    /// A rollback that could not restore every VM.
    #[error("the rollback did not restore everything:\n  {}\nrestored: {}", errors.join("\n  "), if restored.is_empty() { "none".to_owned() } else { restored.join(", ") })]
    Rollback {
        /// The journal.
        journal: PathBuf,
        /// The libvirt URI.
        uri: String,
        /// VMs restored.
        restored: Vec<String>,
        /// What could not be restored.
        errors: Vec<String>,
    },
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

/// The command that puts the journalled VMs back.
pub fn retry(journal: &Path, uri: &str) -> String {
    format!(
        "pinplan apply --rollback {} --connect {uri}",
        journal.display()
    )
}

/// How the host stands after a failed apply.
fn restore_state(failure: &Failure, retry: &str) -> String {
    if !failure.changed {
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
            ApplyError::Refused { .. } | ApplyError::Failed { .. } => None,
        }
    }

    fn exit(&self) -> Exit {
        match self {
            ApplyError::Refused { .. } | ApplyError::Journal(_) => Exit::Error,
            ApplyError::Failed { .. }
            | ApplyError::Rollback { .. }
            | ApplyError::NothingToApply { .. } => Exit::No,
        }
    }
}
