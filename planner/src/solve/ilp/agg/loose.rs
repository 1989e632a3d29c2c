//! VMs that may span nodes in the counting models: their cores per place
//! (NUMA node or cell), and the groups of places they touch, with cover cuts.

use super::super::backend::Model;
use super::super::expr::{Expr, Var};
use super::lexicographic::{fewest_or_all, Objectives};
use crate::ids::NodeId;
use crate::solve::VmRequest;
use std::collections::BTreeMap;

/// A VM of `c` cores that may span places: `p` (placed) and its cores per
/// place, `Σ n = c · p`; never placed when its places together cannot hold it.
/// `places`: key, node and free cores of each place it may use; the cores are
/// added to `used` per place. Returns `p` and `(place, n, most it can take)`
/// for the places with room.
pub(super) fn columns<K: Ord + Copy>(
    m: &mut Model,
    objectives: &mut Objectives,
    vm: &VmRequest,
    c: u32,
    places: impl IntoIterator<Item = (K, Option<NodeId>, u32)>,
    used: &mut BTreeMap<K, Expr>,
) -> (Var, Vec<(K, Var, u32)>) {
    let p = m.binary();
    let mut n = Vec::new();
    let mut nodes = Vec::new();
    for (k, node, free) in places {
        let most = c.min(free);
        if most == 0 {
            continue;
        }
        let v = m.int(f64::from(most));
        n.push((k, v, most));
        *used.entry(k).or_default() += v;
        if vm.nic_remote(node) {
            objectives.remote += v;
        }
        nodes.push(node);
    }
    let held: u32 = n.iter().map(|&(_, _, most)| most).sum();
    if held < c {
        // It fits nowhere: never placed.
        m.le(p, 0.0);
    }
    m.eq(n.iter().map(|&(_, v, _)| v).sum::<Expr>(), f64::from(c) * p);
    // Several required NICs: cores on each of their nodes (a node without
    // room: never placed).
    for &cell in &vm.cell_nodes {
        let there: Expr = n
            .iter()
            .zip(&nodes)
            .filter(|(_, node)| **node == Some(cell))
            .map(|(&(_, v, _), _)| v)
            .sum();
        m.ge(there, p);
    }
    objectives.place(vm, p, c);
    (p, n)
}

/// One binary `g` per group of a placed VM's places (`groups`: its cores
/// there and the most each can take), 1 when it has cores in the group:
/// `n ≤ most · g`. Cover cuts: the groups it touches hold its `c` cores, and
/// there are at least as many as the fewest that can. Returns the binaries,
/// their sum and that fewest.
pub(super) fn touch<K: Ord>(
    m: &mut Model,
    p: Var,
    c: u32,
    groups: BTreeMap<K, Vec<(Var, u32)>>,
) -> (BTreeMap<K, Var>, Expr, u32) {
    let caps: Vec<u32> = groups
        .values()
        .map(|members| members.iter().map(|&(_, most)| most).sum::<u32>().min(c))
        .collect();
    let least = fewest_or_all(&caps, c);
    let mut cover = Expr::default();
    let mut count = Expr::default();
    let mut binaries = BTreeMap::new();
    for ((key, members), &held) in groups.into_iter().zip(&caps) {
        let g = m.binary();
        for (v, most) in members {
            m.le(v, f64::from(most) * g);
        }
        cover += f64::from(held) * g;
        count += g;
        binaries.insert(key, g);
    }
    m.ge(cover, f64::from(c) * p);
    m.ge(count.clone(), f64::from(least) * p);
    (binaries, count, least)
}
