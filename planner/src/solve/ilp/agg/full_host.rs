//! Objective 6's lower bound on a full host: every VM placed and every free
//! core taken.
//!
//! Draw the VMs and the L3 domains as a graph, a VM joined to each domain it
//! has cores in (on any node): its edges are objective 6's count. A
//! connected part of `v` VMs and `d` domains has at least `v + d − 1` edges,
//! so the whole graph has at least `V + D − C`, C its parts. On a full host
//! every domain is taken whole by the VMs of its part, so each part's VMs
//! have exactly the cores of its domains. That bounds C: with `s` the
//! commonest domain size, a part's VM cores are, modulo `s`, the sum of its
//! *odd* domains (a size no multiple of `s`: a domain with reserved cores,
//! say), and every odd domain is in one part. [`most_parts`] counts the most
//! parts a split of the VMs can have under that rule alone (nodes, and
//! which domains a part has, left out), so `V + D − most_parts` is a lower
//! bound.
//! It is what the search over nodes' contents could not prove on a full
//! 512-CPU host (44 domains, against 41 from each VM's fewest domains).

use std::collections::{BTreeMap, HashMap};

/// Odd domains counted at most: their subsets are tried at every step.
const MOST_ODD: usize = 4;

/// Steps (a part tried) the count may take; past it, no bound (about a
/// millisecond: 40 small VMs on a full 126-core host give up there).
const MOST_STEPS: u64 = 1 << 15;

/// The least objective 6 with VMs of `sizes` cores taking every free core
/// of domains of `caps` free cores (a cap of 0 is no domain). `None` when it
/// is not a full host (the sizes do not add up to the caps), when it has
/// more than [`MOST_ODD`] odd domains (a size no multiple of the commonest),
/// a commonest size over 128, more than 255 VMs of one residue, or when the
/// count gives up.
pub(super) fn least_domains(sizes: &[u32], caps: &[u32]) -> Option<u32> {
    let caps: Vec<u32> = caps.iter().copied().filter(|&c| c > 0).collect();
    let total: u64 = sizes.iter().map(|&c| u64::from(c)).sum();
    if sizes.is_empty() || total != caps.iter().map(|&c| u64::from(c)).sum::<u64>() {
        return None;
    }
    let parts = most_parts(sizes, &caps)?;
    let vms = u32::try_from(sizes.len()).ok()?;
    let domains = u32::try_from(caps.len()).ok()?;
    Some((vms + domains).saturating_sub(parts))
}

/// The most parts the VMs of `sizes` can be split into where each part's
/// cores are, modulo the commonest cap `s`, the sum of the odd caps given to
/// it, each odd cap to one part. `None` past [`MOST_STEPS`] or
/// [`MOST_ODD`], or when no split exists.
fn most_parts(sizes: &[u32], caps: &[u32]) -> Option<u32> {
    let s = commonest(&by_size(caps))?;
    if s > 128 {
        return None;
    }
    let odd: Vec<u32> = caps.iter().map(|&c| c % s).filter(|&r| r != 0).collect();
    if odd.len() > MOST_ODD {
        return None;
    }
    let mut counts = vec![0u8; s as usize];
    for &c in sizes {
        let r = (c % s) as usize;
        counts[r] = counts[r].checked_add(1)?;
    }
    let mut count = Count {
        s,
        odd,
        memo: HashMap::new(),
        steps: 0,
    };
    let all = (1u8 << count.odd.len()) - 1;
    let parts = count.best(counts, all);
    if count.steps > MOST_STEPS {
        return None;
    }
    u32::try_from(parts).ok()
}

/// Domains by free cores: how many.
fn by_size(caps: &[u32]) -> BTreeMap<u32, u32> {
    let mut counts = BTreeMap::new();
    for &c in caps {
        *counts.entry(c).or_default() += 1;
    }
    counts
}

/// The commonest domain size of `counts` (domains by free cores), the
/// larger on a tie: the `s` of the residues here and of the search's bound
/// on components ([`super::fills`]).
pub(super) fn commonest(counts: &BTreeMap<u32, u32>) -> Option<u32> {
    counts
        .iter()
        .max_by_key(|&(&cap, &n)| (n, cap))
        .map(|(&cap, _)| cap)
}

/// The count's memo: VMs left per residue and odd domains left → most parts
/// (negative: no split).
struct Count {
    s: u32,
    odd: Vec<u32>,
    memo: HashMap<(Vec<u8>, u8), i64>,
    steps: u64,
}

/// No split of what is left.
const NONE: i64 = i64::MIN / 2;

/// The residues modulo `s` that some nonempty set of a part's VMs reaches,
/// one bit each (`s` ≤ 128).
#[derive(Clone, Copy)]
struct Reach(u128);

impl Reach {
    /// What a part reaches with one more VM of residue `r`.
    fn with(self, r: u32, s: u32) -> Reach {
        let all = if s == 128 {
            u128::MAX
        } else {
            (1u128 << s) - 1
        };
        let turned = if r == 0 {
            self.0
        } else {
            ((self.0 << r) | (self.0 >> (s - r))) & all
        };
        Reach(self.0 | turned | (1u128 << r))
    }

    /// Whether some nonempty set of the part's VMs adds up to 0.
    fn zero(self) -> bool {
        self.0 & 1 != 0
    }
}

impl Count {
    /// The most parts of the VMs left (`counts` per residue) with the odd
    /// domains of `odd` left; [`NONE`] when they cannot all be split.
    fn best(&mut self, counts: Vec<u8>, odd: u8) -> i64 {
        let Some(first) = counts.iter().position(|&n| n > 0) else {
            return if odd == 0 { 0 } else { NONE };
        };
        if self.steps > MOST_STEPS {
            return NONE;
        }
        if let Some(&known) = self.memo.get(&(counts.clone(), odd)) {
            return known;
        }
        // The first VM left is in some part. Only parts none of whose
        // smaller sets of VMs adds up to 0 are tried: such a set would be a
        // part of its own, and the rest still one (more parts, not fewer).
        let mut rest = counts.clone();
        rest[first] -= 1;
        let r = first as u32;
        let mut part = Part {
            rest,
            taken: vec![0; counts.len()],
            odd,
            best: NONE,
        };
        self.grow(&mut part, first, r, Reach(0).with(r, self.s));
        let best = part.best;
        self.memo.insert((counts, odd), best);
        best
    }

    /// Tries the part of `sum` (its VMs' cores modulo `s`, reaching
    /// `reach`) and every part that adds VMs of residue `from` or more.
    fn grow(&mut self, part: &mut Part, from: usize, sum: u32, reach: Reach) {
        self.steps += 1;
        if self.steps > MOST_STEPS {
            return;
        }
        // With every set of the odd domains left whose sizes match it.
        let mut subset = part.odd;
        loop {
            let of_odd = (0..self.odd.len())
                .filter(|&i| subset & (1 << i) != 0)
                .map(|i| self.odd[i])
                .sum::<u32>()
                % self.s;
            if of_odd == sum {
                let left: Vec<u8> = part
                    .rest
                    .iter()
                    .zip(&part.taken)
                    .map(|(&a, &t)| a - t)
                    .collect();
                let parts = self.best(left, part.odd & !subset);
                part.best = part.best.max(parts + 1);
            }
            if subset == 0 {
                break;
            }
            subset = (subset - 1) & part.odd;
        }
        if reach.zero() {
            return;
        }
        for r in from..part.rest.len() {
            if part.taken[r] < part.rest[r] {
                part.taken[r] += 1;
                let next = (sum + r as u32) % self.s;
                self.grow(part, r, next, reach.with(r as u32, self.s));
                part.taken[r] -= 1;
            }
        }
    }
}

/// A part being grown: the VMs left besides its first, those taken into
/// it, the odd domains left, and the most parts found with it.
struct Part {
    rest: Vec<u8>,
    taken: Vec<u8>,
    odd: u8,
    best: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The most parts by brute force: every split of the VMs into parts
    /// (each VM joins a part so far or starts one) and every way to give
    /// each odd domain to a part; `None` when no split matches.
    fn most_parts_by_brute_force(sizes: &[u32], s: u32, odd: &[u32]) -> Option<u32> {
        fn splits(n: usize, at: usize, part_of: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
            if at == n {
                out.push(part_of.clone());
                return;
            }
            let parts = part_of.iter().copied().max().map_or(0, |m| m + 1);
            for p in 0..=parts {
                part_of.push(p);
                splits(n, at + 1, part_of, out);
                part_of.pop();
            }
        }
        let mut all = Vec::new();
        splits(sizes.len(), 0, &mut Vec::new(), &mut all);
        let mut best = None;
        for part_of in all {
            let parts = part_of.iter().copied().max().map_or(0, |m| m + 1);
            // Each odd domain to one part: parts^odd ways.
            let ways = parts.pow(u32::try_from(odd.len()).unwrap_or(0));
            for mut way in 0..ways {
                let mut want = vec![0u32; parts];
                for &o in odd {
                    want[way % parts] += o;
                    way /= parts;
                }
                let mut have = vec![0u32; parts];
                for (&size, &p) in sizes.iter().zip(&part_of) {
                    have[p] += size;
                }
                if have.iter().zip(&want).all(|(h, w)| h % s == w % s) {
                    let parts = u32::try_from(parts).unwrap_or(0);
                    best = Some(best.map_or(parts, |b: u32| b.max(parts)));
                    break;
                }
            }
        }
        best
    }

    proptest! {
        // Like the project's other property tests: no regression files.
        #![proptest_config(ProptestConfig {
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// The count (which tries only parts with no smaller set adding up
        /// to 0) against every split, on up to 6 VMs and 3 odd domains (some
        /// larger than `s`), beside domains of `s` and of `2s`. The last VM
        /// takes what makes the host full, with more domains of `s` than of
        /// any other size.
        #[test]
        fn the_most_parts_are_those_of_every_split(
            s in 2u32..=9,
            mut sizes in prop::collection::vec(1u32..=20, 1..=6),
            odd in prop::collection::vec((1u32..=8, 0u32..=1), 0..=3),
            doubles in 0u32..=2,
        ) {
            let odd: Vec<u32> = odd
                .into_iter()
                .map(|(r, k)| (r % s, r % s + k * s))
                .filter(|&(r, _)| r != 0)
                .map(|(_, cap)| cap)
                .collect();
            let of_odd: u32 = odd.iter().sum::<u32>() + doubles * 2 * s;
            let total: u32 = sizes.iter().sum();
            // More domains of `s` than of any other size.
            let least = (u32::try_from(odd.len()).unwrap_or(0) + doubles + 1) * s;
            let short = (s - (total + s * 3 - of_odd % s) % s) % s;
            let last = sizes.len() - 1;
            sizes[last] += short + if total + short < of_odd + least {
                (of_odd + least - total - short).div_ceil(s) * s
            } else {
                0
            };
            let total: u32 = sizes.iter().sum();
            let mut caps = odd.clone();
            caps.extend(std::iter::repeat_n(2 * s, doubles as usize));
            caps.extend(std::iter::repeat_n(s, ((total - of_odd) / s) as usize));
            prop_assert_eq!(caps.iter().sum::<u32>(), total);
            prop_assert_eq!(commonest(&by_size(&caps)), Some(s));
            let residues: Vec<u32> = odd.iter().map(|c| c % s).collect();
            prop_assert_eq!(
                most_parts(&sizes, &caps),
                most_parts_by_brute_force(&sizes, s, &residues)
            );
        }
    }

    /// Checked by hand.
    #[test]
    fn the_least_domains_of_a_full_host() {
        for (sizes, caps, least) in [
            // 8 + 8 on two domains of 8: two parts, 2 + 2 − 2.
            (vec![8, 8], vec![8, 8], Some(2)),
            // 5 + 3 and 5 + 3 on 8s: two parts of two VMs, 4 + 2 − 2.
            (vec![5, 3, 5, 3], vec![8, 8], Some(4)),
            // 5 + 5 + 6 on 8s: 16 ≡ 0, one part, 3 + 2 − 1 (5 + 3 is not
            // there to pair).
            (vec![5, 5, 6], vec![8, 8], Some(4)),
            // A domain of 6 (two reserved cores): 6 alone on it, 8 alone.
            (vec![6, 8], vec![6, 8], Some(2)),
            // 3 + 3 on the 6 and 5 + 3 on an 8: 4 + 2 − 2.
            (vec![3, 3, 5, 3], vec![6, 8], Some(4)),
            // 7 + 7 on 6 + 8: one part (7 ≢ 6 and 7 ≢ 0 modulo 8).
            (vec![7, 7], vec![6, 8], Some(3)),
            // Not full: no bound.
            (vec![7], vec![8], None),
        ] {
            assert_eq!(least_domains(&sizes, &caps), least, "{sizes:?} on {caps:?}");
        }
    }

    /// The full 512-CPU host of the big-VM benchmark (`s512-l3x16-100`): 32
    /// domains of 8 cores, one of them 6, and 20 VMs of 254 cores. Modulo 8
    /// the VMs are 3 (seven), 6 (four), 7 (three), 4, 5 and 1 (two each).
    /// No VM is 0: a part of one VM is only {6} on the domain of 6. Parts of
    /// two are {3, 5}, {1, 7} and {4, 4}: five at most, besides the part of
    /// 6. Eight parts: {6}, {3, 5} twice, {1, 7} twice, {4, 4}, {3, 6, 7}
    /// and {3, 3, 3, 3, 6, 6}. Nine parts of 20 VMs: with the part of 6 of
    /// one VM, 20 ≥ 1 + 2p + 3(8 − p) needs p = 5 pairs, which take both 5s,
    /// 1s and 4s and leave 3, 3, 3, 3, 3, 6, 6, 6, 7 for three parts of
    /// three, where only {3, 6, 7} adds to 0; with it of two VMs or more,
    /// 20 ≥ 2p + 3(9 − p) needs 7 pairs, one more than there are. So
    /// 20 + 32 − 8 = 44 (each VM's fewest domains: 41). An independent
    /// count (a short program over the residues, outside the project) says 8.
    #[test]
    fn the_full_chiplet_host_of_the_benchmark() {
        let sizes = [
            3, 14, 3, 20, 7, 3, 3, 15, 25, 14, 6, 23, 21, 21, 25, 3, 4, 38, 3, 3,
        ];
        let mut caps = vec![8; 32];
        caps[0] = 6;
        assert_eq!(least_domains(&sizes, &caps), Some(44));
    }
}
