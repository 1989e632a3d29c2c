//! Guest memory: sizes as specs write them (`16GiB`, `512MiB`, a number of
//! MiB), the page size that backs it (`1G`, `2M`, `none`), how a placed VM's
//! memory splits over its host nodes, and the huge pages a plan needs beyond
//! what each node has free — with the commands that allocate them.

use crate::ids::NodeId;
use crate::plan::VmPlan;
use crate::topology::HostTopology;
use serde::{Deserialize, Serialize};

/// A VM's memory and its page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmMemory {
    /// Guest memory in bytes.
    pub bytes: u64,
    /// Page size in KiB: 4 (normal pages), 2048 or 1048576.
    pub page_kib: u64,
}

/// The normal page size, in KiB.
pub const NORMAL_PAGE_KIB: u64 = 4;

/// `16GiB`, `512MiB`, `1048576KiB`, or a plain number of MiB (`16384`) →
/// bytes. `None` with the reason when it is not one of those.
pub fn parse_size(text: &str) -> Result<u64, String> {
    Some(parse_amount(text)?)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("{text:?} is not a usable size (zero)"))
}

/// [`parse_size`] that takes 0 too (a reserve of nothing).
pub fn parse_amount(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = t.split_at(digits);
    let n: u64 = number.parse().map_err(|_| {
        format!("{text:?} is not a size: write e.g. \"16GiB\", \"512MiB\" or a number of MiB")
    })?;
    let scale: u64 = match unit.trim() {
        "" | "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "KiB" | "K" => 1 << 10,
        "TiB" | "T" => 1 << 40,
        other => {
            return Err(format!(
                "unit {other:?} in {text:?}: use KiB, MiB, GiB or TiB (powers of 1024), or a plain number of MiB"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is not a usable size (too large)"))
}

/// `1G`, `2M`, `none` (also `1GiB`, `2MiB`, `4K`) → page size in KiB.
pub fn parse_page(text: &str) -> Result<u64, String> {
    match text.trim() {
        "none" | "4K" | "4KiB" => Ok(NORMAL_PAGE_KIB),
        "2M" | "2MiB" => Ok(2048),
        "1G" | "1GiB" => Ok(1_048_576),
        other => Err(format!(
            "hugepages = {other:?}: use \"1G\", \"2M\" or \"none\" (normal 4 KiB pages)"
        )),
    }
}

/// `1 GiB`, `512 MiB`, `16 GiB`: sizes as messages print them.
pub fn human(bytes: u64) -> String {
    crate::text::bytes(bytes)
}

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
        let vcpus = cell
            .vcpus
            .parse::<crate::cpuset::CpuSet>()
            .map_or(0, |s| s.len() as u64);
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

/// Huge pages of one size on one node that the plan needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// The host node.
    pub node: NodeId,
    /// Page size in KiB.
    pub size_kib: u64,
    /// Pages the plan's VMs need there.
    pub needed: u64,
    /// Pages free there now (`None`: the source does not say; the pool's
    /// total is then taken as free, and a pool it does not list as empty).
    pub free: Option<u64>,
    /// Pages to allocate beyond what is free (0: enough).
    pub missing: u64,
    /// The runtime command that makes the pool large enough (`None` when
    /// nothing is missing).
    pub command: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_pages_parse_as_documented() {
        assert_eq!(parse_size("16GiB"), Ok(16 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1048576KiB"), Ok(1 << 30));
        assert_eq!(parse_size("2048"), Ok(2048 << 20));
        assert!(parse_size("16GB").unwrap_err().contains("powers of 1024"));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_page("1G"), Ok(1_048_576));
        assert_eq!(parse_page("2M"), Ok(2048));
        assert_eq!(parse_page("none"), Ok(4));
        assert!(parse_page("3M").is_err());
    }
}
