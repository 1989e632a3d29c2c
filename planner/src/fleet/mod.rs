//! Planning a fleet: each VM's host and its pinning. Three steps:
//!
//! 1. **Per host** (hosts alike — same spec keys, topology, running VMs and
//!    facts — once): each VM's solver input on that host, or why it cannot
//!    go there (its `hosts`, a NIC whose VFIO group is not viable, a kernel
//!    that cannot run real-time vCPUs, a required NIC it lacks, a target
//!    that host's tables cannot reach…).
//! 2. **The assignment** ([`assign`]): VMs of one kind counted per host and
//!    node, objectives most VMs per priority, vCPUs, fewest cores, fewest
//!    moves of running VMs, fewest hosts touched — proven or stopped.
//! 3. **Each host's exact plan** (the single-host solver) for the VMs the
//!    assignment gave it; hosts alike with VMs alike are solved once. A VM a
//!    host's plan cannot place (L3 or SMT, which the assignment does not
//!    see) is tried on its other hosts with room before it is left out.
//!
//! The fleet plan is proven optimal when the assignment is, every host's
//! plan is and places every VM the assignment gave it (docs/plan.md, fleets).

pub mod apply;
pub mod assign;
pub mod inventory;
pub mod pool;
pub mod read;
pub mod survey;

use crate::doctor::HostFacts;
use crate::plan::Plan;
use crate::solve::{self, PlanRequest, SolveOptions, VmRequest};
use crate::spec::{FleetSpec, SpecError};
use crate::topology::HostTopology;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// What was read of one host.
#[derive(Debug, Clone)]
pub struct HostInput {
    /// Its topology.
    pub topology: HostTopology,
    /// Domains running on it (through `connect`), with their pins.
    pub running: Vec<crate::tenant::Tenant>,
    /// `doctor`'s facts from its `doctor_root`, or from its node devices
    /// through its URI; `Err` says why they could not be read.
    pub facts: Option<Result<HostFacts, String>>,
}

/// Why a VM is not on a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The host.
    pub host: String,
    /// Why.
    pub reason: String,
}

/// One VM's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetVmOutcome {
    /// The VM.
    pub name: String,
    /// The host it is planned on; `null` when none could take it.
    pub host: Option<String>,
    /// The host it runs on now, when running.
    pub was_on: Option<String>,
    /// Hosts it cannot go to and why (its own `hosts` list left out).
    pub refused: Vec<Refusal>,
}

/// One host's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct FleetHostOutcome {
    /// The host.
    pub name: String,
    /// Where its topology was read from.
    pub source: String,
    /// Its libvirt URI, when it has one (its running domains were read
    /// through it).
    pub connect: Option<String>,
    /// The tree `doctor` reads for it (`doctor_root`), when it has one.
    pub doctor_root: Option<String>,
    /// Its plan (`null` when it could not be read or planned).
    #[serde(skip)]
    pub plan: Option<Plan>,
    /// VMs planned on it.
    pub vms: Vec<String>,
    /// Cores its VMs use, of its free cores.
    pub cores_used: u32,
    /// Its free cores before the plan.
    pub cores_free: u32,
    /// Why it has no plan, when it has none.
    pub error: Option<String>,
}

/// The fleet's objective values.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FleetObjective {
    /// VMs placed.
    pub placed: u32,
    /// Per priority level, highest first: `[priority, placed]`.
    pub placed_by_priority: Vec<(i64, u32)>,
    /// vCPUs placed.
    pub vcpus_placed: u32,
    /// Cores used.
    pub cores_used: u32,
    /// Running VMs planned on another host.
    pub moves: u32,
    /// Running VMs kept on their host whose pins the host's plan changes
    /// (a vCPU on another CPU, or floating now; the emulator elsewhere):
    /// moved too, within the host (issue 27). Not an objective of the
    /// assignment, which sees no CPUs.
    pub repinned: u32,
    /// Hosts with a VM of the spec.
    pub hosts_touched: u32,
}

impl FleetObjective {
    /// The running VMs moved, to another host or on theirs:
    /// `3 moved: 1 to another host, 2 re-pinned on their host`, or `0 moved`.
    fn moved_text(&self) -> String {
        let (away, here) = (self.moves, self.repinned);
        let on = if here == 1 { "its" } else { "their" };
        match (away, here) {
            (_, 0) => format!("{away} moved"),
            (0, _) => format!("{here} moved: re-pinned on {on} host"),
            _ => format!(
                "{} moved: {away} to another host, {here} re-pinned on {on} host",
                away + here
            ),
        }
    }
}

/// A fleet plan.
#[derive(Debug, Clone, Serialize)]
pub struct FleetPlan {
    /// Proven optimal (see the module doc).
    pub proven: bool,
    /// Each host, in spec order.
    pub hosts: Vec<FleetHostOutcome>,
    /// Each VM, in spec order.
    pub vms: Vec<FleetVmOutcome>,
    /// The values reached.
    pub objective: FleetObjective,
    /// The assignment's objectives as solved, each with its value as users
    /// count it (bounds on what any fleet plan reaches).
    pub assignment: Vec<(assign::Tier, u64)>,
    /// The first objective the plan did not bring to its bound, when one.
    pub gap: Option<Gap>,
    /// Seconds spent planning.
    pub solve_seconds: f64,
    /// Warnings (per host, prefixed with its name).
    pub warnings: Vec<String>,
}

/// Kind-host pairs above which hosts alike are grouped into one bin of the
/// assignment (each host its own bin below: exact per host).
const GROUP_ABOVE: usize = 2_000;

/// An objective the fleet plan did not prove: what it reached, and the
/// bound (the assignment's optimum, or its best bound when stopped).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gap {
    /// The objective (`hosts touched`, `VMs placed at priority 0`, …).
    pub objective: assign::Tier,
    /// Its value in the plan (VMs, vCPUs, cores, moves or hosts).
    pub reached: u64,
    /// The value no plan can beat.
    pub bound: u64,
}

/// How to plan.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Wall-clock limit for planning (the assignment and every host's plan).
    pub time_limit: Duration,
}

/// One host's per-VM inputs, shared by hosts alike.
struct HostClass {
    /// The request with every VM that may go to such a host.
    request: PlanRequest,
    /// VM name → index in `request.vms`.
    index: BTreeMap<String, usize>,
    /// VM name → why not.
    refused: BTreeMap<String, String>,
    warnings: Vec<String>,
}

/// Plans `spec` on the hosts as read (`inputs`, in spec order).
pub fn plan_fleet(
    spec: &FleetSpec,
    inputs: Vec<Result<HostInput, String>>,
    options: &FleetOptions,
) -> Result<FleetPlan, SpecError> {
    let started = Instant::now();
    let deadline = started + options.time_limit;
    let mut warnings = Vec::new();
    let vm_index: BTreeMap<&str, usize> = spec
        .vms
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.as_str(), i))
        .collect();
    // Where each spec VM runs now.
    let mut running_on: BTreeMap<usize, usize> = BTreeMap::new();
    for (h, input) in inputs.iter().enumerate() {
        let Ok(input) = input else { continue };
        for name in input.running.iter().map(|t| &t.name) {
            if let Some(&v) = vm_index.get(name.as_str()) {
                if let Some(&other) = running_on.get(&v) {
                    warnings.push(format!(
                        "{name} runs on both {} and {}: planned as running on {}",
                        spec.hosts[other].name, spec.hosts[h].name, spec.hosts[other].name
                    ));
                } else {
                    running_on.insert(v, h);
                }
            }
        }
    }

    // 1. Per host class: each VM's input or refusal.
    let mut class_of: Vec<Option<usize>> = Vec::new();
    let mut classes: Vec<HostClass> = Vec::new();
    let mut keys: BTreeMap<String, usize> = BTreeMap::new();
    let mut host_errors: BTreeMap<usize, String> = BTreeMap::new();
    for (h, (_host, input)) in spec.hosts.iter().zip(&inputs).enumerate() {
        let input = match input {
            Ok(i) => i,
            Err(e) => {
                host_errors.insert(h, e.clone());
                class_of.push(None);
                continue;
            }
        };
        let key = class_key(h, spec, input);
        if let Some(&c) = keys.get(&key) {
            class_of.push(Some(c));
            continue;
        }
        // A spec key this host's topology refuses (a reservation it cannot
        // hold) is the spec's error, not the host's: refused whole.
        let class = host_class(spec, h, input).map_err(|mut e| {
            e.message = format!("host {}: {}", spec.hosts[h].name, e.message);
            e
        })?;
        keys.insert(key, classes.len());
        class_of.push(Some(classes.len()));
        classes.push(class);
    }

    trace(started, "host classes read");
    // Hosts by class; each VM's hosts: those of the classes that take it,
    // within its `hosts` and where it runs unless movable. Work is per
    // (VM, class) and per kind: never per (VM, host).
    let mut hosts_of_class: Vec<Vec<usize>> = vec![Vec::new(); classes.len()];
    for (h, c) in class_of.iter().enumerate() {
        if let Some(c) = c {
            hosts_of_class[*c].push(h);
        }
    }
    let host_index: BTreeMap<&str, usize> = spec
        .hosts
        .iter()
        .enumerate()
        .map(|(h, host)| (host.name.as_str(), h))
        .collect();
    let class_free: Vec<Vec<crate::solve::classes::FreeCore>> = classes
        .iter()
        .map(|c| solve::free_cores(&c.request))
        .collect();
    let class_threads: Vec<u32> = class_free.iter().map(|f| assign::threads(f)).collect();
    let mut refused: Vec<Vec<Refusal>> = vec![Vec::new(); spec.vms.len()];
    // Per (class, VM): cores needed, usable cores per node, kept to a node.
    let mut per_class: BTreeMap<(usize, usize), (u32, assign::Capacity, bool)> = BTreeMap::new();
    // 2. Kinds (VMs alike for the assignment) and bins (hosts alike for
    //    every kind), then the assignment.
    type KindKey = (
        Vec<(usize, u32)>,
        Option<Vec<usize>>,
        bool,
        i64,
        u32,
        Option<usize>,
        bool,
        Option<(u64, u64)>,
    );
    let mut kinds_by_key: BTreeMap<KindKey, usize> = BTreeMap::new();
    let mut kinds: Vec<assign::Kind> = Vec::new();
    let mut kind_of: Vec<usize> = vec![usize::MAX; spec.vms.len()];
    for (v, vm) in spec.vms.iter().enumerate() {
        // The hosts it may be given: its list, or where it runs.
        let filter: Option<Vec<usize>> = match (running_on.get(&v), vm.movable, &vm.hosts) {
            (Some(&r), false, _) => Some(vec![r]),
            (_, _, Some(list)) => Some(
                list.iter()
                    .filter_map(|n| host_index.get(n.as_str()).copied())
                    .collect(),
            ),
            _ => None,
        };
        let in_filter = |h: usize| filter.as_ref().is_none_or(|f| f.contains(&h));
        let mut by_class: Vec<(usize, u32)> = Vec::new();
        let (mut strict, mut vcpus, mut priority, mut memory) = (true, 0, 0, None);
        let mut reasons: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (c, class) in classes.iter().enumerate() {
            if !hosts_of_class[c].iter().any(|&h| in_filter(h)) {
                continue;
            }
            if let Some(why) = class.refused.get(&vm.name) {
                let hosts_here = hosts_of_class[c].iter().copied().filter(|&h| in_filter(h));
                reasons.entry(why.clone()).or_default().extend(hosts_here);
                continue;
            }
            let Some(&i) = class.index.get(&vm.name) else {
                continue;
            };
            let request_vm = &class.request.vms[i];
            let (need, _, is_strict) = per_class.entry((c, v)).or_insert_with(|| {
                (
                    assign::cores_needed(class_threads[c], request_vm),
                    assign::usable(&class_free[c], request_vm),
                    assign::strict(request_vm),
                )
            });
            strict = *is_strict;
            vcpus = request_vm.vcpus;
            priority = request_vm.priority;
            memory = solve::memory::need(request_vm)
                .map(|(page, mib)| (page, (mib * 1024.0).round() as u64));
            by_class.push((c, *need));
        }
        for (h, e) in &host_errors {
            if in_filter(*h) {
                reasons
                    .entry(format!("the host could not be read: {e}"))
                    .or_default()
                    .push(*h);
            }
        }
        for (reason, mut hosts) in reasons {
            hosts.sort_unstable();
            for h in hosts {
                refused[v].push(Refusal {
                    host: spec.hosts[h].name.clone(),
                    reason: reason.clone(),
                });
            }
        }
        let key: KindKey = (
            by_class.clone(),
            filter.clone(),
            strict,
            priority,
            vcpus,
            running_on.get(&v).copied(),
            vm.movable,
            memory,
        );
        let k = *kinds_by_key.entry(key).or_insert_with(|| {
            let mut hosts = Vec::new();
            for &(c, need) in &by_class {
                for &h in &hosts_of_class[c] {
                    if in_filter(h) {
                        hosts.push((h, need));
                    }
                }
            }
            hosts.sort_unstable();
            kinds.push(assign::Kind {
                members: Vec::new(),
                hosts,
                strict,
                priority,
                vcpus,
                running_on: running_on.get(&v).copied(),
                movable: vm.movable,
                memory,
            });
            kinds.len() - 1
        });
        kinds[k].members.push(v);
        kind_of[v] = k;
    }
    // The hosts each VM may use: its kind's.
    let allowed =
        |v: usize| -> Vec<usize> { kinds[kind_of[v]].hosts.iter().map(|&(h, _)| h).collect() };
    trace(started, "kinds formed");
    // Bins: hosts of one class that every kind may use alike, and no VM of
    // the spec runs on; on a small fleet every host is its own bin (the
    // assignment is then exact per host).
    let mut kinds_of_host: Vec<Vec<usize>> = vec![Vec::new(); spec.hosts.len()];
    for (k, kind) in kinds.iter().enumerate() {
        for &(h, _) in &kind.hosts {
            kinds_of_host[h].push(k);
        }
    }
    let pairs: usize = kinds.iter().map(|k| k.hosts.len()).sum();
    let group = pairs > GROUP_ABOVE;
    let mut bin_of: Vec<usize> = vec![usize::MAX; spec.hosts.len()];
    let mut bin_hosts: Vec<Vec<usize>> = Vec::new();
    let mut bin_keys: BTreeMap<(usize, Vec<usize>), usize> = BTreeMap::new();
    let running_hosts: BTreeSet<usize> = running_on.values().copied().collect();
    for h in 0..spec.hosts.len() {
        let Some(c) = class_of[h] else { continue };
        let alone = !group || running_hosts.contains(&h);
        let b = if alone {
            None
        } else {
            bin_keys.get(&(c, kinds_of_host[h].clone())).copied()
        };
        let b = b.unwrap_or_else(|| {
            bin_hosts.push(Vec::new());
            let b = bin_hosts.len() - 1;
            if !alone {
                bin_keys.insert((c, kinds_of_host[h].clone()), b);
            }
            b
        });
        bin_hosts[b].push(h);
        bin_of[h] = b;
    }
    let capacity: Vec<assign::Capacity> = bin_hosts
        .iter()
        .map(|hs| {
            class_of[hs[0]]
                .map(|c| assign::capacity(&classes[c].request))
                .unwrap_or_default()
        })
        .collect();
    // Memory a bin's host offers, where the source says and a VM asks.
    let any_memory = kinds.iter().any(|k| k.memory.is_some());
    let memory: Vec<assign::MemoryCaps> = bin_hosts
        .iter()
        .map(|hs| match class_of[hs[0]] {
            Some(c) if any_memory => solve::memory::caps(&classes[c].request)
                .into_iter()
                .filter(|(_, mib)| mib.is_finite())
                .collect(),
            _ => assign::MemoryCaps::new(),
        })
        .collect();
    let multiplicity: Vec<u32> = bin_hosts
        .iter()
        .map(|hs| u32::try_from(hs.len()).unwrap_or(u32::MAX))
        .collect();
    let mut bin_kinds: Vec<assign::Kind> = Vec::new();
    let mut kind_usable: BTreeMap<(usize, usize), assign::Capacity> = BTreeMap::new();
    for (k, kind) in kinds.iter().enumerate() {
        let mut hosts: Vec<(usize, u32)> = Vec::new();
        for &(h, need) in &kind.hosts {
            let b = bin_of[h];
            if b == usize::MAX || hosts.iter().any(|(x, _)| *x == b) {
                continue;
            }
            hosts.push((b, need));
            // A kind's usable cores on a host are its first member's there.
            let first = kind.members[0];
            if let Some((_, nodes, _)) = class_of[h].and_then(|c| per_class.get(&(c, first))) {
                kind_usable.insert((k, b), nodes.clone());
            }
        }
        bin_kinds.push(assign::Kind {
            hosts,
            running_on: kind.running_on.map(|h| bin_of[h]),
            ..kind.clone()
        });
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if std::env::var_os("PINPLAN_ILP_TRACE").is_some() {
        eprintln!(
            "fleet: {} kinds, {} host classes, {} bins, assignment starts after {:.1} ms",
            kinds.len(),
            classes.len(),
            bin_hosts.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    let assignment = assign::solve(
        &bin_kinds,
        &assign::Hosts {
            capacity: &capacity,
            hosts: &multiplicity,
            usable: &kind_usable,
            memory: &memory,
        },
        left.mul_f64(0.5),
    );
    if let Some(fault) = &assignment.fault {
        warnings.push(fault.to_string());
    }
    let mut notes = Vec::new();
    trace(started, "assignment solved");

    // Members to hosts: in a bin of one host, as counted; in a bin of
    // several, packed first fit decreasing onto its hosts (each VM whole on
    // a node when kept to one), largest first.
    let mut host_of: BTreeMap<usize, usize> = BTreeMap::new();
    let mut free: Vec<assign::Capacity> = (0..spec.hosts.len())
        .map(|h| {
            class_of[h]
                .map(|c| assign::capacity(&classes[c].request))
                .unwrap_or_default()
        })
        .collect();
    // And their memory, where the assignment counted it.
    let mut mem_free: Vec<assign::MemoryCaps> = (0..spec.hosts.len())
        .map(|h| {
            if bin_of[h] == usize::MAX {
                return assign::MemoryCaps::new();
            }
            memory.get(bin_of[h]).cloned().unwrap_or_default()
        })
        .collect();
    let mut per_bin: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (k, kind) in bin_kinds.iter().enumerate() {
        let mut members = kind.members.iter();
        for &(b, _) in &kind.hosts {
            let n = assignment.counts.get(&(k, b)).copied().unwrap_or(0);
            for _ in 0..n {
                if let Some(&v) = members.next() {
                    per_bin.entry(b).or_default().push(v);
                }
            }
        }
    }
    let need_on = |v: usize, h: usize| -> Option<&(u32, assign::Capacity, bool)> {
        class_of[h].and_then(|c| per_class.get(&(c, v)))
    };
    let mut packed_short = 0usize;
    for (b, mut vms) in per_bin {
        let hosts = &bin_hosts[b];
        if let [only] = hosts.as_slice() {
            // One host: its exact plan packs its nodes.
            for v in vms {
                host_of.insert(v, *only);
            }
            continue;
        }
        // Largest first, a kind's members together: hosts then fill alike,
        // and hosts alike given VMs alike share one exact plan below.
        vms.sort_by_key(|&v| {
            let need = need_on(v, hosts[0]).map_or(0, |x| x.0);
            (std::cmp::Reverse(need), kind_of[v], v)
        });
        // One VM onto host h, first fit (cores and memory), if it fits.
        let mut place = |v: usize, h: usize| -> bool {
            let Some((need, usable, strict)) = need_on(v, h) else {
                return false;
            };
            let member = assign::Member {
                usable,
                hosts: 1,
                need: *need,
                strict: *strict,
                memory: assign::mib(&kinds[kind_of[v]]),
            };
            let Some(split) = member.fit(&free[h], &mem_free[h], &|_| true) else {
                return false;
            };
            member.take(&mut free[h], &mut mem_free[h], &split);
            host_of.insert(v, h);
            true
        };
        for v in vms {
            if hosts.iter().any(|&h| place(v, h)) {
                continue;
            }
            packed_short += 1;
            // Any other host it may use with room, first fit.
            let _ = allowed(v).into_iter().any(|h| place(v, h));
        }
    }
    if packed_short > 0 {
        notes.push(format!(
            "{packed_short} VM(s) the assignment gave to a group of hosts alike did not fit the host first fit chose: placed on another host they may use, or left out"
        ));
    }

    trace(started, "VMs packed onto hosts");
    // 3. Each host's exact plan; hosts alike with VMs alike solved once.
    let mut plans: Vec<Option<Plan>> = vec![None; spec.hosts.len()];
    let mut memo: BTreeMap<(usize, Vec<usize>), Plan> = BTreeMap::new();
    // Host h's VMs (ascending), from `host_of`: grouped once here, and
    // again for a host only when the repair below changes it.
    let mut on_host: Vec<Vec<usize>> = vec![Vec::new(); spec.hosts.len()];
    for (&v, &h) in &host_of {
        on_host[h].push(v);
    }
    let count = on_host.iter().filter(|vms| !vms.is_empty()).count().max(1);
    let solve_on = |h: usize, mine: &[usize], memo: &mut BTreeMap<(usize, Vec<usize>), Plan>| {
        class_of[h].map(|c| {
            let limit = host_time(deadline, count, !mine.is_empty());
            let running = inputs
                .get(h)
                .and_then(|i| i.as_ref().ok())
                .map_or(&[][..], |i| i.running.as_slice());
            let host = Host {
                class: &classes[c],
                c,
                h,
                running,
            };
            plan_host(&host, spec, mine, &kind_of, memo, limit)
        })
    };
    for h in 0..spec.hosts.len() {
        plans[h] = solve_on(h, &on_host[h], &mut memo);
    }
    trace(started, "hosts planned");
    // Repair: VMs a host's plan left out, tried on their other hosts.
    for h in 0..spec.hosts.len() {
        let left_out: Vec<usize> = plans[h]
            .as_ref()
            .map(|p| {
                p.unplaced
                    .iter()
                    .filter_map(|n| vm_index.get(n.as_str()).copied())
                    .collect()
            })
            .unwrap_or_default();
        if left_out.is_empty() {
            continue;
        }
        for &v in &left_out {
            host_of.remove(&v);
        }
        on_host[h].retain(|v| !left_out.contains(v));
        for v in left_out {
            for other in allowed(v) {
                if other == h || Instant::now() >= deadline {
                    continue;
                }
                let mut mine = on_host[other].clone();
                mine.push(v);
                mine.sort_unstable();
                let Some(plan) = solve_on(other, &mine, &mut memo) else {
                    continue;
                };
                if plan.unplaced.is_empty() {
                    host_of.insert(v, other);
                    on_host[other] = mine;
                    plans[other] = Some(plan);
                    break;
                }
            }
        }
        // The host's own plan without the VMs it could not place.
        plans[h] = solve_on(h, &on_host[h], &mut memo);
    }
    warnings.extend(notes);
    trace(started, "repaired");

    // Outcomes.
    let mut objective = FleetObjective::default();
    let mut by_priority: BTreeMap<std::cmp::Reverse<i64>, u32> = BTreeMap::new();
    let mut hosts_out = Vec::new();
    for (h, host) in spec.hosts.iter().enumerate() {
        let plan = plans[h].take();
        let class = class_of[h].map(|c| &classes[c]);
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
        let vms: Vec<String> = plan
            .as_ref()
            .map(|p| p.vms.iter().map(|v| v.name.clone()).collect())
            .unwrap_or_default();
        hosts_out.push(FleetHostOutcome {
            name: host.name.clone(),
            source: host.source.describe(),
            connect: host.connect.clone(),
            doctor_root: host.doctor_root.as_ref().map(|p| p.display().to_string()),
            cores_used: plan.as_ref().map_or(0, |p| p.objective.cores_used),
            cores_free: class.map_or(0, |c| {
                u32::try_from(solve::free_cores(&c.request).len()).unwrap_or(0)
            }),
            vms,
            error: host_errors.get(&h).cloned(),
            plan,
        });
    }
    let mut vms_out = Vec::new();
    for (v, vm) in spec.vms.iter().enumerate() {
        let host = host_of.get(&v).copied();
        if let Some(h) = host {
            objective.placed += 1;
            let class = &classes[class_of[h].unwrap_or(0)];
            if let Some(&i) = class.index.get(&vm.name) {
                let r = &class.request.vms[i];
                objective.vcpus_placed += r.vcpus;
                *by_priority
                    .entry(std::cmp::Reverse(r.priority))
                    .or_default() += 1;
            }
            match running_on.get(&v) {
                Some(&r) if r != h => objective.moves += 1,
                Some(_) if repinned(&inputs[h], &hosts_out[h], &vm.name) => {
                    objective.repinned += 1;
                }
                _ => {}
            }
        }
        vms_out.push(FleetVmOutcome {
            name: vm.name.clone(),
            host: host.map(|h| spec.hosts[h].name.clone()),
            was_on: running_on.get(&v).map(|&h| spec.hosts[h].name.clone()),
            refused: std::mem::take(&mut refused[v]),
        });
    }
    objective.placed_by_priority = by_priority.into_iter().map(|(p, n)| (p.0, n)).collect();
    let kept = u32::try_from(
        spec.vms
            .iter()
            .enumerate()
            .filter(|(v, vm)| {
                !vm.movable && running_on.get(v).is_some_and(|r| host_of.get(v) == Some(r))
            })
            .count(),
    )
    .unwrap_or(0);
    for (v, vm) in spec.vms.iter().enumerate() {
        if let (Some(&r), false, None) = (running_on.get(&v), vm.movable, host_of.get(&v)) {
            warnings.push(format!(
                "{} runs on {} and could not be kept in its plan: it goes on running on its current pins, which this plan does not plan around",
                vm.name, spec.hosts[r].name
            ));
        }
    }
    // The assignment is a relaxation of the hosts' plans (it sees no L3
    // domains, and counts hosts alike together): its optima bound what
    // any fleet plan reaches. Where the plan reaches them tier by tier, it
    // is optimal; the first tier it misses is the stated gap.
    let reached = |tier: assign::Tier| -> u32 {
        match tier {
            assign::Tier::RunningKept => kept,
            assign::Tier::Placed(p) => objective
                .placed_by_priority
                .iter()
                .find(|(q, _)| *q == p)
                .map_or(0, |x| x.1),
            assign::Tier::Vcpus => objective.vcpus_placed,
            assign::Tier::Cores => objective.cores_used,
            assign::Tier::Moves => objective.moves,
            assign::Tier::HostsTouched => objective.hosts_touched,
        }
    };
    let gap = assignment
        .tiers
        .iter()
        .map(|&(tier, bound)| (tier, u64::from(reached(tier)), bound))
        .find(|(_, value, bound)| value != bound)
        .map(|(objective, reached, bound)| Gap {
            objective,
            reached,
            bound,
        });
    let all_met = assignment.proven && gap.is_none();
    // Every host's own plan must be proven too (its L3 and SMT objectives).
    let hosts_proven = hosts_out
        .iter()
        .all(|h| h.plan.as_ref().is_none_or(|p| p.proven));
    // (A VM packed elsewhere or left out by a host's plan shows as a tier
    // below its bound: no flag of its own is needed.)
    let proven = all_met && hosts_proven;
    Ok(FleetPlan {
        proven,
        gap,
        hosts: hosts_out,
        vms: vms_out,
        objective,
        assignment: assignment.tiers,
        solve_seconds: started.elapsed().as_secs_f64(),
        warnings,
    })
}

/// Whether `host`'s plan gives the VM `name`, running there, other CPUs
/// than it runs on now: a vCPU on another CPU (or one that floats now), or
/// the emulator elsewhere. (The host's plan is made for the VMs the
/// assignment gave it, from scratch: nothing keeps a VM that stays on its
/// host on its CPUs.)
fn repinned(input: &Result<HostInput, String>, host: &FleetHostOutcome, name: &str) -> bool {
    let now = input
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

/// With PINPLAN_ILP_TRACE, how long planning has taken at `step`.
fn trace(started: Instant, step: &str) {
    if std::env::var_os("PINPLAN_ILP_TRACE").is_some() {
        eprintln!(
            "fleet: {step} after {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}

/// The time one host's plan may take: an even share of what is left.
fn host_time(deadline: Instant, hosts: usize, has_vms: bool) -> Duration {
    let left = deadline.saturating_duration_since(Instant::now());
    if !has_vms {
        return Duration::from_millis(50);
    }
    let share = left.div_f64(hosts.max(1) as f64);
    share
        .max(Duration::from_millis(200))
        .min(left.max(Duration::from_millis(50)))
}

/// One host as its plan is made: its class (index `c`), its index `h`, and
/// the domains running there.
struct Host<'a> {
    class: &'a HostClass,
    c: usize,
    h: usize,
    running: &'a [crate::tenant::Tenant],
}

/// A host's plan for the VMs `mine` (indexes into the fleet's VMs), from its
/// class's request. Hosts of one class given VMs of the same kinds share
/// one solve: the plan is the same with the VMs' names (and the host's
/// source) put in. VMs that run there already stay where they run unless
/// `movable`, as on one host ([`crate::spec::Residents`]): such a host is a
/// class of its own, solved on its own.
fn plan_host(
    host: &Host<'_>,
    spec: &FleetSpec,
    mine: &[usize],
    kind_of: &[usize],
    memo: &mut BTreeMap<(usize, Vec<usize>), Plan>,
    limit: Duration,
) -> Plan {
    let (class, c, h) = (host.class, host.c, host.h);
    // The VMs by kind, then spec order: position i of a kind is the same
    // request (but its name) on every host of the class.
    let mut ordered: Vec<usize> = mine.to_vec();
    ordered.sort_by_key(|&v| (kind_of[v], v));
    let key = (c, ordered.iter().map(|&v| kind_of[v]).collect::<Vec<_>>());
    let names: Vec<&str> = ordered.iter().map(|&v| spec.vms[v].name.as_str()).collect();
    let requests = || -> Vec<VmRequest> {
        ordered
            .iter()
            .filter_map(|&v| class.index.get(&spec.vms[v].name))
            .map(|&i| class.request.vms[i].clone())
            .collect()
    };
    if host
        .running
        .iter()
        .any(|t| names.contains(&t.name.as_str()))
    {
        let mut request = PlanRequest {
            vms: requests(),
            ..class.request.clone()
        };
        let mut warnings = Vec::new();
        let movable = |n: &str| spec.vms.iter().any(|v| v.name == n && v.movable);
        let residents = crate::spec::Residents::on_host(
            &mut request,
            host.running,
            &movable,
            names.iter().map(|n| (*n).to_owned()).collect(),
            &mut warnings,
        );
        let options = SolveOptions {
            time_limit: limit,
            ..SolveOptions::default()
        };
        let mut plan = residents.solve(&request, &options);
        plan.warnings.splice(0..0, warnings);
        plan.host.source = spec.hosts[h].source.describe();
        return plan;
    }
    let mut plan = match memo.get(&key) {
        Some(plan) => plan.clone(),
        None => {
            let request = PlanRequest {
                vms: requests(),
                ..class.request.clone()
            };
            let options = SolveOptions {
                time_limit: limit,
                ..SolveOptions::default()
            };
            let plan = solve::solve(&request, &options);
            let solved: Vec<String> = request.vms.iter().map(|v| v.name.clone()).collect();
            // Kept with placeholder names, as every host of the key uses it.
            let kept = rename(&plan, &solved, &names_of(&solved));
            memo.insert(key, kept.clone());
            kept
        }
    };
    plan = rename_back(&plan, &names);
    plan.host.source = spec.hosts[h].source.describe();
    plan
}

/// Placeholder names `#0`, `#1`, … for the memo.
fn names_of(names: &[String]) -> Vec<String> {
    (0..names.len()).map(|i| format!("#{i}")).collect()
}

/// `plan` with each VM named `from[i]` named `to[i]` (plans, unplaced,
/// explanations, the summary's VMs left out, and warnings that start with
/// the name).
fn rename(plan: &Plan, from: &[String], to: &[String]) -> Plan {
    let map: BTreeMap<&str, &str> = from
        .iter()
        .map(String::as_str)
        .zip(to.iter().map(String::as_str))
        .collect();
    let new = |name: &str| {
        map.get(name)
            .map_or_else(|| name.to_owned(), |n| (*n).to_owned())
    };
    let mut out = plan.clone();
    for vm in &mut out.vms {
        vm.name = new(&vm.name);
    }
    for n in &mut out.unplaced {
        *n = new(n);
    }
    // "… fit; left out: a, b and 3 more": the names are the unplaced VMs,
    // in order; what comes before them names none.
    if let Some(summary) = &mut out.summary {
        if let Some((head, _)) = summary.split_once("; left out: ") {
            let names: Vec<&str> = out.unplaced.iter().map(String::as_str).collect();
            *summary = format!(
                "{head}; left out: {}",
                crate::solve::explain::some_names(&names, 5)
            );
        }
    }
    for e in &mut out.explanations {
        let old = e.vm.clone();
        e.vm = new(&old);
        if let Some(rest) = e.message.strip_prefix(old.as_str()) {
            e.message = format!("{}{rest}", e.vm);
        }
    }
    for w in &mut out.warnings {
        if let Some((name, rest)) = w.split_once(": ") {
            if let Some(n) = map.get(name) {
                *w = format!("{n}: {rest}");
            }
        }
    }
    out
}

/// A memoized plan (VMs named `#i`) with the host's VM names.
fn rename_back(plan: &Plan, names: &[&str]) -> Plan {
    let to: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    rename(plan, &names_of(&to), &to)
}

/// What makes two hosts alike: their spec keys, topology, running
/// domains, facts and NIC names (never for a host whose running VMs are in
/// the spec).
fn class_key(h: usize, spec: &FleetSpec, input: &HostInput) -> String {
    let host = &spec.hosts[h];
    if input
        .running
        .iter()
        .any(|t| spec.vms.iter().any(|v| v.name == t.name))
    {
        return format!("host {h}");
    }
    // A file or synthetic description read twice is the same topology; a
    // connection's is compared whole.
    let topology = match &host.source {
        crate::topology::Source::File(_) | crate::topology::Source::Synthetic(_) => {
            host.source.describe()
        }
        _ => {
            let mut t = input.topology.clone();
            t.source = String::new();
            serde_json::to_string(&t).unwrap_or_default()
        }
    };
    format!(
        "{}|{topology}|{:?}|{:?}|{:?}|{:?}",
        host.spec.host_key(),
        input.running,
        input.facts,
        host.doctor_root.is_some(),
        host.nic_names
    )
}

/// One host's VM inputs and refusals.
fn host_class(spec: &FleetSpec, h: usize, input: &HostInput) -> Result<HostClass, SpecError> {
    let host = &spec.hosts[h];
    let (mut request, warnings, refused_each) = host
        .spec
        .request_each(input.topology.clone(), &BTreeMap::new())?;
    let spec_names: BTreeSet<&str> = spec.vms.iter().map(|v| v.name.as_str()).collect();
    // Domains running there that the spec does not name are planned around.
    let mut warnings = warnings;
    let usable = input.topology.usable_cpus();
    let uri = host.connect.as_deref().unwrap_or("its URI");
    for t in &input.running {
        if !spec_names.contains(t.name.as_str()) && host.spec.plans_around(&t.name) {
            request.fixed.extend(crate::spec::plan_around(
                t,
                uri,
                &usable,
                &request.reserved,
                &mut warnings,
            ));
        }
    }
    let mut refused: BTreeMap<String, String> = refused_each
        .into_iter()
        .map(|(name, e)| (name, e.message))
        .collect();
    // The host's facts: passed-through NICs and real-time vCPUs.
    for vm in &spec.vms {
        let nics = match spec.nics_on(vm, host) {
            Ok(nics) => nics,
            Err(why) => {
                refused.entry(vm.name.clone()).or_insert(why);
                continue;
            }
        };
        let why = match &input.facts {
            Some(Err(e)) if !nics.is_empty() || vm.realtime => Some(e.clone()),
            Some(Ok(facts)) => nics
                .iter()
                .find_map(|nic| facts.nics.get(nic).and_then(|r| r.clone().err()))
                .or_else(|| {
                    vm.realtime
                        .then(|| facts.realtime.clone().and_then(Result::err))
                        .flatten()
                }),
            _ => None,
        };
        let unknown_rt = matches!(&input.facts, Some(Ok(f)) if f.realtime.is_none());
        if why.is_none() && vm.realtime && unknown_rt {
            warnings.push(format!(
                "{}: whether real-time vCPUs can start here is not known (read through libvirt, which does not show kernel.sched_rt_runtime_us): give the host a doctor_root to check",
                vm.name
            ));
        }
        if let Some(why) = why {
            refused.entry(vm.name.clone()).or_insert(why);
        }
    }
    request.vms.retain(|vm| !refused.contains_key(&vm.name));
    // Warnings about VMs that cannot go there are no concern of this host.
    let warnings = warnings
        .into_iter()
        .filter(|w| {
            !refused.keys().any(|name| {
                w.strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with(": "))
            })
        })
        .collect();
    let index = request
        .vms
        .iter()
        .enumerate()
        .map(|(i, vm)| (vm.name.clone(), i))
        .collect();
    Ok(HostClass {
        request,
        index,
        refused,
        warnings,
    })
}

impl FleetPlan {
    /// `fleet.json`: which VM is on which host and why others were refused.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// A summary per host, then the VMs left out with why.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let placed = self.objective.placed;
        let total = self.vms.len();
        let unread = self.hosts.iter().filter(|h| h.error.is_some()).count();
        let unread = if unread > 0 {
            format!(" ({unread} not read: planned without them)")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "fleet plan: {}, {placed} of {total} VMs placed on {} of {} hosts{unread} ({}), {:.2} s",
            match (&self.gap, self.proven) {
                (_, true) => "proven optimal".to_owned(),
                (Some(g), false) => format!(
                    "not proven optimal ({}: {} reached, bound {})",
                    g.objective, g.reached, g.bound
                ),
                (None, false) => "not proven optimal".to_owned(),
            },
            self.objective.hosts_touched,
            self.hosts.len(),
            self.objective.moved_text(),
            self.solve_seconds
        );
        let _ = writeln!(out);
        let width = self
            .hosts
            .iter()
            .map(|h| h.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(
            out,
            "{:<width$}  {:>5}  {:>11}  vms",
            "host", "vms", "cores"
        );
        for h in &self.hosts {
            if let Some(e) = &h.error {
                let _ = writeln!(
                    out,
                    "{:<width$}  {:>5}  {:>11}  not read: {e}",
                    h.name, "-", "-"
                );
                continue;
            }
            let listed = if h.vms.len() > 8 {
                format!("{} … ({} more)", h.vms[..8].join(", "), h.vms.len() - 8)
            } else {
                h.vms.join(", ")
            };
            let _ = writeln!(
                out,
                "{:<width$}  {:>5}  {:>11}  {listed}",
                h.name,
                h.vms.len(),
                format!("{}/{}", h.cores_used, h.cores_free)
            );
        }
        let unplaced: Vec<&FleetVmOutcome> = self.vms.iter().filter(|v| v.host.is_none()).collect();
        if !unplaced.is_empty() {
            let _ = writeln!(out, "\nunplaced:");
            for v in unplaced.iter().take(20) {
                let why: Vec<String> = v
                    .refused
                    .iter()
                    .take(3)
                    .map(|r| format!("{}: {}", r.host, r.reason))
                    .collect();
                let why = if why.is_empty() {
                    "no room on the hosts it may use".to_owned()
                } else {
                    why.join("; ")
                };
                let _ = writeln!(out, "  {}: {why}", v.name);
            }
            if unplaced.len() > 20 {
                let _ = writeln!(
                    out,
                    "  … and {} more (fleet.json lists them)",
                    unplaced.len() - 20
                );
            }
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{AnySpec, Spec};

    /// The fleet spec `text` (a test's own, so it must be one).
    fn fleet_spec(text: &str) -> FleetSpec {
        match Spec::parse_any(std::path::Path::new("f.toml"), text) {
            Ok(AnySpec::Fleet(spec)) => spec,
            Ok(_) => panic!("not a fleet spec"),
            Err(e) => panic!("{e}"),
        }
    }

    /// [`plan_fleet`] within `seconds`, which must succeed.
    fn solved(spec: &FleetSpec, inputs: Vec<Result<HostInput, String>>, seconds: u64) -> FleetPlan {
        plan_fleet(
            spec,
            inputs,
            &FleetOptions {
                time_limit: Duration::from_secs(seconds),
            },
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A real-time VM on a host whose facts came through libvirt (which
    /// does not show the kernel's RT settings) is planned, with a warning
    /// in one line that says what to give.
    #[test]
    fn realtime_unknown_through_libvirt_is_a_warning() {
        let text = "[[host]]\nname = \"h0\"\nsource = \"synthetic:package:1 core:4 pu:1\"\n\
                    reserved_cores = 1\n\
                    [[vm]]\nname = \"rt\"\nvcpus = 2\nrealtime = true\nthreads = \"isolate\"\n\
                    emulator = \"host\"\n";
        let spec = fleet_spec(text);
        let topology =
            crate::topology::load(&spec.hosts[0].source).unwrap_or_else(|e| panic!("{e}"));
        let facts = crate::doctor::HostFacts {
            nics: BTreeMap::new(),
            realtime: None,
        };
        let inputs = vec![Ok(HostInput {
            topology,
            running: Vec::new(),
            facts: Some(Ok(facts)),
        })];
        let plan = solved(&spec, inputs, 10);
        assert_eq!(plan.vms[0].host.as_deref(), Some("h0"), "{:?}", plan.vms[0]);
        assert!(
            plan.warnings.contains(
                &"h0: rt: whether real-time vCPUs can start here is not known (read through \
                  libvirt, which does not show kernel.sched_rt_runtime_us): give the host a \
                  doctor_root to check"
                    .to_owned()
            ),
            "{:?}",
            plan.warnings
        );
    }

    /// A plan shared by hosts alike says the host's own VM names, the
    /// summary's "left out" too: 3 VMs of 2 cores on 4 free cores, one left
    /// out, solved as a, b, c and handed to a host whose VMs are x, y, z.
    #[test]
    fn a_shared_plan_names_the_hosts_own_vms_everywhere() {
        let text = "[host]\nsource = \"synthetic:package:1 core:5 pu:1\"\nreserved_cores = 1\n\
                    [[vm]]\nname = \"a\"\nvcpus = 2\n[[vm]]\nname = \"b\"\nvcpus = 2\n\
                    [[vm]]\nname = \"c\"\nvcpus = 2\n";
        let spec =
            Spec::parse(std::path::Path::new("s.toml"), text).unwrap_or_else(|e| panic!("{e}"));
        let host = crate::topology::load(
            spec.source
                .as_ref()
                .unwrap_or(&crate::topology::Source::LiveHost),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (request, _) = spec.request(host).unwrap_or_else(|e| panic!("{e}"));
        let plan = solve::solve(&request, &SolveOptions::default());
        let solved: Vec<String> = ["a", "b", "c"].map(str::to_owned).to_vec();
        let left = plan.unplaced.clone();
        assert_eq!(left.len(), 1, "{:?}", plan.summary);
        let summary = plan.summary.clone().unwrap_or_default();
        assert!(
            summary.ends_with(&format!("left out: {}", left[0])),
            "{summary}"
        );
        let kept = rename(&plan, &solved, &names_of(&solved));
        let theirs = rename_back(&kept, &["x", "y", "z"]);
        let theirs_left = match left[0].as_str() {
            "a" => "x",
            "b" => "y",
            _ => "z",
        };
        assert_eq!(theirs.unplaced, [theirs_left]);
        let summary = theirs.summary.unwrap_or_default();
        assert!(
            summary.starts_with("3 VMs ask for 6 cores, 4 are free: 2 fit; left out: ")
                && summary.ends_with(&format!("left out: {theirs_left}")),
            "{summary}"
        );
        let mut names: Vec<&str> = theirs.vms.iter().map(|v| v.name.as_str()).collect();
        names.push(theirs_left);
        names.sort_unstable();
        assert_eq!(names, ["x", "y", "z"]);
    }

    /// A fleet of one-node hosts of `cores` cores (one thread each, core 0
    /// reserved) and VMs of (vCPUs, priority), each vCPU a core.
    fn fleet(cores: &[u32], vms: &[(u32, i64)]) -> (FleetSpec, Vec<Result<HostInput, String>>) {
        let mut text = String::new();
        for (h, c) in cores.iter().enumerate() {
            text.push_str(&format!(
                "[[host]]\nname = \"h{h}\"\nsource = \"synthetic:package:1 core:{c} pu:1\"\nreserved_cores = 1\n"
            ));
        }
        for (v, (vcpus, priority)) in vms.iter().enumerate() {
            text.push_str(&format!(
                "[[vm]]\nname = \"v{v}\"\nvcpus = {vcpus}\npriority = {priority}\n"
            ));
        }
        let spec = fleet_spec(&text);
        let inputs = spec
            .hosts
            .iter()
            .map(|h| {
                crate::topology::load(&h.source)
                    .map(|topology| HostInput {
                        topology,
                        running: Vec::new(),
                        facts: None,
                    })
                    .map_err(|e| e.to_string())
            })
            .collect();
        (spec, inputs)
    }

    /// The lexicographic optimum by trying every assignment: per priority
    /// (highest first) VMs placed, then vCPUs, then fewest hosts touched
    /// (cores used are the vCPUs placed here).
    fn brute_force(free: &[u32], vms: &[(u32, i64)]) -> (Vec<u32>, u32, u32) {
        let mut levels: Vec<i64> = vms.iter().map(|v| v.1).collect();
        levels.sort_unstable_by(|a, b| b.cmp(a));
        levels.dedup();
        let choices = free.len() + 1;
        let total = choices.pow(u32::try_from(vms.len()).unwrap_or(0));
        let mut best: Option<(Vec<u32>, u32, std::cmp::Reverse<u32>)> = None;
        for mut code in 0..total {
            let mut used = vec![0u32; free.len()];
            let mut placed = vec![0u32; levels.len()];
            let mut vcpus = 0;
            for &(v, p) in vms {
                let h = code % choices;
                code /= choices;
                if h == free.len() {
                    continue;
                }
                used[h] += v;
                vcpus += v;
                placed[levels.iter().position(|&l| l == p).unwrap_or(0)] += 1;
            }
            if used.iter().zip(free).any(|(u, f)| u > f) {
                continue;
            }
            let touched = u32::try_from(used.iter().filter(|&&u| u > 0).count()).unwrap_or(0);
            let key = (placed, vcpus, std::cmp::Reverse(touched));
            if best.as_ref().is_none_or(|b| key > *b) {
                best = Some(key);
            }
        }
        let (placed, vcpus, touched) = best.unwrap_or_default();
        (placed, vcpus, touched.0)
    }

    /// Small fleets against the brute force: the fleet plan reaches the
    /// optimum of every objective and says it is proven.
    #[test]
    fn small_fleets_match_the_brute_force() {
        let mut seed: u64 = 0x00f1_ee70;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % n
        };
        for case in 0..12 {
            let hosts = 1 + usize::try_from(next(3)).unwrap_or(0);
            let cores: Vec<u32> = (0..hosts)
                .map(|_| 3 + u32::try_from(next(5)).unwrap_or(0))
                .collect();
            let n = 2 + usize::try_from(next(4)).unwrap_or(0);
            let vms: Vec<(u32, i64)> = (0..n)
                .map(|_| {
                    (
                        1 + u32::try_from(next(4)).unwrap_or(0),
                        i64::from(next(3) == 0),
                    )
                })
                .collect();
            let free: Vec<u32> = cores.iter().map(|c| c - 1).collect();
            let (placed, vcpus, touched) = brute_force(&free, &vms);
            let (spec, inputs) = fleet(&cores, &vms);
            let plan = solved(&spec, inputs, 20);
            let got: Vec<u32> = {
                let mut levels: Vec<i64> = vms.iter().map(|v| v.1).collect();
                levels.sort_unstable_by(|a, b| b.cmp(a));
                levels.dedup();
                levels
                    .iter()
                    .map(|l| {
                        plan.objective
                            .placed_by_priority
                            .iter()
                            .find(|(p, _)| p == l)
                            .map_or(0, |x| x.1)
                    })
                    .collect()
            };
            let what = format!("case {case}: hosts {cores:?}, VMs {vms:?}");
            assert_eq!(got, placed, "{what}: placed per priority");
            assert_eq!(plan.objective.vcpus_placed, vcpus, "{what}: vCPUs");
            assert_eq!(
                plan.objective.hosts_touched, touched,
                "{what}: hosts touched"
            );
            assert!(plan.proven, "{what}: not proven: {:?}", plan.gap);
        }
    }

    /// A running VM stays where it runs unless `movable`; moved, it counts
    /// as a move and says where it was. h0 runs `old` (3 vCPUs) and has 3
    /// cores free; `new` (3 vCPUs, priority 1) may only go to h0, so `old`
    /// must move to h1 — which it may only when movable. Not movable, it is
    /// kept before any priority (left out, it would go on running on its
    /// old pins) and `new` is left out.
    #[test]
    fn running_vms_move_only_when_movable() {
        for movable in [true, false] {
            let text = format!(
                "[[host]]\nname = \"h0\"\nsource = \"synthetic:package:1 core:4 pu:1\"\nreserved_cores = 1\n\
                 [[host]]\nname = \"h1\"\nsource = \"synthetic:package:1 core:4 pu:1\"\nreserved_cores = 1\n\
                 [[vm]]\nname = \"old\"\nvcpus = 3\nmovable = {movable}\n\
                 [[vm]]\nname = \"new\"\nvcpus = 3\npriority = 1\nhost = \"h0\"\n"
            );
            let spec = fleet_spec(&text);
            let inputs: Vec<Result<HostInput, String>> = spec
                .hosts
                .iter()
                .enumerate()
                .map(|(h, host)| {
                    let topology =
                        crate::topology::load(&host.source).map_err(|e| e.to_string())?;
                    let running = if h == 0 {
                        let xml = "<domain><name>old</name><vcpu cpuset='1-3'>3</vcpu></domain>";
                        vec![
                            crate::libvirt::domain::tenant_from_domain("old.xml", xml, &topology)
                                .map_err(|e| e.to_string())?,
                        ]
                    } else {
                        Vec::new()
                    };
                    Ok(HostInput {
                        topology,
                        running,
                        facts: None,
                    })
                })
                .collect();
            let plan = solved(&spec, inputs, 10);
            let old = plan
                .vms
                .iter()
                .find(|v| v.name == "old")
                .unwrap_or_else(|| panic!("old"));
            let new = plan
                .vms
                .iter()
                .find(|v| v.name == "new")
                .unwrap_or_else(|| panic!("new"));
            assert_eq!(old.was_on.as_deref(), Some("h0"));
            if movable {
                assert_eq!(old.host.as_deref(), Some("h1"), "{plan:?}");
                assert_eq!(new.host.as_deref(), Some("h0"));
                assert_eq!(plan.objective.moves, 1);
            } else {
                // Kept where it runs before any priority: `new` has no room.
                assert_eq!(old.host.as_deref(), Some("h0"), "{plan:?}");
                assert_eq!(new.host, None);
                assert_eq!(plan.objective.moves, 0);
            }
        }
    }

    /// `v0` and `v1` (1 vCPU each) on a host of 4 cores, one reserved;
    /// `v0` runs there with its vCPU on `cpu`, its emulator on the host's
    /// CPU 0.
    fn v0_running_on(cpu: &str) -> (FleetSpec, Vec<Result<HostInput, String>>) {
        let (spec, mut inputs) = fleet(&[4], &[(1, 0), (1, 0)]);
        if let Some(Ok(input)) = inputs.first_mut() {
            let xml = format!(
                "<domain><name>v0</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='{cpu}'/>\
                 <emulatorpin cpuset='0'/></cputune></domain>"
            );
            let tenant =
                crate::libvirt::domain::tenant_from_domain("v0.xml", &xml, &input.topology)
                    .unwrap_or_else(|e| panic!("{e}"));
            input.running = vec![tenant];
        }
        (spec, inputs)
    }

    /// Issue 27: `fleet.json`'s `assignment` says each objective as users
    /// count it — 1 running VM kept, not the solver's -1.
    #[test]
    fn fleet_json_objectives_are_counts() {
        let (spec, inputs) = v0_running_on("3");
        let plan = solved(&spec, inputs, 10);
        assert!(plan.proven, "{:?}", plan.gap);
        use assign::Tier;
        assert_eq!(
            plan.assignment,
            vec![
                (Tier::RunningKept, 1),
                (Tier::Placed(0), 2),
                (Tier::Vcpus, 2),
                (Tier::Cores, 2),
                (Tier::HostsTouched, 1),
            ]
        );
        let json: serde_json::Value =
            serde_json::from_str(&plan.to_json()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            json["assignment"],
            serde_json::json!([
                ["running VMs kept", 1],
                ["VMs placed at priority 0", 2],
                ["vCPUs placed", 2],
                ["cores used", 2],
                ["hosts touched", 1]
            ])
        );
    }

    /// Issue 27: a running VM that stays on its host stays on its CPUs
    /// there too, movable or not (`v0` runs on CPU 3, which the plan would
    /// not pick from scratch); one whose vCPU floats is pinned, and that
    /// counts as moved ("re-pinned on its host").
    #[test]
    fn a_running_vm_stays_on_its_cpus_on_its_host() {
        for movable in [false, true] {
            let (mut spec, inputs) = v0_running_on("3");
            spec.vms[0].movable = movable;
            let plan = solved(&spec, inputs, 10);
            let v0 = plan.hosts[0]
                .plan
                .as_ref()
                .and_then(|p| p.vms.iter().find(|v| v.name == "v0"))
                .unwrap_or_else(|| panic!("v0 is not planned: {plan:?}"));
            assert_eq!(v0.vcpus[0].cpu.0, 3, "{plan:?}");
            assert_eq!(v0.kept, !movable, "{plan:?}");
            assert_eq!(plan.vms[0].host.as_deref(), Some("h0"));
            assert_eq!((plan.objective.moves, plan.objective.repinned), (0, 0));
            assert!(
                plan.to_text().contains(" (0 moved), "),
                "{}",
                plan.to_text()
            );
        }
        let (spec, inputs) = v0_running_on("0-3");
        let plan = solved(&spec, inputs, 10);
        assert_eq!((plan.objective.moves, plan.objective.repinned), (0, 1));
        assert!(
            plan.to_text()
                .contains(" (1 moved: re-pinned on its host), "),
            "{}",
            plan.to_text()
        );
    }

    /// The summary's count of running VMs moved, by where to.
    #[test]
    fn moved_text_names_both_kinds_of_move() {
        for (moves, repinned, text) in [
            (0, 0, "0 moved"),
            (2, 0, "2 moved"),
            (0, 1, "1 moved: re-pinned on its host"),
            (0, 2, "2 moved: re-pinned on their host"),
            (
                1,
                2,
                "3 moved: 1 to another host, 2 re-pinned on their host",
            ),
        ] {
            let objective = FleetObjective {
                moves,
                repinned,
                ..FleetObjective::default()
            };
            assert_eq!(objective.moved_text(), text);
        }
    }

    /// A host that cannot be read is named; the others are planned.
    #[test]
    fn an_unread_host_is_named_and_the_rest_planned() {
        let (spec, mut inputs) = fleet(&[4, 4], &[(2, 0), (2, 0)]);
        inputs[0] = Err("no answer within 30 s".to_owned());
        let plan = solved(&spec, inputs, 10);
        assert_eq!(
            plan.hosts[0].error.as_deref(),
            Some("no answer within 30 s")
        );
        assert_eq!(plan.objective.placed, 1);
        let refused = &plan
            .vms
            .iter()
            .find(|v| v.host.is_none())
            .map(|v| v.refused.clone());
        assert!(
            refused.as_ref().is_some_and(|r| r
                .iter()
                .any(|x| x.host == "h0" && x.reason.contains("no answer"))),
            "{refused:?}"
        );
        assert!(
            plan.to_text()
                .contains("(1 not read: planned without them)"),
            "{}",
            plan.to_text()
        );
    }

    /// `hosts` hosts with two NUMA nodes of 4 cores (one reserved); node 1
    /// has 3,000 huge pages of 2 MiB (5,859 MiB), node 0 100. `vms` VMs of
    /// 1 vCPU and 2 GiB in those pages, kept to one node: memory, not
    /// cores, binds — two per host.
    fn memory_fleet(hosts: usize, vms: usize) -> FleetPlan {
        let caps = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/inputs/caps-two-nodes-hugepages.xml");
        let mut text = String::new();
        for h in 0..hosts {
            text.push_str(&format!(
                "[[host]]\nname = \"h{h}\"\nsource = {:?}\nreserved_cores = 1\n",
                caps.display().to_string()
            ));
        }
        text.push_str("[defaults]\nmemory = \"2GiB\"\nhugepages = \"2M\"\nnuma = \"strict\"\n");
        for v in 0..vms {
            text.push_str(&format!("[[vm]]\nname = \"m{v}\"\nvcpus = 1\n"));
        }
        let spec = fleet_spec(&text);
        let inputs = read::read_hosts(&spec, 4, Duration::from_secs(60), &|_, _| {});
        solved(&spec, inputs, 60)
    }

    /// Memory binds in the assignment as on one host: six VMs on two such
    /// hosts give four placed, two per host, and that is proven — without
    /// memory in the assignment its bound was six and the plan was not
    /// proven.
    #[test]
    fn memory_bounds_the_assignment() {
        let plan = memory_fleet(2, 6);
        assert!(plan.proven, "{:?} {:?}", plan.gap, plan.assignment);
        assert_eq!(plan.objective.placed, 4);
        for h in &plan.hosts {
            assert_eq!(h.vms.len(), 2, "{}: {:?}", h.name, h.vms);
        }
    }

    /// Above 2,000 (kind, host) pairs hosts alike are one bin, and the VMs
    /// it gets are packed onto its hosts first fit: by memory too. 2,001
    /// such hosts and 4,003 VMs: 4,002 placed, two per host, proven.
    #[test]
    fn grouped_bins_pack_by_memory() {
        let plan = memory_fleet(2_001, 2 * 2_001 + 1);
        assert_eq!(plan.objective.placed, 2 * 2_001);
        assert!(plan.hosts.iter().all(|h| h.vms.len() == 2));
        assert!(plan.proven, "{:?}", plan.gap);
        assert!(
            !plan
                .warnings
                .iter()
                .any(|w| w.contains("did not fit the host first fit chose")),
            "{:?}",
            plan.warnings
        );
    }
}
