//! Memory as the second resource of the node pattern model's arc flows: a
//! node's load is (cores, memory in one page size's pool), counted exactly
//! in integer units (see [`crate::solve::ilp::arcflow`]).
//!
//! The unit is 1 KiB / `scale`, where `scale` is the least common multiple
//! of the cores of the VMs that may be split over nodes: a piece of s of a
//! VM's c cores takes s / c of its memory (`crate::solve::memory`), a whole
//! number of units. Memory is counted where it can bind
//! (`crate::solve::memory::binding`), in one page size; pools of other page
//! sizes that bind, or units too fine to count, leave the model to the
//! counting node model.

use super::patterns::Kind;
use crate::ids::NodeId;
use crate::solve::{memory, PlanRequest, VmRequest};
use std::collections::BTreeMap;

/// The finest unit counted: 1 KiB / this at most.
const FINEST: u64 = 1 << 20;

/// How memory is counted: the page size whose pools bind, the units per
/// KiB, and each node's pool in units where it binds.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Axis {
    page: u64,
    scale: u64,
    caps: BTreeMap<Option<NodeId>, u64>,
}

impl Axis {
    /// Memory as the pattern model counts it for these `kinds`: `Ok(None)`
    /// where it cannot bind, `Err(())` where it cannot be counted in one
    /// axis of integers (pools of two page sizes bind, or the unit would be
    /// too fine).
    pub(super) fn of(request: &PlanRequest, kinds: &[Kind]) -> Result<Option<Axis>, ()> {
        let binding = memory::binding(request);
        let mut pages = binding.iter().map(|&(_, page)| page);
        let Some(page) = pages.next() else {
            return Ok(None);
        };
        // Cores of no known node have no pool the models agree on (the
        // counting and cell models allow no memory there).
        let unknown = request.host.cores.iter().any(|c| c.numa_node.is_none());
        if unknown || pages.any(|p| p != page) {
            return Err(());
        }
        let mut scale: u64 = 1;
        for kind in kinds.iter().filter(|kind| !kind.one_node) {
            let vm = &request.vms[kind.members[0]];
            if memory::need_kib(vm).is_some_and(|(p, kib)| p == page && kib > 0) {
                scale = lcm(scale, u64::from(kind.cores.max(1)));
                if scale > FINEST {
                    return Err(());
                }
            }
        }
        let mut caps = BTreeMap::new();
        for (&(node, p), &kib) in &memory::caps_kib(request) {
            if p == page && binding.contains(&(node, p)) {
                let units = kib.and_then(|k| k.checked_mul(scale)).ok_or(())?;
                caps.insert(node, units);
            }
        }
        Ok(Some(Axis { page, scale, caps }))
    }

    /// The memory `vm` takes in units (0 where it is in another pool);
    /// `None` beyond what the units count.
    pub(super) fn of_vm(&self, vm: &VmRequest) -> Option<u64> {
        match memory::need_kib(vm) {
            Some((page, kib)) if page == self.page => kib.checked_mul(self.scale),
            _ => Some(0),
        }
    }

    /// What `node` holds in units, where it can bind.
    pub(super) fn cap(&self, node: Option<NodeId>) -> Option<u64> {
        self.caps.get(&node).copied()
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    (a / gcd(a, b)).saturating_mul(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_common_multiples_by_hand() {
        assert_eq!(lcm(1, 3), 3);
        assert_eq!(lcm(4, 6), 12);
        assert_eq!(lcm(12, 5), 60);
        assert_eq!(gcd(0, 7), 7);
    }
}
