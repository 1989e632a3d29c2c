//! A thread's (or process's) facts from `proc/TID`: the one reader of its
//! `stat`, `comm` and `status`.

use super::fs::read;
use crate::cpuset::CpuSet;
use std::path::Path;

/// A thread's (or process's) facts from `proc/TID`: the one reader of its
/// `stat`, `comm` and `status`.
pub struct Task {
    /// Its name (`comm`).
    pub name: String,
    /// Start time, clock ticks after boot (`stat` field 22): `None` when the
    /// thread is gone.
    pub start: Option<u64>,
    /// The CPUs it may run on (`Cpus_allowed_list`).
    pub affinity: Option<CpuSet>,
    /// Whether it is a kernel thread (`PF_KTHREAD`).
    pub kernel: bool,
    /// Whether the kernel keeps its affinity (`PF_NO_SETAFFINITY`).
    pub bound: bool,
    /// CPU time used, utime + stime in clock ticks (`stat` fields 14, 15).
    pub ticks: u64,
}

/// `PF_KTHREAD` and `PF_NO_SETAFFINITY` in `/proc/TID/stat`'s flags.
const PF_KTHREAD: u64 = 0x0020_0000;
const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// Thread (or process) `tid`'s facts from `root/proc/TID`; what cannot be
/// read is empty, zero or `None`.
pub fn task(root: &Path, tid: u32) -> Task {
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
