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

use super::Counts;
use crate::ids::{CoreId, NodeId};
use crate::solve::classes::{self, Class, Domain};
use crate::solve::{Placement, PlanRequest};
use std::collections::{BTreeMap, BTreeSet};

/// A NUMA node and L3 domain.
type Cell = (Option<NodeId>, Domain);

/// `relaxed`'s cores per VM and class of `classes`, dealt out again on
/// their threads, or `None` where the cores of fewer threads in some cell
/// go to no VM that can spare them.
pub(super) fn on_threads(
    request: &PlanRequest,
    classes: &[Class],
    relaxed: &Placement,
) -> Option<Counts> {
    let most = classes.iter().map(|c| c.threads).max()?;
    let class_of: BTreeMap<CoreId, usize> = classes
        .iter()
        .enumerate()
        .flat_map(|(k, c)| c.cores.iter().map(move |&core| (core, k)))
        .collect();
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
        classes,
        most,
        total: wants
            .iter()
            .map(|(&i, cells)| (i, cells.values().sum()))
            .collect(),
        given: Counts::new(),
    };
    let cells: BTreeSet<Cell> = classes.iter().map(|c| (c.node, c.domain)).collect();
    for cell in cells {
        // Per VM (in spec order), the cores it wants here and not yet dealt.
        let mut need: Vec<(usize, u32)> = wants
            .iter()
            .filter_map(|(&i, cells)| Some((i, *cells.get(&cell)?)))
            .collect();
        let mut here: Vec<usize> = (0..classes.len())
            .filter(|&k| (classes[k].node, classes[k].domain) == cell)
            .collect();
        here.sort_by_key(|&k| std::cmp::Reverse(classes[k].threads));
        // The cores taken: the most threads first, as many as the VMs want.
        let mut demand: u32 = need.iter().map(|&(_, n)| n).sum();
        let mut supply: Vec<(usize, u32)> = Vec::new();
        for &k in &here {
            let n = demand.min(classes[k].size());
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
                let taker = need
                    .iter_mut()
                    .find(|(i, left)| *left > 0 && deal.can_take(*i, classes[k].threads))?;
                taker.1 -= 1;
                *deal.given.entry(taker.0).or_default().entry(k).or_default() += 1;
            }
        }
    }
    Some(deal.given)
}

/// The dealing so far.
struct Deal<'r> {
    request: &'r PlanRequest,
    classes: &'r [Class],
    /// The host's most threads per core.
    most: u32,
    /// Per VM: the cores it takes in all.
    total: BTreeMap<usize, u32>,
    /// Per VM: the cores dealt to it, per class.
    given: Counts,
}

impl Deal<'_> {
    /// Whether VM `i` can take a core of `threads` and still fit exactly
    /// with the rest of its cores of the most threads.
    fn can_take(&self, i: usize, threads: u32) -> bool {
        let Some(vm) = self.request.vms.get(i) else {
            return false;
        };
        let mut cores: Vec<u32> = self
            .given
            .get(&i)
            .into_iter()
            .flatten()
            .flat_map(|(&k, &n)| std::iter::repeat_n(self.classes[k].threads, n as usize))
            .collect();
        let rest = self.total.get(&i).copied().unwrap_or(0);
        let rest = rest.saturating_sub(u32::try_from(cores.len()).unwrap_or(u32::MAX) + 1);
        cores.push(threads);
        cores.extend(std::iter::repeat_n(self.most, rest as usize));
        classes::fits_exactly(vm, &cores)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::solve::classes;

    /// `cores` two-thread cores in one cell, CPU 1 (core 0's sibling) off;
    /// VMs of `vcpus`, `threads = "prefer"`.
    fn request(cores: u32, vcpus: &[u32]) -> PlanRequest {
        super::super::test_request(&format!("package:1 core:{cores} pu:2"), 1, vcpus)
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
        let counts = on_threads(req, &classes, &relaxed)?;
        let out = super::super::lowest_cores(req, &classes, &counts, false);
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
