//! Step 2a of fleet planning: the VMs grouped into kinds (VMs alike for the
//! assignment: their cores on each class of hosts, the hosts they may use,
//! node policy, priority, vCPUs, where they run, memory), with each VM's
//! refusals (the hosts it may use that cannot take it, and why).

use super::assign::{self, Capacity, Kind};
use super::classes::Classes;
use super::index::{ClassIx, HostIx, KindIx, Per, VmIx};
use super::{Fleet, Refusal};
use crate::solve;
use std::collections::BTreeMap;

/// What a VM needs on the hosts of one class.
#[derive(Debug, Clone)]
pub(super) struct Need {
    /// Cores.
    pub cores: u32,
    /// The free cores per node it may use there.
    pub usable: Capacity,
    /// Kept to one node.
    pub strict: bool,
}

/// What makes two VMs alike for the assignment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct KindKey {
    /// Per class that takes it, the cores it needs there.
    by_class: Vec<(ClassIx, u32)>,
    /// The hosts it may be given, when not all.
    filter: Option<Vec<HostIx>>,
    strict: bool,
    priority: i64,
    vcpus: u32,
    running_on: Option<HostIx>,
    movable: bool,
    /// Its page size and KiB, when its memory is counted.
    memory: Option<(u64, u64)>,
}

/// The VMs in kinds, with what each needs per class and why hosts refuse it.
pub(super) struct Kinds {
    /// The kinds, in the order of their first member.
    pub all: Per<KindIx, Kind<HostIx>>,
    /// Per VM, its kind.
    pub of_vm: Per<VmIx, KindIx>,
    /// (class, VM) → what the VM needs on a host of the class.
    pub needs: BTreeMap<(ClassIx, VmIx), Need>,
    /// Per VM, the hosts it may use that refuse it, and why.
    pub refused: Per<VmIx, Vec<Refusal>>,
}

impl Kinds {
    /// Groups every VM of the spec into its kind. Work is per (VM, class)
    /// and per kind: never per (VM, host).
    pub fn form(fleet: &Fleet<'_>, classes: &Classes) -> Kinds {
        let mut kinds = Kinds {
            all: Per::new(),
            of_vm: Per::new(),
            needs: BTreeMap::new(),
            refused: Per::new(),
        };
        let mut by_key: BTreeMap<KindKey, KindIx> = BTreeMap::new();
        for v in fleet.vms() {
            let (key, refused) = kinds.key_of(fleet, classes, v);
            kinds.refused.push(refused);
            let k = *by_key
                .entry(key)
                .or_insert_with_key(|key| kinds.all.push(new_kind(classes, key)));
            kinds.all[k].members.push(v);
            kinds.of_vm.push(k);
        }
        kinds
    }

    /// VM `v`'s kind key, recording what it needs per class; its refusals.
    fn key_of(&mut self, fleet: &Fleet<'_>, classes: &Classes, v: VmIx) -> (KindKey, Vec<Refusal>) {
        let vm = fleet.vm(v);
        let running_on = fleet.running_on.get(&v).copied();
        let filter = hosts_allowed(fleet, v);
        let in_filter = |h: &HostIx| filter.as_ref().is_none_or(|f| f.contains(h));
        let mut key = KindKey {
            by_class: Vec::new(),
            filter: filter.clone(),
            strict: true,
            priority: 0,
            vcpus: 0,
            running_on,
            movable: vm.movable,
            memory: None,
        };
        let mut reasons: BTreeMap<String, Vec<HostIx>> = BTreeMap::new();
        for (c, class) in classes.all.enumerate() {
            let mut hosts_here = class.hosts.iter().copied().filter(in_filter).peekable();
            if hosts_here.peek().is_none() {
                continue;
            }
            if let Some(why) = class.refused.get(&vm.name) {
                reasons.entry(why.clone()).or_default().extend(hosts_here);
                continue;
            }
            let Some(request_vm) = class.vm(&vm.name) else {
                continue;
            };
            let need = self.needs.entry((c, v)).or_insert_with(|| Need {
                cores: assign::cores_needed(class.threads, request_vm),
                usable: assign::usable(&class.free, request_vm),
                strict: assign::strict(request_vm),
            });
            key.strict = need.strict;
            key.vcpus = request_vm.vcpus;
            key.priority = request_vm.priority;
            key.memory = solve::memory::need(request_vm)
                .map(|(page, mib)| (page, (mib * 1024.0).round() as u64));
            key.by_class.push((c, need.cores));
        }
        for (h, e) in &classes.errors {
            if in_filter(h) {
                reasons
                    .entry(super::classes::unread(e))
                    .or_default()
                    .push(*h);
            }
        }
        (key, refusals(fleet, reasons))
    }
}

/// The hosts VM `v` may be given, when not all: where it runs when it may
/// not move, else its `hosts` list.
pub(super) fn hosts_allowed(fleet: &Fleet<'_>, v: VmIx) -> Option<Vec<HostIx>> {
    let vm = fleet.vm(v);
    match (fleet.running_on.get(&v), vm.movable, &vm.hosts) {
        (Some(&r), false, _) => Some(vec![r]),
        (_, _, Some(list)) => Some(
            list.iter()
                .filter_map(|n| fleet.host_index.get(n.as_str()).copied())
                .collect(),
        ),
        _ => None,
    }
}

/// Refusals by reason, each reason's hosts in spec order.
fn refusals(fleet: &Fleet<'_>, reasons: BTreeMap<String, Vec<HostIx>>) -> Vec<Refusal> {
    let mut out = Vec::new();
    for (reason, mut hosts) in reasons {
        hosts.sort_unstable();
        for h in hosts {
            out.push(Refusal {
                host: fleet.host(h).name.clone(),
                reason: reason.clone(),
            });
        }
    }
    out
}

/// A kind with no members yet: its hosts (each with the cores a member
/// needs there) from its key.
fn new_kind(classes: &Classes, key: &KindKey) -> Kind<HostIx> {
    let in_filter = |h: &HostIx| key.filter.as_ref().is_none_or(|f| f.contains(h));
    let mut hosts = Vec::new();
    for &(c, need) in &key.by_class {
        for &h in classes.all[c].hosts.iter().filter(|h| in_filter(h)) {
            hosts.push((h, need));
        }
    }
    hosts.sort_unstable();
    Kind {
        members: Vec::new(),
        hosts,
        strict: key.strict,
        priority: key.priority,
        vcpus: key.vcpus,
        running_on: key.running_on,
        movable: key.movable,
        memory: key.memory,
    }
}
