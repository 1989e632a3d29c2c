//! The host's cgroups confined to the housekeeping CPUs, whichever way the
//! host runs them: through systemd (`systemctl set-property --runtime …
//! AllowedCPUs=`) where systemd runs a unified (v2) hierarchy; directly
//! through cgroup v2 `cpuset.cpus` otherwise; or through the cgroup v1
//! `cpuset` hierarchy. libvirt's cgroup (`machine.slice`, or `machine` on
//! hosts without systemd) keeps the VM CPUs. Processes in the root cgroup,
//! which cannot be confined itself, move into a cgroup of pinplan's,
//! [`HOUSEKEEPING`].

use super::journal::Change;
use super::{read, IsolateError, Target};
use crate::cpuset::CpuSet;
use std::path::{Path, PathBuf};

/// The cgroup pinplan creates for the root cgroup's processes.
pub const HOUSEKEEPING: &str = "pinplan.housekeeping";

/// libvirt's cgroups, left as they are.
const MACHINE: [&str; 2] = ["machine.slice", "machine"];

/// The systemd units confined.
pub const UNITS: [&str; 3] = ["system.slice", "user.slice", "init.scope"];

/// How the host's cgroups are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// systemd on a unified hierarchy mounted here.
    Systemd(PathBuf),
    /// cgroup v2 with the cpuset controller, no systemd.
    V2(PathBuf),
    /// A cgroup v1 hierarchy with the cpuset controller.
    V1(PathBuf),
    /// No cpuset controller mounted.
    None,
}

impl Layout {
    /// The journal's name for it.
    pub fn name(&self) -> &'static str {
        match self {
            Layout::Systemd(_) => "systemd",
            Layout::V2(_) => "cgroup-v2",
            Layout::V1(_) => "cgroup-v1",
            Layout::None => "none",
        }
    }
}

/// A mount table field with the kernel's octal escapes (`\040` for a
/// space) decoded.
pub(crate) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits
                    .iter()
                    .fold(0u16, |acc, d| acc * 8 + u16::from(d - b'0'));
                if let Ok(byte) = u8::try_from(value) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup mounts under `root` (from `root/proc/mounts`): (type, mount
/// point under root, options).
fn mounts(root: &Path) -> Vec<(String, PathBuf, String)> {
    let Some(text) = read(&root.join("proc/mounts")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (point, kind, options) = (fields.get(1)?, fields.get(2)?, fields.get(3)?);
            if *kind != "cgroup" && *kind != "cgroup2" {
                return None;
            }
            let point = unescape(point);
            let relative = point.trim_start_matches('/');
            if relative.split('/').any(|c| c == "..") {
                return None;
            }
            Some((
                (*kind).to_owned(),
                root.join(relative),
                (*options).to_owned(),
            ))
        })
        .collect()
}

/// Every cgroup mount point under `root` (for the journal's path check).
pub fn cgroup_mounts(root: &Path) -> Vec<PathBuf> {
    mounts(root).into_iter().map(|(_, p, _)| p).collect()
}

/// Whether systemd runs the host (`/run/systemd/system` is a directory).
fn systemd_runs(root: &Path) -> bool {
    root.join("run/systemd/system").is_dir()
}

/// The words of a cgroup v2 controller list file.
fn controllers(path: &Path) -> Vec<String> {
    read(path)
        .map(|t| t.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// How the cgroups under `root` are run: a unified hierarchy with cpuset
/// first (systemd's when systemd runs), else a v1 cpuset hierarchy.
pub fn detect(root: &Path) -> Layout {
    let all = mounts(root);
    for (kind, point, _) in &all {
        if kind == "cgroup2"
            && controllers(&point.join("cgroup.controllers"))
                .iter()
                .any(|c| c == "cpuset")
        {
            return if systemd_runs(root) {
                Layout::Systemd(point.clone())
            } else {
                Layout::V2(point.clone())
            };
        }
    }
    for (kind, point, options) in &all {
        if kind == "cgroup" && options.split(',').any(|o| o == "cpuset") {
            return Layout::V1(point.clone());
        }
    }
    Layout::None
}

/// A thread's (or process's) facts from `proc/TID`: the one reader of its
/// `stat`, `comm` and `status`.
pub(super) struct Task {
    pub name: String,
    /// Start time, clock ticks after boot (`stat` field 22): `None` when the
    /// thread is gone.
    pub start: Option<u64>,
    pub affinity: Option<CpuSet>,
    pub kernel: bool,
    pub bound: bool,
    /// CPU time used, utime + stime in clock ticks (`stat` fields 14, 15).
    pub ticks: u64,
}

/// `PF_KTHREAD` and `PF_NO_SETAFFINITY` in `/proc/TID/stat`'s flags.
const PF_KTHREAD: u64 = 0x0020_0000;
const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

pub(super) fn task(root: &Path, tid: u32) -> Task {
    let dir = root.join(format!("proc/{tid}"));
    let name = read(&dir.join("comm"))
        .map(|t| t.trim().to_owned())
        .unwrap_or_default();
    let stat = read(&dir.join("stat")).unwrap_or_default();
    // Fields after the name in parentheses (which may hold spaces and ')').
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    // rest[0] is field 3 (state): flags are field 9, utime and stime 14
    // and 15, starttime 22.
    let field = |i: usize| rest.get(i).and_then(|f| f.parse::<u64>().ok());
    let flags = field(6).unwrap_or(0);
    let start = field(19);
    let ticks = field(11)
        .unwrap_or(0)
        .saturating_add(field(12).unwrap_or(0));
    let affinity = read(&dir.join("status")).and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .and_then(|v| v.trim().parse().ok())
    });
    Task {
        name,
        start,
        affinity,
        kernel: flags & PF_KTHREAD != 0,
        bound: flags & PF_NO_SETAFFINITY != 0,
        ticks,
    }
}

/// The numbers in a `tasks` or `cgroup.procs` file.
fn ids(path: &Path) -> Vec<u32> {
    read(path)
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// The child cgroups of `dir`, sorted, as (name, path).
fn children(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    out.sort();
    out
}

/// The changes that confine the host's cgroups to `target.housekeeping`,
/// and notes for the reader.
pub fn plan(
    root: &Path,
    layout: &Layout,
    target: &Target,
) -> Result<(Vec<Change>, Vec<String>), IsolateError> {
    let hk = &target.housekeeping;
    let mut changes = Vec::new();
    let mut notes = Vec::new();
    match layout {
        Layout::None => notes.push(
            "no cpuset cgroup hierarchy is mounted: the host's processes are not confined \
             (mount one, or isolate at boot: --emit kernel-args)"
                .to_owned(),
        ),
        Layout::Systemd(mount) => {
            for unit in UNITS {
                let before = allowed_cpus(unit)?;
                changes.push(Change::Systemd {
                    unit: unit.to_owned(),
                    before,
                    after: hk.to_string(),
                });
            }
            machine_note(
                &mount.join("machine.slice"),
                "cpuset.cpus.effective",
                target,
                &mut notes,
            );
        }
        Layout::V2(mount) => {
            let ours = mount.join(HOUSEKEEPING);
            if ours.exists() {
                return Err(leftover(&ours));
            }
            let enabled = controllers(&mount.join("cgroup.subtree_control"))
                .iter()
                .any(|c| c == "cpuset");
            if !enabled {
                changes.push(Change::Enable {
                    path: mount.join("cgroup.subtree_control"),
                    controller: "cpuset".to_owned(),
                });
            }
            for (name, dir) in children(mount) {
                if MACHINE.contains(&name.as_str()) {
                    continue;
                }
                let path = dir.join("cpuset.cpus");
                let before = read(&path).map(|t| t.trim().to_owned()).unwrap_or_default();
                changes.push(Change::Write {
                    what: format!("cgroup {name}"),
                    path,
                    before,
                    after: hk.to_string(),
                });
            }
            changes.push(Change::Create {
                path: ours.clone(),
                cpus: hk.clone(),
                mems: None,
            });
            moves(root, mount, &ours, "cgroup.procs", &mut changes, &mut notes);
            machine_note(
                &mount.join("machine.slice"),
                "cpuset.cpus.effective",
                target,
                &mut notes,
            );
        }
        Layout::V1(mount) => {
            let ours = mount.join(HOUSEKEEPING);
            if ours.exists() {
                return Err(leftover(&ours));
            }
            for (name, dir) in children(mount) {
                if MACHINE.contains(&name.as_str()) {
                    continue;
                }
                confine_v1(&dir, &name, hk, &mut changes);
            }
            let mems = read(&mount.join("cpuset.mems")).map(|t| t.trim().to_owned());
            changes.push(Change::Create {
                path: ours.clone(),
                cpus: hk.clone(),
                mems,
            });
            moves(root, mount, &ours, "tasks", &mut changes, &mut notes);
            let machine = MACHINE
                .iter()
                .map(|m| mount.join(m))
                .find(|p| p.is_dir())
                .unwrap_or_else(|| mount.join("machine"));
            machine_note(&machine, "cpuset.cpus", target, &mut notes);
        }
    }
    Ok((changes, notes))
}

fn leftover(ours: &Path) -> IsolateError {
    IsolateError::Leftover {
        path: ours.to_owned(),
    }
}

/// A v1 cgroup subtree: each cgroup's CPUs within its parent's new ones,
/// written deepest first (a v1 parent cannot shrink below a child).
fn confine_v1(dir: &Path, name: &str, parent: &CpuSet, changes: &mut Vec<Change>) {
    let path = dir.join("cpuset.cpus");
    let Some(before) = read(&path).map(|t| t.trim().to_owned()) else {
        return;
    };
    let now: CpuSet = before.parse().unwrap_or_default();
    let kept = now.intersection(parent);
    let after = if kept.is_empty() {
        parent.clone()
    } else {
        kept
    };
    for (child, child_dir) in children(dir) {
        confine_v1(&child_dir, &format!("{name}/{child}"), &after, changes);
    }
    if after.to_string() != before {
        changes.push(Change::Write {
            what: format!("cgroup {name}"),
            path,
            before,
            after: after.to_string(),
        });
    }
}

/// The root cgroup's tasks moved into ours; per-CPU kernel threads (which
/// the kernel keeps) are counted in a note, not moved. On cgroup v2 no
/// kernel thread can leave the root.
fn moves(
    root: &Path,
    mount: &Path,
    ours: &Path,
    file: &str,
    changes: &mut Vec<Change>,
    notes: &mut Vec<String>,
) {
    let mut kept = 0usize;
    for tid in ids(&mount.join(file)) {
        let t = task(root, tid);
        if t.bound || (t.kernel && file == "cgroup.procs") {
            kept += 1;
            continue;
        }
        changes.push(Change::Move {
            tid,
            start: t.start,
            name: t.name,
            from: mount.to_path_buf(),
            to: ours.to_path_buf(),
            file: file.to_owned(),
            affinity: t.affinity,
        });
    }
    if kept > 0 {
        notes.push(format!(
            "{kept} kernel threads stay in the root cgroup (per-CPU or bound: the kernel keeps \
             them where they are)"
        ));
    }
}

/// A note when libvirt's cgroup does not allow every VM CPU.
fn machine_note(dir: &Path, file: &str, target: &Target, notes: &mut Vec<String>) {
    let Some(cpus) = read(&dir.join(file)).and_then(|t| t.trim().parse::<CpuSet>().ok()) else {
        return;
    };
    let missing = target.vm_cpus.difference(&cpus);
    if !missing.is_empty() {
        notes.push(format!(
            "libvirt's cgroup {} allows CPUs {cpus}, not the VM CPUs {missing}: the VMs cannot run there",
            dir.display()
        ));
    }
}

/// `systemctl`, found on `PATH`.
fn systemctl(args: &[&str]) -> Result<String, IsolateError> {
    let failed = |message: String| IsolateError::Systemctl {
        args: args.join(" "),
        message,
    };
    let out = std::process::Command::new("systemctl")
        .args(args)
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        let message = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(failed(if message.is_empty() {
            out.status.to_string()
        } else {
            message
        }));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A unit's `AllowedCPUs` now (empty: not set).
fn allowed_cpus(unit: &str) -> Result<String, IsolateError> {
    systemctl(&["show", "--property", "AllowedCPUs", "--value", unit])
}

/// Sets a unit's `AllowedCPUs` for this boot (`--runtime`: nothing under
/// /etc changes); an empty value removes the restriction.
pub(super) fn set_allowed_cpus(unit: &str, cpus: &str) -> Result<(), IsolateError> {
    let property = format!("AllowedCPUs={cpus}");
    systemctl(&["set-property", "--runtime", unit, &property]).map(|_| ())
}

/// The CPUs the host's VMs may be given, by the cgroups: what libvirt's
/// cgroup (`machine.slice`, `machine`) may use when it exists and has a
/// cpuset, else what the cpuset hierarchy's root may use (all online CPUs
/// on a host; a container's own CPUs inside one). `None` when no cpuset
/// hierarchy is mounted: no cgroup keeps a VM off any CPU.
///
/// Not this process's cgroup nor its affinity: `isolate` confines every
/// cgroup but libvirt's (pinplan's own among them) to the housekeeping
/// CPUs, and the VM CPUs stay the VMs' (issue 27).
pub fn vm_cpus(root: &Path) -> Option<CpuSet> {
    let (mount, files): (PathBuf, &[&str]) = match detect(root) {
        Layout::None => return None,
        Layout::Systemd(m) | Layout::V2(m) => (m, &["cpuset.cpus.effective"]),
        // v1 without `cgroup.sane_behavior` keeps `cpuset.cpus` effective;
        // kernels since 4.17 also write `cpuset.effective_cpus`.
        Layout::V1(m) => (m, &["cpuset.effective_cpus", "cpuset.cpus"]),
    };
    let cpus = |dir: &Path| {
        files.iter().find_map(|file| {
            read(&dir.join(file))
                .and_then(|t| t.trim().parse::<CpuSet>().ok())
                // A v1 cgroup nobody gave CPUs yet: libvirt sets them when a
                // VM starts, from its parent's.
                .filter(|set| !set.is_empty())
        })
    };
    MACHINE
        .iter()
        .map(|m| mount.join(m))
        .find_map(|dir| cpus(&dir))
        .or_else(|| cpus(&mount))
}

/// Where the host's own processes may run now, by their cgroups, and how
/// that is set: `None` when they are not confined (some process of the
/// host may run on every online CPU).
pub fn host_confinement(root: &Path, online: &CpuSet) -> Option<(CpuSet, String)> {
    let layout = detect(root);
    let (mount, file) = match &layout {
        Layout::None => return None,
        Layout::Systemd(m) | Layout::V2(m) => (m.clone(), "cpuset.cpus.effective"),
        Layout::V1(m) => (m.clone(), "cpuset.cpus"),
    };
    let mut allowed = CpuSet::new();
    let mut confined = Vec::new();
    for (name, dir) in children(&mount) {
        if MACHINE.contains(&name.as_str()) {
            continue;
        }
        // A cgroup without the file (no cpuset there) runs on every CPU.
        let cpus = read(&dir.join(file))
            .and_then(|t| t.trim().parse::<CpuSet>().ok())
            .unwrap_or_else(|| online.clone());
        allowed = allowed.union(&cpus);
        if cpus != *online {
            confined.push(name);
        }
    }
    // User processes left in the root cgroup run anywhere.
    let root_file = if matches!(layout, Layout::V1(_)) {
        "tasks"
    } else {
        "cgroup.procs"
    };
    let loose = ids(&mount.join(root_file))
        .into_iter()
        .any(|tid| !task(root, tid).kernel);
    if loose {
        allowed = allowed.union(online);
    }
    let allowed = allowed.intersection(online);
    (allowed != *online && !confined.is_empty()).then(|| {
        (
            allowed.clone(),
            format!(
                "{} cgroups {} confined to CPUs {allowed}",
                layout.name(),
                confined.join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::{unescape, vm_cpus};
    use crate::cpuset::CpuSet;
    use std::path::Path;

    /// A host tree under `root`: `files` are (path, contents), `proc/mounts`
    /// among them.
    fn tree(root: &Path, files: &[(&str, &str)]) {
        for (rel, text) in files {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    /// Issue 27: the CPUs a plan may give VMs are libvirt's cgroup's, else
    /// the hierarchy root's — never the cgroup pinplan itself runs in
    /// (`user.slice` here, confined by `isolate`).
    #[test]
    fn vm_cpus_are_libvirts_cgroups_not_pinplans() {
        const V2: &str = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n";
        const V1: &str = "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n";
        let v2 = |machine: Option<&'static str>| {
            let mut files = vec![
                ("proc/mounts", V2),
                ("sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n"),
                ("sys/fs/cgroup/cpuset.cpus.effective", "0-7\n"),
                ("sys/fs/cgroup/user.slice/cpuset.cpus.effective", "0\n"),
            ];
            if let Some(m) = machine {
                files.push(("sys/fs/cgroup/machine.slice/cpuset.cpus.effective", m));
            }
            files
        };
        let v1 = |machine: &'static str| {
            vec![
                ("proc/mounts", V1),
                ("sys/fs/cgroup/cpuset/cpuset.cpus", "0-3\n"),
                ("sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-3\n"),
                (
                    "sys/fs/cgroup/cpuset/pinplan.housekeeping/cpuset.cpus",
                    "0\n",
                ),
                ("sys/fs/cgroup/cpuset/machine/cpuset.cpus", machine),
            ]
        };
        for (what, files, expected) in [
            ("v2, libvirt's cgroup", v2(Some("2-7\n")), Some("2-7")),
            ("v2, no VM started yet", v2(None), Some("0-7")),
            ("v1, libvirt's cgroup", v1("1-3\n"), Some("1-3")),
            (
                "v1, libvirt's cgroup given no CPUs yet",
                v1("\n"),
                Some("0-3"),
            ),
            ("no cpuset hierarchy", vec![("proc/mounts", "")], None),
        ] {
            let dir = tempfile::tempdir().unwrap();
            tree(dir.path(), &files);
            let expected = expected.map(|e| e.parse::<CpuSet>().unwrap());
            assert_eq!(vm_cpus(dir.path()), expected, "{what}");
        }
    }

    #[test]
    fn mount_points_decode_octal_escapes() {
        assert_eq!(unescape("/sys/fs/cgroup"), "/sys/fs/cgroup");
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/x\\"), "/x\\");
        assert_eq!(unescape("/x\\9"), "/x\\9");
        assert_eq!(unescape("/x\\+12y"), "/x\\+12y");
        assert_eq!(unescape("/x\\777y"), "/x\\777y");
        assert_eq!(unescape("/é\\1é"), "/é\\1é");
    }
}
