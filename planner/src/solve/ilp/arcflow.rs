//! Arc-flow graphs for packing VM pieces into L3 domains (objectives 6–7).
//!
//! Each L3 domain's free cores (a *cell*) is a bin. Cells of one group (same
//! NUMA node, same free cores) are interchangeable, so a group is one flow
//! graph over the vertices `0..=cap`: an arc `i → i+s` per piece size s, a
//! *loss* arc `i → cap` that ends a partly used cell, an *empty* arc
//! `0 → cap`, and as many units of flow as the group has cells. Each unit is
//! one cell's pattern; the flow on arcs of size s is how many pieces of that
//! size the group holds. The LP relaxation of this model is the strong
//! (Gilmore–Gomory) bound of bin packing, which a per-cell model lacks: there
//! the relaxation fills every domain exactly with fractions of VMs.
//!
//! Along a path, sizes never increase (an arc of size s starts only at 0 or at
//! a vertex reached by arcs of size ≥ s): one path per pattern, not one per
//! ordering of it.

use super::backend::Model;
use super::expr::{Expr, Var};
use std::collections::{BTreeMap, BTreeSet};

/// One group's flow graph in a model.
#[derive(Debug, Clone)]
pub(crate) struct Flow {
    cells: u32,
    cap: u32,
    /// (from, size, variable).
    arcs: Vec<(u32, u32, Var)>,
    /// (from, variable).
    losses: Vec<(u32, Var)>,
    empty: Var,
}

impl Flow {
    /// Adds the graph of `cells` cells of `cap` free cores, for pieces of
    /// `sizes` (those above `cap` are left out), to `m`.
    pub(crate) fn add(m: &mut Model, cells: u32, cap: u32, sizes: &BTreeSet<u32>) -> Flow {
        let mut reach: BTreeSet<u32> = BTreeSet::from([0]);
        let mut arcs = Vec::new();
        for &s in sizes.iter().rev().filter(|&&s| s >= 1 && s <= cap) {
            let mut queue: Vec<u32> = reach.iter().copied().collect();
            while let Some(i) = queue.pop() {
                if i + s <= cap && reach.insert(i + s) {
                    queue.push(i + s);
                }
            }
            for &i in reach.iter().filter(|&&i| i + s <= cap) {
                arcs.push((i, s, m.int(f64::from(cells))));
            }
        }
        let losses: Vec<(u32, Var)> = reach
            .iter()
            .filter(|&&i| i > 0 && i < cap)
            .map(|&i| (i, m.int(f64::from(cells))))
            .collect();
        let empty = m.int(f64::from(cells));
        // Full cells, as a variable of its own: cores = cap · full + what the
        // partly used cells hold, which gives the backend's rounding (MIR)
        // cuts something to work on.
        let full = m.int(f64::from(cells));
        let ends: Expr = arcs
            .iter()
            .filter(|&&(from, s, _)| from + s == cap)
            .map(|&(_, _, v)| v)
            .sum();
        m.eq(ends, full);
        let split: Expr = arcs.iter().map(|&(_, size, v)| f64::from(size) * v).sum();
        let losses_held: Expr = losses.iter().map(|&(from, v)| f64::from(from) * v).sum();
        m.eq(split, f64::from(cap) * full + losses_held);
        // Flow conservation at every vertex but the last; `cells` units leave 0.
        for &i in reach.iter().filter(|&&i| i < cap) {
            let out: Expr = arcs
                .iter()
                .filter(|&&(from, _, _)| from == i)
                .map(|&(_, _, v)| v)
                .chain(
                    losses
                        .iter()
                        .filter(|&&(from, _)| from == i)
                        .map(|&(_, v)| v),
                )
                .sum();
            let into: Expr = arcs
                .iter()
                .filter(|&&(from, s, _)| from + s == i)
                .map(|&(_, _, v)| v)
                .sum();
            if i == 0 {
                m.eq(out + empty - into, f64::from(cells));
            } else {
                m.eq(out, into);
            }
        }
        Flow {
            cells,
            cap,
            arcs,
            losses,
            empty,
        }
    }

    /// The flow on arcs of size `s`: pieces of that size in the group.
    pub(crate) fn pieces(&self, s: u32) -> Expr {
        self.arcs
            .iter()
            .filter(|&&(_, size, _)| size == s)
            .map(|&(_, _, v)| v)
            .sum()
    }

    /// Cores the group's pieces take.
    pub(crate) fn cores(&self) -> Expr {
        self.arcs
            .iter()
            .map(|&(_, size, v)| f64::from(size) * v)
            .sum()
    }

    /// Partly used cells of the group.
    pub(crate) fn partial(&self) -> Expr {
        self.losses.iter().map(|&(_, v)| v).sum()
    }

    /// Splits the flow at `values` into one path per cell: the piece sizes of
    /// each cell, largest first (empty cells last).
    pub(crate) fn patterns(&self, values: &[f64]) -> Vec<Vec<u32>> {
        let mut left: BTreeMap<Var, u32> = self
            .arcs
            .iter()
            .map(|&(_, _, v)| v)
            .chain(self.losses.iter().map(|&(_, v)| v))
            .map(|v| (v, v.count(values)))
            .collect();
        let empty = self.empty.count(values) as usize;
        let mut out = Vec::new();
        while out.len() + empty < self.cells as usize {
            let mut at = 0;
            let mut path = Vec::new();
            while at < self.cap {
                let next = self
                    .arcs
                    .iter()
                    .filter(|&&(from, _, v)| from == at && left.get(&v).is_some_and(|&n| n > 0))
                    .max_by_key(|&&(_, s, _)| s)
                    .copied();
                let Some((_, s, v)) = next else {
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
                path.push(s);
                at += s;
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

    #[test]
    fn a_flow_is_one_pattern_per_cell() {
        // Two cells of 4: pieces 3, 1, 2 → patterns [3, 1] and [2] (partial).
        let mut m = Model::default();
        let sizes = BTreeSet::from([1, 2, 3]);
        let flow = Flow::add(&mut m, 2, 4, &sizes);
        for (s, n) in [(1, 1.0), (2, 1.0), (3, 1.0)] {
            m.eq(flow.pieces(s), n);
        }
        let (values, proven) = super::super::backend::run(
            &m,
            &flow.partial(),
            std::time::Duration::from_secs(5),
            None,
        )
        .expect("solves");
        assert!(proven);
        assert_eq!(flow.partial().value(&values), 1.0);
        let mut patterns = flow.patterns(&values);
        patterns.sort();
        assert_eq!(patterns, vec![vec![2], vec![3, 1]]);
    }
}
