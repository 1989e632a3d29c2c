//! What `pinplan isolate` did, or would do, as its `--format json` prints
//! it: typed values the CLI serializes. Fields are declared in alphabetical
//! order, and the journal and undo records nested as JSON values (keys
//! sorted), the order the JSON has always had.

use super::journal::{Journal, Undone};
use super::HookOutcome;
use crate::host::journal::Envelope;
use serde::Serialize;
use std::path::PathBuf;

/// The `status` of an isolation or its undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Nothing changed: what would be.
    DryRun,
    /// The isolation was made.
    Applied,
    /// Every value restored.
    Undone,
    /// Some values could not be restored.
    PartlyUndone,
}

/// What `isolate` did, by how it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    /// `--dry-run`: the isolation it would make, or the journal an undo
    /// would restore (`notes` only for the former).
    DryRun {
        /// The journal, as it would be written or as it was read.
        isolation: serde_json::Value,
        /// Notes on the isolation.
        #[serde(skip_serializing_if = "Option::is_none")]
        notes: Option<Vec<String>>,
        /// `dry-run`.
        status: Status,
    },
    /// The isolation made.
    Applied {
        /// The journal written.
        isolation: serde_json::Value,
        /// Where it was written.
        journal: PathBuf,
        /// Notes on the isolation.
        notes: Vec<String>,
        /// `applied`.
        status: Status,
        /// The command that undoes it.
        undo: String,
    },
    /// An undo.
    Undone {
        /// `undone` or `partly-undone`.
        status: Status,
        /// What it restored and what not.
        undone: serde_json::Value,
    },
    /// The libvirt hook's call for one VM.
    Hook {
        /// What the last undo could not restore.
        failed: Vec<String>,
        /// The isolation now in effect (`null`: none).
        isolation: serde_json::Value,
        /// Notes.
        notes: Vec<String>,
        /// The VMs running (counted) after it.
        running: Vec<String>,
        /// The VM.
        vm: String,
    },
}

impl Outcome {
    /// A dry run of an isolation (with its notes) or of an undo (without).
    pub fn dry_run(journal: &Journal, notes: Option<Vec<String>>) -> Outcome {
        Outcome::DryRun {
            isolation: value(&Envelope::of(journal)),
            notes,
            status: Status::DryRun,
        }
    }

    /// The isolation made, written to `path`.
    pub fn applied(journal: &Journal, path: PathBuf, undo: String, notes: Vec<String>) -> Outcome {
        Outcome::Applied {
            isolation: value(&Envelope::of(journal)),
            journal: path,
            notes,
            status: Status::Applied,
            undo,
        }
    }

    /// An undo, `undone` when nothing failed.
    pub fn undone(done: &Undone) -> Outcome {
        Outcome::Undone {
            status: if done.failed.is_empty() {
                Status::Undone
            } else {
                Status::PartlyUndone
            },
            undone: value(done),
        }
    }

    /// The hook's call for VM `name`.
    pub fn hook(name: &str, out: &HookOutcome) -> Outcome {
        Outcome::Hook {
            failed: out.failed.clone(),
            isolation: out
                .journal
                .as_ref()
                .map_or(serde_json::Value::Null, |j| value(&Envelope::of(j))),
            notes: out.notes.clone(),
            running: out.running.iter().cloned().collect(),
            vm: name.to_owned(),
        }
    }
}

/// A record as a JSON value: its keys sorted, as they always were here.
fn value(record: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(record).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The JSON is what `json!` objects gave before these types (keys
    /// sorted), byte for byte.
    #[test]
    fn undo_and_hook_print_as_the_hand_built_objects_did() {
        let done = Undone {
            failed: vec!["irq 5".to_owned()],
            ..Undone::default()
        };
        assert_eq!(
            serde_json::to_string_pretty(&Outcome::undone(&done)).unwrap_or_default(),
            serde_json::to_string_pretty(&json!({"status": "partly-undone", "undone": done}))
                .unwrap_or_default()
        );
        let out = HookOutcome {
            running: ["b".to_owned(), "a".to_owned()].into_iter().collect(),
            journal: None,
            failed: Vec::new(),
            notes: vec!["n".to_owned()],
        };
        let running: Vec<&String> = out.running.iter().collect();
        assert_eq!(
            serde_json::to_string_pretty(&Outcome::hook("vm1", &out)).unwrap_or_default(),
            serde_json::to_string_pretty(&json!({"vm": "vm1", "running": running,
                "isolation": out.journal, "failed": out.failed, "notes": out.notes}))
            .unwrap_or_default()
        );
    }
}
