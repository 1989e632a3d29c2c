//! The ILP on every hwloc XML and libvirt capabilities fixture: a VM set of
//! about 90 % of the host's free capacity (one core reserved; VMs of 2–8
//! vCPUs, threads = prefer so that SMT-off hosts work, numa = preferred,
//! emulator = host) must solve without panicking, with a safe plan, placing
//! at least 80 % of the requested vCPUs. Every fixture is checked and the test
//! fails once at the end with the whole list of problems.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use planner::plan::{Plan, Status};
use planner::solve::{
    self, EmulatorPolicy, NumaPolicy, PlanRequest, SolveOptions, SolverKind, ThreadPolicy,
    VmRequest,
};
use planner::topology::{load, HostTopology, Source};
use planner::{CoreId, CpuId, CpuSet, NodeId};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const HWLOC_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hwloc-xml");
const CAPS_DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/libvirt-caps"
);

fn fixtures() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for (dir, skip) in [
        (
            HWLOC_DIR,
            &(|n: &str| n.ends_with(".v3.xml")) as &dyn Fn(&str) -> bool,
        ),
        (CAPS_DIR, &|n: &str| n == "caps-test2.xml"),
    ] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".xml") && !skip(&name) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// One reserved core (the lowest), then VMs of 2, 3, ..., 8, 2, ... vCPUs,
/// each rounded up to whole cores of the host's usual thread count (a 3-vCPU
/// VM takes a whole 4-thread core anyway), until about 90 % of the remaining
/// usable CPUs are asked for.
fn request(host: HostTopology) -> PlanRequest {
    let usable = host.usable_cpus();
    let reserved: CpuSet = host
        .cores
        .iter()
        .find(|c| c.cpus.intersects(&usable))
        .map(|c| c.cpus.clone())
        .unwrap_or_default();
    let free = usable.difference(&reserved).len() as u32;
    let mut per_threads: BTreeMap<usize, usize> = BTreeMap::new();
    for c in &host.cores {
        let t = c.cpus.intersection(&usable).len();
        if t > 0 && !c.cpus.intersects(&reserved) {
            *per_threads.entry(t).or_default() += 1;
        }
    }
    let t = per_threads
        .iter()
        .max_by_key(|&(t, n)| (n, std::cmp::Reverse(*t)))
        .map_or(1, |(&t, _)| t as u32);
    let budget = free * 9 / 10;
    let mut vms = Vec::new();
    let mut asked = 0;
    let mut size: u32 = 2;
    while asked < budget {
        let vcpus = size.div_ceil(t) * t;
        if asked + vcpus > budget {
            break;
        }
        vms.push(VmRequest {
            threads: ThreadPolicy::Prefer,
            numa: NumaPolicy::Preferred,
            emulator: EmulatorPolicy::Host,
            ..VmRequest::new(&format!("vm{}", vms.len()), vcpus)
        });
        asked += vcpus;
        size = if size == 8 { 2 } else { size + 1 };
    }
    if vms.is_empty() && free >= 1 {
        // Hosts of 1–2 cores: one tiny VM.
        vms.push(VmRequest {
            threads: ThreadPolicy::Prefer,
            numa: NumaPolicy::Preferred,
            ..VmRequest::new("vm0", 1)
        });
    }
    PlanRequest {
        host,
        reserved,
        fixed: Vec::new(),
        vms,
    }
}

/// The safety properties of a plan; returns the problems found.
fn check(req: &PlanRequest, plan: &Plan) -> Vec<String> {
    let mut problems = Vec::new();
    let host = &req.host;
    let usable = host.usable_cpus();
    let mut owner: BTreeMap<CpuId, String> = req
        .reserved
        .iter()
        .map(|c| (c, "host".to_owned()))
        .collect();
    let mut cores_seen: BTreeSet<CoreId> = BTreeSet::new();
    if plan.vms.len() + plan.unplaced.len() != req.vms.len() {
        problems.push("placed + unplaced != requested".to_owned());
    }
    for vm_plan in &plan.vms {
        let Some(vm) = req.vms.iter().find(|v| v.name == vm_plan.name) else {
            problems.push(format!("unknown VM {}", vm_plan.name));
            continue;
        };
        let name = &vm.name;
        let mut cpus = CpuSet::new();
        let mut nodes: BTreeSet<Option<NodeId>> = BTreeSet::new();
        for &id in &vm_plan.cores {
            let Some(core) = host.core(id) else {
                problems.push(format!("{name}: no core {id}"));
                continue;
            };
            if !cores_seen.insert(id) {
                problems.push(format!("{name}: core {id} given twice"));
            }
            if core.cpus.intersects(&req.reserved) {
                problems.push(format!("{name}: core {id} shares CPUs with the host"));
            }
            cpus = cpus.union(&core.cpus.intersection(&usable));
            nodes.insert(core.numa_node);
        }
        if vm_plan.cpus != cpus {
            problems.push(format!(
                "{name}: cpus {} != its cores' {cpus}",
                vm_plan.cpus
            ));
        }
        for cpu in vm_plan.cpus.iter() {
            if !usable.contains(cpu) {
                problems.push(format!("{name}: CPU {cpu} not usable"));
            }
            if let Some(other) = owner.insert(cpu, name.clone()) {
                problems.push(format!("{name}: CPU {cpu} also {other}'s"));
            }
        }
        let pinned: CpuSet = vm_plan.vcpus.iter().map(|p| p.cpu).collect();
        if vm_plan.vcpus.len() != vm.vcpus as usize || pinned.len() != vm_plan.vcpus.len() {
            problems.push(format!(
                "{name}: {} vCPU pins on {} CPUs, {} asked",
                vm_plan.vcpus.len(),
                pinned.len(),
                vm.vcpus
            ));
        }
        if !pinned.is_subset(&vm_plan.cpus) {
            problems.push(format!("{name}: a vCPU off its cores"));
        }
        if vm_plan.emulator_cpus != req.reserved {
            problems.push(format!("{name}: emulator on {}", vm_plan.emulator_cpus));
        }
        if vm.numa == NumaPolicy::Strict && nodes.len() > 1 {
            problems.push(format!("{name}: strict VM on nodes {nodes:?}"));
        }
    }
    problems
}

#[test]
fn ilp_plans_about_90_percent_of_every_fixture() {
    let options = SolveOptions {
        solver: SolverKind::Ilp,
        time_limit: Duration::from_secs(10),
        explain: false,
    };
    let mut problems = Vec::new();
    let mut summary = Vec::new();
    for path in fixtures() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let host = match load(&Source::File(path.clone())) {
            Ok(h) => h,
            Err(e) => {
                problems.push(format!("{name}: does not load: {e}"));
                continue;
            }
        };
        let req = request(host);
        let asked: u32 = req.vms.iter().map(|v| v.vcpus).sum();
        let started = Instant::now();
        let plan = solve::solve(&req, &options);
        let took = started.elapsed();
        let placed: u32 = plan.vms.iter().map(|v| v.vcpus.len() as u32).sum();
        summary.push(format!(
            "{name}: {placed}/{asked} vCPUs, {}/{} VMs, {:?}, {took:.1?}",
            plan.vms.len(),
            req.vms.len(),
            plan.status
        ));
        if plan.solver != "ilp" {
            problems.push(format!(
                "{name}: solver {} ({:?})",
                plan.solver, plan.warnings
            ));
        }
        if plan.status == Status::Infeasible {
            problems.push(format!(
                "{name}: infeasible, unplaced {:?} ({took:.1?}, {:?})",
                plan.unplaced, plan.warnings
            ));
        }
        for p in check(&req, &plan) {
            problems.push(format!("{name}: {p}"));
        }
        if f64::from(placed) < 0.8 * f64::from(asked) {
            problems.push(format!(
                "{name}: only {placed} of {asked} vCPUs placed ({} of {} VMs; unplaced {:?})",
                plan.vms.len(),
                req.vms.len(),
                plan.unplaced
            ));
        }
    }
    eprintln!("{}", summary.join("\n"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
