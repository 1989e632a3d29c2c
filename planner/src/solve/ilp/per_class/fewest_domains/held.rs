//! Which VMs the plans at the held optima may place, where some are left
//! out: per kind, how many of its VMs.
//!
//! With VMs left out (tight huge page pools, say), the per-class model's
//! held optima fix how many VMs each priority level places and how many
//! vCPUs, but not which VMs. The pattern model may choose them too, as long
//! as every plan at the held optima is still one of its plans: each placed
//! VM on its fewest cores. That holds where every choice of VMs that places
//! as many per level and as many vCPUs needs, each VM on its fewest cores,
//! no fewer cores than are held — then a plan that gave a VM more would use
//! more than the held cores. [`fewest_domains`] checks it over every choice
//! at once (a walk over the kinds, counts per level, vCPUs and cores as its
//! state), and gives objective 6's bound: the fewest L3 domains over the
//! choices whose fewest cores are the held cores.

use super::Kind;
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

/// Objective 6's bound at `held`: the fewest L3 domains (each VM in its
/// fewest, [`Kind::domains`]) over the choices of VMs that place as many per
/// level and as many vCPUs as `held` and need exactly its cores, each VM on
/// its fewest ([`Kind::fewest`]). `None` where some such choice needs fewer
/// cores (a plan at the held optima may then give a VM more than its
/// fewest), where none needs exactly the held cores, where a VM's level is
/// not held, or past [`MOST_STATES`] or [`MOST_STEPS`].
pub(super) fn fewest_domains(kinds: &[Kind], held: &Held) -> Option<u32> {
    // Every VM placed: one choice, no walk (nor its limit).
    if held.every_vm(kinds) {
        let at_held =
            total(kinds, |k| k.vm.vcpus) == held.vcpus && total(kinds, |k| k.fewest) == held.cores;
        return at_held.then(|| total(kinds, Kind::domains));
    }
    let levels: Vec<i64> = held.placed.keys().copied().collect();
    let want: Vec<u32> = held.placed.values().copied().collect();
    /// VMs per level, vCPUs, cores.
    type State = (Vec<u32>, u32, u32);
    let mut states: BTreeMap<State, u32> = BTreeMap::new();
    states.insert((vec![0; levels.len()], 0, 0), 0);
    let mut steps = 0usize;
    for kind in kinds {
        let level = levels.iter().position(|&l| l == kind.vm.priority)?;
        let mut next: BTreeMap<State, u32> = BTreeMap::new();
        for ((counts, vcpus, cores), &domains) in &states {
            // Each more VM of the kind adds to all three: past `held` in
            // one, every larger count is too.
            for n in 0..=kind.count() {
                steps += 1;
                if steps > MOST_STEPS || next.len() > MOST_STATES {
                    return None;
                }
                let mut counts = counts.clone();
                counts[level] = counts[level].saturating_add(n);
                let vcpus = vcpus.saturating_add(n.saturating_mul(kind.vm.vcpus));
                let cores = cores.saturating_add(n.saturating_mul(kind.fewest));
                if counts[level] > want[level] || vcpus > held.vcpus || cores > held.cores {
                    break;
                }
                let d = domains.saturating_add(n.saturating_mul(kind.domains()));
                let kept = next.entry((counts, vcpus, cores)).or_insert(d);
                *kept = (*kept).min(d);
            }
        }
        states = next;
    }
    let mut best: Option<u32> = None;
    for ((counts, vcpus, cores), domains) in states {
        if counts != want || vcpus != held.vcpus {
            continue;
        }
        if cores < held.cores {
            return None;
        }
        best = Some(best.map_or(domains, |b| b.min(domains)));
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::memory::Split;
    use crate::solve::VmRequest;

    /// `count` VMs of `vcpus` at priority `level`, each on `fewest` cores at
    /// its fewest, in one L3 domain or (`split`) two.
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
            memory: Split::Uncounted,
        }
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
        assert_eq!(fewest_domains(&kinds, &held(&[(0, 1)], 4, 4)), None);
        assert_eq!(fewest_domains(&kinds, &held(&[(0, 1)], 4, 2)), Some(1));
    }

    /// Two VMs of 12 vCPUs (6 cores each) placed, of three: two that need
    /// two domains and one that needs one. Both choices need the held 12
    /// cores; the bound is the one with the VM of one domain: 2 + 1 = 3.
    /// Three placed: 2 + 2 + 1 = 5.
    #[test]
    fn the_bound_is_the_fewest_domains_over_the_choices() {
        let kinds = [kind(2, 12, 6, true, 0), kind(1, 12, 6, false, 0)];
        assert_eq!(fewest_domains(&kinds, &held(&[(0, 2)], 24, 12)), Some(3));
        assert_eq!(fewest_domains(&kinds, &held(&[(0, 3)], 36, 18)), Some(5));
        // As many cores but other vCPUs: no choice places them.
        assert_eq!(fewest_domains(&kinds, &held(&[(0, 2)], 20, 12)), None);
    }

    /// Two kinds of 2,000 VMs, of 1 and 2 vCPUs, 3,000 of them placed:
    /// millions of steps to walk, so the walk declines at its limit (the
    /// one choice, 1,000 and 2,000, would give 3,000).
    #[test]
    fn a_walk_past_its_limit_declines() {
        let kinds = [kind(2000, 1, 1, false, 0), kind(2000, 2, 1, false, 0)];
        assert_eq!(
            fewest_domains(&kinds, &held(&[(0, 3000)], 5000, 3000)),
            None
        );
        // Within the limit, the one choice: 10 of the first kind and all
        // 20 of the second, 30 cores, a domain each.
        let small = [kind(20, 1, 1, false, 0), kind(20, 2, 1, false, 0)];
        assert_eq!(fewest_domains(&small, &held(&[(0, 30)], 50, 30)), Some(30));
    }

    /// Levels count apart: one VM of level 10 and none of level 0 is the
    /// VM of level 10 only, whatever its domains; a level not held at all
    /// is no bound.
    #[test]
    fn vms_are_counted_per_level() {
        let kinds = [kind(1, 4, 2, true, 10), kind(1, 4, 2, false, 0)];
        assert_eq!(
            fewest_domains(&kinds, &held(&[(10, 1), (0, 0)], 4, 2)),
            Some(2)
        );
        assert_eq!(
            fewest_domains(&kinds, &held(&[(10, 0), (0, 1)], 4, 2)),
            Some(1)
        );
        assert_eq!(fewest_domains(&kinds, &held(&[(0, 1)], 4, 2)), None);
    }
}
