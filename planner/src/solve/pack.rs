//! A best-fit-decreasing packing of VMs into L3 domains: not a solver of its
//! own, but a good starting point for the integer program's L3 objectives
//! (which are bin packing at heart). VMs in priority order, larger first, each
//! into the fullest single domain that still holds it, else into the fewest
//! domains of one node, else across nodes when its policy allows.

use super::classes::{self, Domain, FreeCore};
use super::greedy::take;
use super::{NumaPolicy, Placement, PlanRequest};
use crate::ids::{CoreId, NodeId};
use std::collections::{BTreeMap, BTreeSet};

/// Packs greedily by domain.
pub fn place(request: &PlanRequest) -> Placement {
    let free = classes::free_cores(request);
    let mut taken: BTreeSet<CoreId> = BTreeSet::new();
    let mut order: Vec<usize> = (0..request.vms.len()).collect();
    order.sort_by_key(|&i| {
        let vm = &request.vms[i];
        (
            std::cmp::Reverse(vm.priority),
            std::cmp::Reverse(vm.pus_needed()),
            i,
        )
    });
    let mut cores: BTreeMap<usize, Vec<CoreId>> = BTreeMap::new();
    let mut memory = super::memory::Ledger::new(request);
    for i in order {
        let vm = &request.vms[i];
        let available: Vec<&FreeCore> = free
            .iter()
            .filter(|c| !taken.contains(&c.core) && classes::allowed(vm, c.node, c.threads()))
            .collect();
        let mut by_domain: BTreeMap<Domain, Vec<&FreeCore>> = BTreeMap::new();
        for c in &available {
            by_domain.entry(c.domain()).or_default().push(c);
        }
        // A VM that must touch several nodes: across them, first fit.
        if !vm.cell_nodes.is_empty() {
            if let Some(c) =
                super::greedy::take_touching(vm, available.clone()).filter(|c| memory.fits(vm, c))
            {
                memory.take(vm, &c);
                taken.extend(c.iter().copied());
                cores.insert(i, c);
            }
            continue;
        }
        // One domain: the fullest that holds it.
        let mut best: Option<(usize, Vec<CoreId>)> = None;
        for cores_of in by_domain.values() {
            if let Some(chosen) = take(vm, cores_of).filter(|c| memory.fits(vm, c)) {
                let left = cores_of.len() - chosen.len();
                if best.as_ref().is_none_or(|(l, _)| left < *l) {
                    best = Some((left, chosen));
                }
            }
        }
        let mut found = best.map(|(_, c)| c);
        // One node: its domains, fullest-free first (fewest domains).
        if found.is_none() {
            let nodes: BTreeSet<Option<NodeId>> = available.iter().map(|c| c.node).collect();
            for node in nodes {
                let mut domains: Vec<&Vec<&FreeCore>> = by_domain
                    .values()
                    .filter(|d| d.first().is_some_and(|c| c.node == node))
                    .collect();
                domains.sort_by_key(|d| std::cmp::Reverse(d.len()));
                let ordered: Vec<&FreeCore> = domains.into_iter().flatten().copied().collect();
                if let Some(c) = take(vm, &ordered).filter(|c| memory.fits(vm, c)) {
                    found = Some(c);
                    break;
                }
            }
        }
        if found.is_none() && vm.numa != NumaPolicy::Strict {
            let mut domains: Vec<&Vec<&FreeCore>> = by_domain.values().collect();
            domains.sort_by_key(|d| std::cmp::Reverse(d.len()));
            let ordered: Vec<&FreeCore> = domains.into_iter().flatten().copied().collect();
            found = take(vm, &ordered).filter(|c| memory.fits(vm, c));
        }
        if let Some(c) = found {
            memory.take(vm, &c);
            taken.extend(c.iter().copied());
            cores.insert(i, c);
        }
    }
    Placement {
        cores,
        proven: false,
        fault: None,
    }
}
