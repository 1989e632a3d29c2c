//! Where a running guest's memory is now: the NUMA nodes its QEMU process's
//! pages sit on, from `/proc/PID/numa_maps`, for `report`'s `memory-remote`
//! finding. Only for a local system URI (`qemu:///system`), where libvirt
//! keeps each guest's QEMU pid in `/run/libvirt/qemu/NAME.pid`; the process
//! is checked to be that guest's QEMU (`-name guest=NAME`) before its maps
//! are read, so a stale pid file names no other process.

use crate::host::fs::read_capped;
use crate::ids::NodeId;
use crate::tenant::NodeResident;
use std::collections::BTreeMap;
use std::path::Path;

/// The most of a file read here: a pid file is a number, a command line a
/// few KiB; numa_maps of a large guest is some MiB.
const PID_FILE_MAX: u64 = 64;
const CMDLINE_MAX: u64 = 1 << 20;
const NUMA_MAPS_MAX: u64 = 64 << 20;

/// KiB per node in a `numa_maps` text: each mapping's `N<node>=<pages>`
/// times its `kernelpagesize_kB=` (4 when the line has none). Words that are
/// not these are skipped; sums saturate.
pub fn parse_numa_maps(text: &str) -> BTreeMap<NodeId, u64> {
    let mut out: BTreeMap<NodeId, u64> = BTreeMap::new();
    for line in text.lines() {
        let mut page_kib = 4u64;
        let mut pages: Vec<(u32, u64)> = Vec::new();
        for word in line.split_whitespace() {
            if let Some(kib) = word.strip_prefix("kernelpagesize_kB=") {
                page_kib = kib.parse().unwrap_or(4);
            } else if let Some((node, count)) =
                word.strip_prefix('N').and_then(|w| w.split_once('='))
            {
                if let (Ok(node), Ok(count)) = (node.parse::<u32>(), count.parse::<u64>()) {
                    pages.push((node, count));
                }
            }
        }
        for (node, count) in pages {
            let entry = out.entry(NodeId(node)).or_default();
            *entry = entry.saturating_add(count.saturating_mul(page_kib));
        }
    }
    out
}

/// Whether a NUL-separated command line is domain `name`'s QEMU: it has
/// `-name` followed by `guest=NAME` (commas in the name doubled, as libvirt
/// writes it) and then `,` or the end.
fn is_guest(cmdline: &str, name: &str) -> bool {
    let wanted = format!("guest={}", name.replace(',', ",,"));
    let args: Vec<&str> = cmdline.split('\0').collect();
    args.windows(2).any(|w| {
        w[0] == "-name"
            && w[1]
                .strip_prefix(&wanted)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(','))
    })
}

/// The pid of running domain `name`'s QEMU process under `root` (from
/// libvirt's pid file, checked against the process's command line).
pub fn qemu_pid(root: &Path, name: &str) -> Option<u32> {
    // A domain name is one path component here, never a way out of the
    // directory (libvirt refuses '/' in names; a hostile tree is not trusted).
    if name.is_empty() || name.contains('/') || name.starts_with('.') || name.contains('\0') {
        return None;
    }
    let pid_text = read_capped(
        &root.join(format!("run/libvirt/qemu/{name}.pid")),
        PID_FILE_MAX,
    )?;
    let pid: u32 = pid_text.trim().parse().ok().filter(|&p| p > 0)?;
    let cmdline = read_capped(&root.join(format!("proc/{pid}/cmdline")), CMDLINE_MAX)?;
    is_guest(&cmdline, name).then_some(pid)
}

/// The memory per node of running domain `name`'s QEMU process, read under
/// `root` (`/` on a host): `None` when the pid file, the process or its maps
/// cannot be read, or the process is not that guest's.
pub fn resident(root: &Path, name: &str) -> Option<Vec<NodeResident>> {
    let pid = qemu_pid(root, name)?;
    let proc_dir = root.join(format!("proc/{pid}"));
    let maps = read_capped(&proc_dir.join("numa_maps"), NUMA_MAPS_MAX)?;
    Some(
        parse_numa_maps(&maps)
            .into_iter()
            .filter(|&(_, kib)| kib > 0)
            .map(|(node, kib)| NodeResident { node, kib })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
7f0000000000 default file=/dev/hugepages/libvirt/qemu/1-vm/qemu_back_mem huge dirty=32 N1=32 kernelpagesize_kB=2048
55d0c0a00000 default file=/usr/bin/qemu-system-x86_64 mapped=1000 N0=1000 kernelpagesize_kB=4
7f1000000000 bind:0 anon=512 dirty=512 N0=256 N1=256 kernelpagesize_kB=4
7f2000000000 default stack anon=3 N0=x Nz=4 N=2 kernelpagesize_kB=4
";

    #[test]
    fn numa_maps_sum_pages_times_their_size_per_node() {
        let nodes = parse_numa_maps(MAPS);
        // Node 1: 32 huge pages of 2048 KiB and 256 normal ones; node 0:
        // 1000 + 256 normal pages. Malformed words count nothing.
        assert_eq!(
            nodes,
            BTreeMap::from([(NodeId(0), 1256 * 4), (NodeId(1), 32 * 2048 + 256 * 4)])
        );
    }

    #[test]
    fn only_the_guests_own_qemu_is_read() -> Result<(), std::io::Error> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        std::fs::create_dir_all(root.join("run/libvirt/qemu"))?;
        std::fs::create_dir_all(root.join("proc/4242"))?;
        std::fs::write(root.join("run/libvirt/qemu/vm,1.pid"), "4242\n")?;
        std::fs::write(root.join("proc/4242/numa_maps"), MAPS)?;
        let cmdline = |name: &str| format!("/usr/bin/qemu\0-name\0{name}\0-m\0064\0");
        std::fs::write(
            root.join("proc/4242/cmdline"),
            cmdline("guest=vm,,1,debug-threads=on"),
        )?;
        let found = resident(root, "vm,1");
        assert_eq!(
            found.as_ref().map(|r| r.iter().map(|n| n.kib).sum::<u64>()),
            Some(1256 * 4 + 32 * 2048 + 256 * 4)
        );
        // A pid file naming another guest's process (a stale pid, reused).
        std::fs::write(
            root.join("proc/4242/cmdline"),
            cmdline("guest=vm,,10,debug-threads=on"),
        )?;
        assert_eq!(resident(root, "vm,1"), None);
        // Names that would leave the directory are not looked up at all.
        assert_eq!(resident(root, "../../proc/4242/x"), None);
        assert_eq!(resident(root, ".."), None);
        // A pid file that is not a number.
        std::fs::write(root.join("run/libvirt/qemu/bad.pid"), "42 42")?;
        assert_eq!(resident(root, "bad"), None);
        Ok(())
    }
}
