//! Step 2b of fleet planning: the bins of the assignment (hosts of one class
//! that every kind may use alike, and no VM of the spec runs on, counted
//! together on a large fleet; each host its own bin on a small one, where
//! the assignment is then exact per host) and the assignment over them.

use super::assign::{self, Assignment, Capacity, Kind, MemoryCaps};
use super::classes::Classes;
use super::index::{BinIx, HostIx, KindIx, Per};
use super::kinds::Kinds;
use super::Fleet;
use crate::solve;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Kind-host pairs above which hosts alike are grouped into one bin of the
/// assignment (each host its own bin below: exact per host).
const GROUP_ABOVE: usize = 2_000;

/// The assignment's bins and what it is told of them.
pub(super) struct Bins {
    /// Per host, its bin (`None`: not read).
    pub of_host: Per<HostIx, Option<BinIx>>,
    /// Per bin, its hosts.
    pub hosts: Per<BinIx, Vec<HostIx>>,
    /// Per bin, the memory one of its hosts offers (where counted).
    pub memory: Per<BinIx, MemoryCaps>,
    /// The kinds over bins instead of hosts.
    pub kinds: Per<KindIx, Kind<BinIx>>,
    /// Per bin, the free cores per node of one of its hosts.
    capacity: Per<BinIx, Capacity>,
    /// Per bin, how many hosts it holds.
    multiplicity: Per<BinIx, u32>,
    /// (kind, bin) → a member's usable cores per node on one of its hosts.
    usable: BTreeMap<(KindIx, BinIx), Capacity>,
}

impl Bins {
    /// Groups the hosts read into bins and lifts the kinds onto them.
    pub fn group(fleet: &Fleet<'_>, classes: &Classes, kinds: &Kinds) -> Bins {
        let (of_host, hosts) = bins_of_hosts(fleet, classes, kinds);
        let class_of_bin = |hs: &Vec<HostIx>| classes.of(hs[0]);
        let capacity = hosts
            .iter()
            .map(|hs| class_of_bin(hs).map_or_else(Capacity::new, |c| assign::capacity(&c.request)))
            .collect();
        // Memory a bin's host offers, where the source says and a VM asks.
        let any_memory = kinds.all.iter().any(|k| k.memory.is_some());
        let memory = hosts
            .iter()
            .map(|hs| match class_of_bin(hs) {
                Some(c) if any_memory => solve::memory::caps(&c.request)
                    .into_iter()
                    .filter(|(_, mib)| mib.is_finite())
                    .collect(),
                _ => MemoryCaps::new(),
            })
            .collect();
        let multiplicity = hosts
            .iter()
            .map(|hs| u32::try_from(hs.len()).unwrap_or(u32::MAX))
            .collect();
        let mut bins = Bins {
            of_host,
            hosts,
            memory,
            kinds: Per::new(),
            capacity,
            multiplicity,
            usable: BTreeMap::new(),
        };
        for (k, kind) in kinds.all.enumerate() {
            let lifted = bins.lift(classes, kinds, k, kind);
            bins.kinds.push(lifted);
        }
        bins
    }

    /// Kind `k` over bins: each bin of its hosts once, with the usable cores
    /// of its first member there.
    fn lift(
        &mut self,
        classes: &Classes,
        kinds: &Kinds,
        k: KindIx,
        kind: &Kind<HostIx>,
    ) -> Kind<BinIx> {
        let mut hosts: Vec<(BinIx, u32)> = Vec::new();
        for &(h, need) in &kind.hosts {
            let Some(b) = self.of_host[h] else { continue };
            if hosts.iter().any(|(x, _)| *x == b) {
                continue;
            }
            hosts.push((b, need));
            let first = kind.members[0];
            if let Some(n) = classes.of_host[h].and_then(|c| kinds.needs.get(&(c, first))) {
                self.usable.insert((k, b), n.usable.clone());
            }
        }
        Kind {
            members: kind.members.clone(),
            hosts,
            strict: kind.strict,
            priority: kind.priority,
            vcpus: kind.vcpus,
            running_on: kind.running_on.and_then(|h| self.of_host[h]),
            movable: kind.movable,
            memory: kind.memory,
        }
    }

    /// The assignment, solved within `limit`.
    pub fn assign(&self, limit: Duration) -> Assignment {
        assign::solve(
            &self.kinds,
            &assign::Hosts {
                capacity: &self.capacity,
                hosts: &self.multiplicity,
                usable: &self.usable,
                memory: &self.memory,
            },
            limit,
        )
    }
}

/// Per host its bin, and per bin its hosts.
fn bins_of_hosts(
    fleet: &Fleet<'_>,
    classes: &Classes,
    kinds: &Kinds,
) -> (Per<HostIx, Option<BinIx>>, Per<BinIx, Vec<HostIx>>) {
    let mut kinds_of_host: Per<HostIx, Vec<KindIx>> =
        Per::from_fn(fleet.hosts_len(), |_| Vec::new());
    for (k, kind) in kinds.all.enumerate() {
        for &(h, _) in &kind.hosts {
            kinds_of_host[h].push(k);
        }
    }
    let pairs: usize = kinds.all.iter().map(|k| k.hosts.len()).sum();
    let group = pairs > GROUP_ABOVE;
    let running_hosts: BTreeSet<HostIx> = fleet.running_on.values().copied().collect();
    let mut of_host: Per<HostIx, Option<BinIx>> = Per::from_fn(fleet.hosts_len(), |_| None);
    let mut hosts: Per<BinIx, Vec<HostIx>> = Per::new();
    let mut keys: BTreeMap<(super::index::ClassIx, Vec<KindIx>), BinIx> = BTreeMap::new();
    for h in fleet.hosts() {
        let Some(c) = classes.of_host[h] else {
            continue;
        };
        let alone = !group || running_hosts.contains(&h);
        let key = (c, kinds_of_host[h].clone());
        let b = match (alone, keys.get(&key)) {
            (false, Some(&b)) => b,
            _ => {
                let b = hosts.push(Vec::new());
                if !alone {
                    keys.insert(key, b);
                }
                b
            }
        };
        hosts[b].push(h);
        of_host[h] = Some(b);
    }
    (of_host, hosts)
}
