//! Reading the host's cgroups: how they are run (systemd, cgroup v2, or the
//! cgroup v1 cpuset hierarchy), where they are mounted, the CPUs libvirt's
//! cgroup may use (for the live topology), and how confined the host's own
//! processes are (for doctor). Changing them is `isolate`'s.

use super::fs::read;
use super::task::task;
use crate::cpuset::CpuSet;
use std::path::{Path, PathBuf};

/// libvirt's cgroups, left as they are.
pub const MACHINE: [&str; 2] = ["machine.slice", "machine"];

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
pub fn controllers(path: &Path) -> Vec<String> {
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

/// The numbers in a `tasks` or `cgroup.procs` file.
pub fn ids(path: &Path) -> Vec<u32> {
    read(path)
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// The child cgroups of `dir`, sorted, as (name, path).
pub fn children(dir: &Path) -> Vec<(String, PathBuf)> {
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
