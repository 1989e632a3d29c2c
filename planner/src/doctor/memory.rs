//! `hugepages`: the huge pages the plan's VMs need, per node and page size,
//! against what the node has free now; 1 GiB pages only with the `pdpe1gb`
//! CPU flag; the transparent huge page setting.

use super::{Check, CheckId, Host, Status};
use crate::host::fs::Fs;
use crate::ids::NodeId;
use crate::plan::Plan;
use std::collections::BTreeMap;

/// Huge pages the plan's VMs need, by (node, page size in KiB): how many
/// pages, and which VMs.
type Needed = BTreeMap<(NodeId, u64), (u64, Vec<String>)>;

/// One check per (node, page size) the plan needs, then the CPU flag and
/// the transparent huge page setting.
pub(super) fn hugepages(host: &Host<'_>, fs: &Fs) -> Vec<Check> {
    let id = CheckId::Hugepages;
    let Some(plan) = host.plan else {
        return vec![Check::new(
            id,
            Status::Skip,
            "host",
            "no plan given: which huge pages the VMs need is the plan's",
        )];
    };
    let needed = needed(plan);
    if needed.is_empty() {
        return vec![Check::new(
            id,
            Status::Pass,
            "host",
            "no VM of the plan is backed by huge pages",
        )];
    }
    let mut checks: Vec<Check> = needed
        .iter()
        .map(|(&(node, size), (pages, vms))| pool(fs, node, size, *pages, vms))
        .collect();
    if needed.keys().any(|&(_, size)| size >= 1_048_576) {
        checks.extend(gigabyte_pages(fs));
    }
    checks.extend(transparent(fs));
    checks
}

/// What the plan's VMs backed by huge pages take of each node's pool.
fn needed(plan: &Plan) -> Needed {
    let mut needed = Needed::new();
    for vm in &plan.vms {
        let Some(memory) = vm
            .memory
            .filter(|m| m.page_kib > crate::memory::NORMAL_PAGE_KIB)
        else {
            continue;
        };
        let page = memory.page_kib * 1024;
        for (node, bytes) in crate::memory::placement::per_node(vm, &memory) {
            let entry = needed.entry((node, memory.page_kib)).or_default();
            entry.0 += bytes.div_ceil(page);
            entry.1.push(vm.name.clone());
        }
    }
    needed
}

/// `pages` huge pages of `size` KiB needed on `node` by `vms`, against the
/// pool's free ones; a shortfall fails with the count to set.
fn pool(fs: &Fs, node: NodeId, size: u64, pages: u64, vms: &[String]) -> Check {
    let id = CheckId::Hugepages;
    let subject = format!(
        "node{node}-{}",
        crate::memory::human(size * 1024).replace(' ', "")
    );
    let pools = fs.hugepage_pools(node);
    // A pool that does not say what is free counts as absent.
    let (total, free) = pools
        .iter()
        .filter(|p| p.size_kib == size)
        .find_map(|p| Some((p.total, p.free?)))
        .unwrap_or((0, 0));
    let what = format!(
        "{pages} pages of {} needed by {} on node {node}; {free} of {total} free",
        crate::memory::human(size * 1024),
        vms.join(", ")
    );
    let path =
        format!("/sys/devices/system/node/node{node}/hugepages/hugepages-{size}kB/nr_hugepages");
    if free >= pages {
        return Check::new(id, Status::Pass, subject, what);
    }
    let missing = pages - free;
    Check::new(
        id,
        Status::Fail,
        subject,
        format!("{what}: {missing} short"),
    )
    .hint(format!(
        "echo {} > {path} (or at boot: hugepagesz=… hugepages={node}:{})",
        total + missing,
        total + missing
    ))
}

/// 1 GiB pages need the CPU's `pdpe1gb` flag; nothing when cpuinfo is
/// unreadable.
fn gigabyte_pages(fs: &Fs) -> Option<Check> {
    let id = CheckId::Hugepages;
    match fs.cpu_flag("pdpe1gb")? {
        true => Some(Check::new(id, Status::Pass, "cpu", "the CPU has pdpe1gb: 1 GiB pages are available")),
        false => Some(
            Check::new(id, Status::Fail, "cpu", "the plan uses 1 GiB pages but /proc/cpuinfo has no pdpe1gb flag: this CPU (or its VM) cannot map them")
                .hint("use hugepages = \"2M\" for these VMs, or expose pdpe1gb (a host CPU model with it)"),
        ),
    }
}

/// The transparent huge page setting: `always` warns; nothing when it is
/// unreadable.
fn transparent(fs: &Fs) -> Option<Check> {
    let thp = fs.transparent_hugepages()?;
    let always = thp.contains("[always]");
    let check = Check::new(
        CheckId::Hugepages,
        if always { Status::Warn } else { Status::Pass },
        "thp",
        format!("transparent huge pages: {thp}"),
    );
    Some(if always {
        check.hint("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (khugepaged compacting memory under the VMs' normal pages adds jitter; huge page backed VMs do not need it)")
    } else {
        check
    })
}
