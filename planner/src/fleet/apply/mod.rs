//! `apply --fleet DIR`: every host of a fleet plan directory applied through
//! its own libvirt URI, each all or nothing with its own journal as `apply
//! PLAN` does (`libvirt::apply`), in four steps:
//!
//! 1. **Lock** every host (the same lock as `apply PLAN`, taken in one order
//!    so that two fleet runs cannot deadlock).
//! 2. **Prepare** every host in parallel, a bounded number at a time, each
//!    within a time limit: its topology, every VM's preconditions and the
//!    pins to journal ([`check`](crate::libvirt::apply::host::check), then [`Checked::prepare`](crate::libvirt::apply::host::Checked::prepare)). Nothing changes.
//! 3. **Journal**: the fleet journal (which host journals belong to this
//!    run), then each host's journal, before the first change anywhere.
//! 4. **Apply** every prepared host in parallel. A host that fails is
//!    restored from its journal and named; the others stay applied. With
//!    `all_or_nothing`, no host changes unless every host was prepared, no
//!    host starts after one failed, and the hosts applied are rolled back
//!    from their journals when one fails.
//!
//! `apply --rollback FLEET-JOURNAL` puts every host back ([`FleetJournal::rollback`]).

mod journal;
mod run;
mod text;

pub use journal::{FleetRollback, HostJournalError, HostRollback, RollbackState, RollbackStatus};
pub use run::apply;
pub use text::journal_line;

use crate::error::{Diagnostic, Exit, WriteError};
use crate::interrupt::Interrupt;
use crate::libvirt::apply::{lock, Applied, Failure, Restored, Scope};
use crate::report::Report;
use crate::topology::HostTopology;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which host journals one `apply --fleet` wrote: written before the first
/// change, beside them, in the journals' envelope ([`crate::host::journal`],
/// tool `pinplan apply --fleet`; version 1, `"pinplan_fleet_journal": 1`,
/// is read too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetJournal {
    /// The fleet plan directory applied.
    pub fleet: PathBuf,
    /// The hosts to be changed.
    pub hosts: Vec<JournalHost>,
}

/// One host of a fleet journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalHost {
    /// The host.
    pub name: String,
    /// Its libvirt URI.
    pub uri: String,
    /// Its journal's file name, in the fleet journal's directory.
    pub journal: String,
}

/// How to apply a fleet.
pub struct FleetApplyOptions<'a> {
    /// Live, config or both.
    pub scope: Scope,
    /// Only these VMs (all when empty).
    pub vms: &'a [String],
    /// Apply even if domains outside a host's plan are pinned onto its CPUs.
    pub force: bool,
    /// Check and say what would change; change nothing, write nothing.
    pub dry_run: bool,
    /// No host changes unless every host can be, and stays changed only if
    /// every host was.
    pub all_or_nothing: bool,
    /// The fleet journal to write (host journals go beside it).
    pub journal: PathBuf,
    /// Hosts worked on at once.
    pub concurrency: usize,
    /// How long one host may take to be prepared.
    pub timeout: Duration,
    /// Told `(stage, hosts done, hosts)` as hosts finish a stage
    /// (`checking`, `applying`, `rolling back`): a progress line.
    pub progress: &'a (dyn Fn(&str, usize, usize) + Sync),
    /// Told the fleet journal's path once it is written, before the first
    /// change (so that a run killed mid-apply has said how to undo it).
    pub journaled: &'a (dyn Fn(&Path) + Sync),
    /// Told just before the first journal is written: from then on the run
    /// changes hosts (the CLI's signal handling stops ending the process at
    /// once, and asks [`Self::interrupt`] to stop instead).
    pub changing: &'a (dyn Fn() + Sync),
    /// Checked before each pin call on every host: a request stops each
    /// host's apply and restores it from its journal; a second stops the
    /// restores too.
    pub interrupt: &'a Interrupt,
}

/// The pin-call hook of one host (fault injection in tests).
pub type Hook = Box<dyn FnMut(u32) -> Result<(), crate::libvirt::apply::HookRefusal> + Send>;

/// What happened on one host.
pub enum HostStatus {
    /// None of its VMs were asked for (or the plan put none there).
    Skipped,
    /// It could not be prepared: nothing was changed on it.
    Refused {
        /// Why (the whole error, with its hint).
        error: String,
        /// Whether it is a "no" or an error.
        exit: Exit,
    },
    /// Dry run: the preconditions hold; what would change.
    DryRun {
        /// The VMs.
        vms: Vec<String>,
        /// The report of the plan against the host now.
        report: Box<Report>,
        /// The host's topology (the report's text needs it).
        host: Box<HostTopology>,
    },
    /// Its VMs have their planned pins already: nothing changed.
    InEffect {
        /// The VMs.
        vms: Vec<String>,
    },
    /// `all_or_nothing` and another host was refused or failed: not
    /// changed although it could have been.
    Held {
        /// The VMs.
        vms: Vec<String>,
    },
    /// Applied and verified.
    Applied {
        /// Per VM.
        vms: Vec<Applied>,
        /// Its journal.
        journal: PathBuf,
    },
    /// A pin call or read-back failed: restored from its journal.
    Failed {
        /// The error (what failed, and how the host stands).
        error: String,
        /// What happened.
        failure: Box<Failure>,
        /// Its journal.
        journal: PathBuf,
    },
    /// Applied, then rolled back because another host failed
    /// (`all_or_nothing`).
    RolledBack {
        /// Its journal.
        journal: PathBuf,
        /// What the rollback did.
        restored: Restored,
    },
}

/// One host's outcome.
pub struct HostOutcome {
    /// The host.
    pub name: String,
    /// Its libvirt URI.
    pub uri: Option<String>,
    /// What happened.
    pub status: HostStatus,
}

/// What `apply --fleet` did.
pub struct FleetApplied {
    /// The directory applied.
    pub fleet: PathBuf,
    /// Per host, in the directory's order.
    pub hosts: Vec<HostOutcome>,
    /// The fleet journal, when one was written.
    pub journal: Option<PathBuf>,
    /// Whether it was all or nothing.
    pub all_or_nothing: bool,
    /// Running VMs the plan moves: to be migrated (by libvirt, not pinplan)
    /// before their new host can pin them.
    pub moves: Vec<super::inventory::Move>,
}

/// Why a fleet apply did not start; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum FleetApplyError {
    /// The inventory is not a plan directory.
    #[error("{} is not a fleet plan directory", path.display())]
    NotPlanned {
        /// What was given.
        path: PathBuf,
    },
    /// `--vm` names a VM no host's plan places.
    #[error("no host of {} plans {}", fleet.display(), names.join(", "))]
    UnknownVm {
        /// The directory.
        fleet: PathBuf,
        /// The names.
        names: Vec<String>,
        /// The VMs the hosts plan.
        placed: Vec<String>,
    },
    /// A journal file exists already.
    #[error("cannot write the journal; nothing was changed")]
    Journal(#[source] WriteError),
    /// A host's lock could not be taken.
    #[error(transparent)]
    Lock(#[from] lock::LockError),
}

impl Diagnostic for FleetApplyError {
    fn hint(&self) -> Option<String> {
        match self {
            FleetApplyError::NotPlanned { .. } => Some(
                "apply takes the directory `pinplan plan FLEET.toml --out DIR` wrote".to_owned(),
            ),
            FleetApplyError::UnknownVm { placed, .. } => {
                Some(format!("VMs the hosts plan: {}", placed.join(", ")))
            }
            FleetApplyError::Journal(_) => Some(
                "a journal is never overwritten: give a new name with --journal FILE".to_owned(),
            ),
            FleetApplyError::Lock(e) => e.hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::journal::host_journal;
    use super::*;
    use crate::host::journal::ReadError;
    use crate::interrupt::Signal;

    #[test]
    fn host_journals_sit_beside_the_fleet_journal() {
        assert_eq!(
            host_journal(Path::new("/tmp/j/pinplan-fleet-journal-5-7.json"), "b1"),
            PathBuf::from("/tmp/j/pinplan-fleet-journal-5-7-b1.json")
        );
        assert_eq!(
            host_journal(Path::new("undo"), "jy"),
            PathBuf::from("undo-jy.json")
        );
    }

    #[test]
    fn a_fleet_journal_is_told_from_a_host_journal() {
        let dir = tempfile::tempdir().unwrap();
        let fleet = dir.path().join("f.json");
        std::fs::write(
            &fleet,
            r#"{"pinplan_fleet_journal": 1, "fleet": "out", "hosts": [{"name": "b1", "uri": "qemu:///system", "journal": "f-b1.json"}]}"#,
        )
        .unwrap();
        let j = FleetJournal::load_if(&fleet).unwrap().unwrap();
        assert_eq!(j.hosts[0].journal, "f-b1.json");
        let host = dir.path().join("h.json");
        std::fs::write(&host, r#"{"pinplan_journal": 1, "uri": "x", "vms": []}"#).unwrap();
        assert!(FleetJournal::load_if(&host).unwrap().is_none());
        std::fs::write(
            &fleet,
            r#"{"pinplan_fleet_journal": 9, "fleet": "o", "hosts": []}"#,
        )
        .unwrap();
        assert!(matches!(
            FleetJournal::load_if(&fleet),
            Err(ReadError::Version { version: 9, .. })
        ));
    }

    /// Issue 29: a fleet journal exactly as version 1 wrote it (its key
    /// `pinplan_fleet_journal` where the envelope has `tool` and `version`)
    /// reads as the same value; written now, it is in the envelope and
    /// reads the same again.
    #[test]
    fn issue_29_a_version_1_fleet_journal_reads_as_the_same_value() {
        const V1: &str = include_str!("../../../../tests/fixtures/journals/fleet-v1.json");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.json");
        std::fs::write(&path, V1).unwrap();
        let expected = FleetJournal {
            fleet: PathBuf::from("out"),
            hosts: vec![JournalHost {
                name: "t".to_owned(),
                uri: "test:///default".to_owned(),
                journal: "f-t.json".to_owned(),
            }],
        };
        assert_eq!(
            FleetJournal::load_if(&path).unwrap(),
            Some(expected.clone())
        );
        let now = dir.path().join("now.json");
        crate::host::journal::write(&now, &expected, crate::host::journal::Write::New).unwrap();
        assert_eq!(
            std::fs::read_to_string(&now).unwrap(),
            V1.replacen(
                "\"pinplan_fleet_journal\": 1,",
                "\"tool\": \"pinplan apply --fleet\",\n  \"version\": 2,",
                1
            )
        );
        assert_eq!(FleetJournal::load_if(&now).unwrap(), Some(expected));
    }

    /// A fleet journal that names a host journal outside its directory is
    /// not followed; a host whose journal was never written changed nothing;
    /// a journal written for another URI is refused.
    #[test]
    fn a_fleet_journal_cannot_point_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let host = |journal: &str| JournalHost {
            name: "h".to_owned(),
            uri: "test:///default".to_owned(),
            journal: journal.to_owned(),
        };
        for evil in ["../../etc/passwd", "/etc/passwd", ".hidden"] {
            let e = host(evil).journal_in(dir.path()).unwrap_err();
            assert!(
                e.to_string().contains("not a file beside it"),
                "{evil}: {e}"
            );
        }
        assert!(host("f-never.json")
            .journal_in(dir.path())
            .unwrap()
            .is_none());
        std::fs::write(
            dir.path().join("f-other.json"),
            r#"{"pinplan_journal": 1, "uri": "qemu+ssh://root@x/system", "vms": []}"#,
        )
        .unwrap();
        assert!(host("f-other.json").journal_in(dir.path()).is_err());
        std::fs::write(
            dir.path().join("f-h.json"),
            r#"{"pinplan_journal": 1, "uri": "test:///default", "vms": []}"#,
        )
        .unwrap();
        let (file, journal) = host("f-h.json").journal_in(dir.path()).unwrap().unwrap();
        assert_eq!(
            (file, journal.uri),
            (dir.path().join("f-h.json"), "test:///default".to_owned())
        );
    }

    /// Issue 27: a fleet apply a signal stopped says so, with how to finish
    /// when a second one stopped a host's restore, and exits 130/143.
    #[test]
    fn issue_27_an_interrupted_fleet_says_so() {
        use crate::libvirt::apply::StepError;
        let done = |again: Option<Signal>| FleetApplied {
            fleet: PathBuf::from("out"),
            hosts: vec![HostOutcome {
                name: "a".to_owned(),
                uri: Some("qemu+ssh://root@a/system".to_owned()),
                status: HostStatus::Failed {
                    error: "interrupted".to_owned(),
                    failure: Box::new(Failure {
                        vm: "v1".to_owned(),
                        error: StepError::Interrupted {
                            signal: Signal::Term,
                            what: "vCPU 0".to_owned(),
                            scope: "live",
                        },
                        restored: vec!["v1".to_owned()],
                        restore_errors: Vec::new(),
                        changed: true,
                        restore_interrupted: again,
                    }),
                    journal: PathBuf::from("fj-a.json"),
                },
            }],
            journal: Some(PathBuf::from("fj.json")),
            all_or_nothing: false,
            moves: Vec::new(),
        };
        let once = done(None);
        assert_eq!(once.exit(), Some(Exit::Interrupted(Signal::Term)));
        assert!(
            once.to_text(false).ends_with(
                "interrupted (SIGTERM): every host changed was restored as it was; fleet journal: fj.json\n"
            ),
            "{}",
            once.to_text(false)
        );
        let twice = done(Some(Signal::Int));
        assert_eq!(twice.exit(), Some(Exit::Interrupted(Signal::Int)));
        assert!(
            twice.to_text(false).ends_with(
                "interrupted again: the hosts are partly restored; finish with: pinplan apply --rollback fj.json\n"
            ),
            "{}",
            twice.to_text(false)
        );
    }

    /// The text names each move with the libvirt command that makes it.
    #[test]
    fn moves_are_said_with_how_to_migrate() {
        let done = FleetApplied {
            fleet: PathBuf::from("out"),
            hosts: vec![
                HostOutcome {
                    name: "a".to_owned(),
                    uri: Some("qemu+ssh://root@a/system".to_owned()),
                    status: HostStatus::Skipped,
                },
                HostOutcome {
                    name: "b".to_owned(),
                    uri: Some("qemu+ssh://root@b/system".to_owned()),
                    status: HostStatus::Refused {
                        error: "no domain \"v1\"".to_owned(),
                        exit: Exit::Error,
                    },
                },
            ],
            journal: None,
            all_or_nothing: false,
            moves: vec![super::super::inventory::Move {
                vm: "v1".to_owned(),
                from: "a".to_owned(),
                to: "b".to_owned(),
            }],
        };
        let text = done.to_text(false);
        assert!(
            text.contains("  v1: a -> b (virsh -c qemu+ssh://root@a/system migrate --live --persistent --undefinesource v1 qemu+ssh://root@b/system)"),
            "{text}"
        );
        assert_eq!(done.exit(), Some(Exit::Error));
        assert!(done.to_json().contains("\"moves\""));
    }
}
