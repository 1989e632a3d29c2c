//! What `pinplan apply` did, or would do, as its `--format json` prints it:
//! typed values the CLI serializes, as it does plans and reports. Each
//! form's fields are declared in alphabetical order, the order the JSON has
//! always had.

use super::Applied;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// The `status` of an apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The plan was in effect already: nothing changed.
    InEffect,
    /// A dry run: the preconditions hold; nothing changed.
    DryRun,
    /// The plan was applied and verified.
    Applied,
    /// `--rollback --dry-run`: what a rollback would do.
    RollbackDryRun,
    /// `--rollback`: the journal's pins are back.
    RolledBack,
}

/// One VM an apply pinned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppliedVm {
    /// Whether its config was pinned.
    pub config: bool,
    /// Whether the live domain was pinned.
    pub live: bool,
    /// Its pin calls and read-back, in milliseconds.
    pub ms: f64,
    /// The VM.
    pub name: String,
    /// Pin calls made.
    pub pin_calls: u32,
}

impl From<&Applied> for AppliedVm {
    fn from(a: &Applied) -> AppliedVm {
        AppliedVm {
            config: a.config,
            live: a.live,
            ms: millis(a.elapsed),
            name: a.vm.clone(),
            pin_calls: a.calls,
        }
    }
}

/// What `apply` did, by how it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    /// Nothing changed and no journal was written: the plan was in effect
    /// already ([`Status::InEffect`]), or a dry run ([`Status::DryRun`],
    /// with the report of what would move).
    Unchanged {
        /// No journal: always `null`.
        journal: (),
        /// A dry run's report (`report --plan` for the selected VMs).
        #[serde(skip_serializing_if = "Option::is_none")]
        report: Option<serde_json::Value>,
        /// `in-effect` or `dry-run`.
        status: Status,
        /// The plan's VMs that it could not place.
        unplaced: Vec<String>,
        /// The host's URI.
        uri: Option<String>,
        /// The VMs selected.
        vms: Vec<String>,
    },
    /// The plan was applied ([`Status::Applied`]).
    Applied {
        /// The journal written before the first change.
        journal: PathBuf,
        /// The whole command, in milliseconds.
        ms: f64,
        /// `applied`.
        status: Status,
        /// The command that undoes it.
        undo: String,
        /// The plan's VMs that it could not place.
        unplaced: Vec<String>,
        /// The host's URI.
        uri: String,
        /// Each VM pinned.
        vms: Vec<AppliedVm>,
    },
    /// What a rollback would do ([`Status::RollbackDryRun`]).
    RollbackPreview {
        /// The journal.
        journal: PathBuf,
        /// `rollback-dry-run`.
        status: Status,
        /// The host's URI.
        uri: String,
        /// One line per VM.
        vms: Vec<String>,
    },
    /// A rollback done and verified ([`Status::RolledBack`]).
    RolledBack {
        /// The journal.
        journal: PathBuf,
        /// What a user should know about VMs restored.
        notes: Vec<String>,
        /// VMs restored.
        restored: Vec<String>,
        /// `rolled-back`.
        status: Status,
        /// The host's URI.
        uri: String,
    },
}

impl Outcome {
    /// A dry run: the selected VMs, and the report of what would move (a
    /// `report::Report`, taken as any serializable value so that apply
    /// stays below the report stage).
    pub fn dry_run(
        uri: Option<&str>,
        vms: Vec<String>,
        unplaced: &[String],
        report: &impl Serialize,
    ) -> Outcome {
        Outcome::Unchanged {
            journal: (),
            report: Some(serde_json::to_value(report).unwrap_or_default()),
            status: Status::DryRun,
            unplaced: unplaced.to_vec(),
            uri: uri.map(str::to_owned),
            vms,
        }
    }

    /// The text `--format json` prints: pretty, with a final newline.
    pub fn to_json(&self) -> String {
        let mut out = serde_json::to_string_pretty(self).unwrap_or_default();
        out.push('\n');
        out
    }
}

/// A duration in milliseconds to a tenth, as apply's JSON gives times.
pub fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The JSON is what `json!` objects gave before these types (keys
    /// sorted), byte for byte: each form against the object built by hand.
    #[test]
    fn each_form_prints_as_the_hand_built_object_did() {
        let pretty = |v: serde_json::Value| {
            let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
            s.push('\n');
            s
        };
        let unplaced = vec!["ghost".to_owned()];
        let in_effect = Outcome::Unchanged {
            journal: (),
            report: None,
            status: Status::InEffect,
            unplaced: unplaced.clone(),
            uri: Some("qemu:///system".to_owned()),
            vms: vec!["vm1".to_owned()],
        };
        assert_eq!(
            in_effect.to_json(),
            pretty(
                json!({"status": "in-effect", "uri": "qemu:///system", "vms": ["vm1"],
                          "unplaced": unplaced, "journal": null})
            )
        );
        let applied = Outcome::Applied {
            journal: PathBuf::from("/j.json"),
            ms: 12.5,
            status: Status::Applied,
            undo: "pinplan apply --rollback /j.json".to_owned(),
            unplaced: Vec::new(),
            uri: "test:///default".to_owned(),
            vms: vec![AppliedVm::from(&Applied {
                vm: "vm1".to_owned(),
                live: true,
                config: false,
                calls: 3,
                elapsed: Duration::from_micros(2345),
                memory: false,
            })],
        };
        assert_eq!(
            applied.to_json(),
            pretty(
                json!({"status": "applied", "uri": "test:///default", "journal": "/j.json",
                          "undo": "pinplan apply --rollback /j.json",
                          "vms": [{"name": "vm1", "live": true, "config": false,
                                   "pin_calls": 3, "ms": 2.3}],
                          "unplaced": [], "ms": 12.5})
            )
        );
        let preview = Outcome::RollbackPreview {
            journal: PathBuf::from("/j.json"),
            status: Status::RollbackDryRun,
            uri: "u".to_owned(),
            vms: vec!["vm1: as journalled".to_owned()],
        };
        assert_eq!(
            preview.to_json(),
            pretty(
                json!({"status": "rollback-dry-run", "uri": "u", "journal": "/j.json",
                          "vms": ["vm1: as journalled"]})
            )
        );
        let rolled = Outcome::RolledBack {
            journal: PathBuf::from("/j.json"),
            notes: vec!["n".to_owned()],
            restored: vec!["vm1".to_owned()],
            status: Status::RolledBack,
            uri: "u".to_owned(),
        };
        assert_eq!(
            rolled.to_json(),
            pretty(
                json!({"status": "rolled-back", "uri": "u", "journal": "/j.json",
                          "restored": ["vm1"], "notes": ["n"]})
            )
        );
    }
}
