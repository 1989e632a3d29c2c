//! The host's cgroups confined to the housekeeping CPUs, whichever way the
//! host runs them: through systemd (`systemctl set-property --runtime …
//! AllowedCPUs=`) where systemd runs a unified (v2) hierarchy; directly
//! through cgroup v2 `cpuset.cpus` otherwise; or through the cgroup v1
//! `cpuset` hierarchy. libvirt's cgroup (`machine.slice`, or `machine` on
//! hosts without systemd) keeps the VM CPUs. Processes in the root cgroup,
//! which cannot be confined itself, move into a cgroup of pinplan's,
//! [`HOUSEKEEPING`].

use super::journal::Change;
use super::systemd::allowed_cpus;
use super::{IsolateError, Target};
use crate::cpuset::CpuSet;
use crate::host::cgroup::{children, controllers, ids, Layout, MACHINE};
use crate::host::fs::read;
use crate::host::task::task;
use std::path::{Path, PathBuf};

/// The cgroup pinplan creates for the root cgroup's processes.
pub const HOUSEKEEPING: &str = "pinplan.housekeeping";

/// The systemd units confined.
pub const UNITS: [&str; 3] = ["system.slice", "user.slice", "init.scope"];

/// The changes that confine the host's cgroups to `target.housekeeping`,
/// and notes for the reader.
pub fn plan(
    root: &Path,
    layout: &Layout,
    target: &Target,
) -> Result<(Vec<Change>, Vec<String>), IsolateError> {
    let mut changes = Vec::new();
    let mut notes = Vec::new();
    match layout {
        Layout::None => notes.push(
            "no cpuset cgroup hierarchy is mounted: the host's processes are not confined \
             (mount one, or isolate at boot: --emit kernel-args)"
                .to_owned(),
        ),
        Layout::Systemd(mount) => systemd(mount, target, &mut changes, &mut notes)?,
        Layout::V2(mount) => v2(root, mount, target, &mut changes, &mut notes)?,
        Layout::V1(mount) => v1(root, mount, target, &mut changes, &mut notes)?,
    }
    Ok((changes, notes))
}

/// Through systemd: each of [`UNITS`] allowed the housekeeping CPUs only.
fn systemd(
    mount: &Path,
    target: &Target,
    changes: &mut Vec<Change>,
    notes: &mut Vec<String>,
) -> Result<(), IsolateError> {
    for unit in UNITS {
        let before = allowed_cpus(unit)?;
        changes.push(Change::Systemd {
            unit: unit.to_owned(),
            before,
            after: target.housekeeping.to_string(),
        });
    }
    machine_note(
        &mount.join("machine.slice"),
        "cpuset.cpus.effective",
        target,
        notes,
    );
    Ok(())
}

/// Directly on cgroup v2: the cpuset controller enabled for the children,
/// each of the host's top cgroups confined, the root's processes moved
/// into ours.
fn v2(
    root: &Path,
    mount: &Path,
    target: &Target,
    changes: &mut Vec<Change>,
    notes: &mut Vec<String>,
) -> Result<(), IsolateError> {
    let hk = &target.housekeeping;
    let ours = ours(mount)?;
    let enabled = controllers(&mount.join("cgroup.subtree_control"))
        .iter()
        .any(|c| c == "cpuset");
    if !enabled {
        changes.push(Change::Enable {
            path: mount.join("cgroup.subtree_control"),
            controller: "cpuset".to_owned(),
        });
    }
    for (name, dir) in host_cgroups(mount) {
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
    moves(root, mount, &ours, "cgroup.procs", changes, notes);
    machine_note(
        &mount.join("machine.slice"),
        "cpuset.cpus.effective",
        target,
        notes,
    );
    Ok(())
}

/// On the cgroup v1 `cpuset` hierarchy: each of the host's cgroups
/// confined, subtree and all, the root's tasks moved into ours (with the
/// root's memory nodes, which v1 requires).
fn v1(
    root: &Path,
    mount: &Path,
    target: &Target,
    changes: &mut Vec<Change>,
    notes: &mut Vec<String>,
) -> Result<(), IsolateError> {
    let hk = &target.housekeeping;
    let ours = ours(mount)?;
    for (name, dir) in host_cgroups(mount) {
        confine_v1(&dir, &name, hk, changes);
    }
    let mems = read(&mount.join("cpuset.mems")).map(|t| t.trim().to_owned());
    changes.push(Change::Create {
        path: ours.clone(),
        cpus: hk.clone(),
        mems,
    });
    moves(root, mount, &ours, "tasks", changes, notes);
    let machine = MACHINE
        .iter()
        .map(|m| mount.join(m))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| mount.join("machine"));
    machine_note(&machine, "cpuset.cpus", target, notes);
    Ok(())
}

/// Our cgroup under `mount`, [`HOUSEKEEPING`]; refused when it exists
/// already (an isolation in effect, or one killed halfway).
fn ours(mount: &Path) -> Result<PathBuf, IsolateError> {
    let path = mount.join(HOUSEKEEPING);
    if path.exists() {
        return Err(IsolateError::Leftover { path });
    }
    Ok(path)
}

/// The top cgroups under `mount` that are the host's, libvirt's aside:
/// (name, directory).
fn host_cgroups(mount: &Path) -> impl Iterator<Item = (String, PathBuf)> {
    children(mount)
        .into_iter()
        .filter(|(name, _)| !MACHINE.contains(&name.as_str()))
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

#[cfg(test)]
mod tests {
    use crate::cpuset::CpuSet;
    use crate::host::cgroup::{unescape, vm_cpus};
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
