//! The changes an isolation makes, journalled before the first one is made
//! and restored from the journal by [`undo`]: every value as it was read,
//! whatever happened in between (a kill after any change is undone the same
//! way, since restoring a value that was never changed changes nothing).

use super::{IsolateError, Target};
use crate::cpuset::CpuSet;
use crate::host::fs::{read, write};
use crate::host::journal::{self as envelope, Body, Tool, Write};
use crate::interrupt::{Interrupt, Signal};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Change {
    /// A value written to a kernel file (`cpuset.cpus`, `smp_affinity_list`,
    /// the workqueue `cpumask`...).
    Write {
        /// What it is, for people: `IRQ 24 (ttyS0)`, `cgroup system.slice`.
        what: String,
        /// The file.
        path: PathBuf,
        /// Its value before (restored by undo).
        before: String,
        /// The value written.
        after: String,
    },
    /// A cgroup pinplan creates for the host's processes that sit in the
    /// root cgroup (which cannot be confined itself); removed by undo.
    Create {
        /// The cgroup directory.
        path: PathBuf,
        /// Its `cpuset.cpus`.
        cpus: CpuSet,
        /// Its `cpuset.mems` (cgroup v1 needs it before a task can join).
        mems: Option<String>,
    },
    /// A controller enabled in a cgroup v2 `cgroup.subtree_control`.
    Enable {
        /// The `cgroup.subtree_control` file.
        path: PathBuf,
        /// `cpuset`.
        controller: String,
    },
    /// A thread (cgroup v1 `tasks`) or process (v2 `cgroup.procs`) moved
    /// from the root cgroup into the host's.
    Move {
        /// Thread or process id.
        tid: u32,
        /// Its start time (clock ticks after boot, `/proc/TID/stat` field
        /// 22): a reused id is not moved back.
        start: Option<u64>,
        /// Its name (`comm`).
        name: String,
        /// The cgroup it was in.
        from: PathBuf,
        /// The cgroup it goes to.
        to: PathBuf,
        /// `tasks` or `cgroup.procs`.
        file: String,
        /// Its CPU affinity before (restored by undo on this machine).
        affinity: Option<CpuSet>,
    },
    /// A systemd unit's `AllowedCPUs`, set with `systemctl set-property
    /// --runtime` (nothing is written under /etc).
    Systemd {
        /// `system.slice`, `user.slice`, `init.scope`.
        unit: String,
        /// Its value before (empty: not set).
        before: String,
        /// The value set.
        after: String,
    },
}

/// What became of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Not made yet (the journal is written before any change).
    Planned,
    /// Made.
    Applied,
    /// The kernel (or systemd) refused it; nothing to undo.
    Refused,
    /// Its thread ended before it was moved.
    Gone,
}

/// One change and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The change.
    #[serde(flatten)]
    pub change: Change,
    /// What became of it.
    pub status: Status,
    /// Why, when refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The journal file, in the journals' envelope ([`crate::host::journal`],
/// tool `pinplan isolate`, version 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// The directory holding sys/ and proc/ (`/` on a host).
    pub root: PathBuf,
    /// How the cgroups were confined: `systemd`, `cgroup-v2`, `cgroup-v1`
    /// or `none`.
    pub cgroups: String,
    /// The VMs whose CPUs were isolated.
    pub vms: Vec<String>,
    /// Their CPUs.
    pub vm_cpus: CpuSet,
    /// The host's.
    pub housekeeping: CpuSet,
    /// `applying`, `applied` or `undone`.
    pub state: String,
    /// Every change, in the order made.
    pub changes: Vec<Entry>,
}

/// What makes a journal one `pinplan isolate --undo` must not act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Unsafe {
    /// A controller other than cpuset.
    #[error("controller {0:?} is not cpuset")]
    Controller(String),
    /// A task file other than `tasks` or `cgroup.procs`.
    #[error("{0:?} is not tasks or cgroup.procs")]
    TaskFile(String),
    /// A unit that is no slice or scope, or a value that is no CPU list.
    #[error("unit {unit:?} or its value {before:?}")]
    Unit {
        /// The unit.
        unit: String,
        /// Its value before.
        before: String,
    },
    /// A path outside what isolation changes.
    #[error("{} is not a file pinplan isolate changes", .0.display())]
    Path(PathBuf),
}

impl Body for Journal {
    const TOOL: Tool = Tool::Isolate;
}

impl Journal {
    /// A journal of `changes` for `target`, none made yet.
    pub fn new(root: &Path, cgroups: &str, target: &Target, changes: Vec<Change>) -> Journal {
        Journal {
            root: root.to_path_buf(),
            cgroups: cgroups.to_owned(),
            vms: target.vms.clone(),
            vm_cpus: target.vm_cpus.clone(),
            housekeeping: target.housekeeping.clone(),
            state: "applying".to_owned(),
            changes: changes
                .into_iter()
                .map(|change| Entry {
                    change,
                    status: Status::Planned,
                    reason: None,
                })
                .collect(),
        }
    }

    /// Reads a journal, refusing one that is not `pinplan isolate`'s or that
    /// names a file outside what isolation changes.
    pub fn load(path: &Path) -> Result<Journal, IsolateError> {
        envelope::read::<Journal>(path)?.body.checked(path)
    }

    /// A journal from its text (read from `path`), checked as [`Journal::load`]
    /// checks it.
    pub fn from_text(path: &Path, text: &str) -> Result<Journal, IsolateError> {
        envelope::parse::<Journal>(path, text)?.body.checked(path)
    }

    /// The journal, when it names only what isolation changes.
    fn checked(self, path: &Path) -> Result<Journal, IsolateError> {
        match self.check() {
            Ok(()) => Ok(self),
            Err(reason) => Err(IsolateError::BadJournal {
                path: path.to_owned(),
                message: reason.to_string(),
            }),
        }
    }

    /// Every path must be one isolation changes, under the journal's root,
    /// without `..`; every unit a slice or scope name.
    fn check(&self) -> Result<(), Unsafe> {
        let root = &self.root;
        let allowed = ["proc/irq", "sys/fs/cgroup", "sys/devices/virtual/workqueue"];
        let mut mounts: Vec<PathBuf> = crate::host::cgroup::cgroup_mounts(root);
        mounts.extend(allowed.iter().map(|a| root.join(a)));
        let inside = |p: &Path| {
            p.components().all(|c| !matches!(c, Component::ParentDir))
                && mounts.iter().any(|m| p.starts_with(m) && p != m.as_path())
        };
        for entry in &self.changes {
            let paths: Vec<&Path> = match &entry.change {
                Change::Write { path, .. } | Change::Create { path, .. } => vec![path],
                Change::Enable { path, controller } => {
                    if controller != "cpuset" {
                        return Err(Unsafe::Controller(controller.clone()));
                    }
                    vec![path]
                }
                Change::Move { from, to, file, .. } => {
                    if file != "tasks" && file != "cgroup.procs" {
                        return Err(Unsafe::TaskFile(file.clone()));
                    }
                    vec![from, to]
                }
                Change::Systemd { unit, before, .. } => {
                    let ok = unit
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.:@".contains(c))
                        && (unit.ends_with(".slice") || unit.ends_with(".scope"));
                    if !ok || (!before.is_empty() && before.parse::<CpuSet>().is_err()) {
                        return Err(Unsafe::Unit {
                            unit: unit.clone(),
                            before: before.clone(),
                        });
                    }
                    vec![]
                }
            };
            // A moved task's root cgroup is the mount itself.
            for p in paths {
                let is_mount = mounts.iter().any(|m| m == p);
                if !(inside(p) || is_mount && matches!(entry.change, Change::Move { .. })) {
                    return Err(Unsafe::Path(p.to_owned()));
                }
            }
        }
        Ok(())
    }

    /// Writes the journal to `path` atomically (a temporary file in the same
    /// directory, synced, renamed over; mode 0600); [`Write::New`]: `path`
    /// must not exist yet (the first save, before any change).
    pub fn save(&self, path: &Path, how: Write) -> Result<(), IsolateError> {
        envelope::write(path, self, how).map_err(|e| {
            if e.source.kind() == std::io::ErrorKind::AlreadyExists {
                IsolateError::JournalExists {
                    path: path.to_owned(),
                }
            } else {
                IsolateError::Io {
                    what: "cannot write",
                    path: e.path,
                    source: e.source,
                }
            }
        })
    }

    /// Counts of the entries by status: (applied, refused, gone).
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |s: Status| self.changes.iter().filter(|e| e.status == s).count();
        (n(Status::Applied), n(Status::Refused), n(Status::Gone))
    }
}

/// Makes every change of `journal`, saving it to `path` first (a new file,
/// state `applying`) and last (`applied`, each change's status). `before`
/// runs before each change with its index (where tests inject a kill). A
/// request on `interrupt`, checked before each change, stops the changes
/// and undoes the ones made ([`IsolateError::Interrupted`]; a second
/// request stops that undo too, [`IsolateError::InterruptedAgain`]).
pub fn apply(
    journal: &mut Journal,
    path: &Path,
    before: &mut dyn FnMut(usize),
    interrupt: &Interrupt,
) -> Result<(), IsolateError> {
    journal.save(path, Write::New)?;
    for i in 0..journal.changes.len() {
        before(i);
        if let Some(signal) = interrupt.first() {
            return Err(stopped(journal, path, signal, interrupt));
        }
        let entry = &mut journal.changes[i];
        let (status, reason) = make(&entry.change);
        entry.status = status;
        entry.reason = reason;
    }
    // Threads started in the root cgroup while the others moved: once more
    // for those (journalled before they move).
    let late = late_moves(journal);
    if !late.is_empty() {
        let first = journal.changes.len();
        journal.changes.extend(late.into_iter().map(|change| Entry {
            change,
            status: Status::Planned,
            reason: None,
        }));
        journal.save(path, Write::Update)?;
        for entry in &mut journal.changes[first..] {
            let (status, reason) = make(&entry.change);
            entry.status = status;
            entry.reason = reason;
        }
    }
    if let Some(signal) = interrupt.first() {
        return Err(stopped(journal, path, signal, interrupt));
    }
    journal.state = "applied".to_owned();
    journal.save(path, Write::Update)
}

/// An isolation stopped by `signal`: what was made is undone from the
/// journal (saved first, with what was made), and how that went is the error.
fn stopped(
    journal: &mut Journal,
    path: &Path,
    signal: Signal,
    interrupt: &Interrupt,
) -> IsolateError {
    if let Err(e) = journal.save(path, Write::Update) {
        return e;
    }
    match undo(journal, path, interrupt) {
        Ok(done) if done.interrupted.is_some() => IsolateError::InterruptedAgain {
            signal: done.interrupted.unwrap_or(signal),
            journal: path.to_owned(),
        },
        Ok(done) => IsolateError::Interrupted {
            signal,
            journal: path.to_owned(),
            failed: done.failed,
        },
        Err(e) => e,
    }
}

/// Moves for the tasks now in the root cgroup that the journal does not
/// move yet (kernel threads the kernel keeps excepted).
fn late_moves(journal: &Journal) -> Vec<Change> {
    let Some((from, to, file)) = journal.changes.iter().find_map(|e| match &e.change {
        Change::Move { from, to, file, .. } => Some((from.clone(), to.clone(), file.clone())),
        _ => None,
    }) else {
        return Vec::new();
    };
    let known = moved_tids(journal);
    let now: Vec<u32> = read(&from.join(&file))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default();
    now.into_iter()
        .filter(|tid| !known.contains(tid))
        .filter_map(|tid| {
            let t = crate::host::task::task(&journal.root, tid);
            let kept = t.bound || (t.kernel && file == "cgroup.procs");
            (!kept).then(|| Change::Move {
                tid,
                start: t.start,
                name: t.name,
                from: from.clone(),
                to: to.clone(),
                file: file.clone(),
                affinity: t.affinity,
            })
        })
        .collect()
}

fn refused(e: &std::io::Error) -> (Status, Option<String>) {
    (Status::Refused, Some(e.to_string()))
}

/// Makes one change.
fn make(change: &Change) -> (Status, Option<String>) {
    match change {
        Change::Write { path, after, .. } => match write(path, after) {
            Ok(()) => (Status::Applied, None),
            Err(e) => refused(&e),
        },
        Change::Create { path, cpus, mems } => {
            if let Err(e) = std::fs::create_dir(path) {
                return refused(&e);
            }
            let mut steps: Vec<(&str, String)> = Vec::new();
            if let Some(mems) = mems {
                steps.push(("cpuset.mems", mems.clone()));
            }
            steps.push(("cpuset.cpus", cpus.to_string()));
            for (file, value) in steps {
                if let Err(e) = write_in_new_cgroup(&path.join(file), &value) {
                    return refused(&e);
                }
            }
            // The kernel made the task files; a tree of ordinary files
            // needs them (cgroupfs refuses to make a file: ignored).
            for file in ["tasks", "cgroup.procs"] {
                let _ = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(path.join(file));
            }
            (Status::Applied, None)
        }
        Change::Enable { path, controller } => match write(path, &format!("+{controller}")) {
            Ok(()) => (Status::Applied, None),
            Err(e) => refused(&e),
        },
        Change::Move { tid, to, file, .. } => match add_task(&to.join(file), *tid) {
            Ok(()) => (Status::Applied, None),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => (Status::Gone, None),
            Err(e) => refused(&e),
        },
        Change::Systemd { unit, after, .. } => {
            match super::systemd::set_allowed_cpus(unit, after) {
                Ok(()) => (Status::Applied, None),
                Err(e) => (Status::Refused, Some(e.to_string())),
            }
        }
    }
}

/// What [`undo`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Undone {
    /// Values written back (files, units).
    pub restored: usize,
    /// The threads and processes the journal records as moved (or, for an
    /// isolation stopped part-way, about to be): what the next three count.
    pub to_move: usize,
    /// Of those, moved back.
    pub moved_back: usize,
    /// Of those, ended meanwhile (or their id now another task's).
    pub gone: usize,
    /// Of those, alive but no longer in pinplan's cgroup (moved since by
    /// another program, as libvirt moves a QEMU it starts; or never moved):
    /// left where they are.
    pub elsewhere: usize,
    /// Threads and processes the journal does not name that were in
    /// pinplan's cgroup when it was removed (started there since): moved to
    /// its parent with it.
    pub swept: usize,
    /// Cgroups removed.
    pub removed: usize,
    /// What could not be restored, one line each: a value that reads back
    /// otherwise than before (compared, not assumed).
    pub failed: Vec<String>,
    /// A second interrupt request stopped the undo part-way (the journal
    /// is not marked undone: undo it again to finish).
    #[serde(skip)]
    pub interrupted: Option<Signal>,
}

/// Restores every change of `journal` (saved at `path`), newest first,
/// then reads every restored value back and compares it with the journal's.
/// A first request on `interrupt` does not stop it (an undo is what an
/// interrupted isolation does); a second one does, before the next value
/// ([`Undone::interrupted`]), and the journal is then not marked undone.
pub fn undo(
    journal: &mut Journal,
    path: &Path,
    interrupt: &Interrupt,
) -> Result<Undone, IsolateError> {
    let mut done = Undone::default();
    let this_machine = journal
        .root
        .canonicalize()
        .is_ok_and(|r| r == Path::new("/"));
    let journalled = moved_tids(journal);
    for entry in journal.changes.iter().rev() {
        if matches!(entry.status, Status::Refused | Status::Gone) {
            continue;
        }
        if interrupt.again() {
            done.interrupted = interrupt.last();
            return Ok(done);
        }
        undo_change(
            &entry.change,
            &journal.root,
            this_machine,
            &journalled,
            &mut done,
        );
    }
    read_back(journal, &mut done);
    journal.state = "undone".to_owned();
    journal.save(path, Write::Update)?;
    Ok(done)
}

/// Restores one change, counting it in `done`; `journalled` are the
/// tasks the journal moves (a cgroup removed takes the others with it).
fn undo_change(
    change: &Change,
    root: &Path,
    this_machine: bool,
    journalled: &BTreeSet<u32>,
    done: &mut Undone,
) {
    match change {
        Change::Write {
            what, path, before, ..
        } => match write(path, before) {
            Ok(()) => done.restored += 1,
            // Refused now, but as it was: a change never made (a kill
            // came first) or one the kernel refused then too.
            Err(_) if read(path).is_some_and(|t| t.trim() == before.trim()) => {}
            Err(e) => done
                .failed
                .push(format!("{what} ({}): {e}", path.display())),
        },
        Change::Enable { path, controller } => {
            if let Err(e) = write(path, &format!("-{controller}")) {
                done.failed
                    .push(format!("{}: -{controller}: {e}", path.display()));
            }
        }
        Change::Move {
            tid,
            start,
            from,
            to,
            file,
            affinity,
            ..
        } => {
            let task = MovedTask {
                tid: *tid,
                start: *start,
                from,
                to,
                file,
                affinity: affinity.as_ref(),
            };
            move_back(&task, root, this_machine, done);
        }
        Change::Create { path: dir, .. } => match remove_cgroup(dir, journalled, &mut done.swept) {
            Ok(true) => done.removed += 1,
            Ok(false) => {}
            Err(e) => done.failed.push(format!("{}: {e}", dir.display())),
        },
        Change::Systemd { unit, before, .. } => {
            match super::systemd::set_allowed_cpus(unit, before) {
                Ok(()) => done.restored += 1,
                Err(e) => done.failed.push(e.to_string()),
            }
        }
    }
}

/// A task the journal moved into pinplan's cgroup.
struct MovedTask<'a> {
    tid: u32,
    start: Option<u64>,
    from: &'a Path,
    to: &'a Path,
    file: &'a str,
    affinity: Option<&'a CpuSet>,
}

/// Moves `task` back where it was, with its affinity on this machine.
fn move_back(task: &MovedTask<'_>, root: &Path, this_machine: bool, done: &mut Undone) {
    let tid = task.tid;
    done.to_move += 1;
    // The same thread: alive, and started when the journal says. One that
    // ended is no longer listed anywhere: it is counted, not skipped.
    let now = crate::host::task::task(root, tid).start;
    if now.is_none() || (task.start.is_some() && now != task.start) {
        done.gone += 1;
        return;
    }
    // Only a task still in pinplan's cgroup goes back: one never moved (a
    // kill came first) or moved on since (libvirt puts a new QEMU into its
    // own cgroup) stays where it is.
    let listed = read(&task.to.join(task.file))
        .is_some_and(|t| t.lines().any(|l| l.trim().parse::<u32>().ok() == Some(tid)));
    if !listed {
        done.elsewhere += 1;
        return;
    }
    match add_task(&task.from.join(task.file), tid) {
        Ok(()) => {
            done.moved_back += 1;
            if let (true, Some(set)) = (this_machine, task.affinity) {
                if let Err(e) = super::sys::set_affinity(tid, set) {
                    done.failed
                        .push(format!("thread {tid}: affinity {set}: {e}"));
                }
            }
        }
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => done.gone += 1,
        Err(e) => done
            .failed
            .push(format!("thread {tid} back to {}: {e}", task.from.display())),
    }
}

/// Reads back what was written: the values must be the journal's.
fn read_back(journal: &Journal, done: &mut Undone) {
    for entry in &journal.changes {
        if let (
            Change::Write {
                what, path, before, ..
            },
            Status::Applied | Status::Planned,
        ) = (&entry.change, entry.status)
        {
            let now = read(path).map(|t| t.trim().to_owned());
            if now.as_deref() != Some(before.trim()) {
                done.failed.push(format!(
                    "{what} ({}) reads {:?} after the undo, not {before:?}",
                    path.display(),
                    now.unwrap_or_default()
                ));
            }
        }
    }
}

/// Moves what is left in a cgroup pinplan created (threads forked after the
/// move) into its parent and removes it; `false` when it does not exist.
fn remove_cgroup(
    dir: &Path,
    journalled: &BTreeSet<u32>,
    swept: &mut usize,
) -> std::io::Result<bool> {
    if !dir.is_dir() {
        return Ok(false);
    }
    let parent = dir.parent().unwrap_or(dir);
    // A thread forked inside between the move and the rmdir keeps it busy
    // (EBUSY): move again, a few times.
    let mut tries = 0;
    let mut moved = BTreeSet::new();
    loop {
        for file in ["tasks", "cgroup.procs"] {
            let Some(text) = read(&dir.join(file)) else {
                continue;
            };
            for tid in text.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
                // A task that ends meanwhile is no longer in the way.
                if add_task(&parent.join(file), tid).is_ok() && !journalled.contains(&tid) {
                    moved.insert(tid);
                }
            }
        }
        *swept = moved.len();
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            // A cgroup's own files go with it; ENOTEMPTY is a tree of
            // ordinary files standing in for one (tests, --root): its plain
            // files go.
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {
                for entry in std::fs::read_dir(dir)?.filter_map(Result::ok) {
                    if entry.file_type().is_ok_and(|t| t.is_file()) {
                        std::fs::remove_file(entry.path())?;
                    }
                }
                return std::fs::remove_dir(dir).map(|()| true);
            }
            other => return other.map(|()| true),
        }
    }
}

/// Adds a task to a `tasks` or `cgroup.procs` file (the kernel moves it
/// there; appended, as a cgroup file takes one id per write).
fn add_task(path: &Path, tid: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(format!("{tid}\n").as_bytes())
}

/// Writes a file of a cgroup this run created: the kernel made it with the
/// directory; in a tree of ordinary files it is made here.
fn write_in_new_cgroup(path: &Path, value: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(value.as_bytes())
}

/// The threads and processes a journal records as moved (whatever became
/// of each).
fn moved_tids(journal: &Journal) -> BTreeSet<u32> {
    journal
        .changes
        .iter()
        .filter_map(|e| match e.change {
            Change::Move { tid, .. } => Some(tid),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 29: a journal exactly as `pinplan isolate` wrote it before the
    /// journals' envelope (it was in the envelope already: `tool`,
    /// `version` 1) reads as the same value and is written back byte for
    /// byte.
    #[test]
    fn issue_29_a_journal_of_before_the_envelope_reads_and_writes_the_same() {
        const V1: &str = include_str!("../../../tests/fixtures/journals/isolate-v1.json");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.json");
        std::fs::write(&path, V1).unwrap();
        let journal = Journal::load(&path).unwrap();
        assert_eq!(
            (
                journal.root.as_path(),
                journal.cgroups.as_str(),
                journal.state.as_str()
            ),
            (Path::new("ROOT"), "cgroup-v2", "applied")
        );
        assert_eq!(journal.vms, ["vm1"]);
        assert_eq!(journal.changes.len(), 10);
        assert_eq!(
            journal.changes[5].change,
            Change::Move {
                tid: 1,
                start: Some(10),
                name: "init".to_owned(),
                from: PathBuf::from("ROOT/sys/fs/cgroup"),
                to: PathBuf::from("ROOT/sys/fs/cgroup/pinplan.housekeeping"),
                file: "cgroup.procs".to_owned(),
                affinity: Some("0-3".parse().unwrap()),
            }
        );
        assert_eq!(envelope::to_text(&journal), V1);
    }
}
