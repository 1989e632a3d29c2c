//! Memory as a capacity of each NUMA node, beside its cores: for each page
//! size, the bytes VMs may take there (a huge page pool's free pages — its
//! total when the source does not say what is free —, or for normal pages
//! the node's free memory, else its size). A VM's memory goes on the nodes of
//! its cores: all on its node for a strict VM, split in proportion to its
//! cores on each node otherwise. Only VMs whose memory the spec (or their
//! domain) gives are counted, and only pools the source lists bound them.

use super::{PlanRequest, VmRequest};
use crate::ids::{CoreId, NodeId};
use crate::memory::NORMAL_PAGE_KIB;
use std::collections::BTreeMap;

/// Memory available per (node, page size in KiB), in MiB: the models'
/// unit (bytes would put coefficients of 10^10 beside core counts, which CBC
/// solves badly).
pub(crate) type Caps = BTreeMap<(Option<NodeId>, u64), f64>;

/// Whether memory can bind at all: some node offers less of a page size
/// than the VMs that may use that node would take together. When it cannot,
/// its constraints are redundant and the models leave them out (and keep
/// their faster pattern forms).
pub(crate) fn active(request: &PlanRequest) -> bool {
    !binding(request).is_empty()
}

/// The pools (node, page size) that can bind: those that offer less than
/// the VMs that may use that node would take together.
pub(crate) fn binding(request: &PlanRequest) -> std::collections::BTreeSet<(Option<NodeId>, u64)> {
    caps(request)
        .into_iter()
        .filter(|&((node, page), cap)| {
            cap.is_finite()
                && request
                    .vms
                    .iter()
                    .filter(|vm| vm.memory.is_some_and(|m| m.page_kib == page))
                    .filter(|vm| {
                        super::classes::allowed(vm, node, 2) || super::classes::allowed(vm, node, 1)
                    })
                    .filter_map(need)
                    .map(|(_, bytes)| bytes)
                    .sum::<f64>()
                    > cap + 1e-6
        })
        .map(|(key, _)| key)
        .collect()
}

/// What each node offers per page size the VMs use.
pub(crate) fn caps(request: &PlanRequest) -> Caps {
    caps_kib(request)
        .into_iter()
        .map(|(key, kib)| (key, kib.map_or(f64::INFINITY, |k| k as f64 / 1024.0)))
        .collect()
}

/// [`caps`] in whole KiB (`None`: unbounded), for models that count memory
/// exactly in integers.
pub(crate) fn caps_kib(request: &PlanRequest) -> BTreeMap<(Option<NodeId>, u64), Option<u64>> {
    let sizes: std::collections::BTreeSet<u64> = request
        .vms
        .iter()
        .filter_map(|v| v.memory.map(|m| m.page_kib))
        .collect();
    let mut caps = BTreeMap::new();
    for node in &request.host.numa_nodes {
        for &size in &sizes {
            let kib = if size <= NORMAL_PAGE_KIB {
                node.memory_free_bytes
                    .or(node.memory_bytes)
                    .map(|b| b / 1024)
            } else {
                // A pool the source does not list is unknown, not empty (an
                // `lstopo` capture lists only the pools it saw): unbounded,
                // and the plan's huge page list says what to have.
                node.hugepages
                    .iter()
                    .find(|p| p.size_kib == size)
                    .map(|p| p.free.unwrap_or(p.total).saturating_mul(size))
            };
            caps.insert((Some(node.id), size), kib);
        }
    }
    caps
}

/// Whether the exact models count memory at all: not where running VMs
/// may move (their pages are already taken from the pools and stay where
/// they are while their vCPUs move; issue 27).
pub(crate) fn countable(request: &PlanRequest) -> bool {
    !request.vms.iter().any(|v| v.running)
}

/// How the exact models split `vm`'s memory over nodes, given the usable
/// threads of the cores it may take: all on its node for a strict VM
/// ([`Split::Whole`]); else `1 / c` of it per core where its core count `c`
/// is the same on each of those cores ([`Split::PerCore`]); else not
/// counted ([`Split::Uncounted`]: on a host of mixed thread counts a VM's
/// core count depends on the cores it gets, and its share per core with
/// it). The one rule of the per-class model, the per-core oracle and the
/// plan's warning.
pub(crate) fn split(vm: &VmRequest, threads: impl IntoIterator<Item = u32>) -> Split {
    if vm.numa == super::NumaPolicy::Strict {
        return Split::Whole;
    }
    let counts: std::collections::BTreeSet<u32> = threads
        .into_iter()
        .map(|t| super::classes::cores_needed(vm, t))
        .collect();
    match (counts.first(), counts.len()) {
        (Some(&c), 1) => Split::PerCore(c.max(1)),
        _ => Split::Uncounted,
    }
}

/// See [`split`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Split {
    /// All on the one node of its cores.
    Whole,
    /// `1 / c` per core, for `c` cores.
    PerCore(u32),
    /// Not counted.
    Uncounted,
}

/// What a VM takes from its pool (page size in KiB, MiB): its memory in
/// whole pages.
pub(crate) fn need(vm: &VmRequest) -> Option<(u64, f64)> {
    need_kib(vm).map(|(page, kib)| (page, kib as f64 / 1024.0))
}

/// [`need`] in KiB, exactly (whole pages are whole KiB).
pub(crate) fn need_kib(vm: &VmRequest) -> Option<(u64, u64)> {
    vm.memory.map(|m| {
        let page = m.page_kib.saturating_mul(1024).max(1);
        (
            m.page_kib,
            m.bytes.div_ceil(page).saturating_mul(page).div_ceil(1024),
        )
    })
}

/// What is left of the nodes' memory as VMs are placed one by one (the
/// first-fit and packing starts).
pub(crate) struct Ledger {
    left: Caps,
    node_of: BTreeMap<CoreId, Option<NodeId>>,
}

impl Ledger {
    pub(crate) fn new(request: &PlanRequest) -> Ledger {
        Ledger {
            left: caps(request),
            node_of: request
                .host
                .cores
                .iter()
                .map(|c| (c.id, c.numa_node))
                .collect(),
        }
    }

    /// Per (node, page size): the bytes `vm` takes on `cores`.
    fn shares(&self, vm: &VmRequest, cores: &[CoreId]) -> Vec<((Option<NodeId>, u64), f64)> {
        let Some((page, bytes)) = need(vm) else {
            return Vec::new();
        };
        let mut per: BTreeMap<Option<NodeId>, u32> = BTreeMap::new();
        for c in cores {
            *per.entry(self.node_of.get(c).copied().flatten())
                .or_default() += 1;
        }
        let total = cores.len().max(1) as f64;
        per.into_iter()
            .map(|(node, n)| ((node, page), bytes * f64::from(n) / total))
            .collect()
    }

    /// MiB left on `node` in the pool of `page` KiB pages.
    pub(crate) fn left(&self, node: Option<NodeId>, page: u64) -> f64 {
        self.left.get(&(node, page)).copied().unwrap_or(0.0)
    }

    /// Whether `vm` on `cores` fits in what is left.
    pub(crate) fn fits(&self, vm: &VmRequest, cores: &[CoreId]) -> bool {
        self.shares(vm, cores)
            .iter()
            .all(|(key, b)| self.left.get(key).is_some_and(|left| *b <= *left + 1e-6))
    }

    /// Takes `vm`'s memory on `cores`.
    pub(crate) fn take(&mut self, vm: &VmRequest, cores: &[CoreId]) {
        for (key, b) in self.shares(vm, cores) {
            if let Some(left) = self.left.get_mut(&key) {
                *left -= b;
            }
        }
    }
}
