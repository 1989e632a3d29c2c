//! Step 5 of fleet planning: the fleet plan from the hosts' plans — each
//! host's and each VM's outcome, the values reached, and whether they are
//! proven (every tier of the assignment reached, every host's plan proven).

use super::assign::{Assignment, Tier};
use super::classes::Classes;
use super::hosts::HostPlans;
use super::index::{HostIx, Per, VmIx};
use super::{Fleet, FleetHostOutcome, FleetObjective, FleetPlan, FleetVmOutcome, Gap, Refusal};
use crate::deadline::Deadline;
use crate::model::Message;
use crate::solve;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// When planning began, and when it must end.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    pub(super) started: Instant,
    pub(super) deadline: Deadline,
}

/// The fleet plan: outcomes, objective, gap and warnings (`warnings` so far
/// first, then each host's, then the running VMs that could not be kept).
pub(super) fn fleet_plan(
    fleet: &Fleet<'_>,
    classes: &Classes,
    refused: Per<VmIx, Vec<Refusal>>,
    mut planned: HostPlans<'_>,
    assignment: Assignment,
    mut warnings: Vec<String>,
    clock: Clock,
) -> FleetPlan {
    let Clock { started, deadline } = clock;
    let host_of = std::mem::take(&mut planned.host_of);
    let mut objective = FleetObjective::default();
    let hosts = host_outcomes(fleet, classes, planned.plans, &mut objective, &mut warnings);
    let mut vms = vm_outcomes(fleet, classes, refused, &host_of, &hosts, &mut objective);
    why_alone(fleet, classes, &mut vms, deadline);
    let kept = running_kept(fleet, &host_of, &mut warnings);
    let gap = first_gap(&assignment, &objective, kept);
    // Every host's own plan must be proven too (its L3 and SMT objectives).
    // (A VM packed elsewhere or left out by a host's plan shows as a tier
    // below its bound: no flag of its own is needed.)
    let hosts_proven = hosts
        .iter()
        .all(|h| h.plan.as_ref().is_none_or(|p| p.proven));
    FleetPlan {
        proven: assignment.proven && gap.is_none() && hosts_proven,
        gap,
        hosts: hosts.into_vec(),
        vms,
        objective,
        assignment: assignment.tiers,
        solve_seconds: started.elapsed().as_secs_f64(),
        warnings,
    }
}

/// Each host's outcome, its warnings (prefixed with its name) and its share
/// of the objective.
fn host_outcomes(
    fleet: &Fleet<'_>,
    classes: &Classes,
    mut plans: Per<HostIx, Option<crate::plan::Plan>>,
    objective: &mut FleetObjective,
    warnings: &mut Vec<String>,
) -> Per<HostIx, FleetHostOutcome> {
    let mut out = Per::new();
    for h in fleet.hosts() {
        let host = fleet.host(h);
        let plan = plans[h].take();
        let class = classes.of(h);
        if let Some(plan) = &plan {
            for w in &plan.warnings {
                warnings.push(format!("{}: {w}", host.name));
            }
            if !plan.vms.is_empty() {
                objective.hosts_touched += 1;
            }
            objective.cores_used += plan.objective.cores_used;
        }
        if let Some(class) = class {
            warnings.extend(class.warnings.iter().map(|w| format!("{}: {w}", host.name)));
        }
        out.push(FleetHostOutcome {
            name: host.name.clone(),
            source: host.source.describe(),
            connect: host.connect.clone(),
            doctor_root: host.doctor_root.as_ref().map(|p| p.display().to_string()),
            cores_used: plan.as_ref().map_or(0, |p| p.objective.cores_used),
            cores_free: class.map_or(0, |c| {
                u32::try_from(solve::free_cores(&c.request).len()).unwrap_or(0)
            }),
            vms: plan
                .as_ref()
                .map(|p| p.vms.iter().map(|v| v.name.clone()).collect())
                .unwrap_or_default(),
            error: classes.errors.get(&h).cloned(),
            plan,
        });
    }
    out
}

/// Each VM's outcome, and the VMs' share of the objective.
fn vm_outcomes(
    fleet: &Fleet<'_>,
    classes: &Classes,
    mut refused: Per<VmIx, Vec<Refusal>>,
    host_of: &BTreeMap<VmIx, HostIx>,
    hosts: &Per<HostIx, FleetHostOutcome>,
    objective: &mut FleetObjective,
) -> Vec<FleetVmOutcome> {
    let mut by_priority: BTreeMap<std::cmp::Reverse<i64>, u32> = BTreeMap::new();
    let mut out = Vec::new();
    for v in fleet.vms() {
        let vm = fleet.vm(v);
        let host = host_of.get(&v).copied();
        if let Some(h) = host {
            objective.placed += 1;
            if let Some(r) = classes.of(h).and_then(|c| c.vm(&vm.name)) {
                objective.vcpus_placed += r.vcpus;
                *by_priority
                    .entry(std::cmp::Reverse(r.priority))
                    .or_default() += 1;
            }
            match fleet.running_on.get(&v) {
                Some(&r) if r != h => objective.moves += 1,
                Some(_) if repinned(fleet, h, &hosts[h], &vm.name) => objective.repinned += 1,
                _ => {}
            }
        }
        out.push(FleetVmOutcome {
            name: vm.name.clone(),
            host: host.map(|h| fleet.host(h).name.clone()),
            was_on: fleet
                .running_on
                .get(&v)
                .map(|&h| fleet.host(h).name.clone()),
            refused: std::mem::take(&mut refused[v]),
        });
    }
    objective.placed_by_priority = by_priority.into_iter().map(|(p, n)| (p.0, n)).collect();
    out
}

/// How long the plan of one VM alone on a host may take: it is proven in
/// milliseconds (one VM), so this only bounds a pathological host.
const ALONE_LIMIT: Duration = Duration::from_secs(1);

/// Hosts named in one refusal for a class of hosts alike.
const ALONE_NAMED: usize = 5;

/// For each VM left out, the classes of hosts it may use where it would
/// not fit even alone, and why: the plan of that VM alone on one of the
/// class's hosts (as read: the domains running there that the spec does not
/// name kept) leaves it out, proven, and its explanation says why (`it
/// needs 1.0 GiB of memory on one node; node 0 has 768.0 MiB free`). One
/// refusal per class, on its first such host, naming the others alike:
/// fleet.json stays as small as the classes however many hosts there are.
/// Hosts that refused the VM already are left as they were; a VM that fits
/// a host alone gets no refusal there (those hosts were full). Within the
/// fleet's deadline: what is not checked by then keeps no refusal.
pub(super) fn why_alone(
    fleet: &Fleet<'_>,
    classes: &Classes,
    vms: &mut [FleetVmOutcome],
    deadline: Deadline,
) {
    // VMs alike get the same answer on a class: solved once, with the VM
    // under a placeholder name, then said with each VM's own.
    let mut memo: BTreeMap<(usize, String), Option<Message>> = BTreeMap::new();
    for (v, out) in fleet.vms().zip(vms.iter_mut()) {
        if out.host.is_some() {
            continue;
        }
        let vm = fleet.vm(v);
        let allowed: Option<std::collections::BTreeSet<HostIx>> =
            super::kinds::hosts_allowed(fleet, v).map(|a| a.into_iter().collect());
        let refused: std::collections::BTreeSet<&str> =
            out.refused.iter().map(|r| r.host.as_str()).collect();
        let mut found: Vec<(HostIx, Refusal)> = Vec::new();
        for (c, class) in classes.all.iter().enumerate() {
            let Some(request_vm) = class.vm(&vm.name) else {
                continue;
            };
            let hosts: Vec<HostIx> = class
                .hosts
                .iter()
                .copied()
                .filter(|h| allowed.as_ref().is_none_or(|a| a.contains(h)))
                .filter(|h| !refused.contains(fleet.host(*h).name.as_str()))
                .collect();
            let Some(&first) = hosts.first() else {
                continue;
            };
            let mut anonymous = request_vm.clone();
            anonymous.name = PLACEHOLDER.to_owned();
            let key = (c, format!("{anonymous:?}"));
            let why = match memo.get(&key) {
                Some(why) => why.clone(),
                None => match alone(class, anonymous, deadline) {
                    Checked::Done(why) => {
                        memo.insert(key, why.clone());
                        why
                    }
                    Checked::NoTime => continue,
                },
            };
            let Some(mut why) = why else {
                continue;
            };
            why.rename(&|n| {
                if n == PLACEHOLDER {
                    vm.name.clone()
                } else {
                    n.to_owned()
                }
            });
            let alike = match hosts.len() - 1 {
                0 => String::new(),
                n => {
                    let named: Vec<&str> = hosts[1..]
                        .iter()
                        .take(ALONE_NAMED)
                        .map(|&h| fleet.host(h).name.as_str())
                        .collect();
                    let more = if n > ALONE_NAMED {
                        format!(" and {} more", n - ALONE_NAMED)
                    } else {
                        String::new()
                    };
                    format!(
                        " (and on {} alike: {}{more})",
                        crate::text::plural(n, "other host", "other hosts"),
                        named.join(", ")
                    )
                }
            };
            let reason = format!("even alone on this host{alike}: {why}");
            debug_assert!(!reason.contains(PLACEHOLDER), "{reason}");
            found.push((
                first,
                Refusal {
                    host: fleet.host(first).name.clone(),
                    reason,
                },
            ));
        }
        if found.is_empty() {
            continue;
        }
        // Every refusal names a host of the fleet; in the fleet's order.
        let mut all: Vec<(Option<HostIx>, Refusal)> = std::mem::take(&mut out.refused)
            .into_iter()
            .map(|r| (fleet.host_index.get(r.host.as_str()).copied(), r))
            .collect();
        all.extend(found.into_iter().map(|(h, r)| (Some(h), r)));
        all.sort_by_key(|(h, _)| *h);
        out.refused = all.into_iter().map(|(_, r)| r).collect();
    }
}

/// What the alone check of one VM on one class found.
enum Checked {
    /// Why it does not fit even alone; `None` when it fits, or when that
    /// is not proven.
    Done(Option<Message>),
    /// Too little of the fleet's time was left to check.
    NoTime,
}

/// The name a VM is planned alone under: no VM of a spec can have it (a
/// control character: [`crate::spec::bad_vm_name`]).
const PLACEHOLDER: &str = "\u{1}alone";

/// Why `vm` does not fit a host of `class` even alone: the one-host plan's
/// explanation, when it proves the VM left out. A greedy first fit answers
/// first (a VM it places fits); the exact plan gets at most
/// [`ALONE_LIMIT`], and no more than leaves its grace
/// ([`crate::deadline::grace`]) inside `deadline`.
fn alone(class: &super::classes::HostClass, vm: solve::VmRequest, deadline: Deadline) -> Checked {
    let request = solve::PlanRequest {
        vms: vec![vm],
        ..class.request.clone()
    };
    if solve::greedy::place(&request).cores.contains_key(&0) {
        return Checked::Done(None);
    }
    // The solve may run its limit plus a grace of a tenth, at least
    // GRACE_FLOOR.
    let left = deadline
        .remaining()
        .saturating_sub(crate::deadline::GRACE_FLOOR)
        .div_f64(1.0 + crate::deadline::GRACE_SHARE);
    if left.is_zero() {
        return Checked::NoTime;
    }
    let plan = solve::solve(
        &request,
        &solve::SolveOptions::default(),
        Deadline::after(left.min(ALONE_LIMIT)),
    );
    if !plan.proven || !plan.unplaced.iter().any(|n| n == PLACEHOLDER) {
        return Checked::Done(None);
    }
    Checked::Done(Some(
        plan.explanations
            .into_iter()
            .find(|e| e.vm == PLACEHOLDER)
            .map_or_else(|| Message::from("it does not fit"), |e| e.message),
    ))
}

/// The running VMs that may not move kept on their host; a warning for each
/// that could not be.
fn running_kept(
    fleet: &Fleet<'_>,
    host_of: &BTreeMap<VmIx, HostIx>,
    warnings: &mut Vec<String>,
) -> u32 {
    let mut kept = 0u32;
    for v in fleet.vms() {
        let vm = fleet.vm(v);
        match (fleet.running_on.get(&v), vm.movable, host_of.get(&v)) {
            (Some(r), false, Some(h)) if r == h => kept += 1,
            (Some(&r), false, None) => warnings.push(format!(
                "{} runs on {} and could not be kept in its plan: it goes on running on its current pins, which this plan does not plan around",
                vm.name,
                fleet.host(r).name
            )),
            _ => {}
        }
    }
    kept
}

/// The first objective the plan did not bring to its bound. The assignment
/// is a relaxation of the hosts' plans (it sees no L3 domains, and counts
/// hosts alike together): its optima bound what any fleet plan reaches.
/// Where the plan reaches them tier by tier, it is optimal; the first tier
/// it misses is the stated gap.
fn first_gap(assignment: &Assignment, objective: &FleetObjective, kept: u32) -> Option<Gap> {
    let reached = |tier: Tier| -> u32 {
        match tier {
            Tier::RunningKept => kept,
            Tier::Placed(p) => objective
                .placed_by_priority
                .iter()
                .find(|(q, _)| *q == p)
                .map_or(0, |x| x.1),
            Tier::Vcpus => objective.vcpus_placed,
            Tier::Cores => objective.cores_used,
            Tier::HostMoves => objective.moves,
            Tier::HostsTouched => objective.hosts_touched,
            // A host's own objectives: the assignment has none of them.
            Tier::RunningPlaced
            | Tier::VcpusMoved
            | Tier::ExtraNodes
            | Tier::NicRemote
            | Tier::L3PerVm
            | Tier::PartialL3
            | Tier::PartialNodes => 0,
        }
    };
    assignment
        .tiers
        .iter()
        .map(|&(tier, bound)| (tier, u64::from(reached(tier)), bound))
        .find(|(_, value, bound)| value != bound)
        .map(|(objective, reached, bound)| Gap {
            objective,
            reached,
            bound,
        })
}

/// Whether host `h`'s plan gives the VM `name`, running there, other CPUs
/// than it runs on now: a vCPU on another CPU (or one that floats now), or
/// the emulator elsewhere. (The host's plan is made for the VMs the
/// assignment gave it, from scratch: nothing keeps a VM that stays on its
/// host on its CPUs.)
fn repinned(fleet: &Fleet<'_>, h: HostIx, host: &FleetHostOutcome, name: &str) -> bool {
    let now = fleet.inputs[h]
        .as_ref()
        .ok()
        .and_then(|i| i.running.iter().find(|t| t.name == name));
    let planned = host
        .plan
        .as_ref()
        .and_then(|p| p.vms.iter().find(|v| v.name == name));
    let (Some(now), Some(planned)) = (now, planned) else {
        return false;
    };
    planned.emulator_cpus != now.emulator_cpus
        || planned.vcpus.iter().any(|pin| {
            let to: crate::cpuset::CpuSet = std::iter::once(pin.cpu).collect();
            now.vcpus
                .iter()
                .find(|v| v.vcpu == pin.vcpu)
                .is_none_or(|v| v.cpus != to)
        })
}
