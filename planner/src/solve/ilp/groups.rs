//! What the models share about groups of cores (NUMA nodes, L3 domains): the
//! fewest groups that hold a demand, whether whole groups add up to a count,
//! and the rows that tell a partly used group.

use super::backend::Model;
use super::expr::{Expr, Var};
use std::collections::BTreeMap;

/// The fewest of `caps` that together hold `demand` (largest first); `None`
/// when all of them do not.
pub(crate) fn fewest(caps: &[u32], demand: u32) -> Option<u32> {
    let mut caps = caps.to_vec();
    caps.sort_by(|a, b| b.cmp(a));
    let mut held = 0;
    for (i, c) in caps.iter().enumerate() {
        held += c;
        if held >= demand {
            return Some(u32::try_from(i + 1).unwrap_or(u32::MAX));
        }
    }
    None
}

/// Whether some subset of `caps` sums to exactly `target`.
pub(crate) fn subset_sum(caps: &[u32], target: u32) -> bool {
    let target = target as usize;
    let mut reachable = vec![false; target + 1];
    reachable[0] = true;
    for &c in caps {
        let c = c as usize;
        for t in (c..=target).rev() {
            if reachable[t - c] {
                reachable[t] = true;
            }
        }
    }
    reachable[target]
}

/// Binaries `touched` and `full` of a group of `cap` cores of which `used`
/// are taken: `used ≤ cap · touched`, `cap · full ≤ used`. `touched − full`
/// is 1 for a partly used group at any optimum that minimises it.
fn partly_used(m: &mut Model, used: &Expr, cap: f64) -> (Var, Var) {
    let touched = m.binary();
    let full = m.binary();
    m.le(used.clone(), cap * touched);
    m.le(cap * full, used.clone());
    (touched, full)
}

/// [`partly_used`] rows for every group of `groups` (the cores taken of it
/// and its capacity) that VMs can take cores of; with `full_when_touched`,
/// also `full ≤ touched`. Returns per group (touched, full, capacity) and
/// the partly used groups' count, `Σ touched − full`.
pub(crate) fn partly_used_groups<K: Ord>(
    m: &mut Model,
    groups: BTreeMap<K, (Expr, u32)>,
    full_when_touched: bool,
) -> (BTreeMap<K, (Var, Var, u32)>, Expr) {
    let mut partial = Expr::default();
    let mut binaries = BTreeMap::new();
    for (key, (used, capacity)) in groups {
        if used.is_empty() {
            continue;
        }
        let (touched, full) = partly_used(m, &used, f64::from(capacity));
        if full_when_touched {
            m.le(full, touched);
        }
        partial += touched - full;
        binaries.insert(key, (touched, full, capacity));
    }
    (binaries, partial)
}

/// The fewest of `caps` that hold `demand`; all of them when they do not.
pub(super) fn fewest_or_all(caps: &[u32], demand: u32) -> u32 {
    fewest(caps, demand).unwrap_or_else(|| u32::try_from(caps.len().max(1)).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewest_groups_and_subset_sums() {
        for (caps, demand, expected) in [
            (&[4, 8, 2][..], 9, Some(2)),
            (&[4, 8, 2], 8, Some(1)),
            (&[4, 8, 2], 15, None),
            (&[], 0, None),
        ] {
            assert_eq!(fewest(caps, demand), expected, "{caps:?} {demand}");
        }
        assert!(subset_sum(&[4, 8, 2], 10));
        assert!(!subset_sum(&[4, 8, 2], 11));
    }
}
