//! `pinplan isolate`: keep the host off the VMs' CPUs. From a plan, the VM
//! CPUs (every CPU a VM owns, idle siblings included) and the housekeeping
//! CPUs (the plan's reserved set); then, with no reboot, the host's cgroups
//! confined to the housekeeping CPUs ([`cgroup`]: systemd, cgroup v2, or the
//! cgroup v1 cpuset hierarchy), IRQs and the unbound workqueues moved off the
//! VM CPUs ([`irq`]), every value journalled first so that
//! [`journal::undo`] restores it exactly ([`journal`]). The boot-time way is
//! printed by [`boot`], and the per-VM libvirt hook is [`mod@hook`]. What still
//! runs on VM CPUs is read by [`crate::host::threads`] (for `report`).

pub mod boot;
pub mod cgroup;
pub mod hook;
pub mod irq;
pub mod journal;
pub mod outcome;
mod sys;
mod systemd;

use crate::cpuset::CpuSet;
use crate::error::{Diagnostic, Exit};
use crate::host::fs::read;
use crate::host::lock::{acquire, FileLock, LockFailure, Wait};
use crate::interrupt::{Interrupt, Signal};
use crate::plan::Plan;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Which CPUs are the VMs' and which the host keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Every CPU a VM of the plan (or of the running set) owns.
    pub vm_cpus: CpuSet,
    /// The CPUs the host is confined to.
    pub housekeeping: CpuSet,
    /// The VMs whose CPUs these are.
    pub vms: Vec<String>,
    /// How the housekeeping CPUs were chosen.
    pub basis: String,
}

impl Target {
    /// The whole plan: every VM's CPUs; the host on the plan's reserved
    /// CPUs, or (a plan that reserves none) on every online CPU no VM owns.
    pub fn from_plan(plan: &Plan, online: &CpuSet) -> Result<Target, IsolateError> {
        let names: BTreeSet<String> = plan.vms.iter().map(|v| v.name.clone()).collect();
        Target::build(plan, &names, online, true)
    }

    /// Only `names` (the running VMs of the hook): their CPUs; the host on
    /// every other online CPU.
    pub fn for_vms(
        plan: &Plan,
        names: &BTreeSet<String>,
        online: &CpuSet,
    ) -> Result<Target, IsolateError> {
        Target::build(plan, names, online, false)
    }

    fn build(
        plan: &Plan,
        names: &BTreeSet<String>,
        online: &CpuSet,
        reserved: bool,
    ) -> Result<Target, IsolateError> {
        let vms: Vec<&crate::plan::VmPlan> = plan
            .vms
            .iter()
            .filter(|v| names.contains(&v.name))
            .collect();
        if vms.is_empty() {
            return Err(IsolateError::NothingToIsolate);
        }
        let vm_cpus = vms.iter().fold(CpuSet::new(), |a, v| a.union(&v.cpus));
        let (housekeeping, basis) = if reserved && !plan.host.reserved_cpus.is_empty() {
            (
                plan.host.reserved_cpus.clone(),
                "the plan's reserved CPUs".to_owned(),
            )
        } else {
            (
                online.difference(&vm_cpus),
                if reserved {
                    "every online CPU no VM owns (the plan reserves none)".to_owned()
                } else {
                    "every online CPU no running VM of the plan owns".to_owned()
                },
            )
        };
        let overlap = housekeeping.intersection(&vm_cpus);
        if !overlap.is_empty() {
            return Err(IsolateError::Overlap { cpus: overlap });
        }
        let housekeeping = housekeeping.intersection(online);
        if housekeeping.is_empty() {
            return Err(IsolateError::NoHousekeeping {
                vm_cpus,
                online: online.clone(),
            });
        }
        Ok(Target {
            vm_cpus,
            housekeeping,
            vms: vms.iter().map(|v| v.name.clone()).collect(),
            basis,
        })
    }
}

/// Why isolation could not be planned, applied or undone.
#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    /// The plan places no VM (or none of those named).
    #[error("the plan places no VM whose CPUs could be isolated")]
    NothingToIsolate,
    /// The plan's reserved CPUs hold VM CPUs.
    #[error("the plan's reserved CPUs {cpus} are VM CPUs too")]
    Overlap {
        /// The CPUs in both.
        cpus: CpuSet,
    },
    /// Nothing would be left for the host.
    #[error("the VMs own CPUs {vm_cpus} of the online {online}: none is left for the host")]
    NoHousekeeping {
        /// The VM CPUs.
        vm_cpus: CpuSet,
        /// The online CPUs.
        online: CpuSet,
    },
    /// No online CPU list under the root.
    #[error("cannot read {}: which CPUs are online", path.display())]
    Online {
        /// The file.
        path: PathBuf,
    },
    /// A file could not be read or written.
    #[error("{what} {}", path.display())]
    Io {
        /// `cannot read`, `cannot write`...
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The journal exists already.
    #[error("{} exists: it may hold the only record of values to restore", path.display())]
    JournalExists {
        /// The journal.
        path: PathBuf,
    },
    /// The journal cannot be read as `pinplan isolate`'s.
    #[error(transparent)]
    ReadJournal(#[from] crate::host::journal::ReadError),
    /// The journal names something outside what isolation may change.
    #[error("{}: {message}", path.display())]
    BadJournal {
        /// The journal.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Another isolation is in effect.
    #[error("an isolation is in effect already (journal {}); undo it first", journal.display())]
    Active {
        /// Its journal.
        journal: PathBuf,
    },
    /// pinplan's cgroup exists, though no isolation is recorded as in
    /// effect in this state directory.
    #[error("{} exists already: an isolation is in effect (recorded in another --state directory), or a killed one left it", path.display())]
    Leftover {
        /// The cgroup.
        path: PathBuf,
    },
    /// Another pinplan holds the lock.
    #[error("cannot lock {}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// `systemctl` failed.
    #[error("systemctl {args} failed: {message}")]
    Systemctl {
        /// Its arguments.
        args: String,
        /// Its standard error or status.
        message: String,
    },
    /// An interrupt request (SIGINT, SIGTERM) stopped the isolation; what
    /// it had changed was undone from the journal (`failed`: what was not).
    #[error("interrupted ({signal}): {}; journal: {}", if failed.is_empty() { "every value restored as it was".to_owned() } else { format!("the undo did not restore everything:\n  {}\n", failed.join("\n  ")) }, journal.display())]
    Interrupted {
        /// The request's signal.
        signal: Signal,
        /// The journal.
        journal: PathBuf,
        /// What the undo could not restore.
        failed: Vec<String>,
    },
    /// A second request stopped the undo part-way.
    #[error("interrupted again: the host is partly restored; finish with: pinplan isolate --undo {}", journal.display())]
    InterruptedAgain {
        /// The second request's signal.
        signal: Signal,
        /// The journal.
        journal: PathBuf,
    },
    /// The hook directory or script cannot be written.
    #[error("{}: {message}", path.display())]
    Hook {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl Diagnostic for IsolateError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            IsolateError::NothingToIsolate => {
                "plan VMs first (pinplan plan SPEC --out DIR), and give DIR/plan.json".to_owned()
            }
            IsolateError::Overlap { .. } => {
                "the plan is inconsistent: make it again with pinplan plan".to_owned()
            }
            IsolateError::NoHousekeeping { .. } => {
                "reserve a core for the host: [host] reserved_cores = 1, and plan again".to_owned()
            }
            IsolateError::Online { .. } => {
                "give --root the directory that holds sys/ and proc/ (/ for this machine)"
                    .to_owned()
            }
            IsolateError::Io { .. } => "run as root on the host itself".to_owned(),
            IsolateError::JournalExists { path } => format!(
                "undo it first (pinplan isolate --undo {}), or give another --journal",
                path.display()
            ),
            IsolateError::ReadJournal(e) => return e.hint(),
            IsolateError::BadJournal { .. } => {
                "give the journal `pinplan isolate` wrote, unchanged".to_owned()
            }
            IsolateError::Active { journal } => {
                format!("pinplan isolate --undo {}", journal.display())
            }
            IsolateError::Leftover { path } => format!(
                "undo that isolation's journal (pinplan isolate --undo JOURNAL), or if none is \
                 left: move its tasks back and rmdir {}",
                path.display()
            ),
            IsolateError::Lock { .. } => {
                "another pinplan isolate is running: wait for it to finish".to_owned()
            }
            IsolateError::Systemctl { .. } => {
                "check that systemd runs and the unit exists (systemctl status UNIT)".to_owned()
            }
            IsolateError::Hook { .. } => {
                "give a directory of your own, e.g. /etc/libvirt/hooks".to_owned()
            }
            IsolateError::Interrupted {
                failed, journal, ..
            } if !failed.is_empty() => {
                format!("retry with: pinplan isolate --undo {}", journal.display())
            }
            IsolateError::Interrupted { .. } | IsolateError::InterruptedAgain { .. } => {
                return None
            }
        })
    }

    fn exit(&self) -> Exit {
        match self {
            IsolateError::Interrupted { signal, .. }
            | IsolateError::InterruptedAgain { signal, .. } => Exit::Interrupted(*signal),
            _ => Exit::Error,
        }
    }
}

/// The online CPUs under `root` (`sys/devices/system/cpu/online`).
pub fn online_cpus(root: &Path) -> Result<CpuSet, IsolateError> {
    let path = root.join("sys/devices/system/cpu/online");
    read(&path)
        .and_then(|t| t.trim().parse().ok())
        .ok_or(IsolateError::Online { path })
}

/// Where an isolation keeps its state: `active` (the journal of the
/// isolation in effect), `hook.json` (the running VMs the hook counts),
/// `hook-journal.json`, and the `lock` every run holds.
#[derive(Debug, Clone)]
pub struct State {
    /// The directory (default `/run/pinplan`: gone at reboot, as runtime
    /// isolation is).
    pub dir: PathBuf,
}

/// The lock, held while the value lives (the file's lock is released when
/// it is closed).
pub struct Lock(#[allow(dead_code)] FileLock);

impl State {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Takes the lock, waiting up to a minute for another run.
    pub fn lock(&self) -> Result<Lock, IsolateError> {
        use std::os::unix::fs::DirBuilderExt as _;
        let path = self.path("lock");
        let failed = |source| IsolateError::Lock {
            path: path.clone(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(failed)?;
        let wait = Wait {
            limit: std::time::Duration::from_secs(60),
            poll: std::time::Duration::from_millis(100),
        };
        match acquire(&path, wait, &mut || {}) {
            Ok(lock) => Ok(Lock(lock)),
            Err(LockFailure::Busy) => Err(failed(std::io::ErrorKind::WouldBlock.into())),
            Err(LockFailure::Open(e)) => Err(failed(e)),
        }
    }

    /// No isolation in effect any more when it was the one of `path`.
    fn forget(&self, path: &Path) {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let active = read(&self.path("active")).map(|t| PathBuf::from(t.trim()));
        if active.as_deref() == Some(absolute.as_path()) {
            let _ = std::fs::remove_file(self.path("active"));
        }
    }

    /// The journal of the isolation in effect, if any (one not undone).
    fn active(&self) -> Option<PathBuf> {
        let text = read(&self.path("active"))?;
        let journal = PathBuf::from(text.trim());
        journal::Journal::load(&journal)
            .ok()
            .filter(|j| j.state != "undone")
            .map(|_| journal)
    }

    /// Refuses while an isolation is in effect (a whole plan's, or the
    /// hook's for running VMs).
    pub fn check_idle(&self) -> Result<(), IsolateError> {
        if let Some(active) = self.active() {
            return Err(IsolateError::Active { journal: active });
        }
        if !self.hook_vms().is_empty() {
            return Err(IsolateError::Active {
                journal: self.path("hook-journal.json"),
            });
        }
        Ok(())
    }

    /// The VMs the hook counts as running.
    fn hook_vms(&self) -> BTreeSet<String> {
        read(&self.path("hook.json"))
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    fn save_hook_vms(&self, vms: &BTreeSet<String>) -> Result<(), IsolateError> {
        let text = serde_json::to_string(vms).unwrap_or_default() + "\n";
        crate::host::write::write_atomically(&self.path("hook.json"), &text, 0o600).map_err(|e| {
            IsolateError::Io {
                what: "cannot write",
                path: e.path,
                source: e.source,
            }
        })
    }
}

/// Every change isolating `target` under `root`, as a journal not yet
/// applied, and notes (refusals to expect, irqbalance, libvirt's cgroup).
pub fn prepare(
    root: &Path,
    target: &Target,
) -> Result<(journal::Journal, Vec<String>), IsolateError> {
    let layout = crate::host::cgroup::detect(root);
    let (mut changes, mut notes) = cgroup::plan(root, &layout, target)?;
    let (irq_changes, irq_notes) = irq::plan(root, target);
    changes.extend(irq_changes);
    notes.extend(irq_notes);
    Ok((
        journal::Journal::new(root, layout.name(), target, changes),
        notes,
    ))
}

/// `pinplan isolate --plan`: refuses while another isolation is in effect,
/// then journals and makes every change of [`prepare`]'s journal; a request
/// on `interrupt` stops it and undoes what it made ([`journal::apply`]).
pub fn isolate(
    state: &State,
    journal: &mut journal::Journal,
    path: &Path,
    before: &mut dyn FnMut(usize),
    interrupt: &Interrupt,
) -> Result<(), IsolateError> {
    let _lock = state.lock()?;
    state.check_idle()?;
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(IsolateError::JournalExists {
            path: path.to_owned(),
        });
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    // Recorded first: a kill during the changes leaves this isolation in
    // effect, and undoable from its journal.
    crate::host::write::write_atomically(
        &state.path("active"),
        &format!("{}\n", absolute.display()),
        0o600,
    )
    .map_err(|e| IsolateError::Io {
        what: "cannot write",
        path: e.path,
        source: e.source,
    })?;
    let result = journal::apply(journal, path, before, interrupt);
    if let Err(IsolateError::Interrupted { failed, .. }) = &result {
        if failed.is_empty() {
            state.forget(path);
        }
    }
    result
}

/// `pinplan isolate --undo JOURNAL`: a first request on `interrupt` lets it
/// finish, a second stops it ([`journal::Undone::interrupted`]; the
/// isolation stays recorded as in effect, to be undone again).
pub fn undo(
    state: &State,
    path: &Path,
    interrupt: &Interrupt,
) -> Result<journal::Undone, IsolateError> {
    let _lock = state.lock()?;
    let mut journal = journal::Journal::load(path)?;
    let done = journal::undo(&mut journal, path, interrupt)?;
    if done.interrupted.is_none() {
        state.forget(path);
    }
    Ok(done)
}

/// What the hook did for one VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookOutcome {
    /// The VMs running (counted) after it.
    pub running: BTreeSet<String>,
    /// The isolation now in effect (`None`: none, every value restored).
    pub journal: Option<journal::Journal>,
    /// What the last undo could not restore.
    pub failed: Vec<String>,
    /// Notes.
    pub notes: Vec<String>,
}

/// `--vm-start NAME` / `--vm-stop NAME`: the running set changes, the
/// isolation in effect is undone and the set's made again (none when the
/// set is empty). A VM not in the plan changes nothing.
pub fn hook(
    state: &State,
    root: &Path,
    plan: &Plan,
    name: &str,
    start: bool,
) -> Result<HookOutcome, IsolateError> {
    let _lock = state.lock()?;
    let mut running = state.hook_vms();
    let mut notes = Vec::new();
    if !plan.vms.iter().any(|v| v.name == name) {
        notes.push(format!("{name} is not in the plan: nothing to isolate"));
        return Ok(HookOutcome {
            running,
            journal: None,
            failed: Vec::new(),
            notes,
        });
    }
    if let Some(active) = state.active() {
        return Err(IsolateError::Active { journal: active });
    }
    if start {
        running.insert(name.to_owned());
    } else {
        running.remove(name);
    }
    let path = state.path("hook-journal.json");
    let mut failed = Vec::new();
    if let Ok(mut old) = journal::Journal::load(&path) {
        if old.state != "undone" {
            failed = journal::undo(&mut old, &path, &Interrupt::new())?.failed;
        }
    }
    if path.exists() {
        std::fs::remove_file(&path).map_err(|source| IsolateError::Io {
            what: "cannot remove",
            path: path.clone(),
            source,
        })?;
    }
    // A VM started that the plan lists but that a stale count names twice
    // is still one VM: the set is by name.
    let journal = if running.is_empty() {
        None
    } else {
        let online = online_cpus(root)?;
        let target = Target::for_vms(plan, &running, &online)?;
        let (mut journal, more) = prepare(root, &target)?;
        notes.extend(more);
        // The hook runs under libvirt, not a terminal: nothing interrupts it.
        journal::apply(&mut journal, &path, &mut |_| {}, &Interrupt::new())?;
        Some(journal)
    };
    state.save_hook_vms(&running)?;
    Ok(HookOutcome {
        running,
        journal,
        failed,
        notes,
    })
}
