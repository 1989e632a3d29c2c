//! `apply --fleet DIR`: every host of a fleet plan directory applied through
//! its own libvirt URI, each all or nothing with its own journal as `apply
//! PLAN` does (`libvirt::apply`), in four steps:
//!
//! 1. **Lock** every host (the same lock as `apply PLAN`, taken in one order
//!    so that two fleet runs cannot deadlock).
//! 2. **Prepare** every host in parallel, a bounded number at a time, each
//!    within a time limit: its topology, every VM's preconditions and the
//!    pins to journal ([`check`], then [`Checked::prepare`]). Nothing changes.
//! 3. **Journal**: the fleet journal (which host journals belong to this
//!    run), then each host's journal, before the first change anywhere.
//! 4. **Apply** every prepared host in parallel. A host that fails is
//!    restored from its journal and named; the others stay applied. With
//!    `all_or_nothing`, no host changes unless every host was prepared, no
//!    host starts after one failed, and the hosts applied are rolled back
//!    from their journals when one fails.
//!
//! `apply --rollback FLEET-JOURNAL` puts every host back ([`FleetJournal::rollback`]).

use super::inventory::Inventory;
use super::pool;
use crate::error::{Diagnostic, Exit, WriteError};
use crate::interrupt::{Interrupt, Signal};
use crate::libvirt::apply::host::{check, Checked, PrepareError, Prepared};
use crate::libvirt::apply::{
    lock, retry, Applied, ApplyError, Failure, Journal, JournalError, JournalStatus, Restored,
    Scope, Session,
};
use crate::output::write_new;
use crate::plan::Plan;
use crate::report::Report;
use crate::topology::HostTopology;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The fleet journal's format version.
pub const FLEET_JOURNAL_VERSION: u32 = 1;

/// Which host journals one `apply --fleet` wrote: written before the first
/// change, beside them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetJournal {
    /// Format version ([`FLEET_JOURNAL_VERSION`]).
    pub pinplan_fleet_journal: u32,
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

/// The error's message, causes and hint on one block of text, as a host's
/// line in a fleet report shows it.
pub fn full_text(error: &dyn Diagnostic) -> String {
    let mut text = error.to_string();
    let mut next = std::error::Error::source(error);
    while let Some(cause) = next {
        text.push_str(&format!(": {cause}"));
        next = cause.source();
    }
    if let Some(hint) = error.hint() {
        text.push_str(&format!(" (hint: {hint})"));
    }
    text
}

/// Host `name`'s journal beside the fleet journal `fleet`:
/// `pinplan-fleet-journal-1-2.json` → `pinplan-fleet-journal-1-2-b1.json`.
fn host_journal(fleet: &Path, name: &str) -> PathBuf {
    let stem = fleet
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pinplan-fleet-journal".to_owned());
    fleet.with_file_name(format!("{stem}-{name}.json"))
}

/// Takes the apply lock of every URI's host, one after another in a fixed
/// order; `waiting` is told when one is held by another run.
fn lock_all<'u>(
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

/// Applies every host of `inventory` (a plan directory); `hook(host)` gives
/// the pin-call hook of each host.
pub fn apply(
    inventory: &Inventory,
    options: &FleetApplyOptions<'_>,
    hook: &(dyn Fn(&str) -> Hook + Sync),
    waiting: &mut dyn FnMut(&Path),
) -> Result<FleetApplied, FleetApplyError> {
    if !inventory.planned {
        return Err(FleetApplyError::NotPlanned {
            path: inventory.origin.clone(),
        });
    }
    // Each host's VMs asked for; a name no host plans is refused first.
    let placed: BTreeSet<&str> = inventory
        .hosts
        .iter()
        .filter_map(|h| h.plan.as_ref())
        .flat_map(|(_, p)| p.vms.iter().map(|v| v.name.as_str()))
        .collect();
    let unknown: Vec<String> = options
        .vms
        .iter()
        .filter(|n| !placed.contains(n.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(FleetApplyError::UnknownVm {
            fleet: inventory.origin.clone(),
            names: unknown,
            placed: placed.iter().map(|&n| n.to_owned()).collect(),
        });
    }
    let selected: Vec<Vec<String>> = inventory
        .hosts
        .iter()
        .map(|h| {
            h.plan.as_ref().map_or_else(Vec::new, |(_, p)| {
                p.vms
                    .iter()
                    .filter(|v| options.vms.is_empty() || options.vms.contains(&v.name))
                    .map(|v| v.name.clone())
                    .collect()
            })
        })
        .collect();
    let busy: Vec<usize> = (0..inventory.hosts.len())
        .filter(|&h| !selected[h].is_empty())
        .collect();
    if !options.dry_run {
        for path in std::iter::once(options.journal.clone()).chain(
            busy.iter()
                .map(|&h| host_journal(&options.journal, &inventory.hosts[h].name)),
        ) {
            if let Err(ApplyError::Journal(w)) = crate::libvirt::apply::check_journal_is_new(&path)
            {
                return Err(FleetApplyError::Journal(w));
            }
        }
    }
    let _locks = if options.dry_run {
        Vec::new()
    } else {
        lock_all(
            busy.iter()
                .filter_map(|&h| inventory.hosts[h].connect.as_deref()),
            waiting,
        )?
    };

    let finish = |statuses: Vec<Option<HostStatus>>, journal: Option<PathBuf>| FleetApplied {
        fleet: inventory.origin.clone(),
        hosts: inventory
            .hosts
            .iter()
            .zip(statuses)
            .map(|(h, s)| HostOutcome {
                name: h.name.clone(),
                uri: h.connect.clone(),
                status: s.unwrap_or(HostStatus::Skipped),
            })
            .collect(),
        journal,
        all_or_nothing: options.all_or_nothing,
        moves: inventory.moves.clone(),
    };
    if options.dry_run {
        let statuses = each_host(inventory, options, &selected, |checked, plan, _| {
            let report = checked.dry_run(plan)?;
            Ok(HostStatus::DryRun {
                vms: checked.targets.iter().map(|t| t.name.clone()).collect(),
                report: Box::new(report),
                host: Box::new(checked.host),
            })
        })
        .into_iter()
        .map(|done| {
            Some(match done {
                None => HostStatus::Skipped,
                Some(Err((error, exit))) => HostStatus::Refused { error, exit },
                Some(Ok(status)) => status,
            })
        })
        .collect();
        return Ok(finish(statuses, None));
    }

    // 2. Prepare every host with VMs to apply.
    let prepared = each_host(inventory, options, &selected, |checked, _, scope| {
        checked.prepare(scope)
    });
    let mut statuses: Vec<Option<HostStatus>> = prepared
        .iter()
        .map(|p| match p {
            None => Some(HostStatus::Skipped),
            Some(Err((error, exit))) => Some(HostStatus::Refused {
                error: error.clone(),
                exit: *exit,
            }),
            Some(Ok(p)) if p.in_effect => Some(HostStatus::InEffect { vms: names_of(p) }),
            Some(Ok(_)) => None,
        })
        .collect();
    let refused = statuses
        .iter()
        .any(|s| matches!(s, Some(HostStatus::Refused { .. })));
    let to_change: Vec<usize> = (0..statuses.len())
        .filter(|&h| statuses[h].is_none())
        .collect();
    if to_change.is_empty() || (refused && options.all_or_nothing) {
        for &h in &to_change {
            if let Some(Ok(p)) = &prepared[h] {
                statuses[h] = Some(HostStatus::Held { vms: names_of(p) });
            }
        }
        return Ok(finish(statuses, None));
    }

    // 3. The fleet journal, then each host's, before any change.
    let fleet_journal = FleetJournal {
        pinplan_fleet_journal: FLEET_JOURNAL_VERSION,
        fleet: inventory.origin.clone(),
        hosts: to_change
            .iter()
            .map(|&h| {
                let host = &inventory.hosts[h];
                JournalHost {
                    name: host.name.clone(),
                    uri: host.connect.clone().unwrap_or_default(),
                    journal: file_name(&host_journal(&options.journal, &host.name)),
                }
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&fleet_journal).unwrap_or_default();
    text.push('\n');
    (options.changing)();
    write_new(&options.journal, &text, 0o600).map_err(FleetApplyError::Journal)?;
    (options.journaled)(&options.journal);
    let mut journal_failed = false;
    for &h in &to_change {
        let Some(Ok(p)) = &prepared[h] else { continue };
        let path = host_journal(&options.journal, &inventory.hosts[h].name);
        if let Err(e) = p.journal.write_new(&path) {
            let e = ApplyError::Journal(e);
            statuses[h] = Some(HostStatus::Refused {
                error: full_text(&e),
                exit: e.exit(),
            });
            journal_failed = true;
        }
    }
    if journal_failed && options.all_or_nothing {
        for &h in &to_change {
            if let (None, Some(Ok(p))) = (&statuses[h], &prepared[h]) {
                statuses[h] = Some(HostStatus::Held { vms: names_of(p) });
            }
        }
        return Ok(finish(statuses, Some(options.journal.clone())));
    }

    // 4. Apply, in parallel.
    let stop = AtomicBool::new(false);
    let changing: Vec<usize> = to_change
        .iter()
        .copied()
        .filter(|&h| statuses[h].is_none())
        .collect();
    let applied: Vec<HostStatus> = pool::each(
        changing.len(),
        options.concurrency,
        |k| {
            let h = changing[k];
            let Some(Ok(p)) = &prepared[h] else {
                return HostStatus::Skipped;
            };
            if options.all_or_nothing && stop.load(Ordering::SeqCst) {
                return HostStatus::Held { vms: names_of(p) };
            }
            let name = &inventory.hosts[h].name;
            let journal = host_journal(&options.journal, name);
            let mut hook = hook(name);
            let result = p.session.apply(
                &p.targets,
                &p.journal,
                options.scope,
                &mut *hook,
                options.interrupt,
            );
            // The journal says whether this host's run finished (the next
            // apply there looks); a journal not marked stays unfinished,
            // the safe side.
            let _ = p.journal.mark(
                &journal,
                result
                    .as_ref()
                    .map_or_else(|f| f.journal_status(), |_| JournalStatus::Applied),
            );
            match result {
                Ok(vms) => HostStatus::Applied { vms, journal },
                Err(failure) => {
                    stop.store(true, Ordering::SeqCst);
                    let error = ApplyError::of_failure(failure.clone(), &journal, &p.journal.uri)
                        .to_string();
                    HostStatus::Failed {
                        error,
                        failure,
                        journal,
                    }
                }
            }
        },
        &|k, n| (options.progress)("applying", k, n),
    );
    for (k, status) in applied.into_iter().enumerate() {
        statuses[changing[k]] = Some(status);
    }
    // All or nothing: a host failed, so the ones applied go back. An
    // interrupted fleet apply is not done either: its hosts go back too.
    let interrupted = options.interrupt.first().is_some();
    if (options.all_or_nothing && stop.load(Ordering::SeqCst)) || interrupted {
        let back: Vec<usize> = changing
            .iter()
            .copied()
            .filter(|&h| matches!(statuses[h], Some(HostStatus::Applied { .. })))
            .collect();
        let restored: Vec<Restored> = pool::each(
            back.len(),
            options.concurrency,
            |k| match &prepared[back[k]] {
                Some(Ok(p)) => {
                    let path = host_journal(&options.journal, &inventory.hosts[back[k]].name);
                    let _ = p.journal.mark(&path, JournalStatus::RollingBack);
                    let done = p.session.rollback(&p.journal, false, options.interrupt);
                    if done.errors.is_empty() {
                        let _ = p.journal.mark(&path, JournalStatus::RolledBack);
                    }
                    done
                }
                _ => Restored::default(),
            },
            &|k, n| (options.progress)("rolling back", k, n),
        );
        for (k, restored) in restored.into_iter().enumerate() {
            let h = back[k];
            statuses[h] = Some(HostStatus::RolledBack {
                journal: host_journal(&options.journal, &inventory.hosts[h].name),
                restored,
            });
        }
    }
    Ok(finish(statuses, Some(options.journal.clone())))
}

/// What one host's checked connection gives: its prepared apply, or a dry
/// run's status.
type Job<T> = fn(Checked, &Plan, Scope) -> Result<T, PrepareError>;

/// Checks every host with VMs asked for ([`check`]) and runs `job` on it, in
/// parallel, `options.concurrency` at a time, each within `options.timeout`:
/// per host `None` when no VM of it is asked for, else the job's result or
/// why it was refused (the whole error, its exit status). Nothing changes.
fn each_host<T: Send + 'static>(
    inventory: &Inventory,
    options: &FleetApplyOptions<'_>,
    selected: &[Vec<String>],
    job: Job<T>,
) -> Vec<Option<Result<T, (String, Exit)>>> {
    pool::each(
        inventory.hosts.len(),
        options.concurrency,
        |h| {
            if selected[h].is_empty() {
                return None;
            }
            let host = &inventory.hosts[h];
            let Some(uri) = host.connect.clone() else {
                return Some(Err((
                    format!(
                        "fleet.json gives host {} no connect URI: apply reaches a host through \
                         libvirt (add connect = \"qemu+ssh://root@HOST/system\" to its [[host]] \
                         and plan again)",
                        host.name
                    ),
                    Exit::Error,
                )));
            };
            let (plan_path, plan) = host.plan.clone()?;
            // Every VM of the host, or the ones asked for by name.
            let names = if options.vms.is_empty() {
                Vec::new()
            } else {
                selected[h].clone()
            };
            let (scope, force) = (options.scope, options.force);
            let timeout = options.timeout;
            Some(
                pool::within(timeout, move || {
                    check(&plan_path, &plan, &uri, &names, scope, force)
                        .and_then(|checked| job(checked, &plan, scope))
                        .map_err(|e| (full_text(&e), e.exit()))
                })
                .unwrap_or_else(|| {
                    Err((
                        format!(
                            "no answer within {:.0} s: nothing was changed on it",
                            timeout.as_secs_f64()
                        ),
                        Exit::Error,
                    ))
                }),
            )
        },
        &|k, n| (options.progress)("checking", k, n),
    )
}

fn names_of(p: &Prepared) -> Vec<String> {
    p.targets.iter().map(|t| t.name.clone()).collect()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl FleetApplied {
    /// The exit status: 0 when every host with VMs asked for was applied,
    /// in effect or (dry run) would be; else the worst host's (1 for a host
    /// that failed and was restored, or was held back; 2 for one refused by
    /// an error).
    pub fn exit(&self) -> Option<Exit> {
        if let Some(signal) = self.interrupted() {
            return Some(Exit::Interrupted(signal));
        }
        let mut worst = None;
        for h in &self.hosts {
            let exit = match &h.status {
                HostStatus::Refused { exit, .. } => Some(*exit),
                HostStatus::Failed { .. } | HostStatus::Held { .. } => Some(Exit::No),
                HostStatus::RolledBack { restored, .. } if !restored.errors.is_empty() => {
                    Some(Exit::Error)
                }
                HostStatus::RolledBack { .. } => Some(Exit::No),
                _ => None,
            };
            worst = match (worst, exit) {
                (Some(Exit::Error), _) | (_, Some(Exit::Error)) => Some(Exit::Error),
                (w, e) => w.or(e),
            };
        }
        worst
    }

    /// The signal that stopped the fleet apply (an interrupt request), and
    /// whether a second one stopped a host's restore.
    fn interruption(&self) -> Option<(Signal, bool)> {
        let mut found: Option<(Signal, bool)> = None;
        for h in &self.hosts {
            let (first, again) = match &h.status {
                HostStatus::Failed { failure, .. } => {
                    (failure.interrupted(), failure.restore_interrupted)
                }
                HostStatus::RolledBack { restored, .. } => (None, restored.interrupted),
                _ => (None, None),
            };
            if let Some(signal) = again {
                return Some((signal, true));
            }
            if let (Some(signal), None) = (first, found) {
                found = Some((signal, false));
            }
        }
        found
    }

    /// The signal whose exit status the run takes (the second one's when a
    /// restore was stopped).
    fn interrupted(&self) -> Option<Signal> {
        self.interruption().map(|(signal, _)| signal)
    }

    /// The hosts that ended applied.
    fn applied(&self) -> Vec<&str> {
        self.hosts
            .iter()
            .filter(|h| matches!(h.status, HostStatus::Applied { .. }))
            .map(|h| h.name.as_str())
            .collect()
    }

    /// The command that undoes every host this run changed.
    pub fn undo(&self) -> Option<String> {
        self.journal
            .as_ref()
            .map(|j| format!("pinplan apply --rollback {}", j.display()))
    }

    /// One block per host, then what stands (the fleet journal's line is
    /// [`journal_line`]'s, said when it is written).
    pub fn to_text(&self, colour: bool) -> String {
        let mut out = String::new();
        let width = self.hosts.iter().map(|h| h.name.len()).max().unwrap_or(4);
        for h in &self.hosts {
            let uri = h.uri.as_deref().unwrap_or("no URI");
            let line = match &h.status {
                HostStatus::Skipped => "nothing to apply (no VM of the plan asked for)".to_owned(),
                HostStatus::Refused { error, .. } => {
                    format!("refused, nothing changed: {}", indent(error))
                }
                HostStatus::DryRun { vms, report, host } => format!(
                    "dry run: the preconditions hold for {}; nothing was changed\n{}",
                    vms.join(", "),
                    indent_block(&report.to_text(host, colour))
                ),
                HostStatus::InEffect { vms } => {
                    format!(
                        "the plan is already in effect for {}: nothing changed",
                        vms.join(", ")
                    )
                }
                HostStatus::Held { vms } => format!(
                    "not changed ({} could be applied; --all-or-nothing and another host was not)",
                    vms.join(", ")
                ),
                HostStatus::Applied { vms, journal } => format!(
                    "applied: {} (journal {})\n{}",
                    crate::text::plural(vms.len(), "VM", "VMs"),
                    journal.display(),
                    crate::libvirt::apply::summary(vms)
                        .lines()
                        .filter(|l| l.starts_with("  "))
                        .map(|l| format!("  {l}\n"))
                        .collect::<String>()
                        .trim_end()
                ),
                HostStatus::Failed { error, .. } => format!("failed: {}", indent(error)),
                HostStatus::RolledBack { restored, journal } if restored.errors.is_empty() => {
                    format!(
                        "applied, then rolled back from {} and verified (--all-or-nothing): {}",
                        journal.display(),
                        restored.restored.join(", ")
                    )
                }
                HostStatus::RolledBack { restored, journal } => format!(
                    "applied, and the rollback (--all-or-nothing) did not restore everything: \
                     {}; retry with: pinplan apply --rollback {} --connect {uri}",
                    restored.errors.join("; "),
                    journal.display()
                ),
            };
            out.push_str(&format!("{:<width$}  {uri}  {}\n", h.name, line.trim_end()));
        }
        if !self.moves.is_empty() {
            let uri = |name: &str| {
                self.hosts
                    .iter()
                    .find(|h| h.name == name)
                    .and_then(|h| h.uri.clone())
                    .unwrap_or_else(|| name.to_owned())
            };
            out.push_str(
                "moves the plan makes (pinplan does not migrate: migrate each, then apply --fleet again for its new host):\n",
            );
            for m in &self.moves {
                out.push_str(&format!(
                    "  {}: {} -> {} (virsh -c {} migrate --live --persistent --undefinesource {} {})\n",
                    m.vm,
                    m.from,
                    m.to,
                    uri(&m.from),
                    m.vm,
                    uri(&m.to)
                ));
            }
        }
        let applied = self.applied();
        let not = self
            .hosts
            .iter()
            .filter(|h| {
                matches!(
                    h.status,
                    HostStatus::Refused { .. }
                        | HostStatus::Failed { .. }
                        | HostStatus::Held { .. }
                        | HostStatus::RolledBack { .. }
                )
            })
            .count();
        let dry = self
            .hosts
            .iter()
            .any(|h| matches!(h.status, HostStatus::DryRun { .. }));
        if let Some((signal, again)) = self.interruption() {
            let journal = self
                .journal
                .as_ref()
                .map(|j| j.display().to_string())
                .unwrap_or_default();
            out.push_str(&if again {
                format!(
                    "interrupted again: the hosts are partly restored; finish with: pinplan apply --rollback {journal}\n"
                )
            } else if applied.is_empty() {
                format!(
                    "interrupted ({signal}): every host changed was restored as it was; fleet journal: {journal}\n"
                )
            } else {
                format!(
                    "interrupted ({signal}): the hosts not done were restored; {} had finished and stay applied (undo with {})\n",
                    applied.join(", "),
                    self.undo().unwrap_or_default()
                )
            });
        } else if dry {
            out.push_str("dry run: nothing was changed on any host\n");
        } else if not == 0 && applied.is_empty() {
            out.push_str("fleet already in effect: nothing changed\n");
        } else if not == 0 {
            out.push_str(&format!(
                "fleet applied: {} changed, every host as planned\n",
                crate::text::plural(applied.len(), "host", "hosts")
            ));
        } else if applied.is_empty() {
            out.push_str("fleet not applied: no host is changed\n");
        } else {
            out.push_str(&format!(
                "fleet partly applied: {} applied ({}): without --all-or-nothing a host \
                 that fails does not undo the others; undo them with {}\n",
                if applied.len() == 1 {
                    "1 host stays".to_owned()
                } else {
                    format!("{} hosts stay", applied.len())
                },
                applied.join(", "),
                self.undo().unwrap_or_default()
            ));
        }
        out
    }

    /// `{"status", "fleet", "journal", "undo", "hosts": [...]}`.
    pub fn to_json(&self) -> String {
        let hosts: Vec<Value> = self
            .hosts
            .iter()
            .map(|h| {
                let (status, extra) = match &h.status {
                    HostStatus::Skipped => ("skipped", json!({})),
                    HostStatus::Refused { error, .. } => ("refused", json!({"error": error})),
                    HostStatus::DryRun { vms, report, .. } => (
                        "dry-run",
                        json!({"vms": vms,
                               "report": serde_json::from_str::<Value>(&report.to_json())
                                   .unwrap_or(Value::Null)}),
                    ),
                    HostStatus::InEffect { vms } => ("in-effect", json!({"vms": vms})),
                    HostStatus::Held { vms } => ("held", json!({"vms": vms})),
                    HostStatus::Applied { vms, journal } => (
                        "applied",
                        json!({"journal": journal, "vms": vms.iter().map(|a| json!({
                            "name": a.vm, "live": a.live, "config": a.config,
                            "pin_calls": a.calls})).collect::<Vec<_>>()}),
                    ),
                    HostStatus::Failed {
                        error,
                        failure,
                        journal,
                    } => (
                        "failed",
                        json!({"error": error, "vm": failure.vm, "journal": journal,
                               "restored": failure.restored,
                               "restore_errors": failure.restore_errors,
                               "changed": failure.changed}),
                    ),
                    HostStatus::RolledBack { journal, restored } => (
                        "rolled-back",
                        json!({"journal": journal, "restored": restored.restored,
                               "restore_errors": restored.errors}),
                    ),
                };
                let mut object = json!({"name": h.name, "uri": h.uri, "status": status});
                if let (Some(o), Value::Object(extra)) = (object.as_object_mut(), extra) {
                    o.extend(extra);
                }
                object
            })
            .collect();
        let status = match self.exit() {
            _ if self
                .hosts
                .iter()
                .any(|h| matches!(h.status, HostStatus::DryRun { .. })) =>
            {
                "dry-run"
            }
            None => "applied",
            Some(_) if self.applied().is_empty() => "not-applied",
            Some(_) => "partly-applied",
        };
        let mut text = serde_json::to_string_pretty(&json!({
            "status": status, "fleet": self.fleet, "journal": self.journal,
            "undo": self.undo(), "all_or_nothing": self.all_or_nothing, "hosts": hosts,
            "moves": self.moves.iter().map(|m| json!({"vm": m.vm, "from": m.from, "to": m.to}))
                .collect::<Vec<_>>()}))
        .unwrap_or_default();
        text.push('\n');
        text
    }
}

/// `fleet journal: PATH (undo: pinplan apply --rollback PATH)`.
pub fn journal_line(path: &Path) -> String {
    format!(
        "fleet journal: {} (undo: pinplan apply --rollback {})\n",
        path.display(),
        path.display()
    )
}

/// Continuation lines of a host's text, indented under it.
fn indent(text: &str) -> String {
    text.replace('\n', "\n    ")
}

fn indent_block(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}\n"))
        .collect::<String>()
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
    fn journal_in(&self, dir: &Path) -> Result<Option<(PathBuf, Journal)>, String> {
        if self.journal.contains('/') || self.journal.starts_with('.') {
            return Err(format!(
                "the fleet journal names {:?} as its journal: not a file beside it",
                self.journal
            ));
        }
        let file = dir.join(&self.journal);
        if std::fs::symlink_metadata(&file).is_err() {
            return Ok(None);
        }
        Journal::load(&file, Some(&self.uri))
            .map(|j| Some((file, j)))
            .map_err(|e| full_text(&e))
    }
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
                    Err(e) => RollbackStatus::Failed(e),
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

#[cfg(test)]
mod tests {
    use super::*;

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
            Err(JournalError::Version { version: 9, .. })
        ));
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
            assert!(e.contains("not a file beside it"), "{evil}: {e}");
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
