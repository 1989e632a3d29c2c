//! Arc-flow graphs for packing VM pieces into bins: the L3 domains of a node
//! (objectives 6–7), or NUMA nodes (objectives 1–5 on hosts of small nodes).
//!
//! Each bin's free cores is its capacity. Bins of one group (same free
//! cores, same memory) are interchangeable, so a group is one flow graph
//! over the loads `0..=cap`: an arc `i → i+s` per piece *item* s, a *loss*
//! arc `i → cap` that ends a partly used bin, an *empty* arc `0 → cap`, and
//! as many units of flow as the group has bins. Each unit is one bin's
//! pattern; the flow on arcs of item s is how many pieces of s the group
//! holds. The LP relaxation of this model is the strong (Gilmore–Gomory)
//! bound of bin packing, which a per-bin model lacks: there the relaxation
//! fills every bin exactly with fractions of VMs.
//!
//! An item is a piece's cores and, where a group's memory can bind, its
//! memory: a load is then (cores, memory), a vertex per load reached within
//! both capacities, and every load of `cap` cores is the end (vector
//! packing; its LP is Gilmore–Gomory's bound of that too). Where memory
//! cannot bind (or is not counted), loads are cores only and items of equal
//! cores share their vertices.
//!
//! Along a path, items never increase (an arc of item s starts only at 0 or
//! at a load reached by arcs of items ≥ s): one path per pattern, not one
//! per ordering of it.

use super::backend::Model;
use super::expr::{Expr, Var};
use std::collections::{BTreeMap, BTreeSet};

/// Arcs (and loads) one graph may have; a graph that would need more is not
/// built (its model steps aside for one that does not enumerate loads).
pub(crate) const MOST_ARCS: usize = 60_000;

/// What a piece takes from its bin: cores, and memory in the model's units
/// (0 where memory is not counted). Ordered by cores first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Item {
    pub(crate) cores: u32,
    pub(crate) memory: u64,
}

#[cfg(test)]
impl Item {
    /// A piece of `cores` cores and no memory counted.
    pub(crate) fn cores(cores: u32) -> Item {
        Item { cores, memory: 0 }
    }
}

/// A bin's load: cores, and memory where the group counts it.
type Load = (u32, u64);

/// Steps the memory sums of [`Lift`] may take (about a millisecond each
/// 100,000); beyond, loads are not lifted (and the graph, bigger, may be too
/// big to build).
const MOST_SUM_STEPS: usize = 2_000_000;

/// Graph compression for memory: a load's memory is raised to the highest
/// value that still admits every way of filling the bin's other cores.
///
/// With `S[k]` the memory sums of the multisets of items of at most k cores
/// (within the bin's memory M), a bin at (c, m) can still take any multiset
/// whose sum r ∈ S[cap − c] has r ≤ M − m; raising m to M − max{r ∈ S[cap −
/// c] : r ≤ M − m} keeps every one of them. By induction along a path, the
/// raised memory admits every completion the true memory does, and it is
/// never below the true memory: the patterns the graph holds are exactly the
/// feasible ones, over far fewer loads (many memories share one raised
/// value).
struct Lift {
    memory: u64,
    sums: Option<Vec<BTreeSet<u64>>>,
}

impl Lift {
    fn new(cap: u32, memory: Option<u64>, items: &BTreeSet<Item>) -> Lift {
        let Some(most) = memory else {
            return Lift {
                memory: 0,
                sums: None,
            };
        };
        let mut sums: Vec<BTreeSet<u64>> = vec![BTreeSet::from([0])];
        let mut steps = 0;
        for k in 1..=cap {
            let mut here = sums[(k - 1) as usize].clone();
            steps += here.len();
            for item in items.iter().filter(|i| i.cores >= 1 && i.cores <= k) {
                let from = &sums[(k - item.cores) as usize];
                steps += from.len();
                if steps > MOST_SUM_STEPS {
                    return Lift {
                        memory: most,
                        sums: None,
                    };
                }
                for &r in from {
                    if let Some(t) = r.checked_add(item.memory).filter(|&t| t <= most) {
                        here.insert(t);
                    }
                }
            }
            sums.push(here);
        }
        Lift {
            memory: most,
            sums: Some(sums),
        }
    }

    /// The raised memory of a bin of `cap` cores at (c, m).
    fn raise(&self, cap: u32, (c, m): Load) -> Load {
        let Some(sums) = &self.sums else {
            return (c, m);
        };
        let room = self.memory.saturating_sub(m);
        let fits = sums
            .get((cap.saturating_sub(c)) as usize)
            .and_then(|s| s.range(..=room).next_back())
            .copied()
            .unwrap_or(0);
        (c, self.memory - fits)
    }
}

/// One group's flow graph in a model.
#[derive(Debug, Clone)]
pub(crate) struct Flow {
    cells: u32,
    cap: u32,
    /// (from, to, item, variable); a load of `cap` cores is the end.
    arcs: Vec<(Load, Load, Item, Var)>,
    /// (from, variable).
    losses: Vec<(Load, Var)>,
    empty: Var,
    full: Var,
}

impl Flow {
    /// Adds the graph of `cells` bins of `cap` free cores (and `memory`,
    /// where it can bind), for pieces of `items` (those that do not fit a
    /// bin are left out), to `m`; `None` when it would have more than
    /// [`MOST_ARCS`] arcs.
    pub(crate) fn add(
        m: &mut Model,
        (cells, cap, memory): (u32, u32, Option<u64>),
        items: &BTreeSet<Item>,
    ) -> Option<Flow> {
        let lift = Lift::new(cap, memory, items);
        let step = |(c, mem): Load, item: &Item| -> Option<Load> {
            let c = c.checked_add(item.cores).filter(|&c| c <= cap)?;
            let mem = match memory {
                Some(most) => mem.checked_add(item.memory).filter(|&m| m <= most)?,
                None => 0,
            };
            Some(lift.raise(cap, (c, mem)))
        };
        let mut reach: BTreeSet<Load> = BTreeSet::from([(0, 0)]);
        let mut found: Vec<(Load, Load, Item)> = Vec::new();
        for item in items.iter().rev().filter(|s| s.cores >= 1) {
            let mut queue: Vec<Load> = reach.iter().copied().filter(|l| l.0 < cap).collect();
            while let Some(load) = queue.pop() {
                if let Some(next) = step(load, item) {
                    if next.0 < cap && reach.insert(next) {
                        queue.push(next);
                    }
                }
                if reach.len() > MOST_ARCS {
                    return None;
                }
            }
            for &load in reach.iter().filter(|l| l.0 < cap) {
                if let Some(to) = step(load, item) {
                    found.push((load, to, *item));
                }
            }
            if found.len() > MOST_ARCS {
                return None;
            }
        }
        let arcs: Vec<(Load, Load, Item, Var)> = found
            .into_iter()
            .map(|(from, to, item)| (from, to, item, m.int(f64::from(cells))))
            .collect();
        let losses: Vec<(Load, Var)> = reach
            .iter()
            .filter(|l| l.0 > 0 && l.0 < cap)
            .map(|&l| (l, m.int(f64::from(cells))))
            .collect();
        let empty = m.int(f64::from(cells));
        // Full bins, as a variable of its own: cores = cap · full + what the
        // partly used bins hold, which gives the backend's rounding (MIR)
        // cuts something to work on.
        let full = m.int(f64::from(cells));
        let ends: Expr = arcs
            .iter()
            .filter(|(_, to, _, _)| to.0 == cap)
            .map(|&(_, _, _, v)| v)
            .sum();
        m.eq(ends, full);
        let split: Expr = arcs
            .iter()
            .map(|&(_, _, item, v)| f64::from(item.cores) * v)
            .sum();
        let losses_held: Expr = losses.iter().map(|&(from, v)| f64::from(from.0) * v).sum();
        m.eq(split, f64::from(cap) * full + losses_held);
        // Flow conservation at every load below `cap` cores; `cells` units
        // leave 0.
        let mut out: BTreeMap<Load, Expr> = BTreeMap::new();
        let mut into: BTreeMap<Load, Expr> = BTreeMap::new();
        for &(from, to, _, v) in &arcs {
            *out.entry(from).or_default() += v;
            if to.0 < cap {
                *into.entry(to).or_default() += v;
            }
        }
        for &(from, v) in &losses {
            *out.entry(from).or_default() += v;
        }
        for &load in reach.iter().filter(|l| l.0 < cap) {
            let leaving = out.remove(&load).unwrap_or_default();
            let arriving = into.remove(&load).unwrap_or_default();
            if load == (0, 0) {
                m.eq(leaving + empty - arriving, f64::from(cells));
            } else {
                m.eq(leaving, arriving);
            }
        }
        Some(Flow {
            cells,
            cap,
            arcs,
            losses,
            empty,
            full,
        })
    }

    /// Adds to `values` the flow of bins holding `bins` (each bin's items,
    /// in any order; one entry per bin, empty bins included): the start
    /// point of a layout. `None` when a bin's items do not fit it or a
    /// path is not in the graph.
    pub(crate) fn add_start(&self, bins: &[Vec<Item>], values: &mut [f64]) -> Option<()> {
        if bins.len() != self.cells as usize {
            return None;
        }
        for bin in bins {
            let mut items = bin.clone();
            items.sort_unstable_by(|a, b| b.cmp(a));
            if items.is_empty() {
                values[self.empty.index()] += 1.0;
                continue;
            }
            let mut at: Load = (0, 0);
            for item in items {
                let &(_, to, _, v) = self
                    .arcs
                    .iter()
                    .find(|&&(from, _, it, _)| from == at && it == item)?;
                values[v.index()] += 1.0;
                at = to;
            }
            if at.0 == self.cap {
                values[self.full.index()] += 1.0;
            } else {
                let &(_, v) = self.losses.iter().find(|&&(from, _)| from == at)?;
                values[v.index()] += 1.0;
            }
        }
        Some(())
    }

    /// The flow on arcs of `item`: pieces of it in the group.
    pub(crate) fn pieces(&self, item: Item) -> Expr {
        self.arcs
            .iter()
            .filter(|&&(_, _, it, _)| it == item)
            .map(|&(_, _, _, v)| v)
            .sum()
    }

    /// Cores the group's pieces take.
    pub(crate) fn cores(&self) -> Expr {
        self.arcs
            .iter()
            .map(|&(_, _, item, v)| f64::from(item.cores) * v)
            .sum()
    }

    /// Its arcs.
    pub(crate) fn arcs(&self) -> usize {
        self.arcs.len()
    }

    /// Partly used bins of the group.
    pub(crate) fn partial(&self) -> Expr {
        self.losses.iter().map(|&(_, v)| v).sum()
    }

    /// Splits the flow at `values` into one path per bin: the items of each
    /// bin, largest first (empty bins last).
    pub(crate) fn patterns(&self, values: &[f64]) -> Vec<Vec<Item>> {
        let mut left: BTreeMap<Var, u32> = self
            .arcs
            .iter()
            .map(|&(_, _, _, v)| v)
            .chain(self.losses.iter().map(|&(_, v)| v))
            .map(|v| (v, v.count(values)))
            .collect();
        let empty = self.empty.count(values) as usize;
        let mut out = Vec::new();
        while out.len() + empty < self.cells as usize {
            let mut at: Load = (0, 0);
            let mut path = Vec::new();
            while at.0 < self.cap {
                let next = self
                    .arcs
                    .iter()
                    .filter(|&&(from, _, _, v)| from == at && left.get(&v).is_some_and(|&n| n > 0))
                    .max_by_key(|&&(_, _, item, _)| item)
                    .copied();
                let Some((_, to, item, v)) = next else {
                    // A loss arc ends the path (or, were the flow broken,
                    // nothing does: the path ends here all the same).
                    let loss = self
                        .losses
                        .iter()
                        .find(|&&(from, v)| from == at && left.get(&v).is_some_and(|&n| n > 0))
                        .map(|&(_, v)| v);
                    if let Some(n) = loss.and_then(|v| left.get_mut(&v)) {
                        *n -= 1;
                    }
                    break;
                };
                if let Some(n) = left.get_mut(&v) {
                    *n -= 1;
                }
                path.push(item);
                at = to;
            }
            if path.is_empty() {
                break;
            }
            out.push(path);
        }
        out.resize(self.cells as usize, Vec::new());
        out
    }
}

/// The partitions of `n` into at most `parts` parts of at most `largest`
/// each, largest part first.
#[cfg(test)]
pub(crate) fn partitions(n: u32, largest: u32, parts: u32) -> Vec<Vec<u32>> {
    partitions_within(n, largest, parts, usize::MAX).unwrap_or_default()
}

/// [`partitions`], or `None` as soon as there are more than `limit` (there
/// can be millions: 48 cores in parts of at most 8).
pub(crate) fn partitions_within(
    n: u32,
    largest: u32,
    parts: u32,
    limit: usize,
) -> Option<Vec<Vec<u32>>> {
    fn go(
        n: u32,
        largest: u32,
        parts: u32,
        limit: usize,
        current: &mut Vec<u32>,
        out: &mut Vec<Vec<u32>>,
    ) -> Option<()> {
        if n == 0 {
            out.push(current.clone());
            return (out.len() <= limit).then_some(());
        }
        if parts == 0 {
            return Some(());
        }
        for part in (1..=largest.min(n)).rev() {
            current.push(part);
            go(n - part, part, parts - 1, limit, current, out)?;
            current.pop();
        }
        Some(())
    }
    let mut out = Vec::new();
    go(n, largest, parts, limit, &mut Vec::new(), &mut out)?;
    Some(out)
}

/// The compact layouts of a VM of `n` cores kept to one NUMA node whose bins
/// (L3 domains) come in groups `(free cores, how many)`: some bins whole,
/// and at most one more piece, the remainder; at most `parts` pieces in all.
/// Each pattern's pieces are largest first; the patterns are in a fixed order.
///
/// Most optima have this form (given a layout, a VM A whose cores fill all
/// but one of its bins' worth can take those bins whole and its rest in the
/// last, which then holds every other piece found in A's bins: they fit, as
/// that bin has room for all the k bins held beside A), but not all:
/// a VM smaller than its bins may have to be split to fill a host (2 cores
/// as 1 + 1 beside two 7-core VMs in two bins of 8). So a model of these
/// patterns alone is a fast first try whose answer is optimal only where it
/// meets a lower bound, or, for objective 7, where every VM touches its
/// fewest domains (objective 6 at its bound): a VM in its fewest bins cannot
/// hold all but one of its bins' worth only if fewer bins would hold it, so
/// the exchange above applies to every VM, one after the other (no VM
/// touches more bins, no more bins are partly used, nothing leaves its
/// node). The model of every partition decides otherwise.
pub(crate) fn whole_and_rest(n: u32, groups: &[(u32, u32)], parts: u32) -> Vec<Vec<u32>> {
    /// Whole bins of `groups[at..]` (`left`: bins of each group not taken
    /// whole), then a remainder in a bin not taken.
    fn go(
        n: u32,
        groups: &[(u32, u32)],
        at: usize,
        left: &mut Vec<u32>,
        parts: u32,
        current: &mut Vec<u32>,
        out: &mut BTreeSet<Vec<u32>>,
    ) {
        let Some(&(cap, count)) = groups.get(at) else {
            // The remainder: nothing, or one piece in a bin that holds it.
            let room = groups
                .iter()
                .zip(left.iter())
                .any(|(&(cap, _), &free)| cap >= n && free > 0);
            if n == 0 || (room && parts >= 1) {
                let mut pattern = current.clone();
                if n > 0 {
                    pattern.push(n);
                }
                pattern.sort_unstable_by(|a, b| b.cmp(a));
                out.insert(pattern);
            }
            return;
        };
        let most = count.min(parts).min(n.checked_div(cap).unwrap_or(0));
        for whole in 0..=most {
            current.extend(std::iter::repeat_n(cap, whole as usize));
            left[at] = count - whole;
            go(
                n - whole * cap,
                groups,
                at + 1,
                left,
                parts - whole,
                current,
                out,
            );
            current.truncate(current.len() - whole as usize);
        }
        left[at] = count;
    }
    let groups: Vec<(u32, u32)> = groups.iter().copied().filter(|&(cap, _)| cap > 0).collect();
    let mut left: Vec<u32> = groups.iter().map(|&(_, count)| count).collect();
    let mut out = BTreeSet::new();
    go(n, &groups, 0, &mut left, parts, &mut Vec::new(), &mut out);
    // Fewest pieces first, then largest pieces first: a fixed order.
    let mut out: Vec<Vec<u32>> = out.into_iter().collect();
    out.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| b.cmp(a)));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    #[test]
    fn partitions_are_counted_by_hand() {
        // 4 = 4 = 3+1 = 2+2 = 2+1+1 = 1+1+1+1.
        assert_eq!(partitions(4, 4, 4).len(), 5);
        assert_eq!(partitions(4, 3, 2), vec![vec![3, 1], vec![2, 2]]);
        assert_eq!(partitions(5, 2, 3), vec![vec![2, 2, 1]]);
        assert!(partitions(7, 2, 3).is_empty());
        assert_eq!(partitions_within(4, 4, 4, 5).map(|p| p.len()), Some(5));
        assert_eq!(partitions_within(4, 4, 4, 4), None);
    }

    #[test]
    fn whole_bins_and_one_remainder_counted_by_hand() {
        // 20 cores over bins of 8 (×3) and 7 (×1): 8+8+4 and 8+7+5 (7+… and
        // 8+… alone leave more than one bin's worth; three 8s are too many).
        assert_eq!(
            whole_and_rest(20, &[(8, 3), (7, 1)], 5),
            vec![vec![8, 8, 4], vec![8, 7, 5]]
        );
        // Bins of 4 only: 10 = 4+4+2; with 2 parts at most, nothing.
        assert_eq!(whole_and_rest(10, &[(4, 5)], 3), vec![vec![4, 4, 2]]);
        assert!(whole_and_rest(10, &[(4, 5)], 2).is_empty());
        // Fewer bins than whole pieces needed: 12 on two bins of 4, none.
        assert!(whole_and_rest(12, &[(4, 2)], 9).is_empty());
        // A VM smaller than a bin: itself, or a whole bin of its size.
        assert_eq!(whole_and_rest(3, &[(8, 2), (3, 1)], 4), vec![vec![3]]);
    }

    /// `m` solved for the fewest partly used bins of `flow`.
    fn fewest_partial(
        m: &Model,
        flow: &Flow,
    ) -> Result<(Vec<f64>, bool), super::super::backend::SolveError> {
        super::super::backend::run(m, &flow.partial(), std::time::Duration::from_secs(5), None)
    }

    #[test]
    fn a_flow_is_one_pattern_per_cell() {
        // Two cells of 4: pieces 3, 1, 2 → patterns [3, 1] and [2] (partial).
        let mut m = Model::default();
        let sizes = BTreeSet::from([Item::cores(1), Item::cores(2), Item::cores(3)]);
        let flow = Flow::add(&mut m, (2, 4, None), &sizes).expect("small");
        for (s, n) in [(1, 1.0), (2, 1.0), (3, 1.0)] {
            m.eq(flow.pieces(Item::cores(s)), n);
        }
        let (values, proven) = fewest_partial(&m, &flow).expect("solves");
        assert!(proven);
        assert_eq!(flow.partial().value(&values), 1.0);
        let mut patterns: Vec<Vec<u32>> = flow
            .patterns(&values)
            .into_iter()
            .map(|p| p.into_iter().map(|item| item.cores).collect())
            .collect();
        patterns.sort();
        assert_eq!(patterns, vec![vec![2], vec![3, 1]]);
    }

    #[test]
    fn memory_keeps_two_big_pieces_apart() {
        // Two bins of 4 cores and 4 units of memory; pieces of 2 cores with
        // 3 units (A) and with 1 unit (B), two of each: A + A would take 6
        // units, so each bin holds A + B. Without memory, cores alone allow
        // A + A.
        let (a, b) = (
            Item {
                cores: 2,
                memory: 3,
            },
            Item {
                cores: 2,
                memory: 1,
            },
        );
        let items = BTreeSet::from([a, b]);
        let mut m = Model::default();
        let flow = Flow::add(&mut m, (2, 4, Some(4)), &items).expect("small");
        m.eq(flow.pieces(a), 2.0);
        m.eq(flow.pieces(b), 2.0);
        let (values, proven) = fewest_partial(&m, &flow).expect("solves");
        assert!(proven);
        assert_eq!(flow.patterns(&values), vec![vec![a, b], vec![a, b]]);
        // One bin cannot hold both A pieces whatever else it holds.
        let mut m = Model::default();
        let flow = Flow::add(&mut m, (1, 4, Some(4)), &items).expect("small");
        m.eq(flow.pieces(a), 2.0);
        let solved = fewest_partial(&m, &flow);
        assert!(solved.is_err(), "{solved:?}");
    }

    /// The multisets of `items` (largest first) of at most `cap` cores and
    /// `memory`: every pattern a bin may hold, by brute force.
    fn feasible(items: &[Item], cap: u32, memory: u64) -> BTreeSet<Vec<Item>> {
        fn go(
            items: &[Item],
            (cap, memory): (u32, u64),
            current: &mut Vec<Item>,
            out: &mut BTreeSet<Vec<Item>>,
        ) {
            if !current.is_empty() {
                out.insert(current.clone());
            }
            for (at, item) in items.iter().enumerate() {
                if item.cores <= cap && item.memory <= memory {
                    current.push(*item);
                    go(
                        &items[at..],
                        (cap - item.cores, memory - item.memory),
                        current,
                        out,
                    );
                    current.pop();
                }
            }
        }
        let mut sorted: Vec<Item> = items.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        sorted.dedup();
        let mut out = BTreeSet::new();
        go(&sorted, (cap, memory), &mut Vec::new(), &mut out);
        out
    }

    /// Every path of `flow` from the empty load to its end (a full bin, or
    /// a loss arc), as a multiset: the patterns its graph holds.
    fn paths(flow: &Flow) -> BTreeSet<Vec<Item>> {
        fn go(flow: &Flow, at: Load, current: &mut Vec<Item>, out: &mut BTreeSet<Vec<Item>>) {
            if at.0 == flow.cap || flow.losses.iter().any(|&(from, _)| from == at) {
                let mut pattern = current.clone();
                pattern.sort_unstable_by(|a, b| b.cmp(a));
                out.insert(pattern);
            }
            for &(from, to, item, _) in &flow.arcs {
                if from == at {
                    current.push(item);
                    go(flow, to, current, out);
                    current.pop();
                }
            }
        }
        let mut out = BTreeSet::new();
        go(flow, (0, 0), &mut Vec::new(), &mut out);
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 256,
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        })]

        /// Lifting loads' memory keeps exactly the feasible patterns: the
        /// graph's paths equal a brute-force enumeration of the multisets
        /// that fit both capacities.
        #[test]
        fn lifted_graphs_hold_exactly_the_feasible_patterns(
            cap in 1u32..=7,
            memory in 0u64..=14,
            items in proptest::collection::vec((1u32..=4, 0u64..=7), 1..=5),
        ) {
            let items: BTreeSet<Item> = items
                .into_iter()
                .map(|(cores, memory)| Item { cores, memory })
                .collect();
            let mut m = Model::default();
            let flow = Flow::add(&mut m, (1, cap, Some(memory)), &items).expect("small");
            let list: Vec<Item> = items.iter().copied().collect();
            proptest::prop_assert_eq!(paths(&flow), feasible(&list, cap, memory));
        }
    }
}
