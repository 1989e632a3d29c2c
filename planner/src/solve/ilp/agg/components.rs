//! One full NUMA node: the most *components* its pieces can form, and the
//! layout that has them.
//!
//! Every free core of the node is used. Draw the pieces (a VM's cores on
//! this node) and the node's L3 domains as a graph, a piece joined to each
//! domain it has cores in: its edges are objective 6's count on this node.
//! A connected part of `p` pieces and `d` domains has at least `p + d − 1`
//! edges, and its pieces fill its domains exactly (the node is full), so the
//! node has at least `pieces + domains − components` edges. Laying a part's
//! pieces one after the other over its domains reaches that: the fewest
//! edges are the pieces and domains less the most groups the pieces can be
//! cut into, each filling a set of domains exactly. That is what [`most`]
//! counts, and [`Groups::lay_out`] lays out.

use std::collections::HashMap;

/// Pieces this many or fewer on one node are grouped exactly; more, and the
/// search declines (2^n subsets).
pub(super) const MOST_PIECES: usize = 14;

/// A node's domains: (free cores, how many domains have that many), largest
/// first.
pub(super) type Caps = Vec<(u32, u32)>;

/// The best grouping of a set of pieces (a bit mask) with the domains left:
/// how many groups, and the first group with the domains it takes.
type Memo = HashMap<(u32, Vec<u32>), (u32, u32, Vec<u32>)>;

/// Per piece, its cores in each domain: ((which value of the caps, which
/// domain of that value), cores).
pub(super) type Laid = Vec<Vec<((usize, u32), u32)>>;

/// The most groups of `sizes` (pieces of one full node, at most
/// [`MOST_PIECES`]) that fill sets of the domains `caps` exactly.
pub(super) fn most(sizes: &[u32], caps: &Caps) -> u32 {
    let mut g = Groups::new(sizes, caps);
    g.best(g.all(), &g.counts())
}

/// The grouping of one node's pieces.
pub(super) struct Groups<'a> {
    sizes: &'a [u32],
    values: Vec<u32>,
    counts: Vec<u32>,
    /// Cores of each subset of the pieces.
    sums: Vec<u32>,
    memo: Memo,
}

impl<'a> Groups<'a> {
    pub(super) fn new(sizes: &'a [u32], caps: &Caps) -> Groups<'a> {
        let n = sizes.len().min(MOST_PIECES);
        let mut sums = vec![0u32; 1 << n];
        for mask in 1..sums.len() {
            let low = mask.trailing_zeros() as usize;
            sums[mask] = sums[mask & (mask - 1)] + sizes[low];
        }
        Groups {
            sizes: &sizes[..n],
            values: caps.iter().map(|&(v, _)| v).collect(),
            counts: caps.iter().map(|&(_, c)| c).collect(),
            sums,
            memo: Memo::new(),
        }
    }

    fn all(&self) -> u32 {
        (1u32 << self.sizes.len()) - 1
    }

    fn counts(&self) -> Vec<u32> {
        self.counts.clone()
    }

    /// The most groups of the pieces in `mask` over the domains `left`
    /// (whose cores are the pieces' cores).
    fn best(&mut self, mask: u32, left: &[u32]) -> u32 {
        if mask == 0 {
            return 0;
        }
        if let Some(&(g, _, _)) = self.memo.get(&(mask, left.to_vec())) {
            return g;
        }
        // Every group has a piece and a domain.
        let most = mask.count_ones().min(left.iter().sum());
        let low = mask & mask.wrapping_neg();
        let rest = mask ^ low;
        // The pieces in `mask` as one group, over every domain left.
        let mut best = (1, mask, left.to_vec());
        let mut sub = rest;
        loop {
            let group = sub | low;
            if group != mask && best.0 < most {
                let sum = self.sums[group as usize];
                for take in takes(&self.values, left, sum) {
                    let after: Vec<u32> = left.iter().zip(&take).map(|(l, t)| l - t).collect();
                    let g = 1 + self.best(mask ^ group, &after);
                    if g > best.0 {
                        best = (g, group, take);
                    }
                }
            }
            if sub == 0 {
                break;
            }
            sub = (sub - 1) & rest;
        }
        let g = best.0;
        self.memo.insert((mask, left.to_vec()), best);
        g
    }

    /// The pieces laid out: per piece, (domain slot, cores) where a domain
    /// slot is (which value of `caps`, which domain of that value), each
    /// group's pieces one after the other over its domains. Returns the
    /// number of groups too.
    pub(super) fn lay_out(&mut self) -> (u32, Laid) {
        let mut left = self.counts();
        let groups = self.best(self.all(), &left);
        let mut next = vec![0u32; left.len()];
        let mut out = vec![Vec::new(); self.sizes.len()];
        let mut mask = self.all();
        while mask != 0 {
            let Some((_, group, take)) = self.memo.get(&(mask, left.clone())).cloned() else {
                break;
            };
            // The group's domains, in order.
            let mut domains: Vec<(usize, u32)> = Vec::new();
            for (v, &t) in take.iter().enumerate() {
                for _ in 0..t {
                    domains.push((v, next[v]));
                    next[v] += 1;
                }
            }
            let mut cursor = domains.into_iter().map(|d| (d, self.values[d.0]));
            let mut current = cursor.next();
            for (p, size) in self.sizes.iter().enumerate() {
                if group & (1 << p) == 0 {
                    continue;
                }
                let mut need = *size;
                while need > 0 {
                    let Some((d, room)) = current.as_mut() else {
                        break;
                    };
                    let n = need.min(*room);
                    if n > 0 {
                        out[p].push((*d, n));
                        *room -= n;
                        need -= n;
                    }
                    if *room == 0 {
                        current = cursor.next();
                    }
                }
            }
            for (l, t) in left.iter_mut().zip(&take) {
                *l -= t;
            }
            mask ^= group;
        }
        (groups, out)
    }
}

/// Every way to take domains from `left` (counts of each value in `values`)
/// whose cores add up to `sum`.
fn takes(values: &[u32], left: &[u32], sum: u32) -> Vec<Vec<u32>> {
    fn go(
        values: &[u32],
        left: &[u32],
        k: usize,
        sum: u32,
        now: &mut Vec<u32>,
        out: &mut Vec<Vec<u32>>,
    ) {
        if k == values.len() {
            if sum == 0 {
                out.push(now.clone());
            }
            return;
        }
        let v = values[k].max(1);
        for t in 0..=left[k].min(sum / v) {
            now.push(t);
            go(values, left, k + 1, sum - t * v, now, out);
            now.pop();
        }
    }
    let mut out = Vec::new();
    go(values, left, 0, sum, &mut Vec::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checked by hand. Domains of 7, 8, 8, 8 with pieces 23, 4, 4: {23} on
    /// 7 + 8 + 8 and {4, 4} on 8 (2 groups); with pieces 18, 12, 1 on the
    /// same domains no piece set but all fills a set of domains (1).
    #[test]
    fn the_most_groups_of_a_full_node() {
        for (sizes, caps, groups) in [
            (vec![23, 4, 4], vec![(8, 3), (7, 1)], 2),
            (vec![18, 12, 1], vec![(8, 3), (7, 1)], 1),
            (vec![4, 4, 4, 4], vec![(4, 4)], 4),
            (vec![2, 2, 4, 3, 5], vec![(4, 4)], 3),
            (vec![3, 5, 3, 5], vec![(8, 2)], 2),
            (vec![6], vec![(4, 1), (2, 1)], 1),
        ] {
            assert_eq!(most(&sizes, &caps), groups, "{sizes:?} on {caps:?}");
        }
    }

    /// The layout has as many groups as counted, fills every domain and
    /// gives each piece its cores: edges = pieces + domains − groups.
    #[test]
    fn the_layout_reaches_the_count() {
        for (sizes, caps) in [
            (vec![23u32, 4, 4], vec![(8u32, 3u32), (7, 1)]),
            (vec![2, 2, 4, 3, 5], vec![(4, 4)]),
            (vec![5, 3, 1, 7], vec![(4, 4)]),
        ] {
            let mut g = Groups::new(&sizes, &caps);
            let (groups, laid) = g.lay_out();
            let mut used: HashMap<(usize, u32), u32> = HashMap::new();
            let mut edges = 0;
            for (p, pieces) in laid.iter().enumerate() {
                assert_eq!(pieces.iter().map(|&(_, n)| n).sum::<u32>(), sizes[p]);
                edges += pieces.len() as u32;
                for &(d, n) in pieces {
                    *used.entry(d).or_default() += n;
                }
            }
            let domains: u32 = caps.iter().map(|&(_, c)| c).sum();
            assert_eq!(used.len() as u32, domains);
            for (&(v, _), &n) in &used {
                assert_eq!(n, caps[v].0);
            }
            assert_eq!(edges, sizes.len() as u32 + domains - groups, "{sizes:?}");
        }
    }
}
