//! The fleet journal: which host journals one `apply --fleet` wrote, where
//! they sit, the locks of its hosts, and the rollback of every host.

use super::super::pool;
use super::{full_text, FleetJournal, JournalHost, FLEET_JOURNAL_VERSION};
use crate::interrupt::Interrupt;
use crate::libvirt::apply::{lock, retry, Journal, JournalError, JournalStatus, Restored, Session};
use serde_json::Value;
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
    #[error("{}", full_text(.0))]
    Load(JournalError),
}

impl FleetJournal {
    /// Reads `path` when it is a fleet journal (`None` for any other file,
    /// left to the single-host journal's reader).
    pub fn load_if(path: &Path) -> Result<Option<FleetJournal>, JournalError> {
        let text = std::fs::read_to_string(path).map_err(|source| JournalError::Read {
            path: path.to_owned(),
            source,
        })?;
        let Ok(Value::Object(object)) = serde_json::from_str::<Value>(&text) else {
            return Ok(None);
        };
        if !object.contains_key("pinplan_fleet_journal") {
            return Ok(None);
        }
        let journal: FleetJournal =
            serde_json::from_str(&text).map_err(|source| JournalError::Parse {
                path: path.to_owned(),
                line: source.line(),
                source,
            })?;
        if journal.pinplan_fleet_journal != FLEET_JOURNAL_VERSION {
            return Err(JournalError::Version {
                path: path.to_owned(),
                version: journal.pinplan_fleet_journal,
                reads: FLEET_JOURNAL_VERSION,
            });
        }
        Ok(Some(journal))
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
                            full_text(&e),
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
