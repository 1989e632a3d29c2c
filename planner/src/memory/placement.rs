//! How a placed VM's memory splits over its host nodes, and the huge pages
//! a plan needs beyond what each node has free — with the commands that
//! allocate them. Above the plan (it reads [`VmPlan`]s); the values it
//! works with are [`super`]'s.

use super::{Allocation, VmMemory, NORMAL_PAGE_KIB};
use crate::ids::NodeId;
use crate::plan::VmPlan;
use crate::topology::HostTopology;

/// How `vm`'s memory splits over its host nodes: all on its node when it has
/// one; across its guest cells in proportion to their vCPUs when it spans
/// nodes, each share rounded up to whole pages.
pub fn per_node(vm: &VmPlan, memory: &VmMemory) -> Vec<(NodeId, u64)> {
    let page = memory.page_kib.saturating_mul(1024).max(1);
    let round_up = |b: u64| b.div_ceil(page).saturating_mul(page);
    if vm.guest_cells.is_empty() {
        return vm
            .numa_nodes
            .first()
            .map(|&n| vec![(n, round_up(memory.bytes))])
            .unwrap_or_default();
    }
    let total: u64 = vm.vcpus.len().max(1) as u64;
    let mut shares: Vec<(NodeId, u64)> = Vec::new();
    let mut given = 0u64;
    let cells = vm.guest_cells.len();
    for (i, cell) in vm.guest_cells.iter().enumerate() {
        let vcpus = cell.vcpus.len() as u64;
        let share = if i + 1 == cells {
            memory.bytes.saturating_sub(given)
        } else {
            round_up(memory.bytes / total * vcpus)
        };
        given = given.saturating_add(share);
        shares.push((cell.host_node, round_up(share)));
    }
    shares
}

/// Per node and huge page size, what the plan's VMs need against what the
/// host has free; the runtime command for what is missing.
pub fn allocations(host: &HostTopology, vms: &[VmPlan]) -> Vec<Allocation> {
    use std::collections::BTreeMap;
    let mut needed: BTreeMap<(NodeId, u64), u64> = BTreeMap::new();
    for vm in vms {
        let Some(memory) = vm.memory.filter(|m| m.page_kib > NORMAL_PAGE_KIB) else {
            continue;
        };
        let page = memory.page_kib.saturating_mul(1024);
        for (node, bytes) in per_node(vm, &memory) {
            *needed.entry((node, memory.page_kib)).or_default() += bytes.div_ceil(page);
        }
    }
    needed
        .into_iter()
        .map(|((node, size_kib), needed)| {
            let pool = host
                .numa_nodes
                .iter()
                .find(|n| n.id == node)
                .and_then(|n| n.hugepages.iter().find(|p| p.size_kib == size_kib));
            // A pool the source does not list: unknown; all of it to have.
            let (total, free) = pool.map_or((0, None), |p| (p.total, p.free));
            let available = if pool.is_some() { free.unwrap_or(total) } else { 0 };
            let missing = needed.saturating_sub(available);
            let command = (missing > 0).then(|| {
                format!(
                    "echo {} > /sys/devices/system/node/node{node}/hugepages/hugepages-{size_kib}kB/nr_hugepages",
                    total + missing
                )
            });
            Allocation {
                node,
                size_kib,
                needed,
                free,
                missing,
                command,
            }
        })
        .collect()
}

/// The boot-time kernel arguments for the pools `allocations` asks for
/// (whole-host counts: `hugepagesz=1G hugepages=N`; the per-node form
/// `hugepages=0:N,1:M` where the kernel supports it, 5.7 and later).
pub fn boot_args(allocations: &[Allocation], host: &HostTopology) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut by_size: BTreeMap<u64, Vec<(NodeId, u64)>> = BTreeMap::new();
    for a in allocations.iter().filter(|a| a.missing > 0) {
        let total = host
            .numa_nodes
            .iter()
            .find(|n| n.id == a.node)
            .and_then(|n| n.hugepages.iter().find(|p| p.size_kib == a.size_kib))
            .map_or(0, |p| p.total);
        by_size
            .entry(a.size_kib)
            .or_default()
            .push((a.node, total + a.missing));
    }
    by_size
        .into_iter()
        .map(|(size_kib, nodes)| {
            let size = if size_kib >= 1_048_576 {
                format!("{}G", size_kib / 1_048_576)
            } else {
                format!("{}M", size_kib / 1024)
            };
            let per_node: Vec<String> = nodes.iter().map(|(n, c)| format!("{n}:{c}")).collect();
            format!("hugepagesz={size} hugepages={}", per_node.join(","))
        })
        .collect()
}
