//! First-fit baseline, in the style of OpenStack Nova's
//! `numa_fit_instance_to_host`: VMs in priority order take the lowest free
//! cores of the first NUMA node that holds them (the NIC's node first), or,
//! when their policy allows, of several nodes. Kept for comparison and
//! benchmarks; it proves nothing.

use super::classes::{self, FreeCore};
use super::{NumaPolicy, Placement, PlanRequest, VmRequest};
use crate::ids::{CoreId, NodeId};
use std::collections::BTreeSet;

/// Takes cores from `candidates` (in order, skipping those `vm` may not
/// use) until `vm` is satisfied.
pub(crate) fn take(vm: &VmRequest, candidates: &[&FreeCore]) -> Option<Vec<CoreId>> {
    let mut chosen: Vec<&FreeCore> = Vec::new();
    for c in candidates {
        if !classes::allowed(vm, c.node, c.threads()) {
            continue;
        }
        let threads: Vec<u32> = chosen.iter().map(|c| c.threads()).collect();
        if classes::fits_exactly(vm, &threads) {
            break;
        }
        chosen.push(c);
    }
    let threads: Vec<u32> = chosen.iter().map(|c| c.threads()).collect();
    classes::fits_exactly(vm, &threads).then(|| chosen.iter().map(|c| c.core).collect())
}

/// [`take`] from `ordered`, the first usable core of each node `vm` must
/// touch (several required NICs) moved to the front; `None` unless the
/// cores taken touch every such node.
pub(crate) fn take_touching(vm: &VmRequest, mut ordered: Vec<&FreeCore>) -> Option<Vec<CoreId>> {
    for &cell in vm.cell_nodes.iter().rev() {
        if let Some(at) = ordered
            .iter()
            .position(|c| c.node == Some(cell) && classes::allowed(vm, c.node, c.threads()))
        {
            let first = ordered.remove(at);
            ordered.insert(0, first);
        }
    }
    take(vm, &ordered).filter(|c| touches(vm, c, &ordered))
}

/// Whether `cores` (of `free`) have one on each node `vm` must touch.
fn touches(vm: &VmRequest, cores: &[CoreId], free: &[&FreeCore]) -> bool {
    vm.cell_nodes.iter().all(|&node| {
        free.iter()
            .any(|c| c.node == Some(node) && cores.contains(&c.core))
    })
}

/// Places greedily.
pub fn place(request: &PlanRequest) -> Placement {
    fill(request, Placement::default())
}

/// `given`, with the VMs it leaves out placed greedily on the cores and the
/// memory it leaves free; the VMs it places keep their cores. For an answer
/// stopped early (a run stopped at "VMs placed" places only what it found
/// then): the result is never worse, since adding a VM only raises VMs
/// placed at its level.
pub(crate) fn fill(request: &PlanRequest, given: Placement) -> Placement {
    let mut free: Vec<FreeCore> = classes::free_cores(request);
    free.sort_by_key(|c| c.core);
    let mut memory = super::memory::Ledger::new(request);
    let mut taken: BTreeSet<CoreId> = BTreeSet::new();
    for (&i, cores) in &given.cores {
        if let Some(vm) = request.vms.get(i) {
            memory.take(vm, cores);
        }
        taken.extend(cores.iter().copied());
    }
    let mut order: Vec<usize> = (0..request.vms.len())
        .filter(|i| !given.cores.contains_key(i))
        .collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(request.vms[i].priority), i));
    let Placement {
        mut cores,
        proven,
        fault,
    } = given;
    for i in order {
        let vm = &request.vms[i];
        let available: Vec<&FreeCore> = free.iter().filter(|c| !taken.contains(&c.core)).collect();
        let mut nodes: Vec<Option<NodeId>> = available
            .iter()
            .map(|c| c.node)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if vm.nic_affinity != super::NicAffinity::Ignore {
            nodes.sort_by_key(|n| !n.is_some_and(|n| vm.nic_nodes.contains(&n)));
        }
        let mut found = None;
        // A VM that must have cores on several nodes never fits on one.
        for node in nodes.iter().filter(|_| vm.cell_nodes.len() < 2) {
            let on_node: Vec<&FreeCore> = available
                .iter()
                .copied()
                .filter(|c| c.node == *node)
                .collect();
            if let Some(c) = take(vm, &on_node).filter(|c| memory.fits(vm, c)) {
                found = Some(c);
                break;
            }
        }
        if found.is_none() && vm.numa != NumaPolicy::Strict {
            let mut ordered = available.clone();
            ordered.sort_by_key(|c| (nodes.iter().position(|n| *n == c.node), c.core));
            found = take_touching(vm, ordered).filter(|c| memory.fits(vm, c));
        }
        if let Some(c) = found {
            memory.take(vm, &c);
            taken.extend(c.iter().copied());
            cores.insert(i, c);
        }
    }
    Placement {
        cores,
        proven,
        fault,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::topology::{load, Source};
    use std::collections::BTreeMap;

    /// Two nodes of 4 cores (1 thread each); VMs of 3, 4 and 1 cores, all
    /// strict. Given a placement of only the 4-core VM on node 0 (where
    /// first fit alone would put the 3-core VM), the fill keeps it there and
    /// puts the 3-core VM and the 1-core VM on node 1 (3 + 1 = 4): by hand,
    /// the only way to place all three beside it.
    #[test]
    fn a_fill_keeps_what_is_placed_and_places_the_rest() {
        let request = PlanRequest {
            host: load(&Source::Synthetic(
                "package:1 numa:2 core:4 pu:1".to_owned(),
            ))
            .unwrap(),
            reserved: crate::cpuset::CpuSet::new(),
            fixed: Vec::new(),
            vms: [3, 4, 1]
                .iter()
                .enumerate()
                .map(|(i, &c)| VmRequest {
                    threads: super::super::ThreadPolicy::Prefer,
                    numa: NumaPolicy::Strict,
                    ..VmRequest::new(&format!("vm{i}"), c)
                })
                .collect(),
            order: Default::default(),
            max_moves: None,
        };
        let node_of = |core: &CoreId| {
            request
                .host
                .cores
                .iter()
                .find(|c| c.id == *core)
                .and_then(|c| c.numa_node)
        };
        let node0: Vec<CoreId> = request
            .host
            .cores
            .iter()
            .filter(|c| c.numa_node == Some(NodeId(0)))
            .map(|c| c.id)
            .collect();
        assert_eq!(node0.len(), 4);
        let given = Placement {
            cores: BTreeMap::from([(1, node0.clone())]),
            proven: false,
            fault: None,
        };
        let filled = fill(&request, given);
        assert_eq!(filled.cores.get(&1), Some(&node0));
        for i in [0, 2] {
            let cores = filled.cores.get(&i).unwrap();
            assert!(
                cores.iter().all(|c| node_of(c) == Some(NodeId(1))),
                "{i}: {cores:?}"
            );
        }
        assert_eq!(filled.cores[&0].len() + filled.cores[&2].len(), 4);
    }
}
