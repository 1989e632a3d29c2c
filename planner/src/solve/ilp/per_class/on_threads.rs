//! A relaxation's placement dealt out again on the host's threads.
//!
//! The relaxation (the aggregated model on a host of mixed thread counts)
//! counts every free core at the host's most threads, so a VM of an even
//! count of vCPUs may sit on a core of one thread there. Within one cell (a
//! NUMA node and L3 domain) cores are interchangeable for every objective,
//! so the same count per VM and cell is dealt out again: the cores of fewer
//! threads to VMs that can spare the threads ([`classes::fits_exactly`]),
//! the others of the most. What comes out is only a start: the model checks
//! it like any other.

use crate::ids::{CoreId, NodeId};
use crate::solve::classes::{self, Class, Domain};
use crate::solve::{Placement, PlanRequest};
use std::collections::{BTreeMap, BTreeSet};

/// A NUMA node and L3 domain.
type Cell = (Option<NodeId>, Domain);

/// `relaxed` on `classes`' threads, or `None` where the cores of fewer
/// threads in some cell go to no VM that can spare them.
pub(super) fn on_threads(
    request: &PlanRequest,
    classes: &[Class],
    relaxed: &Placement,
) -> Option<Placement> {
    let most = classes.iter().map(|c| c.threads).max()?;
    let class_of: BTreeMap<CoreId, usize> = classes
        .iter()
        .enumerate()
        .flat_map(|(k, c)| c.cores.iter().map(move |&core| (core, k)))
        .collect();
    let mut order: Vec<usize> = relaxed.cores.keys().copied().collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(request.vms.get(i).map(|v| v.priority)), i));
    let mut wants: BTreeMap<usize, BTreeMap<Cell, u32>> = BTreeMap::new();
    for (&i, cores) in &relaxed.cores {
        for core in cores {
            let class = &classes[*class_of.get(core)?];
            *wants
                .entry(i)
                .or_default()
                .entry((class.node, class.domain))
                .or_default() += 1;
        }
    }
    let mut deal = Deal {
        request,
        most,
        dealt: BTreeMap::new(),
        left: wants
            .iter()
            .map(|(&i, cells)| (i, cells.values().sum()))
            .collect(),
        given: BTreeMap::new(),
    };
    let cells: BTreeSet<Cell> = classes.iter().map(|c| (c.node, c.domain)).collect();
    for cell in cells {
        let mut need: Vec<(usize, u32)> = order
            .iter()
            .filter_map(|&i| Some((i, *wants.get(&i)?.get(&cell)?)))
            .collect();
        let mut here: Vec<usize> = (0..classes.len())
            .filter(|&k| (classes[k].node, classes[k].domain) == cell)
            .collect();
        here.sort_by_key(|&k| std::cmp::Reverse(classes[k].threads));
        // The cores taken: the most threads first, as many as the VMs want.
        let mut demand: u32 = need.iter().map(|&(_, n)| n).sum();
        let mut supply: Vec<(usize, u32)> = Vec::new();
        for &k in &here {
            let n = demand.min(u32::try_from(classes[k].cores.len()).unwrap_or(u32::MAX));
            if n > 0 {
                supply.push((k, n));
            }
            demand -= n;
        }
        if demand > 0 {
            return None;
        }
        // Fewest threads first: they are the hardest to place.
        for &(k, n) in supply.iter().rev() {
            for _ in 0..n {
                let threads = classes[k].threads;
                let taker = need
                    .iter_mut()
                    .find(|(i, left)| *left > 0 && deal.can_take(*i, threads))?;
                taker.1 -= 1;
                deal.give(taker.0, k, threads);
            }
        }
    }
    Some(deal.cores(classes, &order))
}

/// The dealing so far.
struct Deal<'r> {
    request: &'r PlanRequest,
    /// The host's most threads per core.
    most: u32,
    /// Per VM: the threads of the cores dealt to it.
    dealt: BTreeMap<usize, Vec<u32>>,
    /// Per VM: cores still to deal.
    left: BTreeMap<usize, u32>,
    /// Per VM: cores per class.
    given: BTreeMap<usize, BTreeMap<usize, u32>>,
}

impl Deal<'_> {
    /// Whether VM `i` can take a core of `threads` and still fit exactly
    /// with the rest of its cores of the most threads.
    fn can_take(&self, i: usize, threads: u32) -> bool {
        let Some(vm) = self.request.vms.get(i) else {
            return false;
        };
        let rest = self.left.get(&i).copied().unwrap_or(0).saturating_sub(1);
        let mut cores: Vec<u32> = self.dealt.get(&i).cloned().unwrap_or_default();
        cores.push(threads);
        cores.extend(std::iter::repeat_n(self.most, rest as usize));
        classes::fits_exactly(vm, &cores)
    }

    fn give(&mut self, i: usize, class: usize, threads: u32) {
        self.dealt.entry(i).or_default().push(threads);
        if let Some(left) = self.left.get_mut(&i) {
            *left = left.saturating_sub(1);
        }
        *self.given.entry(i).or_default().entry(class).or_default() += 1;
    }

    /// Concrete cores: VMs in `order` take the lowest free cores of each
    /// class dealt to them.
    fn cores(&self, classes: &[Class], order: &[usize]) -> Placement {
        let mut next = vec![0usize; classes.len()];
        let mut cores = BTreeMap::new();
        for &i in order {
            let mut mine: Vec<CoreId> = Vec::new();
            for (&k, &n) in self.given.get(&i).into_iter().flatten() {
                let end = (next[k] + n as usize).min(classes[k].cores.len());
                mine.extend_from_slice(&classes[k].cores[next[k]..end]);
                next[k] = end;
            }
            mine.sort();
            cores.insert(i, mine);
        }
        Placement {
            cores,
            proven: false,
            fault: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::solve::{classes, ThreadPolicy, VmRequest};
    use crate::topology::{load, Source};

    /// `cores` two-thread cores in one cell, CPU 1 (core 0's sibling) off;
    /// VMs of `vcpus`, `threads = "prefer"`.
    fn request(cores: u32, vcpus: &[u32]) -> PlanRequest {
        let mut host = load(&Source::Synthetic(format!("package:1 core:{cores} pu:2"))).unwrap();
        for pu in &mut host.pus {
            if pu.cpu.0 == 1 {
                pu.usable = false;
                pu.allowed = false;
            }
        }
        let vms = vcpus
            .iter()
            .enumerate()
            .map(|(i, &v)| VmRequest {
                threads: ThreadPolicy::Prefer,
                ..VmRequest::new(&format!("vm{i}"), v)
            })
            .collect();
        PlanRequest {
            host,
            reserved: Default::default(),
            fixed: Vec::new(),
            vms,
            order: Default::default(),
            max_moves: None,
        }
    }

    fn dealt(req: &PlanRequest, relaxed: &[&[u32]]) -> Option<Vec<Vec<u32>>> {
        let classes = classes::classes(&classes::free_cores(req));
        let relaxed = Placement {
            cores: relaxed
                .iter()
                .enumerate()
                .map(|(i, cores)| (i, cores.iter().map(|&c| CoreId(c)).collect()))
                .collect(),
            proven: true,
            fault: None,
        };
        let out = on_threads(req, &classes, &relaxed)?;
        Some(
            out.cores
                .values()
                .map(|c| c.iter().map(|c| c.0).collect())
                .collect(),
        )
    }

    /// The relaxation put vm0 (2 vCPUs: one two-thread core) on core 0, of
    /// one thread; with a two-thread core free in the cell, it gets that.
    #[test]
    fn a_core_of_one_thread_is_left_when_the_cell_has_others() {
        let req = request(4, &[2, 3]);
        assert_eq!(
            dealt(&req, &[&[0], &[1, 2]]),
            Some(vec![vec![1], vec![2, 3]])
        );
    }

    /// Every core of the cell is taken: the core of one thread goes to vm1
    /// (3 vCPUs on two cores: 2 + 1 threads), not to vm0 (2 vCPUs on one
    /// core), though vm0 comes first.
    #[test]
    fn a_core_of_one_thread_goes_to_the_vm_that_can_spare_a_thread() {
        let req = request(3, &[2, 3]);
        assert_eq!(
            dealt(&req, &[&[0], &[1, 2]]),
            Some(vec![vec![1], vec![0, 2]])
        );
    }

    /// Two VMs of 2 vCPUs on the only two cores, one of them of one thread:
    /// no dealing holds them, and none is made up.
    #[test]
    fn no_dealing_when_no_vm_can_spare_a_thread() {
        let req = request(2, &[2, 2]);
        assert_eq!(dealt(&req, &[&[0], &[1]]), None);
    }
}
