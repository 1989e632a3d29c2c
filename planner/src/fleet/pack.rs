//! Step 2c of fleet planning: the assignment's counts turned into hosts for
//! VMs. In a bin of one host, as counted (its exact plan packs its nodes);
//! in a bin of several, packed first fit decreasing onto its hosts (each VM
//! whole on a node when kept to one), largest first.

use super::assign::{self, Assignment, Capacity, MemoryCaps};
use super::bins::Bins;
use super::classes::Classes;
use super::index::{BinIx, HostIx, Per, VmIx};
use super::kinds::{Kinds, Need};
use super::Fleet;
use std::collections::BTreeMap;

/// Each VM given a host, and how many a bin's first fit could not place on
/// the bin's hosts.
pub(super) struct Packed {
    /// VM → its host.
    pub host_of: BTreeMap<VmIx, HostIx>,
    /// VMs a bin of several hosts gave none of them room for.
    pub short: usize,
}

/// What is left of each host as VMs are packed onto it.
struct Room<'a> {
    classes: &'a Classes,
    kinds: &'a Kinds,
    free: Per<HostIx, Capacity>,
    mem_free: Per<HostIx, MemoryCaps>,
    host_of: BTreeMap<VmIx, HostIx>,
}

/// Gives each VM the assignment placed a host.
pub(super) fn members_to_hosts(
    fleet: &Fleet<'_>,
    classes: &Classes,
    kinds: &Kinds,
    bins: &Bins,
    assignment: &Assignment,
) -> Packed {
    let mut room = Room {
        classes,
        kinds,
        free: Per::from_fn(fleet.hosts_len(), |h| {
            classes
                .of(h)
                .map(|c| assign::capacity(&c.request))
                .unwrap_or_default()
        }),
        // And their memory, where the assignment counted it.
        mem_free: Per::from_fn(fleet.hosts_len(), |h| {
            bins.of_host[h]
                .and_then(|b| bins.memory.get(b).cloned())
                .unwrap_or_default()
        }),
        host_of: BTreeMap::new(),
    };
    let mut short = 0usize;
    for (b, vms) in per_bin(bins, assignment) {
        short += room.pack_bin(&bins.hosts[b], vms);
    }
    Packed {
        host_of: room.host_of,
        short,
    }
}

/// The VMs the assignment placed in each bin.
fn per_bin(bins: &Bins, assignment: &Assignment) -> BTreeMap<BinIx, Vec<VmIx>> {
    let mut out: BTreeMap<BinIx, Vec<VmIx>> = BTreeMap::new();
    for (k, kind) in bins.kinds.enumerate() {
        let mut members = kind.members.iter();
        for &(b, _) in &kind.hosts {
            let n = assignment.counts.get(&(k, b)).copied().unwrap_or(0);
            for _ in 0..n {
                if let Some(&v) = members.next() {
                    out.entry(b).or_default().push(v);
                }
            }
        }
    }
    out
}

impl<'a> Room<'a> {
    /// What VM `v` needs on host `h`, when it may go there.
    fn need_on(&self, v: VmIx, h: HostIx) -> Option<&'a Need> {
        let kinds: &'a Kinds = self.kinds;
        self.classes.of_host[h].and_then(|c| kinds.needs.get(&(c, v)))
    }

    /// A bin's VMs onto its hosts; how many did not fit the bin's hosts.
    fn pack_bin(&mut self, hosts: &[HostIx], mut vms: Vec<VmIx>) -> usize {
        if let [only] = hosts {
            for v in vms {
                self.host_of.insert(v, *only);
            }
            return 0;
        }
        // Largest first, a kind's members together: hosts then fill alike,
        // and hosts alike given VMs alike share one exact plan.
        vms.sort_by_key(|&v| {
            let need = self.need_on(v, hosts[0]).map_or(0, |n| n.cores);
            (std::cmp::Reverse(need), self.kinds.of_vm[v], v)
        });
        let mut short = 0;
        for v in vms {
            if hosts.iter().any(|&h| self.place(v, h)) {
                continue;
            }
            short += 1;
            // Any other host it may use with room, first fit.
            let kinds: &'a Kinds = self.kinds;
            let kind = &kinds.all[kinds.of_vm[v]];
            let _ = kind.hosts.iter().any(|&(h, _)| self.place(v, h));
        }
        short
    }

    /// VM `v` onto host `h`, first fit (cores and memory), if it fits.
    fn place(&mut self, v: VmIx, h: HostIx) -> bool {
        let Some(need) = self.need_on(v, h) else {
            return false;
        };
        let member = assign::Member {
            usable: &need.usable,
            hosts: 1,
            need: need.cores,
            strict: need.strict,
            memory: assign::mib(&self.kinds.all[self.kinds.of_vm[v]]),
        };
        let Some(split) = member.fit(&self.free[h], &self.mem_free[h], &|_| true) else {
            return false;
        };
        member.take(&mut self.free[h], &mut self.mem_free[h], &split);
        self.host_of.insert(v, h);
        true
    }
}
