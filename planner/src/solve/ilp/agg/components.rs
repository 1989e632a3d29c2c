//! One NUMA node: how few L3 domains its pieces can touch, and how few
//! partly used, and the layout that has it.
//!
//! Draw the pieces on the node (a VM's cores there) and its L3 domains as a
//! graph, a piece joined to each domain it has cores in: its edges are
//! objective 6's count on this node. A connected part of `p` pieces and `d`
//! domains has at least `p + d − 1` edges and holds its pieces' cores; where
//! it has free cores, one of its domains at least is partly used
//! (objective 7). Laying a part's pieces one after the other over its
//! domains, largest first, reaches both: `p + d − 1` edges, and only its last
//! domain partly used. So the best layout of a node cuts its pieces into
//! groups, each over a set of domains that holds it and has none to spare
//! (without its smallest, too few cores); it costs per group its domains
//! less one, then the groups with free cores. [`cost`] finds the least, and
//! [`Groups::lay_out`] lays it out. On a full node every group fills its
//! domains exactly, and the cost is the domains less the most groups.

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// Pieces this many or fewer on a node of several domains are grouped
/// exactly; more, and the search declines (3^n pairs of a set and a part).
pub(super) const MOST_PIECES: usize = 14;

/// A node's domains: (free cores, how many domains have that many), largest
/// first.
pub(super) type Caps = Vec<(u32, u32)>;

/// Objective 6's count on a node beyond one per piece (domains less groups)
/// and objective 7's (groups with free cores): compared in that order.
pub(super) type Cost = (u32, u32);

/// The best grouping of a set of pieces (a bit mask) with the domains left:
/// its cost, and the first group with the domains it takes (`None` where
/// the domains cannot hold the pieces).
type Memo = FxHashMap<Key, Option<(Cost, u32, Counts)>>;

/// A few counts (domains of each value, pieces of each kind), inline: the
/// searches make millions of them, each an allocation on the heap.
pub(super) type Counts = SmallVec<[u32; 8]>;

/// The memo's key: a set of pieces (a mask) and the domains left.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    /// In one word: the mask, each count in a byte, and how many counts
    /// (most nodes).
    Packed(u64),
    /// The mask followed by the counts.
    Long(Counts),
}

impl Key {
    fn new(mask: u32, left: &[u32]) -> Key {
        // 16 bits, 5 bytes and 3 bits: 59 of 64.
        if mask < 1 << 16 && left.len() <= 5 && left.iter().all(|&l| l < 1 << 8) {
            let packed = left
                .iter()
                .fold(u64::from(mask), |key, &l| key << 8 | u64::from(l));
            // The number of counts tells `[1]` from `[0, 1]`.
            return Key::Packed(packed << 3 | left.len() as u64);
        }
        let mut key = Counts::with_capacity(left.len() + 1);
        key.push(mask);
        key.extend_from_slice(left);
        Key::Long(key)
    }
}

/// Sets of domains of a node with few ([`MOST_SETS`]) listed once: every
/// count of each value up to the node's, in the order [`takes`] lists
/// them, and per core count a group may have, the sets that [`takes`] gives
/// it with every domain left.
struct Sets {
    sets: Vec<Counts>,
    by_sum: Vec<Vec<u32>>,
}

/// Sets of domains a node may have for [`Sets`]; more, and the walk lists
/// them each time.
const MOST_SETS: usize = 256;

impl Sets {
    fn new(values: &[u32], counts: &[u32], exact: bool) -> Option<Sets> {
        let many = counts
            .iter()
            .try_fold(1usize, |n, &c| n.checked_mul(c as usize + 1))?;
        if many > MOST_SETS {
            return None;
        }
        let mut out = Sets {
            sets: Vec::new(),
            by_sum: Vec::new(),
        };
        let mut now: Counts = counts.iter().map(|_| 0).collect();
        loop {
            // The walk's rules, with its cores of a domain (1 at least).
            let held: u32 = now.iter().zip(values).map(|(t, v)| t * v.max(&1)).sum();
            let smallest = now
                .iter()
                .zip(values)
                .rev()
                .find(|(t, _)| **t > 0)
                .map_or(0, |(_, v)| *v.max(&1));
            if held > 0 {
                let i = u32::try_from(out.sets.len()).ok()?;
                // Exactly `held` cores, or any that needs the last domain.
                let sums = if exact {
                    held..=held
                } else {
                    held - smallest + 1..=held
                };
                if out.by_sum.len() <= held as usize {
                    out.by_sum.resize(held as usize + 1, Vec::new());
                }
                for sum in sums {
                    out.by_sum[sum as usize].push(i);
                }
                out.sets.push(now.clone());
            }
            // The next count, the last value's fastest (the walk's order).
            let Some(k) = (0..now.len()).rev().find(|&k| now[k] < counts[k]) else {
                break;
            };
            now[k] += 1;
            for later in &mut now[k + 1..] {
                *later = 0;
            }
        }
        Some(out)
    }

    /// The sets for a group of `sum` cores among the domains `left`
    /// (indexes into [`Sets::sets`]).
    fn takes(&self, left: &[u32], sum: u32) -> SmallVec<[u32; 8]> {
        let Some(list) = self.by_sum.get(sum as usize) else {
            return SmallVec::new();
        };
        list.iter()
            .copied()
            .filter(|&i| {
                let set = &self.sets[i as usize];
                set.iter().zip(left).all(|(t, l)| t <= l)
            })
            .collect()
    }
}

/// Per piece, its cores in each domain: ((which value of the caps, which
/// domain of that value), cores).
pub(super) type Laid = Vec<Vec<((usize, u32), u32)>>;

/// Steps (a set of pieces with a set of domains for it) one node's grouping
/// may take: past it, the grouping gives up rather than hold the search
/// (whose budget counts them too).
const MOST_STEPS: u64 = 1 << 18;

/// What grouping one node's pieces found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Costed {
    /// The least cost.
    Least(Cost),
    /// The domains do not hold the pieces.
    Unheld,
    /// More pieces than [`MOST_PIECES`] on several domains, or more steps
    /// than [`MOST_STEPS`]: not known.
    GaveUp,
}

/// The least cost of `sizes` (pieces of one node) over the domains `caps`,
/// and the steps it took.
pub(super) fn cost(sizes: &[u32], caps: &Caps) -> (Costed, u64) {
    let mut g = Groups::new(sizes, caps);
    let least = if one_domain(caps) {
        g.lay_out().map(|(c, _)| c)
    } else if g.too_many {
        None
    } else {
        g.best(g.all(), &g.counts())
    };
    let costed = match least {
        _ if g.too_many || g.steps > MOST_STEPS => Costed::GaveUp,
        Some(c) => Costed::Least(c),
        None => Costed::Unheld,
    };
    (costed, g.steps)
}

/// Whether `caps` is one domain.
pub(super) fn one_domain(caps: &Caps) -> bool {
    matches!(caps[..], [(_, 1)])
}

/// The grouping of one node's pieces.
pub(super) struct Groups<'a> {
    sizes: &'a [u32],
    values: Vec<u32>,
    counts: Vec<u32>,
    /// Cores of each subset of the pieces.
    sums: Vec<u32>,
    /// The pieces use every core: groups fill their domains exactly.
    full: bool,
    /// Which core counts some set of the domains has (for `full`).
    sums_of_domains: Vec<bool>,
    memo: Memo,
    /// The node's sets of domains listed once, where they are few.
    sets: Option<Sets>,
    /// More pieces than [`MOST_PIECES`] on several domains: nothing known.
    too_many: bool,
    steps: u64,
}

impl<'a> Groups<'a> {
    pub(super) fn new(sizes: &'a [u32], caps: &Caps) -> Groups<'a> {
        // One domain takes any number of pieces, as one group; on several,
        // the subsets of more than MOST_PIECES are too many.
        let too_many = !one_domain(caps) && sizes.len() > MOST_PIECES;
        let n = if one_domain(caps) || too_many {
            0
        } else {
            sizes.len()
        };
        let mut sums = vec![0u32; 1 << n];
        for mask in 1..sums.len() {
            let low = mask.trailing_zeros() as usize;
            sums[mask] = sums[mask & (mask - 1)] + sizes[low];
        }
        let cores: u32 = caps.iter().map(|&(v, c)| v * c).sum();
        let full = sums.last() == Some(&cores);
        let mut sums_of_domains = vec![!full; if full { cores as usize + 1 } else { 0 }];
        if let Some(zero) = sums_of_domains.first_mut() {
            *zero = true;
        }
        for &(v, c) in caps.iter().filter(|_| full) {
            for _ in 0..c {
                for t in (v as usize..sums_of_domains.len()).rev() {
                    if sums_of_domains[t - v as usize] {
                        sums_of_domains[t] = true;
                    }
                }
            }
        }
        let values: Vec<u32> = caps.iter().map(|&(v, _)| v).collect();
        let counts: Vec<u32> = caps.iter().map(|&(_, c)| c).collect();
        Groups {
            sizes: if n == 0 { sizes } else { &sizes[..n] },
            sets: (!too_many && n > 0)
                .then(|| Sets::new(&values, &counts, full))
                .flatten(),
            values,
            counts,
            full,
            sums,
            sums_of_domains,
            memo: Memo::default(),
            too_many,
            steps: 0,
        }
    }

    /// Every piece, as a mask (at most [`MOST_PIECES`]).
    fn all(&self) -> u32 {
        debug_assert!(self.sizes.len() <= MOST_PIECES);
        (1u32 << self.sizes.len().min(MOST_PIECES)) - 1
    }

    fn counts(&self) -> Vec<u32> {
        self.counts.clone()
    }

    /// The least cost of the pieces in `mask` over the domains `left`.
    fn best(&mut self, mask: u32, left: &[u32]) -> Option<Cost> {
        if mask == 0 {
            return Some((0, 0));
        }
        self.steps += 1;
        if self.steps > MOST_STEPS {
            return None;
        }
        let key = Key::new(mask, left);
        if let Some(known) = self.memo.get(&key) {
            return known.as_ref().map(|&(c, _, _)| c);
        }
        let low = mask & mask.wrapping_neg();
        let rest = mask ^ low;
        let mut best: Option<(Cost, u32, Counts)> = None;
        let mut sub = rest;
        loop {
            let group = sub | low;
            let sum = self.sums[group as usize];
            // On a full node most sets of pieces fill no set of domains.
            let possible = !self.full || self.sums_of_domains.get(sum as usize) == Some(&true);
            let takes: SmallVec<[Counts; 4]> = match &self.sets {
                _ if !possible => SmallVec::new(),
                Some(sets) => sets
                    .takes(left, sum)
                    .iter()
                    .map(|&i| sets.sets[i as usize].clone())
                    .collect(),
                None => SmallVec::from_vec(takes(&self.values, left, sum, self.full)),
            };
            for take in takes {
                self.steps += 1;
                let after: Counts = left.iter().zip(&take).map(|(l, t)| l - t).collect();
                let Some((domains, spare)) = self.best(mask ^ group, &after) else {
                    continue;
                };
                let held: u32 = take.iter().zip(&self.values).map(|(t, v)| t * v).sum();
                let n: u32 = take.iter().sum();
                let cost = (domains + n - 1, spare + u32::from(held > sum));
                if best.as_ref().is_none_or(|b| cost < b.0) {
                    best = Some((cost, group, take));
                }
            }
            if sub == 0 || best.as_ref().is_some_and(|b| b.0 == (0, 0)) {
                break;
            }
            sub = (sub - 1) & rest;
        }
        let cost = best.as_ref().map(|&(c, _, _)| c);
        self.memo.insert(key, best);
        cost
    }

    /// The pieces laid out: per piece, (domain slot, cores) where a domain
    /// slot is (which value of `caps`, which domain of that value), each
    /// group's pieces one after the other over its domains (largest first).
    /// Returns the cost too (`None`: the domains do not hold the pieces).
    pub(super) fn lay_out(&mut self) -> Option<(Cost, Laid)> {
        if self.too_many {
            return None;
        }
        if let ([cap], [1]) = (&self.values[..], &self.counts[..]) {
            let sum: u32 = self.sizes.iter().sum();
            let laid = self.sizes.iter().map(|&c| vec![((0, 0), c)]).collect();
            // An empty domain is not partly used.
            return (sum <= *cap).then_some(((0, u32::from(sum > 0 && sum < *cap)), laid));
        }
        let mut left = self.counts();
        let cost = self.best(self.all(), &left)?;
        if self.steps > MOST_STEPS {
            return None;
        }
        let mut next = vec![0u32; left.len()];
        let mut out = vec![Vec::new(); self.sizes.len()];
        let mut mask = self.all();
        while mask != 0 {
            let Some(Some((_, group, take))) = self.memo.get(&Key::new(mask, &left)).cloned()
            else {
                break;
            };
            // Its domains largest first: the last, the smallest, is the one
            // left partly used.
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
        Some((cost, out))
    }
}

/// The sets of domains from `left` (counts of each value in `values`,
/// largest first) that a group of `sum` cores may take: those of exactly
/// `sum` cores when `exact`, else those that hold it and have none to spare
/// (without a smallest of theirs, fewer than `sum`).
fn takes(values: &[u32], left: &[u32], sum: u32, exact: bool) -> Vec<Counts> {
    struct Walk<'v> {
        values: &'v [u32],
        left: &'v [u32],
        sum: u32,
        exact: bool,
        now: Counts,
        out: Vec<Counts>,
    }
    impl Walk<'_> {
        fn go(&mut self, k: usize, held: u32, smallest: u32) {
            let enough = if self.exact {
                held == self.sum
            } else {
                held >= self.sum
            };
            if enough {
                // Nothing more: more domains would be to spare.
                let minimal = self.exact || held - smallest < self.sum;
                if minimal && held > 0 {
                    let mut take = self.now.clone();
                    take.resize(self.values.len(), 0);
                    self.out.push(take);
                }
                return;
            }
            if k == self.values.len() {
                return;
            }
            let v = self.values[k].max(1);
            for t in 0..=self.left[k] {
                if self.exact && held + t * v > self.sum {
                    break;
                }
                self.now.push(t);
                let smallest = if t > 0 { v } else { smallest };
                self.go(k + 1, held + t * v, smallest);
                self.now.pop();
                if !self.exact && held + t * v >= self.sum {
                    break;
                }
            }
        }
    }
    let mut walk = Walk {
        values,
        left,
        sum,
        exact,
        now: Counts::new(),
        out: Vec::new(),
    };
    walk.go(0, 0, 0);
    walk.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Checked by hand. Full nodes: domains of 7, 8, 8, 8 with pieces 23,
    /// 4, 4: {23} on 7 + 8 + 8 and {4, 4} on 8, 4 domains less 2 groups;
    /// with pieces 18, 12, 1 no set of pieces but all fills a set of domains
    /// (4 − 1). Nodes with free cores: 5 and 5 over two 8s each alone (no
    /// domain more, two partly used) before together (one more, one partly
    /// used); 7 + 1 fill an 8, 3 alone leaves one partly used.
    #[test]
    fn the_least_cost_of_a_node() {
        for (sizes, caps, least) in [
            (vec![23, 4, 4], vec![(8, 3), (7, 1)], (2, 0)),
            (vec![18, 12, 1], vec![(8, 3), (7, 1)], (3, 0)),
            (vec![4, 4, 4, 4], vec![(4, 4)], (0, 0)),
            (vec![2, 2, 4, 3, 5], vec![(4, 4)], (1, 0)),
            (vec![3, 5, 3, 5], vec![(8, 2)], (0, 0)),
            (vec![6], vec![(4, 1), (2, 1)], (1, 0)),
            (vec![3], vec![(8, 2)], (0, 1)),
            (vec![5, 5], vec![(8, 2)], (0, 2)),
            (vec![4, 4], vec![(8, 2)], (0, 0)),
            (vec![9], vec![(8, 2)], (1, 1)),
            (vec![7, 1, 3], vec![(8, 2)], (0, 1)),
            (vec![6], vec![(8, 1), (7, 1)], (0, 1)),
        ] {
            assert_eq!(
                cost(&sizes, &caps).0,
                Costed::Least(least),
                "{sizes:?} on {caps:?}"
            );
        }
        assert_eq!(cost(&[9, 9], &vec![(8, 2)]).0, Costed::Unheld);
        // An empty node, of one domain or more, has no partly used domain.
        assert_eq!(cost(&[], &vec![(6, 1)]).0, Costed::Least((0, 0)));
        assert_eq!(cost(&[], &vec![(4, 2)]).0, Costed::Least((0, 0)));
        assert_eq!(cost(&[1; 15], &vec![(8, 2)]).0, Costed::GaveUp);
        assert_eq!(cost(&[1; 15], &vec![(16, 1)]).0, Costed::Least((0, 1)));
    }

    /// The sets listed once give what the walk gives, in its order: every
    /// node of up to three values (largest first) of up to three domains
    /// each, every count left, every group's cores, exact or not.
    #[test]
    fn sets_listed_once_take_what_the_takes() {
        let mut checked = 0;
        for a in 1..=7u32 {
            for b in 0..a {
                for c in 0..b.max(1) {
                    let values: Vec<u32> = [a, b, c].into_iter().filter(|&v| v > 0).collect();
                    let many = values.len();
                    for counts in 0..4u32.pow(many as u32) {
                        let counts: Vec<u32> =
                            (0..many).map(|k| counts / 4u32.pow(k as u32) % 4).collect();
                        let total: u32 = values.iter().zip(&counts).map(|(v, c)| v * c).sum();
                        for exact in [false, true] {
                            let sets = Sets::new(&values, &counts, exact).unwrap();
                            let lefts = counts.iter().map(|&c| c + 1).product::<u32>();
                            for left in 0..lefts {
                                let mut rest = left;
                                let left: Vec<u32> = counts
                                    .iter()
                                    .map(|&c| {
                                        let l = rest % (c + 1);
                                        rest /= c + 1;
                                        l
                                    })
                                    .collect();
                                for sum in 0..=total + 2 {
                                    let listed: Vec<Counts> = sets
                                        .takes(&left, sum)
                                        .iter()
                                        .map(|&i| sets.sets[i as usize].clone())
                                        .collect();
                                    assert_eq!(
                                        listed,
                                        takes(&values, &left, sum, exact),
                                        "values {values:?}, counts {counts:?}, left {left:?}, sum {sum}, exact {exact}"
                                    );
                                    checked += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
        // More sets than MOST_SETS: none listed (the walk lists them).
        assert!(Sets::new(&[4, 3], &[20, 20], true).is_none());
    }

    /// The memo's keys tell every set of pieces and domains left apart,
    /// packed or not.
    #[test]
    fn memo_keys_are_one_per_mask_and_domains_left() {
        let mut seen = std::collections::HashSet::new();
        let mut made = 0;
        for mask in [0u32, 1, 2, 255, 256, 1 << 13, (1 << 16) - 1, 1 << 16] {
            for left in [
                &[][..],
                &[0],
                &[1],
                &[0, 1],
                &[1, 0],
                &[255],
                &[256],
                &[0, 0, 0, 0, 1],
                &[1, 0, 0, 0, 0],
                &[0, 0, 0, 0, 0, 1],
            ] {
                seen.insert(Key::new(mask, left));
                made += 1;
            }
        }
        assert_eq!(seen.len(), made);
        assert!(matches!(Key::new(3, &[1, 2]), Key::Packed(_)));
        assert!(matches!(Key::new(3, &[256]), Key::Long(_)));
    }

    /// By hand: 13 cores take 4 domains of 4 (3 hold only 12), and exactly
    /// none; 12 exactly take 3. Over two domains of 4 and two of 3: 7 cores
    /// exactly take one of each, 6 exactly two of 3; 6 not exactly take two
    /// of 3, one of each, or two of 4 (each set short of 6 without its
    /// smallest domain), and not one of 4 with two of 3 (10, and 7 without
    /// a domain of 3). Listed once and walked alike.
    #[test]
    fn a_group_takes_the_domains_counted_by_hand() {
        let counts = |c: &[&[u32]]| c.iter().map(|t| Counts::from_slice(t)).collect::<Vec<_>>();
        let listed = |values: &[u32], left: &[u32], sum, exact| {
            let sets = Sets::new(values, left, exact).unwrap();
            let found: Vec<Counts> = sets
                .takes(left, sum)
                .iter()
                .map(|&i| sets.sets[i as usize].clone())
                .collect();
            assert_eq!(found, takes(values, left, sum, exact));
            found
        };
        assert_eq!(listed(&[4], &[4], 13, false), counts(&[&[4]]));
        assert!(listed(&[4], &[4], 13, true).is_empty());
        assert_eq!(listed(&[4], &[4], 12, true), counts(&[&[3]]));
        assert_eq!(listed(&[4, 3], &[2, 2], 7, true), counts(&[&[1, 1]]));
        assert_eq!(listed(&[4, 3], &[2, 2], 6, true), counts(&[&[0, 2]]));
        assert_eq!(
            listed(&[4, 3], &[2, 2], 6, false),
            counts(&[&[0, 2], &[1, 1], &[2, 0]])
        );
    }

    /// The layout has the cost counted: each piece gets its cores, the
    /// domains touched over the pieces are the pieces plus the first count,
    /// and the partly used domains are the second; on a full node every
    /// domain is filled.
    #[test]
    fn the_layout_has_the_cost() {
        for (sizes, caps) in [
            (vec![23u32, 4, 4], vec![(8u32, 3u32), (7, 1)]),
            (vec![2, 2, 4, 3, 5], vec![(4, 4)]),
            (vec![5, 3, 1, 7], vec![(4, 4)]),
            (vec![5, 5], vec![(8, 2)]),
            (vec![9, 2, 3], vec![(8, 3), (7, 1)]),
            (vec![10, 10, 1], vec![(8, 2), (6, 2)]),
        ] {
            let mut g = Groups::new(&sizes, &caps);
            let ((domains, spare), laid) = g.lay_out().unwrap();
            let mut used: HashMap<(usize, u32), u32> = HashMap::new();
            let mut edges = 0;
            for (p, pieces) in laid.iter().enumerate() {
                assert_eq!(pieces.iter().map(|&(_, n)| n).sum::<u32>(), sizes[p]);
                edges += pieces.len() as u32;
                for &(d, n) in pieces {
                    *used.entry(d).or_default() += n;
                }
            }
            assert_eq!(edges, sizes.len() as u32 + domains, "{sizes:?}");
            let partly = used.iter().filter(|(&(v, _), &n)| n < caps[v].0).count();
            assert_eq!(partly as u32, spare, "{sizes:?}");
            let all: u32 = caps.iter().map(|&(v, c)| v * c).sum();
            if sizes.iter().sum::<u32>() == all {
                assert_eq!(used.len() as u32, caps.iter().map(|&(_, c)| c).sum::<u32>());
            }
        }
    }
}
