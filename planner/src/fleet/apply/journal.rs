//! The fleet journal: which host journals one `apply --fleet` wrote, where
//! they sit, the locks of its hosts, and the rollback of every host.

use super::super::pool;
use super::{FleetJournal, JournalHost};
use crate::error::one_line;
use crate::host::journal::{self as envelope, Body, ReadError, Tool};
use crate::interrupt::Interrupt;
use crate::libvirt::apply::{lock, retry, Journal, JournalError, JournalStatus, Restored, Session};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Host `name`'s journal beside the fleet journal `fleet`:
/// `pinplan-fleet-journal-1-2.json` → `pinplan-fleet-journal-1-2-b1.json`.
pub(super) fn host_journal(fleet: &Path, name: &str) -> PathBuf {
    let stem = fleet
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pinplan-fleet-journal".to_owned());
    fleet.with_file_name(format!("{stem}-{name}.json"))
}

/// Takes the apply lock of every URI's host, one after another in a fixed
/// order; `waiting` is told when one is held by another run.
pub(super) fn lock_all<'u>(
    uris: impl Iterator<Item = &'u str>,
    waiting: &mut dyn FnMut(&Path),
) -> Result<Vec<lock::HostLock>, lock::LockError> {
    let keys: BTreeSet<(String, &str)> = uris.map(|u| (lock::host_key(u), u)).collect();
    let mut seen = BTreeSet::new();
    let mut locks = Vec::new();
    for (key, uri) in keys {
        if seen.insert(key) {
            locks.push(lock::lock(uri, waiting)?);
        }
    }
    Ok(locks)
}

pub(super) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What a fleet rollback did on one host.
pub enum RollbackStatus {
    /// Its journal was never written: the apply changed nothing there.
    NoJournal,
    /// Restored (and verified), or what could not be.
    Done(Restored),
    /// Its journal or connection failed.
    Failed(String),
}

impl JournalHost {
    /// Its journal in `dir` (the fleet journal's directory), with its file;
    /// `None` when it was never written (the apply changed nothing there).
    /// A name that is not a plain file name there is refused, not followed.
    pub(super) fn journal_in(
        &self,
        dir: &Path,
    ) -> Result<Option<(PathBuf, Journal)>, HostJournalError> {
        if self.journal.contains('/') || self.journal.starts_with('.') {
            return Err(HostJournalError::NotBeside {
                journal: self.journal.clone(),
            });
        }
        let file = dir.join(&self.journal);
        if std::fs::symlink_metadata(&file).is_err() {
            return Ok(None);
        }
        Journal::load(&file, Some(&self.uri))
            .map(|j| Some((file, j)))
            .map_err(HostJournalError::Load)
    }
}

/// Why a host's journal named by a fleet journal cannot be rolled back.
#[derive(Debug, thiserror::Error)]
pub enum HostJournalError {
    /// The name is not a plain file name beside the fleet journal.
    #[error("the fleet journal names {journal:?} as its journal: not a file beside it")]
    NotBeside {
        /// The name.
        journal: String,
    },
    /// The journal could not be read. (The message says the cause whole,
    /// its hint too, as the host's line of a fleet rollback always has.)
    #[error("{}", one_line(.0))]
    Load(JournalError),
}

impl Body for FleetJournal {
    const TOOL: Tool = Tool::FleetApply;
}

impl FleetJournal {
    /// Reads `path` when it is a fleet journal (`None` for any other file,
    /// left to the single-host journal's reader).
    pub fn load_if(path: &Path) -> Result<Option<FleetJournal>, ReadError> {
        if envelope::tool_of(path) != Some(Tool::FleetApply) {
            return Ok(None);
        }
        envelope::read(path).map(|journal| Some(journal.body))
    }

    /// Puts every host of the journal (read from `path`) back, in parallel,
    /// with its lock; per host, what was done.
    pub fn rollback(
        &self,
        path: &Path,
        concurrency: usize,
        redefine: bool,
        waiting: &mut dyn FnMut(&Path),
        interrupt: &Interrupt,
        changing: &dyn Fn(),
    ) -> Result<Vec<(JournalHost, RollbackStatus)>, lock::LockError> {
        let _locks = lock_all(self.hosts.iter().map(|h| h.uri.as_str()), waiting)?;
        changing();
        let dir = path.parent().unwrap_or(Path::new(""));
        Ok(pool::each(
            self.hosts.len(),
            concurrency,
            |i| {
                let host = &self.hosts[i];
                let status = match host.journal_in(dir) {
                    Err(e) => RollbackStatus::Failed(e.to_string()),
                    Ok(None) => RollbackStatus::NoJournal,
                    Ok(Some((file, journal))) => match Session::open(&host.uri) {
                        Ok(session) => {
                            let _ = journal.mark(&file, JournalStatus::RollingBack);
                            let done = session.rollback(&journal, redefine, interrupt);
                            if done.errors.is_empty() {
                                let _ = journal.mark(&file, JournalStatus::RolledBack);
                            }
                            RollbackStatus::Done(done)
                        }
                        Err(e) => RollbackStatus::Failed(format!(
                            "{}; retry with: {}",
                            one_line(&e),
                            retry(&file, &host.uri)
                        )),
                    },
                };
                (host.clone(), status)
            },
            &|_, _| {},
        ))
    }
}

/// How one host's rollback ended, as `apply --rollback FLEET-JOURNAL
/// --format json` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RollbackState {
    /// The apply changed nothing there.
    NoJournal,
    /// Restored and verified.
    RolledBack,
    /// Not everything was restored.
    Failed,
}

/// One host of a fleet rollback, as its JSON prints it. Fields are declared
/// in alphabetical order, the order the JSON has always had; the ones a
/// state lacks are left out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostRollback {
    /// What could not be restored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
    /// The host.
    pub name: String,
    /// What a user should know about VMs restored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// VMs restored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored: Option<Vec<String>>,
    /// How it ended.
    pub status: RollbackState,
    /// Its libvirt URI.
    pub uri: String,
}

impl HostRollback {
    /// Host `host`'s rollback that ended as `status`.
    pub fn of(host: &JournalHost, status: &RollbackStatus) -> HostRollback {
        let (state, errors, notes, restored) = match status {
            RollbackStatus::NoJournal => (RollbackState::NoJournal, None, None, None),
            RollbackStatus::Done(r) if r.errors.is_empty() => (
                RollbackState::RolledBack,
                None,
                Some(r.notes.clone()),
                Some(r.restored.clone()),
            ),
            RollbackStatus::Done(r) => (
                RollbackState::Failed,
                Some(r.errors.clone()),
                None,
                Some(r.restored.clone()),
            ),
            RollbackStatus::Failed(e) => (RollbackState::Failed, Some(vec![e.clone()]), None, None),
        };
        HostRollback {
            errors,
            name: host.name.clone(),
            notes,
            restored,
            status: state,
            uri: host.uri.clone(),
        }
    }
}

/// A fleet rollback, as `--format json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FleetRollback {
    /// Each host, in the journal's order.
    pub hosts: Vec<HostRollback>,
    /// The fleet journal.
    pub journal: PathBuf,
    /// `failed` when a host was not restored whole, else `rolled-back`.
    pub status: RollbackState,
}

impl FleetRollback {
    /// The rollback of the fleet journal at `journal`, host by host.
    pub fn of(journal: &Path, done: &[(JournalHost, RollbackStatus)]) -> FleetRollback {
        let hosts: Vec<HostRollback> = done.iter().map(|(h, s)| HostRollback::of(h, s)).collect();
        let failed = hosts.iter().any(|h| h.status == RollbackState::Failed);
        FleetRollback {
            hosts,
            journal: journal.to_owned(),
            status: if failed {
                RollbackState::Failed
            } else {
                RollbackState::RolledBack
            },
        }
    }
}

#[cfg(test)]
mod rollback_json_tests {
    use super::*;
    use serde_json::{json, Value};

    /// The JSON is what the CLI's hand-built objects gave before these
    /// types (keys sorted), byte for byte, for each way a host ends.
    #[test]
    fn a_fleet_rollback_prints_as_the_hand_built_object_did() {
        let host = |name: &str| JournalHost {
            name: name.to_owned(),
            uri: format!("qemu+ssh://{name}/system"),
            journal: format!("{name}.json"),
        };
        let done = vec![
            (host("a"), RollbackStatus::NoJournal),
            (
                host("b"),
                RollbackStatus::Done(Restored {
                    restored: vec!["vm1".to_owned()],
                    notes: vec!["n".to_owned()],
                    ..Restored::default()
                }),
            ),
            (
                host("c"),
                RollbackStatus::Done(Restored {
                    restored: vec!["vm2".to_owned()],
                    errors: vec!["vm3: gone".to_owned()],
                    ..Restored::default()
                }),
            ),
            (
                host("d"),
                RollbackStatus::Failed("cannot connect".to_owned()),
            ),
        ];
        let with = |mut o: Value, h: &JournalHost| {
            if let Some(m) = o.as_object_mut() {
                m.insert("name".to_owned(), json!(h.name));
                m.insert("uri".to_owned(), json!(h.uri));
            }
            o
        };
        let objects = vec![
            with(json!({"status": "no-journal"}), &done[0].0),
            with(
                json!({"status": "rolled-back", "restored": ["vm1"], "notes": ["n"]}),
                &done[1].0,
            ),
            with(
                json!({"status": "failed", "restored": ["vm2"], "errors": ["vm3: gone"]}),
                &done[2].0,
            ),
            with(
                json!({"status": "failed", "errors": ["cannot connect"]}),
                &done[3].0,
            ),
        ];
        let path = Path::new("/j/fleet.json");
        let old = json!({"status": "failed", "journal": path, "hosts": objects});
        assert_eq!(
            serde_json::to_string_pretty(&FleetRollback::of(path, &done)).unwrap_or_default(),
            serde_json::to_string_pretty(&old).unwrap_or_default()
        );
    }
}
