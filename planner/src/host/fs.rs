//! Reading a Linux host's sysfs and procfs under a root directory (`/`, or
//! an unpacked capture holding `sys/` and `proc/`, as hwloc's
//! `HWLOC_FSROOT`): [`Fs`]. Every read is optional: a file that is absent or
//! unreadable is `None`, never an error, so that callers can say what they
//! could not see. Deciding what the values mean is the callers' business.
//! Also the unconfined primitives that read and write kernel files of the
//! live host ([`read`], [`read_capped`], [`write()`]).
//!
//! Symbolic links (`driver`, `iommu_group`, `physfn`) are read with
//! `read_link` and only their last component is used: captures keep the
//! links but not always the directories they point to, and an absolute
//! link would leave the root.

use crate::cpuset::CpuSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// A filesystem root holding `sys/` and/or `proc/`.
#[derive(Debug, Clone)]
pub struct Fs {
    root: PathBuf,
    /// `root` with every link resolved: no read leaves it.
    real_root: PathBuf,
    has_sys: bool,
}

/// Why a root cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    /// The root holds neither `sys/` nor `proc/`.
    #[error("{} has neither sys/ nor proc/", root.display())]
    NoSysOrProc {
        /// The root given.
        root: PathBuf,
    },
}

impl Fs {
    /// Opens `root`; it must hold `sys/` or `proc/` (or both).
    pub fn open(root: &Path) -> Result<Fs, FsError> {
        let has_sys = root.join("sys").is_dir();
        let has_proc = root.join("proc").is_dir();
        if !has_sys && !has_proc {
            return Err(FsError::NoSysOrProc {
                root: root.to_path_buf(),
            });
        }
        Ok(Fs {
            root: root.to_path_buf(),
            real_root: root.canonicalize().unwrap_or_else(|_| root.to_path_buf()),
            has_sys,
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// tuned's isolated CPUs when its active profile is `cpu-partitioning`
    /// (`etc/tuned/active_profile`, `isolated_cores=` in
    /// `etc/tuned/cpu-partitioning-variables.conf`); `None` otherwise, or
    /// when the value is not a plain CPU list.
    pub fn tuned_isolated(&self) -> Option<CpuSet> {
        let profile = self.read(&self.root.join("etc/tuned/active_profile"))?;
        if !profile.split_whitespace().any(|p| p == "cpu-partitioning") {
            return None;
        }
        let vars = self.read(&self.root.join("etc/tuned/cpu-partitioning-variables.conf"))?;
        vars.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .find_map(|l| l.trim().strip_prefix("isolated_cores="))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Whether `sys/` exists under the root.
    pub fn has_sys(&self) -> bool {
        self.has_sys
    }

    /// `ROOT/sys/REL`.
    pub fn sys(&self, rel: &str) -> PathBuf {
        self.root.join("sys").join(rel)
    }

    /// `ROOT/proc/REL`.
    pub fn proc(&self, rel: &str) -> PathBuf {
        self.root.join("proc").join(rel)
    }

    /// `sys/devices/system/cpu/smt/control` (`on`, `off`, `forceoff`,
    /// `notsupported`, `notimplemented`).
    pub fn smt_control(&self) -> Option<String> {
        self.read(&self.sys("devices/system/cpu/smt/control"))
    }

    /// The number of NUMA nodes (`sys/devices/system/node/nodeN`).
    pub fn numa_nodes(&self) -> Option<usize> {
        let names = self.list(&self.sys("devices/system/node"))?;
        Some(
            names
                .iter()
                .filter(|n| {
                    n.strip_prefix("node")
                        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
                })
                .count(),
        )
    }

    /// The NUMA node ids (`sys/devices/system/node/nodeN`).
    pub fn node_ids(&self) -> Option<std::collections::BTreeSet<crate::ids::NodeId>> {
        let names = self.list(&self.sys("devices/system/node"))?;
        Some(
            names
                .iter()
                .filter_map(|n| n.strip_prefix("node")?.parse().ok())
                .map(crate::ids::NodeId)
                .collect(),
        )
    }

    /// Whether `/proc/cpuinfo` lists the CPU flag `flag` (`pdpe1gb`).
    pub fn cpu_flag(&self, flag: &str) -> Option<bool> {
        let text = self.read_raw(&self.proc("cpuinfo"))?;
        let flags = text.lines().find(|l| l.starts_with("flags"))?;
        Some(flags.split_whitespace().any(|f| f == flag))
    }

    /// The transparent huge page setting, e.g. `always [madvise] never`.
    pub fn transparent_hugepages(&self) -> Option<String> {
        self.read(&self.sys("kernel/mm/transparent_hugepage/enabled"))
    }

    /// The CPUs present, online or not (`sys/devices/system/cpu/present`).
    pub fn present_cpus(&self) -> Option<CpuSet> {
        self.read(&self.sys("devices/system/cpu/present"))?
            .parse()
            .ok()
    }

    /// The online CPUs (`sys/devices/system/cpu/online`).
    pub fn online_cpus(&self) -> Option<CpuSet> {
        self.read(&self.sys("devices/system/cpu/online"))?
            .parse()
            .ok()
    }

    /// The first `vendor_id` of `/proc/cpuinfo` (`GenuineIntel`,
    /// `AuthenticAMD`, `HygonGenuine`).
    pub fn cpu_vendor(&self) -> Option<String> {
        let text = self.read_raw(&self.proc("cpuinfo"))?;
        text.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == "vendor_id").then(|| value.trim().to_owned())
        })
    }

    /// A file under the root as trimmed text (`proc/sys/kernel/…`).
    pub fn text(&self, rel: &str) -> Option<String> {
        self.read(&self.root.join(rel))
    }

    /// `/proc/cmdline`.
    pub fn cmdline(&self) -> Option<String> {
        self.read(&self.proc("cmdline"))
    }
}

/// At most this much of a file is read: a link to `/dev/zero` in a capture
/// must not grow without bound.
pub const MAX_READ: u64 = 16 << 20;

impl Fs {
    /// Where `path` really is, when that is inside the root.
    fn inside(&self, path: &Path) -> Option<PathBuf> {
        let real = path.canonicalize().ok()?;
        real.starts_with(&self.real_root).then_some(real)
    }

    /// A regular file's whole text, when it is inside the root (no link out
    /// of it), at most [`MAX_READ`] bytes, and UTF-8; else `None`. FIFOs and
    /// devices are never opened.
    pub(crate) fn read_raw(&self, path: &Path) -> Option<String> {
        let real = self.inside(path)?;
        if !std::fs::metadata(&real).ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        std::fs::File::open(&real)
            .ok()?
            .take(MAX_READ + 1)
            .read_to_string(&mut text)
            .ok()?;
        (text.len() as u64 <= MAX_READ).then_some(text)
    }

    /// [`Fs::read_raw`], trimmed.
    pub(crate) fn read(&self, path: &Path) -> Option<String> {
        self.read_raw(path).map(|s| s.trim().to_owned())
    }

    /// A directory's entry names, sorted, when it is inside the root.
    pub(crate) fn list(&self, dir: &Path) -> Option<Vec<String>> {
        let real = self.inside(dir)?;
        let mut names: Vec<String> = std::fs::read_dir(real)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Some(names)
    }
}

/// The last component of a symbolic link's target.
pub(crate) fn link_name(path: &Path) -> Option<String> {
    let target = std::fs::read_link(path).ok()?;
    target.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// At most [`MAX_READ`] bytes of `path` as text (lossy), wherever it is;
/// `None` when unreadable.
pub fn read(path: &Path) -> Option<String> {
    read_capped(path, MAX_READ)
}

/// At most `max` bytes of a regular file as text (lossy); `None` when it
/// cannot be read or is not a regular file (a FIFO planted in /proc's place
/// is never waited on).
pub fn read_capped(path: &Path, max: u64) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Writes `value` to an existing kernel file (never creating one, never
/// through a symbolic link as the last component).
pub fn write(path: &Path, value: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(value.as_bytes())
}
