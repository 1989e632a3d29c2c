//! Which VMs the plans at the held optima may place, where some are left
//! out: per kind, how many of its VMs.
//!
//! With VMs left out (tight huge page pools, say), the per-class model's
//! held optima fix how many VMs each priority level places and how many
//! vCPUs, but not which VMs. The pattern model may choose them too, as long
//! as every plan at the held optima is still one of its plans: each placed
//! VM on its fewest cores, or on at most as many more as the held cores
//! exceed the fewest of any choice of VMs that places as many per level
//! and as many vCPUs (the slack: a plan giving more would use more than the
//! held cores). [`fewest_domains`] finds the slack over every choice at
//! once (a walk over the kinds, counts per level, vCPUs and cores as its
//! state), and gives objective 6's bound: the fewest L3 domains over the
//! choices whose cores, each VM on its fewest or a few more, are the held
//! cores.

use super::Kind;
use crate::solve::memory::Split;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

/// What the per-class model holds when the pattern model is asked: VMs
/// placed per priority level, vCPUs placed, cores used, extra NUMA nodes,
/// and the cores of NIC-preferring VMs off their NICs' nodes.
#[derive(Debug, Clone, PartialEq)]
pub(in super::super) struct Held {
    /// VMs placed, per priority level.
    pub(in super::super) placed: BTreeMap<i64, u32>,
    /// vCPUs placed.
    pub(in super::super) vcpus: u32,
    /// Cores used.
    pub(in super::super) cores: u32,
    /// Extra NUMA nodes: nodes past the first that `preferred` VMs touch.
    pub(in super::super) extra_nodes: u32,
    /// Cores of NIC-preferring VMs off their NICs' nodes, at most.
    pub(in super::super) nic_remote: f64,
}

impl Held {
    /// Whether it places every VM of `kinds`.
    pub(super) fn every_vm(&self, kinds: &[Kind]) -> bool {
        per_level(kinds) == self.placed
    }

    /// For tests: the optima held where every VM of `kinds` is placed, each
    /// on its fewest cores, over `extra_nodes` extra NUMA nodes, with at
    /// most `nic_remote` cores off the NICs' nodes.
    #[cfg(test)]
    pub(super) fn of_every_vm(kinds: &[Kind], extra_nodes: u32, nic_remote: f64) -> Held {
        Held {
            placed: per_level(kinds),
            vcpus: total(kinds, |k| k.vm.vcpus),
            cores: total(kinds, |k| k.fewest),
            extra_nodes,
            nic_remote,
        }
    }
}

/// The VMs of `kinds` per priority level.
fn per_level(kinds: &[Kind]) -> BTreeMap<i64, u32> {
    let mut per_level: BTreeMap<i64, u32> = BTreeMap::new();
    for kind in kinds {
        *per_level.entry(kind.vm.priority).or_default() += kind.count();
    }
    per_level
}

/// `per_vm` summed over every VM of `kinds`.
pub(super) fn total(kinds: &[Kind], per_vm: fn(&Kind) -> u32) -> u32 {
    kinds
        .iter()
        .map(|k| k.count().saturating_mul(per_vm(k)))
        .fold(0, u32::saturating_add)
}

/// The most states (VMs per level, vCPUs, cores) the walk keeps, and the
/// most steps it takes; beyond either the pattern model declines. The
/// bench's plans keep at most 45 states; the steps bound the walk's time
/// (a few tens of milliseconds) whatever the VMs.
const MOST_STATES: usize = 10_000;
const MOST_STEPS: usize = 1_000_000;

/// Objective 6's bound at `held`, and how many cores more than its fewest
/// a VM may take in a plan at the held optima.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in super::super) struct Bound {
    /// The fewest L3 domains over the VMs placed.
    pub(in super::super) domains: u32,
    /// The held cores less the fewest of any choice of VMs at the held
    /// optima, each VM on its fewest: what a VM may take beyond its fewest.
    pub(in super::super) slack: u32,
}

/// Objective 6's bound at `held`: the fewest L3 domains (each VM in its
/// fewest, [`Kind::domains`]) over the choices of VMs that place as many per
/// level and as many vCPUs as `held` and need exactly its cores, each VM on
/// its fewest ([`Kind::fewest`]) or, where some choice needs fewer cores
/// than held, on as many more as the difference (the slack, at most
/// [`MOST_SLACK`](super::MOST_SLACK)) where it lies in as many domains
/// there ([`super::More::Alike`]). `None` where a VM on more cores may lie
/// otherwise (it may then take fewer domains), where a VM whose memory
/// goes per core may take more, where no choice needs the held cores or
/// fewer, where a VM's level is not held, or past [`MOST_STATES`] or
/// [`MOST_STEPS`].
pub(super) fn fewest_domains(kinds: &[Kind], held: &Held, lays: &LaysMore<'_>) -> Option<Bound> {
    // Every VM placed: one choice, no walk (nor its limit).
    let every_vm = held.every_vm(kinds);
    let fewest = |_: &Kind| vec![0];
    let states = if every_vm {
        if total(kinds, |k| k.vm.vcpus) != held.vcpus {
            return None;
        }
        BTreeMap::new()
    } else {
        walk(kinds, held, &fewest)?
    };
    let least = if every_vm {
        total(kinds, |k| k.fewest)
    } else {
        states
            .keys()
            .filter(|(counts, vcpus, _)| {
                held.placed.values().eq(counts.iter()) && *vcpus == held.vcpus
            })
            .map(|&(_, _, cores)| cores)
            .min()?
    };
    let slack = held.cores.checked_sub(least)?;
    if every_vm && slack == 0 {
        return Some(Bound {
            domains: total(kinds, Kind::domains),
            slack,
        });
    }
    let at_held = |states: &BTreeMap<State, u32>| {
        states
            .iter()
            .filter(|((counts, vcpus, cores), _)| {
                held.placed.values().eq(counts.iter())
                    && *vcpus == held.vcpus
                    && *cores == held.cores
            })
            .map(|(_, &domains)| domains)
            .min()
    };
    if slack == 0 {
        return at_held(&states).map(|domains| Bound { domains, slack });
    }
    if slack > super::MOST_SLACK {
        return None;
    }
    for kind in kinds {
        for more in lays(kind).iter().take(slack as usize) {
            let per_core = matches!(kind.memory, Split::PerCore(_));
            match more {
                super::More::Never => {}
                super::More::Alike { .. } if !per_core => {}
                super::More::Alike { .. } | super::More::Unlike => return None,
            }
        }
    }
    // Every VM placed: its domains are the same on any of its core counts.
    if every_vm {
        return Some(Bound {
            domains: total(kinds, Kind::domains),
            slack,
        });
    }
    let extras = |kind: &Kind| -> Vec<u32> {
        let mut extras = vec![0];
        for (extra, more) in (1..=slack).zip(lays(kind)) {
            if matches!(more, super::More::Alike { .. }) {
                extras.push(extra);
            }
        }
        extras
    };
    let states = walk(kinds, held, &extras)?;
    at_held(&states).map(|domains| Bound { domains, slack })
}

/// VMs per level, vCPUs, cores.
type State = (Vec<u32>, u32, u32);

/// How a kind lies on cores more than its fewest ([`Kind::more`]).
pub(super) type LaysMore<'a> = dyn Fn(&Kind) -> &[super::More] + 'a;

/// Every choice of VMs within `held`'s VMs per level, vCPUs and cores,
/// each VM on its fewest cores and, per kind, as many more as one of
/// `extras`: per state, the fewest L3 domains. `None` where a VM's level
/// is not held, or past [`MOST_STATES`] or [`MOST_STEPS`].
fn walk(
    kinds: &[Kind],
    held: &Held,
    extras: &dyn Fn(&Kind) -> Vec<u32>,
) -> Option<BTreeMap<State, u32>> {
    let levels: Vec<i64> = held.placed.keys().copied().collect();
    let want: Vec<u32> = held.placed.values().copied().collect();
    let mut states: BTreeMap<State, u32> = BTreeMap::new();
    states.insert((vec![0; levels.len()], 0, 0), 0);
    let mut steps = 0usize;
    for kind in kinds {
        let level = levels.iter().position(|&l| l == kind.vm.priority)?;
        let extras = extras(kind);
        // One VM of the kind at a time, each on one of its core counts, up
        // to the level's count or until no state is new.
        for _ in 0..kind.count().min(want[level]) {
            let mut next = states.clone();
            let mut new = false;
            for ((counts, vcpus, cores), &domains) in &states {
                for &extra in &extras {
                    steps += 1;
                    if steps > MOST_STEPS || next.len() > MOST_STATES {
                        return None;
                    }
                    let mut counts = counts.clone();
                    counts[level] = counts[level].saturating_add(1);
                    let vcpus = vcpus.saturating_add(kind.vm.vcpus);
                    let cores = cores.saturating_add(kind.fewest + extra);
                    if counts[level] > want[level] || vcpus > held.vcpus || cores > held.cores {
                        continue;
                    }
                    let d = domains.saturating_add(kind.domains());
                    match next.entry((counts, vcpus, cores)) {
                        Entry::Vacant(slot) => {
                            slot.insert(d);
                            new = true;
                        }
                        Entry::Occupied(mut kept) if d < *kept.get() => {
                            kept.insert(d);
                            new = true;
                        }
                        Entry::Occupied(_) => {}
                    }
                }
            }
            states = next;
            if !new {
                break;
            }
        }
    }
    Some(states)
}

#[cfg(test)]
mod tests {
    use super::super::More;
    use super::*;
    use crate::solve::memory::Split;
    use crate::solve::VmRequest;

    /// `count` VMs of `vcpus` at priority `level`, each on `fewest` cores at
    /// its fewest, in one L3 domain or (`split`) two; on more cores, laid
    /// out otherwise (the test cannot tell without a host).
    fn kind(count: usize, vcpus: u32, fewest: u32, split: bool, level: i64) -> Kind {
        let vm = VmRequest {
            priority: level,
            ..VmRequest::new("vm", vcpus)
        };
        Kind {
            members: (0..count).collect(),
            vm,
            fewest,
            whole: !split,
            splits: if split {
                vec![(vec![fewest / 2], vec![fewest - fewest / 2])]
            } else {
                Vec::new()
            },
            across: Vec::new(),
            more: vec![More::Unlike; super::super::MOST_SLACK as usize].into(),
            memory: Split::Uncounted,
        }
    }

    /// How a kind of these tests lies on more cores: as it says.
    fn known(kind: &Kind) -> &[More] {
        kind.more.get().map_or(&[], Vec::as_slice)
    }

    /// Objective 6's bound of `held`'s domains, each VM on its fewest.
    fn at_fewest(kinds: &[Kind], held: &Held) -> Option<u32> {
        fewest_domains(kinds, held, &known).map(|b| {
            assert_eq!(b.slack, 0);
            b.domains
        })
    }

    fn held(placed: &[(i64, u32)], vcpus: u32, cores: u32) -> Held {
        Held {
            placed: placed.iter().copied().collect(),
            vcpus,
            cores,
            extra_nodes: 0,
            nic_remote: 0.0,
        }
    }

    /// One VM of 4 vCPUs placed, of two: one that needs 2 cores and one that
    /// needs 4. Held at 4 cores, a plan could give the first 4 cores (its
    /// fewest are 2): no bound. Held at 2, only the first is placed, in 1
    /// domain.
    #[test]
    fn a_choice_that_needs_fewer_cores_than_held_leaves_no_bound() {
        let kinds = [kind(1, 4, 2, false, 0), kind(1, 4, 4, false, 0)];
        assert_eq!(at_fewest(&kinds, &held(&[(0, 1)], 4, 4)), None);
        assert_eq!(at_fewest(&kinds, &held(&[(0, 1)], 4, 2)), Some(1));
    }

    /// Two VMs of 12 vCPUs (6 cores each) placed, of three: two that need
    /// two domains and one that needs one. Both choices need the held 12
    /// cores; the bound is the one with the VM of one domain: 2 + 1 = 3.
    /// Three placed: 2 + 2 + 1 = 5.
    #[test]
    fn the_bound_is_the_fewest_domains_over_the_choices() {
        let kinds = [kind(2, 12, 6, true, 0), kind(1, 12, 6, false, 0)];
        assert_eq!(at_fewest(&kinds, &held(&[(0, 2)], 24, 12)), Some(3));
        assert_eq!(at_fewest(&kinds, &held(&[(0, 3)], 36, 18)), Some(5));
        // As many cores but other vCPUs: no choice places them.
        assert_eq!(at_fewest(&kinds, &held(&[(0, 2)], 20, 12)), None);
    }

    /// One VM of 4 vCPUs placed, of two: one whose fewest are 2 cores and
    /// which lies alike (whole in a domain) on 3 or 4, and one that needs 4
    /// and takes no more. Held at 3 cores, a plan gives the first a core
    /// more (slack 1): one domain. At 4, the first with 2 more or the
    /// second (slack 2): one domain. At 5, past the most slack: no bound;
    /// nor where the first lies otherwise on 3, or its memory goes per core.
    #[test]
    fn a_vm_may_take_as_many_cores_more_as_the_slack() {
        let alike = More::Alike {
            splits: Vec::new(),
            across: Vec::new(),
        };
        let mut first = kind(1, 4, 2, false, 0);
        first.more = vec![alike.clone(); 2].into();
        let mut second = kind(1, 4, 4, false, 0);
        second.more = vec![More::Never; 2].into();
        let kinds = [first, second];
        let bound = |cores| fewest_domains(&kinds, &held(&[(0, 1)], 4, cores), &known);
        assert_eq!(
            bound(2),
            Some(Bound {
                domains: 1,
                slack: 0
            })
        );
        assert_eq!(
            bound(3),
            Some(Bound {
                domains: 1,
                slack: 1
            })
        );
        assert_eq!(
            bound(4),
            Some(Bound {
                domains: 1,
                slack: 2
            })
        );
        assert_eq!(bound(5), None);
        let mut unlike = kinds.clone();
        unlike[0].more = vec![More::Unlike, alike].into();
        assert_eq!(
            fewest_domains(&unlike, &held(&[(0, 1)], 4, 3), &known),
            None
        );
        let mut per_core = kinds.clone();
        per_core[0].memory = Split::PerCore(2);
        assert_eq!(
            fewest_domains(&per_core, &held(&[(0, 1)], 4, 3), &known),
            None
        );
    }

    /// Two kinds of 2,000 VMs, of 1 and 2 vCPUs, 3,000 of them placed:
    /// millions of steps to walk, so the walk declines at its limit (the
    /// one choice, 1,000 and 2,000, would give 3,000).
    #[test]
    fn a_walk_past_its_limit_declines() {
        let kinds = [kind(2000, 1, 1, false, 0), kind(2000, 2, 1, false, 0)];
        assert_eq!(at_fewest(&kinds, &held(&[(0, 3000)], 5000, 3000)), None);
        // A kind of 2,000 VMs of which 600 are placed: the walk stops at
        // the level's count (600 passes, not 2,000), within its limit.
        let one = [kind(2000, 1, 1, false, 0)];
        assert_eq!(at_fewest(&one, &held(&[(0, 600)], 600, 600)), Some(600));
        // Within the limit, the one choice: 10 of the first kind and all
        // 20 of the second, 30 cores, a domain each.
        let small = [kind(20, 1, 1, false, 0), kind(20, 2, 1, false, 0)];
        assert_eq!(at_fewest(&small, &held(&[(0, 30)], 50, 30)), Some(30));
    }

    /// Levels count apart: one VM of level 10 and none of level 0 is the
    /// VM of level 10 only, whatever its domains; a level not held at all
    /// is no bound.
    #[test]
    fn vms_are_counted_per_level() {
        let kinds = [kind(1, 4, 2, true, 10), kind(1, 4, 2, false, 0)];
        assert_eq!(at_fewest(&kinds, &held(&[(10, 1), (0, 0)], 4, 2)), Some(2));
        assert_eq!(at_fewest(&kinds, &held(&[(10, 0), (0, 1)], 4, 2)), Some(1));
        assert_eq!(at_fewest(&kinds, &held(&[(0, 1)], 4, 2)), None);
    }
}
