//! Why a VM could not be placed, and the smallest change that makes it fit.
//!
//! One summary for the host (what the VMs ask for, what is free, what fits,
//! who is left out), then for each unplaced VM: what it needs (cores, on one
//! node or not), what is free per NUMA node (after the host's reservation and
//! fixed tenants, and after the VMs that were placed — naming a few of them,
//! never the full list), which constraint binds, and a fix found by trying
//! single changes in order — thread policy, emulator, NUMA policy, NIC
//! affinity, a smaller demand from the tables (`min_fraction`), fewer vCPUs.
//! A change counts only if the VM then fits without pushing out a VM that was
//! placed: first checked against the cores the plan leaves free (cheap), then,
//! for policy changes and while time is left before the deadline, by
//! re-solving exactly.

use super::classes::{self, cores_needed, FreeCore};
use super::{
    EmulatorPolicy, NicAffinity, NumaPolicy, Placement, PlanRequest, SolveOptions, SolverKind,
    ThreadPolicy, VmRequest,
};
use crate::ids::{CoreId, NodeId};
use crate::plan::Explanation;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

fn node_name(node: Option<NodeId>) -> String {
    node.map_or_else(|| "node ?".to_owned(), |n| format!("node {n}"))
}

fn plural(n: u32, one: &str) -> String {
    crate::text::plural(n as usize, one, &format!("{one}s"))
}

/// At most `most` names, then "and N more".
pub(crate) fn some_names(names: &[&str], most: usize) -> String {
    if names.len() <= most {
        return names.join(", ");
    }
    format!(
        "{} and {} more",
        names[..most].join(", "),
        names.len() - most
    )
}

/// The host as `placement` leaves it: the placed VMs become fixed tenants,
/// no VM to place yet. Built once per explanation run.
fn leftover(request: &PlanRequest, placement: &Placement) -> PlanRequest {
    let cpus_of: std::collections::BTreeMap<CoreId, &crate::cpuset::CpuSet> =
        request.host.cores.iter().map(|c| (c.id, &c.cpus)).collect();
    let mut rest = PlanRequest {
        vms: Vec::new(),
        ..request.clone()
    };
    for (&i, cores) in &placement.cores {
        let mut cpus = crate::cpuset::CpuSet::default();
        for core in cores {
            if let Some(c) = cpus_of.get(core) {
                cpus = cpus.union(c);
            }
        }
        rest.fixed.push(super::FixedTenant {
            name: request
                .vms
                .get(i)
                .map(|v| v.name.clone())
                .unwrap_or_default(),
            cpus,
        });
    }
    rest
}

/// Whether `changed` fits in the cores of `rest` ([`leftover`]), every placed
/// VM staying where it is: its cores if so.
fn fits_in_leftover(rest: &mut PlanRequest, changed: &VmRequest) -> Option<u32> {
    rest.vms = vec![changed.clone()];
    let placed = super::greedy::place(rest);
    placed
        .cores
        .get(&0)
        .map(|c| u32::try_from(c.len()).unwrap_or(u32::MAX))
}

/// Whether `vm_index` fits once changed: in the cores left free, or (when
/// `resolve` and time is left) by re-solving; `Some(cores of that VM)` when it
/// then fits and every VM placed before still is.
#[allow(clippy::too_many_arguments)]
fn fits_with(
    request: &PlanRequest,
    rest: &mut PlanRequest,
    before: &Placement,
    vm_index: usize,
    changed: VmRequest,
    options: &SolveOptions,
    deadline: Instant,
    resolve: bool,
) -> Option<u32> {
    if let Some(cores) = fits_in_leftover(rest, &changed) {
        return Some(cores);
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if !resolve || left.is_zero() {
        return None;
    }
    let mut trial = request.clone();
    trial.vms[vm_index] = changed;
    let placement = match options.solver {
        SolverKind::Ilp => super::exact(&trial, left.min(Duration::from_secs(2))).ok()?,
        SolverKind::Greedy => super::greedy::place(&trial),
    };
    let keeps_others = before.cores.keys().all(|i| placement.cores.contains_key(i));
    let cores = placement.cores.get(&vm_index)?;
    keeps_others.then(|| u32::try_from(cores.len()).unwrap_or(u32::MAX))
}

/// Explanations for every VM the placement left out.
pub fn explain(
    request: &PlanRequest,
    placement: &Placement,
    options: &SolveOptions,
    deadline: Instant,
) -> Vec<Explanation> {
    let free: Vec<FreeCore> = classes::free_cores(request);
    let taken: BTreeSet<CoreId> = placement.cores.values().flatten().copied().collect();
    let reserved_cores = request.host.whole_cores(&request.reserved).len();
    let fixed_cores = request
        .host
        .cores
        .iter()
        .filter(|c| request.fixed.iter().any(|f| c.cpus.intersects(&f.cpus)))
        .count();
    let nodes: BTreeSet<Option<NodeId>> = free.iter().map(|c| c.node).collect();
    let placed_names: Vec<&str> = placement
        .cores
        .keys()
        .filter_map(|&i| request.vms.get(i).map(|v| v.name.as_str()))
        .collect();
    let placed_list = some_names(&placed_names, 3);
    let mut rest = leftover(request, placement);

    let mut out = Vec::new();
    for (i, vm) in request.vms.iter().enumerate() {
        if placement.cores.contains_key(&i) {
            continue;
        }
        let allowed: Vec<&FreeCore> = free
            .iter()
            .filter(|c| classes::allowed(vm, c.node, c.threads()))
            .collect();
        let typical_threads = allowed
            .iter()
            .chain(free.iter().collect::<Vec<_>>().iter())
            .map(|c| c.threads())
            .max()
            .unwrap_or(1);
        let need = cores_needed(vm, typical_threads);
        let per_node = |cores: &[&FreeCore], node: Option<NodeId>, exclude_taken: bool| {
            u32::try_from(
                cores
                    .iter()
                    .filter(|c| c.node == node && !(exclude_taken && taken.contains(&c.core)))
                    .count(),
            )
            .unwrap_or(0)
        };
        let free_lines: Vec<String> = nodes
            .iter()
            .map(|&node| {
                let all: Vec<&FreeCore> = free.iter().collect();
                let total = per_node(&all, node, false);
                let left = per_node(&all, node, true);
                let nic = if vm.nic_node.is_some() && vm.nic_node == node {
                    " (the NIC's node)"
                } else {
                    ""
                };
                if left == total {
                    format!("{}{nic}: {} free", node_name(node), plural(total, "core"))
                } else {
                    format!(
                        "{}{nic}: {} free, {left} left after {placed_list}",
                        node_name(node),
                        plural(total, "core"),
                    )
                }
            })
            .collect();
        let total_free = u32::try_from(free.len()).unwrap_or(0);
        let left_allowed =
            u32::try_from(allowed.iter().filter(|c| !taken.contains(&c.core)).count()).unwrap_or(0);
        let best_node = nodes
            .iter()
            .map(|&n| per_node(&allowed, n, false))
            .max()
            .unwrap_or(0);

        let where_ = match (vm.required_node(), vm.numa) {
            (Some(node), _) => format!(" on {} (its NIC's)", node_name(Some(node))),
            (None, NumaPolicy::Strict) => " on one NUMA node".to_owned(),
            _ => String::new(),
        };
        let emu = if vm.emulator == EmulatorPolicy::Isolate {
            " + its emulator"
        } else {
            ""
        };
        let needs = format!(
            "{} ({} vCPUs{emu}, threads={}){where_}",
            plural(need, "core"),
            vm.vcpus,
            vm.threads.name()
        );
        let binding = if allowed.is_empty()
            && vm.threads == ThreadPolicy::Require
            && free.iter().all(|c| c.threads() < 2)
        {
            "threads"
        } else if vm.required_node().is_some()
            && allowed.len() < need as usize
            && free
                .iter()
                .filter(|c| {
                    classes::allowed(
                        &VmRequest {
                            nic_affinity: NicAffinity::Ignore,
                            ..vm.clone()
                        },
                        c.node,
                        c.threads(),
                    )
                })
                .count()
                >= need as usize
        {
            "nic"
        } else if (allowed.len() as u32) < need {
            "capacity"
        } else if vm.numa == NumaPolicy::Strict && best_node < need {
            "numa"
        } else {
            "capacity"
        }
        .to_owned();

        // Candidate single changes, smallest first.
        let mut candidates: Vec<(String, VmRequest)> = Vec::new();
        let with = |f: &dyn Fn(&mut VmRequest)| {
            let mut v = vm.clone();
            f(&mut v);
            v
        };
        match vm.threads {
            ThreadPolicy::Isolate => {
                candidates.push((
                    "threads = \"require\"".to_owned(),
                    with(&|v| v.threads = ThreadPolicy::Require),
                ));
                candidates.push((
                    "threads = \"prefer\"".to_owned(),
                    with(&|v| v.threads = ThreadPolicy::Prefer),
                ));
            }
            ThreadPolicy::Require => {
                candidates.push((
                    "threads = \"prefer\"".to_owned(),
                    with(&|v| v.threads = ThreadPolicy::Prefer),
                ));
            }
            ThreadPolicy::Prefer => {}
        }
        if vm.emulator == EmulatorPolicy::Isolate && !request.reserved.is_empty() {
            candidates.push((
                "emulator = \"host\"".to_owned(),
                with(&|v| v.emulator = EmulatorPolicy::Host),
            ));
        }
        if vm.numa == NumaPolicy::Strict {
            candidates.push((
                "numa = \"preferred\"".to_owned(),
                with(&|v| v.numa = NumaPolicy::Preferred),
            ));
        }
        if vm.nic_affinity == NicAffinity::Required {
            candidates.push((
                "nic_affinity = \"preferred\"".to_owned(),
                with(&|v| v.nic_affinity = NicAffinity::Preferred),
            ));
        }
        for (label, vcpus) in &vm.alternatives {
            let v = *vcpus;
            candidates.push((format!("{label} ({v} vCPUs)"), with(&|x| x.vcpus = v)));
        }

        let mut fix = None;
        if options.explain {
            for (label, changed) in candidates {
                if let Some(cores) = fits_with(
                    request, &mut rest, placement, i, changed, options, deadline, true,
                ) {
                    fix = Some(format!(
                        "with {label} it needs {} and fits",
                        plural(cores, "core")
                    ));
                    break;
                }
            }
            if fix.is_none() && vm.demand.is_none() && vm.vcpus > 1 {
                // The largest vCPU count that fits, by bisection.
                let (mut lo, mut hi) = (0u32, vm.vcpus - 1);
                let mut best = None;
                while lo < hi {
                    let mid = (lo + hi).div_ceil(2);
                    let changed = with(&|v| v.vcpus = mid);
                    if fits_with(
                        request, &mut rest, placement, i, changed, options, deadline, false,
                    )
                    .is_some()
                    {
                        best = Some(mid);
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                if let Some(v) = best {
                    fix = Some(format!("with vcpus = {v} it fits"));
                }
            }
            // A full host: the VM fits alone, so above every other priority it
            // is placed (the first objective places the highest level first),
            // and VMs of lower priority make room.
            if fix.is_none() && !placed_names.is_empty() {
                let alone = PlanRequest {
                    vms: vec![vm.clone()],
                    ..request.clone()
                };
                if !super::greedy::place(&alone).cores.is_empty() {
                    let top = request.vms.iter().map(|v| v.priority).max().unwrap_or(0);
                    let lower: Vec<&str> = placement
                        .cores
                        .keys()
                        .filter_map(|&j| request.vms.get(j))
                        .filter(|v| v.priority <= vm.priority)
                        .map(|v| v.name.as_str())
                        .collect();
                    fix = Some(if lower.is_empty() {
                        format!(
                            "with priority = {} it fits, in place of VMs of higher priority now",
                            top.saturating_add(1)
                        )
                    } else {
                        format!(
                            "with priority = {} it fits, in place of VMs of its priority or \
                             lower ({})",
                            top.saturating_add(1),
                            some_names(&lower, 3)
                        )
                    });
                }
            }
        }

        let after: Vec<String> = {
            let mut parts = vec![format!("{} free", plural(total_free, "core"))];
            if reserved_cores > 0 {
                parts.push(format!(
                    "after the host's {}",
                    plural(u32::try_from(reserved_cores).unwrap_or(0), "reserved core")
                ));
            }
            if fixed_cores > 0 {
                parts.push(format!(
                    "and {} of fixed tenants",
                    plural(u32::try_from(fixed_cores).unwrap_or(0), "core")
                ));
            }
            parts
        };
        let usable_note = if left_allowed < total_free && !placed_names.is_empty() {
            format!(", {left_allowed} usable by it left after {placed_list}")
        } else {
            String::new()
        };
        let why = match binding.as_str() {
            "threads" => {
                " — threads=require needs cores with two usable threads and this host has none"
                    .to_owned()
            }
            "nic" => format!(
                " — its NIC's {} has only {} for it",
                node_name(vm.nic_node),
                plural(u32::try_from(allowed.len()).unwrap_or(0), "free core")
            ),
            "numa" => format!(" — no single node has {need} (the most on one node is {best_node})"),
            _ => String::new(),
        };
        let message = format!(
            "{} needs {needs}; {}{usable_note}{why}{}",
            vm.name,
            after.join(" "),
            fix.as_ref()
                .map(|f| format!(" — {f}"))
                .unwrap_or_else(|| " — no single change found that makes it fit".to_owned())
        );
        out.push(Explanation {
            vm: vm.name.clone(),
            needs,
            free: free_lines,
            binding,
            fix,
            message,
        });
    }
    out
}

/// One line for the host when VMs were left out: "91 VMs ask for 375 cores,
/// 190 are free: 65 fit; left out: vm3, vm9, vm12 and 23 more".
pub fn summary(request: &PlanRequest, placement: &Placement) -> String {
    let free = classes::free_cores(request);
    let threads = free.iter().map(FreeCore::threads).max().unwrap_or(1);
    let asked: u32 = request.vms.iter().map(|vm| cores_needed(vm, threads)).sum();
    let left_out: Vec<&str> = request
        .vms
        .iter()
        .enumerate()
        .filter(|(i, _)| !placement.cores.contains_key(i))
        .map(|(_, vm)| vm.name.as_str())
        .collect();
    format!(
        "{} ask for {}, {} free: {} fit; left out: {}",
        plural(u32::try_from(request.vms.len()).unwrap_or(0), "VM"),
        plural(asked, "core"),
        if free.len() == 1 {
            "1 is".to_owned()
        } else {
            format!("{} are", free.len())
        },
        placement.cores.len(),
        some_names(&left_out, 5)
    )
}
