//! Steps 3 and 4 of fleet planning: each host's exact plan (the single-host
//! solver) for the VMs the assignment gave it, hosts alike with VMs alike
//! solved once; then the repair: a VM a host's plan cannot place (L3 or SMT,
//! which the assignment does not see) is tried on its other hosts with room
//! before it is left out.

use super::classes::{Classes, HostClass};
use super::index::{ClassIx, HostIx, KindIx, Per, VmIx};
use super::kinds::Kinds;
use super::names::Names;
use super::Fleet;
use crate::deadline::{Deadline, FLEET_HOST_BOUNDS};
use crate::plan::Plan;
use crate::solve::{self, PlanRequest, SolveOptions, VmRequest};
use std::collections::BTreeMap;
use std::time::Duration;

/// Plans solved once for hosts of one class given VMs of the same kinds, in
/// the same order.
type Memo = BTreeMap<(ClassIx, Vec<KindIx>), Plan>;

/// The hosts' plans as they are made and repaired.
pub(super) struct HostPlans<'a> {
    fleet: &'a Fleet<'a>,
    classes: &'a Classes,
    kinds: &'a Kinds,
    deadline: Deadline,
    /// Hosts with VMs when first planned (at least 1): the time's shares.
    busy: usize,
    memo: Memo,
    /// Per host, its plan (`None`: not read).
    pub plans: Per<HostIx, Option<Plan>>,
    /// Per host, its VMs, ascending.
    pub on_host: Per<HostIx, Vec<VmIx>>,
    /// VM → its host.
    pub host_of: BTreeMap<VmIx, HostIx>,
}

impl<'a> HostPlans<'a> {
    /// Every host's plan for the VMs `host_of` gives it.
    pub fn plan(
        fleet: &'a Fleet<'a>,
        classes: &'a Classes,
        kinds: &'a Kinds,
        host_of: BTreeMap<VmIx, HostIx>,
        deadline: Deadline,
    ) -> HostPlans<'a> {
        let mut on_host: Per<HostIx, Vec<VmIx>> = Per::from_fn(fleet.hosts_len(), |_| Vec::new());
        for (&v, &h) in &host_of {
            on_host[h].push(v);
        }
        let busy = on_host.iter().filter(|vms| !vms.is_empty()).count().max(1);
        let mut hosts = HostPlans {
            fleet,
            classes,
            kinds,
            deadline,
            busy,
            memo: Memo::new(),
            plans: Per::from_fn(fleet.hosts_len(), |_| None),
            on_host,
            host_of,
        };
        for h in fleet.hosts() {
            hosts.plans[h] = hosts.solve_on(h, &hosts.on_host[h].clone());
        }
        hosts
    }

    /// The VMs each host's plan left out, tried on their other hosts in
    /// turn; each host then planned again without those it could not place.
    pub fn repair(&mut self) {
        for h in self.fleet.hosts() {
            let left_out: Vec<VmIx> = self.plans[h]
                .as_ref()
                .map(|p| {
                    p.unplaced
                        .iter()
                        .filter_map(|n| self.fleet.vm_index.get(n.as_str()).copied())
                        .collect()
                })
                .unwrap_or_default();
            if left_out.is_empty() {
                continue;
            }
            for v in &left_out {
                self.host_of.remove(v);
            }
            self.on_host[h].retain(|v| !left_out.contains(v));
            for v in left_out {
                self.move_elsewhere(v, h);
            }
            // The host's own plan without the VMs it could not place.
            self.plans[h] = self.solve_on(h, &self.on_host[h].clone());
        }
    }

    /// VM `v`, left out on host `h`, onto the first other host it may use
    /// whose plan then places every VM, if one does.
    fn move_elsewhere(&mut self, v: VmIx, h: HostIx) {
        let kind = &self.kinds.all[self.kinds.of_vm[v]];
        for &(other, _) in &kind.hosts {
            if other == h || self.deadline.is_past() {
                continue;
            }
            let mut mine = self.on_host[other].clone();
            mine.push(v);
            mine.sort_unstable();
            let Some(plan) = self.solve_on(other, &mine) else {
                continue;
            };
            if plan.unplaced.is_empty() {
                self.host_of.insert(v, other);
                self.on_host[other] = mine;
                self.plans[other] = Some(plan);
                return;
            }
        }
    }

    /// Host `h`'s plan for the VMs `mine`, when it was read.
    fn solve_on(&mut self, h: HostIx, mine: &[VmIx]) -> Option<Plan> {
        let c = self.classes.of_host[h]?;
        let limit = host_time(self.deadline, self.busy, !mine.is_empty());
        let running = self
            .fleet
            .inputs
            .get(h)
            .and_then(|i| i.as_ref().ok())
            .map_or(&[][..], |i| i.running.as_slice());
        let host = Host {
            class: &self.classes.all[c],
            c,
            h,
            running,
        };
        Some(plan_host(
            &host,
            self.fleet,
            mine,
            &self.kinds.of_vm,
            &mut self.memo,
            limit,
        ))
    }
}

/// The time one host's plan may take: an even share of what is left.
fn host_time(deadline: Deadline, hosts: usize, has_vms: bool) -> Duration {
    let (least, share_floor) = FLEET_HOST_BOUNDS;
    let left = deadline.remaining();
    if !has_vms {
        return least;
    }
    let share = left.div_f64(hosts.max(1) as f64);
    share.max(share_floor).min(left.max(least))
}

/// One host as its plan is made: its class (index `c`), its index `h`, and
/// the domains running there.
struct Host<'a> {
    class: &'a HostClass,
    c: ClassIx,
    h: HostIx,
    running: &'a [crate::tenant::Tenant],
}

/// A host's plan for the VMs `mine`, from its class's request. Hosts of one
/// class given VMs of the same kinds share one solve: the plan is the same
/// with the VMs' names (and the host's source) put in. VMs that run there
/// already stay where they run unless `movable`, as on one host
/// ([`crate::spec::Residents`]): such a host is a class of its own, solved
/// on its own.
fn plan_host(
    host: &Host<'_>,
    fleet: &Fleet<'_>,
    mine: &[VmIx],
    kind_of: &Per<VmIx, KindIx>,
    memo: &mut Memo,
    limit: Duration,
) -> Plan {
    // The VMs by kind, then spec order: position i of a kind is the same
    // request (but its name) on every host of the class.
    let mut ordered: Vec<VmIx> = mine.to_vec();
    ordered.sort_by_key(|&v| (kind_of[v], v));
    let names: Vec<&str> = ordered.iter().map(|&v| fleet.vm(v).name.as_str()).collect();
    let request = || PlanRequest {
        vms: ordered
            .iter()
            .filter_map(|&v| host.class.vm(&fleet.vm(v).name))
            .cloned()
            .collect::<Vec<VmRequest>>(),
        ..host.class.request.clone()
    };
    let options = SolveOptions::default();
    let deadline = Deadline::after(limit);
    let mut plan = if host
        .running
        .iter()
        .any(|t| names.contains(&t.name.as_str()))
    {
        with_residents(host, fleet, request(), &names, &options, deadline)
    } else {
        let key = (host.c, ordered.iter().map(|&v| kind_of[v]).collect());
        let shared = memo.entry(key).or_insert_with(|| {
            let request = request();
            let plan = solve::solve(&request, &options, deadline);
            // Kept with placeholder names, as every host of the key uses it.
            Names::placeholders(&request).rename(&plan)
        });
        Names::real(&names).rename(shared)
    };
    plan.host.source = fleet.host(host.h).source.describe();
    plan
}

/// The plan of a host where VMs of the spec run: they stay where they run
/// unless `movable`.
fn with_residents(
    host: &Host<'_>,
    fleet: &Fleet<'_>,
    mut request: PlanRequest,
    names: &[&str],
    options: &SolveOptions,
    deadline: Deadline,
) -> Plan {
    let mut warnings = Vec::new();
    let movable = |n: &str| fleet.spec.vms.iter().any(|v| v.name == n && v.movable);
    let residents = crate::spec::Residents::on_host(
        &mut request,
        host.running,
        &movable,
        names.iter().map(|n| (*n).to_owned()).collect(),
        &mut warnings,
    );
    let mut plan = residents.solve(&request, options, deadline);
    plan.warnings.splice(0..0, warnings);
    plan
}
