//! `cargo bench -p planner --bench plan`: placement speed and quality.
//!
//! 1. Solve time (exact ILP, no explanations) and end-to-end time (synthetic
//!    topology load + request build + solve + `Plan::to_json`) against host
//!    size, up to a 2 × 96-core × 2-thread host (384 CPUs, 24 L3 domains,
//!    siblings N and N+192) with 80 VMs filling ~90 % of the free cores.
//!    Targets: ≤ 100 ms solve, ≤ 300 ms end to end, proven optimal.
//! 2. 100 random near-capacity scenarios (seeded, deterministic): ILP against
//!    the greedy first fit — VMs and vCPUs placed, and physical cores shared
//!    between tenants, computed from the plan independently of the solver.
//!    Targets: the ILP never places fewer VMs than greedy, 0 shared cores.
//!    One `SCENARIO` line per seed (placed per priority level, vCPUs, status,
//!    time) to compare with another commit's run.
//! 3. The seeded set: 8 hosts (6 real hwloc fixtures, the synthetic 256- and
//!    384-CPU hosts of part 1) × 5 loads (90–130 % of the free cores) = 40
//!    instances of 40–120 VMs with every policy, each solved with `solve()`
//!    (ILP, 10 s, explanations on) and again by the exact solver alone for
//!    its per-objective statistics. `PLAN_BENCH_SPECS=DIR` also writes each
//!    instance as a plan spec (DIR/NAME.toml, read back and compared with the
//!    instance) for timing the CLI (scripts/bench-plan-cli.sh).
//!
//! Environment: `PLAN_BENCH_PART=3` (or `1`, `2`, `1,3`...) runs only those
//! parts; `PLAN_BENCH_SEED=0x5eed0007` reruns one scenario of part 2;
//! `PLAN_BENCH_INSTANCE=epyc7763-110` runs one instance of part 3;
//! `PLAN_BENCH_SPECS_ONLY=1` (with `PLAN_BENCH_SPECS`) only writes the specs
//! of parts 3, 6 and 7, solving nothing; `PLAN_BENCH_NICS=spec` drops from part 3's VMs
//! the NIC nodes the specs cannot name (hosts without PCI devices), so that
//! the bench solves exactly what `pinplan plan` reads from the specs.
//! `PINPLAN_ILP_TRACE=1` and `PINPLAN_CBC_PARAMS` work as for the CLI
//! ([`solver_settings_from_env`]).
//!
//! 5. (issue 27) Part 1's hosts with part 1's VMs running where its plan put
//!    them, all movable, and two new VMs: the plan's time with the fewest
//!    vCPUs moved, against the same request as if nothing ran, and the
//!    vCPUs moved (`PLAN_BENCH_PART=5`).
//!
//! 6. (issue 28) A few big VMs on chiplet hosts: 10 hosts (Zen 1, Zen 3,
//!    Hygon, Knights Landing fixtures; synthetic Zen 4 9654-like, Sapphire
//!    Rapids SNC4-like, 256- and 512-CPU hosts with 4–32 L3 domains per
//!    socket) × loads 70–100 %, 4–20 VMs of 6–96 vCPUs (`PLAN_BENCH_PART=6`;
//!    `PLAN_BENCH_SPECS=DIR` writes the specs).
//! 7. (issue 28) Hosts of mixed thread counts: hybrid P/E fixtures, one with
//!    offline siblings, synthetic hosts with every 3rd/4th core's sibling
//!    offline (`PLAN_BENCH_PART=7`; specs for the fixtures only).
//! 8. (issue 28) Part 7's instances with memory, as part 4: without it,
//!    with ample and with tight huge page pools (`PLAN_BENCH_PART=8`).
//! 9. (issue 28) Part 7's instances on its synthetic hosts with fewer
//!    siblings offline: every 16th, 64th, 128th core (`PLAN_BENCH_PART=9`).
//!
//! Results are recorded in docs/benchmarks.md.

use pinplan::deadline::Deadline;
use pinplan::ids::{CoreId, CpuId, NodeId, PackageId};
use pinplan::plan::Plan;
use pinplan::solve::{
    self, ilp, ilp::agg, EmulatorPolicy, FixedTenant, NicAffinity, NumaPolicy, PlanRequest,
    SolveOptions, SolverKind, ThreadPolicy, Tier, VmRequest,
};
use pinplan::topology::{self, Source};
use pinplan::{CpuSet, HostTopology};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Runs per host size in part 1.
const RUNS: usize = 5;
/// Random scenarios in part 2.
const SCENARIOS: u64 = 100;
/// Seed of scenario `i` is `SEED_BASE + i` (rerun one with `PLAN_BENCH_SEED`).
const SEED_BASE: u64 = 0x5eed_0000;

/// xorshift64* (Vigna): small, deterministic, good enough for test data.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so that neighbouring seeds diverge at once.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        let span = u64::from(hi - lo) + 1;
        lo + u32::try_from(self.next() % span).unwrap_or(0)
    }

    /// True with probability `percent` %.
    fn chance(&mut self, percent: u32) -> bool {
        self.range(0, 99) < percent
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The synthetic description of a host: packages × NUMA nodes per package ×
/// L3 per node × cores per L3 × threads; with `split` (and 2 threads) the
/// siblings of CPU N are N + cores (Linux's usual x86 numbering), else N + 1.
fn synthetic(packages: u32, numa: u32, l3: u32, cores: u32, threads: u32, split: bool) -> String {
    let total = packages * numa * l3 * cores;
    let pu = if threads == 2 && split {
        format!("pu:2(indexes={}*{total}:1*2)", 2 * total)
    } else {
        format!("pu:{threads}")
    };
    format!("package:{packages} numa:{numa} l3:{l3} core:{cores} {pu}")
}

/// All CPUs of the lowest-numbered core of each package.
fn first_core_per_package(host: &HostTopology) -> CpuSet {
    let mut seen: BTreeSet<Option<PackageId>> = BTreeSet::new();
    let mut reserved = CpuSet::new();
    for core in &host.cores {
        if seen.insert(core.package) {
            reserved = reserved.union(&core.cpus);
        }
    }
    reserved
}

/// Cores a VM takes on a host with `smt` threads per core (all cores alike).
fn cores_needed(vm: &VmRequest, smt: u32) -> u32 {
    match vm.threads {
        ThreadPolicy::Isolate => {
            vm.vcpus + u32::from(vm.emulator == EmulatorPolicy::Isolate && smt < 2)
        }
        ThreadPolicy::Require | ThreadPolicy::Prefer => vm.pus_needed().div_ceil(smt),
    }
}

// ---------------------------------------------------------------------------
// Part 1: time against host size.

/// The repeating VM mix of part 1: (vCPUs, threads, NUMA). 16 VMs, 34 cores on
/// an SMT-2 host, so 80 VMs take 170 of the 190 free cores of the largest host
/// (89 %).
const MIX: [(u32, ThreadPolicy, NumaPolicy); 16] = [
    (2, ThreadPolicy::Require, NumaPolicy::Strict),
    (4, ThreadPolicy::Require, NumaPolicy::Strict),
    (6, ThreadPolicy::Require, NumaPolicy::Preferred),
    (3, ThreadPolicy::Prefer, NumaPolicy::Strict),
    (2, ThreadPolicy::Isolate, NumaPolicy::Strict),
    (3, ThreadPolicy::Require, NumaPolicy::Strict),
    (4, ThreadPolicy::Prefer, NumaPolicy::Preferred),
    (8, ThreadPolicy::Require, NumaPolicy::Strict),
    (2, ThreadPolicy::Require, NumaPolicy::Preferred),
    (3, ThreadPolicy::Isolate, NumaPolicy::Strict),
    (5, ThreadPolicy::Prefer, NumaPolicy::Strict),
    (2, ThreadPolicy::Require, NumaPolicy::Strict),
    (4, ThreadPolicy::Require, NumaPolicy::Preferred),
    (2, ThreadPolicy::Prefer, NumaPolicy::Strict),
    (6, ThreadPolicy::Require, NumaPolicy::Strict),
    (2, ThreadPolicy::Isolate, NumaPolicy::Preferred),
];

/// Part 1's request: reserved = first core of each package; VMs from [`MIX`],
/// 80 for the largest host (190 free cores) and as many per free core on the
/// smaller ones: ~90 % of the free cores.
fn sized_request(host: HostTopology) -> PlanRequest {
    let reserved = first_core_per_package(&host);
    let reserved_cores = host
        .cores
        .iter()
        .filter(|c| c.cpus.intersects(&reserved))
        .count();
    let free = u32::try_from(host.cores.len() - reserved_cores).unwrap_or(0);
    let count = ((80 * free + 95) / 190) as usize;
    let vms = MIX
        .iter()
        .cycle()
        .take(count)
        .enumerate()
        .map(|(i, &(vcpus, threads, numa))| {
            let mut vm = VmRequest::new(&format!("vm{i:02}"), vcpus);
            vm.threads = threads;
            vm.numa = numa;
            vm.emulator = EmulatorPolicy::Host;
            vm
        })
        .collect();
    PlanRequest {
        host,
        reserved,
        fixed: Vec::new(),
        vms,
        order: Default::default(),
        max_moves: None,
    }
}

/// The time a solve of the benchmarks gets unless it says otherwise.
fn ten_seconds() -> Deadline {
    Deadline::after(Duration::from_secs(10))
}

fn ilp_options() -> SolveOptions {
    SolveOptions {
        explain: false,
        ..Default::default()
    }
}

struct Stats {
    min: f64,
    median: f64,
    max: f64,
}

fn stats(mut times: Vec<Duration>) -> Stats {
    times.sort();
    let n = times.len();
    Stats {
        min: ms(times[0]),
        median: ms(times[n / 2]),
        max: ms(times[n - 1]),
    }
}

fn part1() -> BoxResult<()> {
    println!("== placement time against host size ({RUNS} runs each; ILP, explain = false) ==");
    println!(
        "{:<52} {:>4} {:>3} {:>5} {:>4} {:>5} {:>21} {:>21} {:<8}",
        "host (synthetic)",
        "cpus",
        "l3",
        "cores",
        "vms",
        "fill",
        "solve min/med/max ms",
        "e2e min/med/max ms",
        "status"
    );
    // (packages, L3 per package, cores per L3): 2 × SMT2 each.
    let sizes: [(u32, u32, u32); 5] = [(2, 1, 4), (2, 2, 8), (2, 4, 8), (2, 8, 8), (2, 12, 8)];
    for (packages, l3, cores) in sizes {
        let text = synthetic(packages, 1, l3, cores, 2, true);
        let source = Source::Synthetic(text.clone());
        let mut solve_times = Vec::new();
        let mut e2e_times = Vec::new();
        let mut statuses = BTreeSet::new();
        let mut summary = String::new();
        for _ in 0..RUNS {
            // End to end, with the solve timed inside it.
            let start = Instant::now();
            let host = topology::load(&source)?;
            let request = sized_request(host);
            let solve_start = Instant::now();
            let plan = solve::solve(&request, &ilp_options(), ten_seconds());
            solve_times.push(solve_start.elapsed());
            let json = plan.to_json();
            e2e_times.push(start.elapsed());
            std::hint::black_box(json);
            statuses.insert(format!("{:?}", plan.status).to_lowercase());
            let demand: u32 = request.vms.iter().map(|v| cores_needed(v, 2)).sum();
            let free = solve::free_cores(&request).len();
            let check = check_plan(&request, &plan);
            summary = format!(
                "{} cpus, {} l3, {free} free cores, {} vms, demand {demand} cores ({:.0} %), \
                 placed {}/{}, solver {}, cores used {}, shared cores {}, errors {}",
                request.host.pus.len(),
                request.host.l3_domains.len(),
                request.vms.len(),
                100.0 * f64::from(demand) / free as f64,
                plan.vms.len(),
                request.vms.len(),
                plan.solver,
                plan.objective.cores_used,
                check.shared_cores,
                check.errors.len(),
            );
            for e in &check.errors {
                println!("  ERROR: {e}");
            }
        }
        let host = topology::load(&source)?;
        let request = sized_request(host);
        let demand: u32 = request.vms.iter().map(|v| cores_needed(v, 2)).sum();
        let free = solve::free_cores(&request).len();
        let s = stats(solve_times);
        let e = stats(e2e_times);
        println!(
            "{:<52} {:>4} {:>3} {:>5} {:>4} {:>4.0}% {:>6.1}/{:>6.1}/{:>6.1} {:>6.1}/{:>6.1}/{:>6.1} {}",
            text,
            request.host.pus.len(),
            request.host.l3_domains.len(),
            free,
            request.vms.len(),
            100.0 * f64::from(demand) / free as f64,
            s.min,
            s.median,
            s.max,
            e.min,
            e.median,
            e.max,
            statuses.into_iter().collect::<Vec<_>>().join(",")
        );
        println!("  {summary}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Independent checks of a plan.

#[derive(Default)]
struct Check {
    /// Physical cores whose CPUs belong to more than one tenant.
    shared_cores: usize,
    /// Anything else wrong (a CPU given twice, a vCPU off its VM's CPUs...).
    errors: Vec<String>,
}

/// Tenants by CPU, from the plan alone: `host` for reserved CPUs, fixed
/// tenants, and each VM's owned CPUs, vCPU pins, and emulator / I/O thread
/// CPUs outside the reserved set (on the reserved CPUs they are the host's
/// business by design).
fn check_plan(request: &PlanRequest, plan: &Plan) -> Check {
    let mut check = Check::default();
    let mut tenants: BTreeMap<CpuId, BTreeSet<String>> = BTreeMap::new();
    let reserved = &plan.host.reserved_cpus;
    for cpu in reserved.iter() {
        tenants.entry(cpu).or_default().insert("host".to_owned());
    }
    for f in &plan.fixed {
        for cpu in f.cpus.iter() {
            tenants
                .entry(cpu)
                .or_default()
                .insert(format!("fixed:{}", f.name));
        }
    }
    let usable = request.host.usable_cpus();
    for vm in &plan.vms {
        let name = format!("vm:{}", vm.name);
        let mut mine = vm.cpus.clone();
        for pin in &vm.vcpus {
            mine.insert(pin.cpu);
        }
        mine = mine.union(&vm.emulator_cpus.difference(reserved));
        for io in &vm.iothreads {
            mine = mine.union(&io.cpus.difference(reserved));
        }
        for cpu in mine.iter() {
            let set = tenants.entry(cpu).or_default();
            if !set.is_empty() {
                check.errors.push(format!(
                    "cpu {cpu} of {} also belongs to {:?}",
                    vm.name, set
                ));
            }
            set.insert(name.clone());
            if !usable.contains(cpu) {
                check
                    .errors
                    .push(format!("{} uses cpu {cpu}, which is not usable", vm.name));
            }
        }
        // The request's view of the VM.
        let Some(req) = request.vms.iter().find(|v| v.name == vm.name) else {
            check
                .errors
                .push(format!("{} is not in the request", vm.name));
            continue;
        };
        let pins: BTreeSet<CpuId> = vm.vcpus.iter().map(|p| p.cpu).collect();
        if vm.vcpus.len() != req.vcpus as usize || pins.len() != vm.vcpus.len() {
            check.errors.push(format!(
                "{}: {} vCPU pins on {} distinct CPUs, {} asked",
                vm.name,
                vm.vcpus.len(),
                pins.len(),
                req.vcpus
            ));
        }
        if !pins.iter().all(|c| vm.cpus.contains(*c)) {
            check
                .errors
                .push(format!("{}: a vCPU is pinned outside its CPUs", vm.name));
        }
        let nodes: BTreeSet<Option<NodeId>> = vm
            .cpus
            .iter()
            .map(|c| request.host.pu(c).and_then(|p| p.numa_node))
            .collect();
        if req.numa == NumaPolicy::Strict && nodes.len() > 1 {
            check.errors.push(format!(
                "{}: numa = strict but on {} nodes",
                vm.name,
                nodes.len()
            ));
        }
        if let Some(node) = req.required_node() {
            if nodes.iter().any(|n| *n != Some(node)) {
                check
                    .errors
                    .push(format!("{}: off its required NIC node {node}", vm.name));
            }
        }
        if req.threads == ThreadPolicy::Isolate {
            let cores: BTreeSet<Option<CoreId>> = pins
                .iter()
                .map(|c| request.host.pu(*c).and_then(|p| p.core))
                .collect();
            if cores.len() != pins.len() {
                check.errors.push(format!(
                    "{}: threads = isolate but two vCPUs share a core",
                    vm.name
                ));
            }
        }
    }
    for core in &request.host.cores {
        let owners: BTreeSet<&String> = core
            .cpus
            .iter()
            .filter_map(|c| tenants.get(&c))
            .flatten()
            .collect();
        if owners.len() > 1 {
            check.shared_cores += 1;
        }
    }
    check
}

// ---------------------------------------------------------------------------
// Part 2: random near-capacity scenarios, ILP against greedy.

struct Scenario {
    text: String,
    request: PlanRequest,
    smt: u32,
    free_cores: u32,
    demand_cores: u32,
}

fn random_scenario(seed: u64) -> BoxResult<Scenario> {
    let mut rng = Rng::new(seed);
    // Host: 1–2 packages, 1–2 NUMA nodes per package, 1–3 L3 per node,
    // 2–8 cores per L3, SMT 1 or 2; 8–64 cores in all.
    let (packages, numa, l3, cores) = loop {
        let p = rng.range(1, 2);
        let n = if rng.chance(30) { 2 } else { 1 };
        let l = rng.range(1, 3);
        let c = rng.range(2, 8);
        let total = p * n * l * c;
        if (8..=64).contains(&total) {
            break (p, n, l, c);
        }
    };
    let smt = rng.range(1, 2);
    let split = rng.chance(70);
    let text = synthetic(packages, numa, l3, cores, smt, split);
    let host = topology::load(&Source::Synthetic(text.clone()))?;

    // Reserved: the first core of each package (sometimes only one CPU of it).
    let mut reserved = first_core_per_package(&host);
    if rng.chance(20) {
        if let Some(first) = reserved.first() {
            reserved = std::iter::once(first).collect();
        }
    }
    // Sometimes a fixed tenant on one core (or one CPU of it).
    let mut fixed = Vec::new();
    if rng.chance(30) {
        let pick = rng.range(0, u32::try_from(host.cores.len() - 1).unwrap_or(0)) as usize;
        if let Some(core) = host.cores.get(pick) {
            if !core.cpus.intersects(&reserved) {
                let cpus = if rng.chance(50) {
                    core.cpus.clone()
                } else {
                    core.cpus.first().into_iter().collect()
                };
                fixed.push(FixedTenant {
                    name: "legacy".to_owned(),
                    cpus,
                    kind: pinplan::plan::FixedKind::Spec,
                });
            }
        }
    }
    let mut request = PlanRequest {
        host,
        reserved,
        fixed,
        vms: Vec::new(),
        order: Default::default(),
        max_moves: None,
    };
    let free_cores = u32::try_from(solve::free_cores(&request).len()).unwrap_or(0);
    let nodes: Vec<NodeId> = request.host.numa_nodes.iter().map(|n| n.id).collect();

    // VMs until the demand reaches 95–110 % of the free cores.
    let target = free_cores * rng.range(95, 110);
    let priorities = rng.chance(25);
    let mut demand = 0;
    let mut i = 0;
    while demand * 100 < target {
        let vcpus = rng.range(1, 8);
        let mut vm = VmRequest::new(&format!("vm{i:02}"), vcpus);
        vm.threads = match rng.range(0, 9) {
            0..=4 if smt == 2 => ThreadPolicy::Require,
            0..=6 => ThreadPolicy::Prefer,
            _ => ThreadPolicy::Isolate,
        };
        vm.numa = match rng.range(0, 9) {
            0..=5 => NumaPolicy::Strict,
            6..=8 => NumaPolicy::Preferred,
            _ => NumaPolicy::Spread,
        };
        if rng.chance(15) {
            vm.emulator = EmulatorPolicy::Isolate;
        }
        if rng.chance(10) {
            vm.iothreads = 1;
        }
        if nodes.len() > 1 && rng.chance(20) {
            let k = rng.range(0, u32::try_from(nodes.len() - 1).unwrap_or(0)) as usize;
            vm.nic_nodes = nodes.get(k).copied().into_iter().collect();
            vm.nic_affinity = if rng.chance(50) {
                NicAffinity::Required
            } else {
                NicAffinity::Preferred
            };
        }
        if priorities {
            vm.priority = i64::from(rng.range(0, 2));
        }
        demand += cores_needed(&vm, smt);
        request.vms.push(vm);
        i += 1;
    }
    Ok(Scenario {
        text,
        request,
        smt,
        free_cores,
        demand_cores: demand,
    })
}

/// VMs placed per priority level, highest first, as a comparable vector.
fn placed_key(request: &PlanRequest, plan: &Plan) -> Vec<(std::cmp::Reverse<i64>, u32)> {
    let placed: BTreeSet<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
    let mut by: BTreeMap<std::cmp::Reverse<i64>, u32> = BTreeMap::new();
    for vm in &request.vms {
        *by.entry(std::cmp::Reverse(vm.priority)).or_default() +=
            u32::from(placed.contains(vm.name.as_str()));
    }
    by.into_iter().collect()
}

fn vcpus_placed(plan: &Plan) -> usize {
    plan.vms.iter().map(|v| v.vcpus.len()).sum()
}

/// Part 2's machine-readable line for one scenario: the ILP's VMs placed per
/// priority level (highest first), vCPUs placed, status, solver and time.
/// A baseline run of another commit prints the same line (patched in), so
/// that the two can be compared per seed.
fn scenario_line(seed: u64, request: &PlanRequest, plan: &Plan, took: Duration) -> String {
    let placed: Vec<String> = placed_key(request, plan)
        .iter()
        .map(|(p, n)| format!("p{}={n}", p.0))
        .collect();
    format!(
        "SCENARIO {seed:#x} placed {} vms {}/{} vcpus {} status {} solver {} proven {} ms {:.1}",
        placed.join(","),
        plan.vms.len(),
        request.vms.len(),
        vcpus_placed(plan),
        format!("{:?}", plan.status).to_lowercase(),
        plan.solver,
        plan.proven,
        ms(took)
    )
}

fn part2(only: Option<u64>) -> BoxResult<()> {
    println!();
    println!(
        "== {SCENARIOS} random near-capacity scenarios (seeds {SEED_BASE:#x}..): ILP vs greedy =="
    );
    println!(
        "{:<10} {:<46} {:>5} {:>6} {:>4} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8}",
        "seed",
        "host",
        "free",
        "demand",
        "vms",
        "ilp vms",
        "grd vms",
        "ilp vcpu",
        "grd vcpu",
        "shared",
        "ilp ms"
    );
    let seeds: Vec<u64> = match only {
        Some(seed) => vec![seed],
        None => (0..SCENARIOS).map(|i| SEED_BASE + i).collect(),
    };
    let (mut more, mut equal, mut fewer) = (0, 0, 0);
    let (mut more_total, mut fewer_total) = (0, 0);
    let (mut ilp_vms, mut greedy_vms, mut ilp_vcpus, mut greedy_vcpus) = (0, 0, 0, 0);
    let (mut ilp_shared, mut greedy_shared) = (0, 0);
    let mut ilp_errors = 0;
    let mut greedy_errors = 0;
    let mut not_proven = Vec::new();
    let mut fell_back = Vec::new();
    let mut worse = Vec::new();
    let mut times = Vec::new();
    let greedy_options = SolveOptions {
        solver: SolverKind::Greedy,
        explain: false,
        ..Default::default()
    };
    for seed in seeds {
        let s = random_scenario(seed)?;
        let start = Instant::now();
        let ilp = solve::solve(&s.request, &ilp_options(), ten_seconds());
        let took = start.elapsed();
        times.push(took);
        let greedy = solve::solve(&s.request, &greedy_options, ten_seconds());
        let ci = check_plan(&s.request, &ilp);
        let cg = check_plan(&s.request, &greedy);
        for e in &ci.errors {
            println!("  ERROR (ilp, seed {seed:#x}): {e}");
        }
        for e in &cg.errors {
            println!("  ERROR (greedy, seed {seed:#x}): {e}");
        }
        ilp_errors += ci.errors.len();
        greedy_errors += cg.errors.len();
        ilp_shared += ci.shared_cores;
        greedy_shared += cg.shared_cores;
        println!("{}", scenario_line(seed, &s.request, &ilp, took));
        let ki = placed_key(&s.request, &ilp);
        let kg = placed_key(&s.request, &greedy);
        match ki.cmp(&kg) {
            std::cmp::Ordering::Greater => more += 1,
            std::cmp::Ordering::Equal => equal += 1,
            std::cmp::Ordering::Less => {
                fewer += 1;
                worse.push(seed);
            }
        }
        match ilp.vms.len().cmp(&greedy.vms.len()) {
            std::cmp::Ordering::Greater => more_total += 1,
            std::cmp::Ordering::Less => fewer_total += 1,
            std::cmp::Ordering::Equal => {}
        }
        if ilp.solver != pinplan::solve::SolverKind::Ilp {
            fell_back.push(seed);
        } else if !ilp.proven {
            not_proven.push(seed);
        }
        ilp_vms += ilp.vms.len();
        greedy_vms += greedy.vms.len();
        ilp_vcpus += vcpus_placed(&ilp);
        greedy_vcpus += vcpus_placed(&greedy);
        println!(
            "{:<10} {:<46} {:>5} {:>5}% {:>4} {:>9} {:>9} {:>9} {:>9} {:>3}/{:<3} {:>8.1}",
            format!("{seed:#x}"),
            format!("{} (smt {})", s.text, s.smt),
            s.free_cores,
            (s.demand_cores * 100)
                .checked_div(s.free_cores)
                .unwrap_or(0),
            s.request.vms.len(),
            ilp.vms.len(),
            greedy.vms.len(),
            vcpus_placed(&ilp),
            vcpus_placed(&greedy),
            ci.shared_cores,
            cg.shared_cores,
            ms(took),
        );
    }
    let n = times.len();
    let t = stats(times.clone());
    let mut sorted = times;
    sorted.sort();
    let p90 = ms(sorted[(n * 9 / 10).min(n - 1)]);
    let over_100 = sorted.iter().filter(|d| ms(**d) > 100.0).count();
    println!();
    println!(
        "ILP vs greedy, VMs placed (lexicographic by priority): more in {more}, equal in {equal}, fewer in {fewer}"
    );
    println!(
        "ILP vs greedy, VMs placed (total count): more in {more_total}, fewer in {fewer_total}"
    );
    println!("VMs placed: ilp {ilp_vms}, greedy {greedy_vms}; vCPUs placed: ilp {ilp_vcpus}, greedy {greedy_vcpus}");
    println!("shared cores: ilp {ilp_shared}, greedy {greedy_shared}; plan errors: ilp {ilp_errors}, greedy {greedy_errors}");
    println!(
        "ILP solve time over {n}: min {:.1} ms, median {:.1} ms, p90 {p90:.1} ms, max {:.1} ms; over 100 ms: {over_100}",
        t.min, t.median, t.max
    );
    println!("ILP not proven optimal: {not_proven:x?}; fell back to greedy: {fell_back:x?}");
    if !worse.is_empty() {
        println!("SUSPICIOUS: the ILP placed fewer VMs than greedy for seeds {worse:x?}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Part 3: the seeded set: real and synthetic hosts at 90–130 % load.

/// Seed of part 3's instance `i` is `SEED3_BASE + i` (hosts in order, 5 loads each).
const SEED3_BASE: u64 = 0x5eed_3000;
/// Loads of part 3: the VMs' summed core demand, in % of the free cores.
const LOADS: [u32; 5] = [90, 100, 110, 120, 130];
/// VMs per instance of part 3, at least.
const MIN_VMS: usize = 40;
/// VMs per instance of part 3, at most.
const MAX_VMS: usize = 120;
/// vCPUs per VM, at most.
const MAX_VCPUS: u32 = 16;
/// `solve()`'s time limit in part 3 (`pinplan plan`'s default).
const TIME_LIMIT: Duration = Duration::from_secs(10);
/// The share of it `solve()` gives the exact solver when VMs may be left out:
/// the limit of the stats run.
const EXACT_SHARE: f64 = pinplan::deadline::EXACT_SHARE;
/// The hwloc XML fixtures (the bench runs with cwd = planner/).
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hwloc-xml");

/// Part 3's hosts: (short name, source).
fn hosts3() -> Vec<(&'static str, Source)> {
    let file = |name: &str| Source::File(Path::new(FIXTURES).join(name));
    vec![
        ("epyc7763", file("x86-AMD-19h-Zen3-2xEpyc-7763.xml")),
        ("epyc7451", file("x86-AMD-17h-Zen-2xEpyc-7451.xml")),
        ("knl7210", file("x86-Intel-KnightsLanding-XeonPhi-7210.xml")),
        ("24n8c2t", file("192em64t-24n8c2t.xml")),
        (
            "opteron6348",
            file("x86-AMD-15h-Piledriver-4xOpteron-6348.xml"),
        ),
        (
            "e5-4620v2",
            file("x86-Intel-IvyBridge-12xXeon-E5-4620v2.xml"),
        ),
        (
            "synth256",
            Source::Synthetic(synthetic(2, 1, 8, 8, 2, true)),
        ),
        (
            "synth384",
            Source::Synthetic(synthetic(2, 1, 12, 8, 2, true)),
        ),
    ]
}

struct Instance {
    name: String,
    seed: u64,
    load: u32,
    source: Source,
    request: PlanRequest,
    smt: u32,
    free_cores: u32,
    demand_cores: u32,
    /// VMs with a NIC node but no PCI device to name in a spec.
    nic_without_address: usize,
}

/// Free cores per NUMA node (`None`: cores of no known node).
fn free_per_node(request: &PlanRequest) -> BTreeMap<Option<NodeId>, u32> {
    let mut per: BTreeMap<Option<NodeId>, u32> = BTreeMap::new();
    for core in solve::free_cores(request) {
        *per.entry(core.node).or_default() += 1;
    }
    per
}

/// One VM of part 3: 1–16 vCPUs, mostly 2–8, every policy.
fn draw_vm3(
    rng: &mut Rng,
    i: usize,
    smt: u32,
    nic_nodes: &[(NodeId, Option<pinplan::topology::PciAddress>)],
    priorities: bool,
) -> VmRequest {
    let vcpus = match rng.range(0, 19) {
        0..=1 => 1,
        2..=16 => rng.range(2, 8),
        _ => rng.range(9, MAX_VCPUS),
    };
    let mut vm = VmRequest::new(&format!("vm{i:03}"), vcpus);
    vm.threads = match rng.range(0, 19) {
        0..=8 if smt >= 2 => ThreadPolicy::Require,
        0..=15 => ThreadPolicy::Prefer,
        _ => ThreadPolicy::Isolate,
    };
    vm.numa = match rng.range(0, 9) {
        0..=6 => NumaPolicy::Strict,
        7..=8 => NumaPolicy::Preferred,
        _ => NumaPolicy::Spread,
    };
    if rng.chance(20) {
        vm.emulator = EmulatorPolicy::Isolate;
    }
    vm.iothreads = match rng.range(0, 9) {
        0..=6 => 0,
        7..=8 => 1,
        _ => 2,
    };
    if !nic_nodes.is_empty() && rng.chance(30) {
        let k = rng.range(0, u32::try_from(nic_nodes.len() - 1).unwrap_or(0)) as usize;
        if let Some(&(node, address)) = nic_nodes.get(k) {
            vm.nic_nodes = vec![node];
            vm.nic = address;
            vm.nics = address.into_iter().collect();
            vm.nic_affinity = if rng.chance(50) {
                NicAffinity::Required
            } else {
                NicAffinity::Preferred
            };
        }
    }
    if priorities {
        vm.priority = i64::from(rng.range(0, 2));
    }
    vm
}

/// Whether `vm` fits in `node_cap` cores (the largest node's free cores: a VM
/// bigger than every node is not realistic).
fn fits_node(vm: &VmRequest, smt: u32, node_cap: u32) -> bool {
    cores_needed(vm, smt) <= node_cap
}

/// A request for `host` with no VM yet (reserved: the first core of each
/// package), its free cores and their most threads.
fn bare_request(host: &HostTopology) -> (PlanRequest, u32, u32) {
    let request = PlanRequest {
        host: host.clone(),
        reserved: first_core_per_package(host),
        fixed: Vec::new(),
        vms: Vec::new(),
        order: Default::default(),
        max_moves: None,
    };
    let free = solve::free_cores(&request);
    let free_cores = u32::try_from(free.len()).unwrap_or(0);
    let smt = free
        .iter()
        .map(solve::classes::FreeCore::threads)
        .max()
        .unwrap_or(1);
    (request, free_cores, smt)
}

/// Takes a vCPU from random VMs above `least` until the demand of `vms` is at
/// most `target` cores (`smt` threads per core).
fn shrink_to(vms: &mut [VmRequest], rng: &mut Rng, (target, smt): (u32, u32), least: u32) {
    while vms.iter().map(|v| cores_needed(v, smt)).sum::<u32>() > target {
        let smaller: Vec<usize> = (0..vms.len()).filter(|&i| vms[i].vcpus > least).collect();
        if smaller.is_empty() {
            break;
        }
        let k = smaller[rng.range(0, u32::try_from(smaller.len() - 1).unwrap_or(0)) as usize];
        vms[k].vcpus -= 1;
    }
}

/// Gives a vCPU to random VMs below `most` (that still fit the largest
/// node's `node_cap` free cores) until the demand of `vms` is `target` cores.
fn grow_to(
    vms: &mut [VmRequest],
    rng: &mut Rng,
    (target, smt, node_cap): (u32, u32, u32),
    most: u32,
) {
    while vms.iter().map(|v| cores_needed(v, smt)).sum::<u32>() < target {
        let bigger: Vec<usize> = (0..vms.len())
            .filter(|&i| {
                let mut grown = vms[i].clone();
                grown.vcpus += 1;
                grown.vcpus <= most && fits_node(&grown, smt, node_cap)
            })
            .collect();
        if bigger.is_empty() {
            break;
        }
        let k = bigger[rng.range(0, u32::try_from(bigger.len() - 1).unwrap_or(0)) as usize];
        vms[k].vcpus += 1;
    }
}

/// Instance `name` of part 3: `load` % of the free cores of `host` asked by
/// 40–120 VMs. VMs are drawn with realistic sizes until their demand reaches
/// the load; when that takes fewer than 40 (small hosts) or more than 120
/// VMs, the count is clamped and vCPUs are taken from or added to random VMs
/// until the demand is the load again (never below 1 or above 16 vCPUs, never
/// beyond the largest node's free cores; on a host too small for 40 VMs of
/// 1 vCPU, emulators move to the host).
fn instance(
    name: String,
    seed: u64,
    source: &Source,
    host: &HostTopology,
    load: u32,
    priorities: bool,
) -> Instance {
    let mut rng = Rng::new(seed);
    let (mut request, free_cores, smt) = bare_request(host);
    let per_node = free_per_node(&request);
    let node_cap = per_node
        .iter()
        .filter(|(n, _)| n.is_some())
        .map(|(_, c)| *c)
        .max()
        .unwrap_or(free_cores);
    // NIC nodes: nodes with free cores; with a PCI device when the host lists
    // any on such a node (then the spec can name it).
    let cpu_nodes: Vec<NodeId> = per_node.keys().filter_map(|n| *n).collect();
    let with_device: Vec<(NodeId, Option<pinplan::topology::PciAddress>)> = cpu_nodes
        .iter()
        .filter_map(|&node| {
            let on_node = host.pci.iter().filter(|d| d.numa_node == Some(node));
            let mut devices: Vec<_> = on_node.collect();
            devices.sort_by_key(|d| (!d.is_network(), d.address.to_string()));
            devices.first().map(|d| (node, Some(d.address)))
        })
        .collect();
    let nic_nodes: Vec<(NodeId, Option<pinplan::topology::PciAddress>)> = if with_device.is_empty()
    {
        cpu_nodes.iter().map(|&n| (n, None)).collect()
    } else {
        with_device
    };

    let target = (free_cores * load).div_ceil(100);
    let mut vms: Vec<VmRequest> = Vec::new();
    let demand_of = |vms: &[VmRequest]| -> u32 { vms.iter().map(|v| cores_needed(v, smt)).sum() };
    while (demand_of(&vms) < target && vms.len() < MAX_VMS) || vms.len() < MIN_VMS {
        let mut vm = draw_vm3(&mut rng, vms.len(), smt, &nic_nodes, priorities);
        while vm.vcpus > 1 && !fits_node(&vm, smt, node_cap) {
            vm.vcpus -= 1;
        }
        vms.push(vm);
    }
    // Down to the load, then up to it (each vCPU moves the demand by 0 or 1 core).
    shrink_to(&mut vms, &mut rng, (target, smt), 1);
    // Still above it with 1 vCPU each (small hosts): emulators to the host.
    while demand_of(&vms) > target {
        let Some(vm) = vms
            .iter_mut()
            .find(|v| v.emulator == EmulatorPolicy::Isolate && cores_needed(v, smt) > 1)
        else {
            break;
        };
        vm.emulator = EmulatorPolicy::Host;
    }
    grow_to(&mut vms, &mut rng, (target, smt, node_cap), MAX_VCPUS);
    let demand_cores = demand_of(&vms);
    let nic_without_address = vms
        .iter()
        .filter(|v| !v.nic_nodes.is_empty() && v.nic.is_none())
        .count();
    request.vms = vms;
    Instance {
        name,
        seed,
        load,
        source: source.clone(),
        request,
        smt,
        free_cores,
        demand_cores,
        nic_without_address,
    }
}

fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Writes `inst` as a plan spec, DIR/NAME.toml. The topology source is in a
/// `# source: ` comment line for `pinplan plan --source` (a spec's `[host]
/// source` is a file: synthetic hosts have none), and in `[host] source` for
/// the fixtures (absolute path). NICs are named only where the host lists a
/// PCI device on the VM's NIC node; other NIC nodes are left out (the comment
/// says how many).
fn write_spec(dir: &Path, inst: &Instance) -> BoxResult<PathBuf> {
    let req = &inst.request;
    let mut t = String::new();
    writeln!(
        t,
        "# pinplan bench (cargo bench -p planner --bench plan, parts 3, 6, 7): instance {}, seed {:#x}",
        inst.name, inst.seed
    )?;
    writeln!(
        t,
        "# {} VMs asking {} of {} free cores ({} % load, SMT {})",
        req.vms.len(),
        inst.demand_cores,
        inst.free_cores,
        inst.load,
        inst.smt
    )?;
    let source = match &inst.source {
        Source::File(path) => Source::File(std::fs::canonicalize(path)?),
        other => other.clone(),
    };
    writeln!(t, "# source: {}", source.describe())?;
    if inst.nic_without_address > 0 {
        writeln!(
            t,
            "# not here: the NIC node of {} VMs (the host lists no PCI device on it)",
            inst.nic_without_address
        )?;
    }
    writeln!(t, "\n[host]")?;
    if let Source::File(path) = &source {
        writeln!(t, "source = {}", toml_string(&path.display().to_string()))?;
    }
    writeln!(t, "reserved_cpus = \"{}\"", req.reserved)?;
    for vm in &req.vms {
        writeln!(t, "\n[[vm]]")?;
        writeln!(t, "name = {}", toml_string(&vm.name))?;
        writeln!(t, "vcpus = {}", vm.vcpus)?;
        writeln!(t, "threads = \"{}\"", vm.threads.name())?;
        let numa = match vm.numa {
            NumaPolicy::Strict => "strict",
            NumaPolicy::Preferred => "preferred",
            NumaPolicy::Spread => "spread",
        };
        writeln!(t, "numa = \"{numa}\"")?;
        let emulator = match vm.emulator {
            EmulatorPolicy::Host => "host",
            EmulatorPolicy::Isolate => "isolate",
            EmulatorPolicy::WithHousekeeping => "with-housekeeping",
        };
        writeln!(t, "emulator = \"{emulator}\"")?;
        if vm.roles.housekeeping > 0 && vm.demand.is_none() {
            writeln!(t, "housekeeping_vcpus = {}", vm.roles.housekeeping)?;
        }
        if vm.iothreads > 0 {
            writeln!(t, "iothreads = {}", vm.iothreads)?;
        }
        if vm.priority != 0 {
            writeln!(t, "priority = {}", vm.priority)?;
        }
        if let Some(address) = vm.nic {
            let affinity = match vm.nic_affinity {
                NicAffinity::Required => "required",
                NicAffinity::Preferred => "preferred",
                NicAffinity::Ignore => "ignore",
            };
            writeln!(t, "nic = \"{address}\"")?;
            writeln!(t, "nic_affinity = \"{affinity}\"")?;
        }
    }
    let path = dir.join(format!("{}.toml", inst.name));
    std::fs::write(&path, t)?;
    Ok(path)
}

/// Reads back a spec written by [`write_spec`] the way `pinplan plan` does
/// and checks that it asks for the instance's request (less the NIC nodes
/// the spec cannot name).
fn check_spec(path: &Path, inst: &Instance) -> BoxResult<()> {
    let spec = pinplan::spec::Spec::load(path).map_err(|e| format!("{e}"))?;
    let (request, _warnings) = spec
        .request(inst.request.host.clone())
        .map_err(|e| format!("{e}"))?;
    let expected: Vec<VmRequest> = inst
        .request
        .vms
        .iter()
        .map(|vm| {
            let mut vm = vm.clone();
            if vm.nic.is_none() {
                vm.nic_nodes.clear();
                vm.nic_affinity = NicAffinity::Ignore;
            }
            vm
        })
        .collect();
    if request.reserved != inst.request.reserved {
        return Err(format!(
            "{}: reserved {} read back, {} meant",
            path.display(),
            request.reserved,
            inst.request.reserved
        )
        .into());
    }
    if let Some((got, want)) = request
        .vms
        .iter()
        .zip(&expected)
        .find(|(got, want)| got != want)
    {
        return Err(format!("{}: {got:?} read back, {want:?} meant", path.display()).into());
    }
    if request.vms.len() != expected.len() || !request.fixed.is_empty() {
        return Err(format!("{}: not the instance's VMs", path.display()).into());
    }
    Ok(())
}

/// An objective's short name in part 3's lines.
fn tier_letter(tier: Tier) -> String {
    match tier {
        Tier::RunningPlaced => "W".to_owned(),
        Tier::Placed(level) => format!("P{level}"),
        Tier::Vcpus => "V".to_owned(),
        Tier::VcpusMoved => "M".to_owned(),
        Tier::Cores => "C".to_owned(),
        Tier::ExtraNodes => "N".to_owned(),
        Tier::NicRemote => "R".to_owned(),
        Tier::L3PerVm => "L".to_owned(),
        Tier::PartialL3 => "D".to_owned(),
        Tier::PartialNodes => "Q".to_owned(),
        // A fleet's objectives: the host's models have none.
        Tier::RunningKept => "K".to_owned(),
        Tier::HostMoves => "H".to_owned(),
        Tier::HostsTouched => "T".to_owned(),
    }
}

/// `letter=value:ms` per objective; `!` unproven, `b` proven by a bound.
fn tier_runs(stats: &agg::Stats) -> String {
    stats
        .tiers
        .iter()
        .map(|t| {
            let mark = if !t.proven {
                "!"
            } else if t.by_bound {
                "b"
            } else {
                ""
            };
            // `+ 0.0`: no "-0" for a placed count of 0.
            format!(
                "{}={:.0}:{:.1}{mark}",
                tier_letter(t.tier),
                t.value + 0.0,
                t.ms
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value at quantile `q` (0–1) of sorted `values`.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Whether part 3's VMs keep only the NICs a spec can name
/// (`PLAN_BENCH_NICS=spec`): then the bench solves what `pinplan plan` reads
/// from the specs, and the two can be timed on the same requests.
fn spec_nics_only() -> bool {
    std::env::var("PLAN_BENCH_NICS").is_ok_and(|v| v == "spec")
}

/// Part 3's instances (only the one named `only`, if given): per host, one
/// per load; priorities in every other one.
fn instances3(only: Option<&str>) -> BoxResult<Vec<Instance>> {
    let mut instances = Vec::new();
    let mut seed = SEED3_BASE;
    for (host_index, (host_name, source)) in hosts3().into_iter().enumerate() {
        let host = topology::load(&source)?;
        for (load_index, &load) in LOADS.iter().enumerate() {
            let name = format!("{host_name}-{load}");
            if only.is_none_or(|o| o == name) {
                let priorities = (host_index + load_index) % 2 == 1;
                let mut inst = instance(name, seed, &source, &host, load, priorities);
                if spec_nics_only() {
                    for vm in inst.request.vms.iter_mut().filter(|v| v.nic.is_none()) {
                        vm.nic_nodes.clear();
                        vm.nic_affinity = NicAffinity::Ignore;
                    }
                }
                instances.push(inst);
            }
            seed += 1;
        }
    }
    if instances.is_empty() {
        return Err(format!("PLAN_BENCH_INSTANCE: no instance {}", only.unwrap_or("")).into());
    }
    Ok(instances)
}

/// Writes part 3's specs to `dir` without solving them.
fn part3_specs(only: Option<&str>, dir: &Path) -> BoxResult<()> {
    std::fs::create_dir_all(dir)?;
    let instances = instances3(only)?;
    for inst in &instances {
        check_spec(&write_spec(dir, inst)?, inst)?;
    }
    println!("wrote {} plan specs to {}", instances.len(), dir.display());
    Ok(())
}

fn part3(only: Option<&str>, specs: Option<&Path>) -> BoxResult<()> {
    println!();
    println!(
        "== seeded set: 8 hosts x loads {LOADS:?} % (seeds {SEED3_BASE:#x}..); \
         solve(): ILP, {} s, explain = true{} ==",
        TIME_LIMIT.as_secs(),
        if spec_nics_only() {
            "; NICs: only those the specs name (PLAN_BENCH_NICS=spec)"
        } else {
            ""
        }
    );
    report_set("seeded set", &instances3(only)?, specs)
}

/// Solves each of `instances` with `solve()` (ILP, 10 s, explanations) and
/// again with the exact solver alone for its per-objective statistics; one
/// line per instance, then the summary of the set `label`. With `specs`,
/// writes each instance as a plan spec there first.
fn report_set(label: &str, instances: &[Instance], specs: Option<&Path>) -> BoxResult<()> {
    let legend: Vec<String> = std::iter::once(Tier::Placed(0))
        .chain(Tier::AFTER_LEVELS)
        .map(|t| format!("{}: {t}", tier_letter(t)))
        .collect();
    println!(
        "objectives (value:ms; ! not proven, b proven by a bound): {}",
        legend.join(", ")
    );
    println!(
        "{:<16} {:>4} {:>3} {:>4} {:>4} {:>6} {:>3} {:>8} {:>7} {:>3} {:>11} {:>8} {:>9} {:<3} objectives",
        "instance",
        "cpus",
        "smt",
        "free",
        "load",
        "demand",
        "vms",
        "vcpu min/med/max",
        "placed",
        "grd",
        "vars n/c",
        "exact ms",
        "solve() ms",
        "prv"
    );
    if let Some(dir) = specs {
        std::fs::create_dir_all(dir)?;
    }
    let options = SolveOptions {
        solver: SolverKind::Ilp,
        explain: true,
        progress: None,
    };
    let greedy_options = SolveOptions {
        solver: SolverKind::Greedy,
        explain: false,
        ..Default::default()
    };
    let mut solve_times = Vec::new();
    let mut exact_times = Vec::new();
    let (mut proven, mut all_placed, mut count) = (0, 0, 0);
    let (mut errors, mut shared) = (0, 0);
    let (mut more, mut equal, mut fewer) = (0, 0, 0);
    let mut not_proven = Vec::new();
    let mut over_1s = Vec::new();
    for inst in instances {
        if let Some(dir) = specs {
            check_spec(&write_spec(dir, inst)?, inst)?;
        }
        let req = &inst.request;
        count += 1;

        let start = Instant::now();
        let plan = solve::solve(req, &options, Deadline::after(TIME_LIMIT));
        let solve_ms = ms(start.elapsed());
        let check = check_plan(req, &plan);
        for e in &check.errors {
            println!("  ERROR ({}): {e}", inst.name);
        }
        errors += check.errors.len();
        shared += check.shared_cores;

        // The exact solver alone, for its statistics.
        let limit = TIME_LIMIT.mul_f64(EXACT_SHARE);
        let start = Instant::now();
        let exact = if agg::supported(req) {
            Ok(agg::place(req, Deadline::after(limit), &Default::default()))
                .map(|(p, s)| (p, Some(s)))
        } else {
            ilp::place(req, Deadline::after(limit), &Default::default()).map(|p| (p, None))
        };
        let exact_ms = ms(start.elapsed());
        let (vars, objectives) = match &exact {
            Ok((placement, Some(stats))) => {
                if placement.cores.len() != plan.vms.len() {
                    println!(
                        "  NOTE ({}): the stats run placed {} VMs, solve() {}",
                        inst.name,
                        placement.cores.len(),
                        plan.vms.len()
                    );
                }
                (
                    format!("{}/{}", stats.variables.0, stats.variables.1),
                    tier_runs(stats),
                )
            }
            Ok((placement, None)) => (
                "-".to_owned(),
                format!(
                    "per-class model (ilp::place), {} placed, proven {}",
                    placement.cores.len(),
                    placement.proven
                ),
            ),
            Err(e) => ("-".to_owned(), format!("exact solver failed: {e}")),
        };
        let greedy = solve::solve(req, &greedy_options, ten_seconds());
        match placed_key(req, &plan).cmp(&placed_key(req, &greedy)) {
            std::cmp::Ordering::Greater => more += 1,
            std::cmp::Ordering::Equal => equal += 1,
            std::cmp::Ordering::Less => fewer += 1,
        }
        if plan.proven {
            proven += 1;
        } else {
            not_proven.push(inst.name.clone());
        }
        if plan.unplaced.is_empty() {
            all_placed += 1;
        }
        if solve_ms > 1000.0 {
            over_1s.push(format!("{} ({solve_ms:.0} ms)", inst.name));
        }
        let mut sizes: Vec<u32> = req.vms.iter().map(|v| v.vcpus).collect();
        sizes.sort_unstable();
        println!(
            "{:<16} {:>4} {:>3} {:>4} {:>3}% {:>6} {:>3} {:>5}/{:>2}/{:<2} {:>3}/{:<3} {:>3} {:>11} {:>8.1} {:>10.1} {:<3} {}{}",
            inst.name,
            req.host.pus.len(),
            inst.smt,
            inst.free_cores,
            inst.load,
            inst.demand_cores,
            req.vms.len(),
            sizes.first().copied().unwrap_or(0),
            sizes.get(sizes.len() / 2).copied().unwrap_or(0),
            sizes.last().copied().unwrap_or(0),
            plan.vms.len(),
            req.vms.len(),
            greedy.vms.len(),
            vars,
            exact_ms,
            solve_ms,
            if plan.proven { "yes" } else { "no" },
            objectives,
            if check.shared_cores > 0 {
                format!(" SHARED CORES {}", check.shared_cores)
            } else {
                String::new()
            },
        );
        solve_times.push(solve_ms);
        exact_times.push(exact_ms);
    }
    solve_times.sort_by(f64::total_cmp);
    exact_times.sort_by(f64::total_cmp);
    println!();
    println!(
        "{label}: {count} instances, proven optimal {proven}/{count}, every VM placed in {all_placed}; \
         plan errors {errors}, shared cores {shared}"
    );
    println!(
        "solve() time (explanations included): median {:.1} ms, p90 {:.1} ms, max {:.1} ms; \
         exact solver alone: median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        quantile(&solve_times, 0.5),
        quantile(&solve_times, 0.9),
        quantile(&solve_times, 1.0),
        quantile(&exact_times, 0.5),
        quantile(&exact_times, 0.9),
        quantile(&exact_times, 1.0),
    );
    println!(
        "ILP vs greedy, VMs placed (lexicographic by priority): more in {more}, equal in {equal}, fewer in {fewer}"
    );
    println!("not proven: {not_proven:?}; solve() over 1 s: {over_1s:?}");
    if let Some(dir) = specs {
        println!("wrote {count} plan specs to {}", dir.display());
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Parts 6 and 7 (issue 28): a few big VMs on chiplet hosts; hosts of mixed
// thread counts.

/// Seed of part 6's instance `i` is `SEED6_BASE + i`; part 7's `SEED7_BASE + i`.
const SEED6_BASE: u64 = 0x5eed_6000;
const SEED7_BASE: u64 = 0x5eed_7000;
/// Loads of parts 6 and 7, in % of the free cores.
const LOADS6: [u32; 4] = [70, 80, 90, 100];
/// VM sizes of part 6 (vCPUs), drawn uniformly.
const BIG_SIZES: [u32; 13] = [6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96];

/// Part 6's hosts: chiplet machines (real fixtures: Zen 1 7451 with 3-core
/// CCXs, Zen 3 7763 with 8-core CCDs and SMT off, a Hygon Dhyana (Zen 1),
/// Knights Landing; synthetic ones shaped like a 2 × EPYC 9654 (Zen 4, 12
/// CCDs of 8 cores per socket) and a 2 × Xeon 8480 in SNC4 (one L3 per
/// socket over 4 nodes)), and synthetic 256- and 512-CPU hosts with 4–32 L3
/// domains per socket.
fn hosts6() -> Vec<(&'static str, Source)> {
    let file = |name: &str| Source::File(Path::new(FIXTURES).join(name));
    let syn = |d: String| Source::Synthetic(d);
    vec![
        ("zen1-7451", file("x86-AMD-17h-Zen-2xEpyc-7451.xml")),
        ("zen3-7763", file("x86-AMD-19h-Zen3-2xEpyc-7763.xml")),
        ("hygon", file("x86-Hygon-Dhyana-32cores.xml")),
        ("knl7210", file("x86-Intel-KnightsLanding-XeonPhi-7210.xml")),
        ("zen4-9654", syn(synthetic(2, 1, 12, 8, 2, true))),
        (
            "spr-snc4",
            syn("package:2 l3:1 numa:4 core:14 pu:2(indexes=2*112:1*2)".to_owned()),
        ),
        ("s256-l3x4", syn(synthetic(2, 1, 4, 16, 2, true))),
        ("s256-l3x8", syn(synthetic(2, 2, 4, 8, 2, true))),
        ("s512-l3x16", syn(synthetic(2, 2, 8, 8, 2, true))),
        ("s512-l3x32", syn(synthetic(2, 4, 8, 4, 2, true))),
    ]
}

/// Part 7's hosts: real ones whose cores have 1 or 2 usable threads (hybrid
/// P/E cores, offline siblings), and synthetic 256- and 512-CPU hosts with
/// the second thread of every third (or fourth) core offline (`offline`:
/// every n-th core; 0: none). Only the real ones are written as specs.
fn hosts7() -> Vec<(&'static str, Source, u32)> {
    let file = |name: &str| Source::File(Path::new(FIXTURES).join(name));
    vec![
        (
            "hybrid-20",
            file("gen29-20em64t-hybrid-1p6c2t+2ca4co1t.xml"),
            0,
        ),
        (
            "raptorlake",
            file("x86-Intel-RaptorLake-Corei7-1370P.xml"),
            0,
        ),
        (
            "arrowlake",
            file("x86-Intel-ArrowLake-CoreUltra5-225U.xml"),
            0,
        ),
        ("offlines-16", file("16em64t-4s2c2t-offlines.xml"), 0),
        (
            "s256-off4",
            Source::Synthetic(synthetic(2, 2, 4, 8, 2, true)),
            4,
        ),
        (
            "s512-off3",
            Source::Synthetic(synthetic(2, 2, 8, 8, 2, true)),
            3,
        ),
    ]
}

/// Part 9's hosts: part 7's synthetic ones with fewer siblings offline
/// (every 16th, 64th, 128th core), where the relaxation of a host of mixed
/// thread counts can be tight.
fn hosts9() -> Vec<(&'static str, Source, u32)> {
    let (s256, s512) = (
        synthetic(2, 2, 4, 8, 2, true),
        synthetic(2, 2, 8, 8, 2, true),
    );
    vec![
        ("s256-off16", Source::Synthetic(s256.clone()), 16),
        ("s256-off64", Source::Synthetic(s256), 64),
        ("s512-off128", Source::Synthetic(s512), 128),
    ]
}

/// Takes the second thread of every `nth` core offline.
fn offline_siblings(host: &mut HostTopology, nth: usize) {
    if nth == 0 {
        return;
    }
    let off: BTreeSet<CpuId> = host
        .cores
        .iter()
        .enumerate()
        .filter(|(k, _)| k % nth == nth - 1)
        .filter_map(|(_, c)| c.cpus.iter().nth(1))
        .collect();
    for pu in &mut host.pus {
        if off.contains(&pu.cpu) {
            pu.usable = false;
            pu.allowed = false;
        }
    }
}

/// An instance of `vms` VMs (a range) of `sizes` vCPUs at `load` % of the
/// free cores of `host`: drawn, then vCPUs taken from or added to random VMs
/// until the demand is the load (within the sizes' range, never beyond the
/// largest node's free cores). Policies: `threads` mostly prefer, then
/// require (with SMT) and isolate; `numa` mostly strict; some emulators
/// isolated; no NICs, no priorities.
fn few_big(
    name: String,
    seed: u64,
    (source, host): (&Source, &HostTopology),
    load: u32,
    vms_range: (u32, u32),
    sizes: &[u32],
) -> Instance {
    let mut rng = Rng::new(seed);
    let (mut request, free_cores, smt) = bare_request(host);
    let node_cap = free_per_node(&request)
        .iter()
        .filter(|(n, _)| n.is_some())
        .map(|(_, c)| *c)
        .max()
        .unwrap_or(free_cores);
    let (least, most) = (
        sizes.iter().copied().min().unwrap_or(1),
        sizes.iter().copied().max().unwrap_or(1),
    );
    let count = rng.range(vms_range.0, vms_range.1);
    let mut vms: Vec<VmRequest> = Vec::new();
    for i in 0..count {
        let k = rng.range(0, u32::try_from(sizes.len() - 1).unwrap_or(0)) as usize;
        let mut vm = VmRequest::new(&format!("vm{i:02}"), sizes[k]);
        vm.threads = match rng.range(0, 19) {
            0..=5 if smt >= 2 => ThreadPolicy::Require,
            0..=16 => ThreadPolicy::Prefer,
            _ => ThreadPolicy::Isolate,
        };
        vm.numa = match rng.range(0, 19) {
            0..=15 => NumaPolicy::Strict,
            16..=18 => NumaPolicy::Preferred,
            _ => NumaPolicy::Spread,
        };
        if rng.chance(20) {
            vm.emulator = EmulatorPolicy::Isolate;
        }
        while vm.vcpus > 1 && !fits_node(&vm, smt, node_cap) {
            vm.vcpus -= 1;
        }
        vms.push(vm);
    }
    let target = (free_cores * load).div_ceil(100);
    let demand_of = |vms: &[VmRequest]| -> u32 { vms.iter().map(|v| cores_needed(v, smt)).sum() };
    shrink_to(&mut vms, &mut rng, (target, smt), least);
    grow_to(&mut vms, &mut rng, (target, smt, node_cap), most);
    let demand_cores = demand_of(&vms);
    request.vms = vms;
    Instance {
        name,
        seed,
        load,
        source: source.clone(),
        request,
        smt,
        free_cores,
        demand_cores,
        nic_without_address: 0,
    }
}

/// Part 6's instances: per host, one per load, 4–20 VMs of 6–96 vCPUs.
fn instances6(only: Option<&str>) -> BoxResult<Vec<Instance>> {
    let mut instances = Vec::new();
    let mut seed = SEED6_BASE;
    for (host_name, source) in hosts6() {
        let host = topology::load(&source)?;
        for &load in &LOADS6 {
            let name = format!("{host_name}-{load}");
            if only.is_none_or(|o| o == name) {
                instances.push(few_big(
                    name,
                    seed,
                    (&source, &host),
                    load,
                    (4, 20),
                    &BIG_SIZES,
                ));
            }
            seed += 1;
        }
    }
    Ok(instances)
}

/// Part 7's instances: per host, one per load, 4–20 VMs of 2–16 vCPUs.
fn instances7(only: Option<&str>) -> BoxResult<Vec<(Instance, bool)>> {
    mixed_instances(only, hosts7())
}

/// Part 7's instances on `hosts` (seeds from part 7's on).
fn mixed_instances(
    only: Option<&str>,
    hosts: Vec<(&'static str, Source, u32)>,
) -> BoxResult<Vec<(Instance, bool)>> {
    let sizes: Vec<u32> = (2..=16).collect();
    let mut instances = Vec::new();
    let mut seed = SEED7_BASE;
    for (host_name, source, offline) in hosts {
        let mut host = topology::load(&source)?;
        offline_siblings(&mut host, offline as usize);
        for &load in &LOADS6 {
            let name = format!("{host_name}-{load}");
            if only.is_none_or(|o| o == name) {
                let inst = few_big(name, seed, (&source, &host), load, (4, 20), &sizes);
                instances.push((inst, offline == 0));
            }
            seed += 1;
        }
    }
    Ok(instances)
}

/// Part 6: a few big VMs on chiplet hosts.
fn part6(only: Option<&str>, specs: Option<&Path>) -> BoxResult<()> {
    println!();
    println!(
        "== few big VMs (issue 28): 10 hosts x loads {LOADS6:?} % (seeds {SEED6_BASE:#x}..), 4-20 VMs of 6-96 vCPUs; solve(): ILP, {} s, explain = true ==",
        TIME_LIMIT.as_secs()
    );
    let instances = instances6(only)?;
    if let (Some(dir), Some(_)) = (specs, std::env::var_os("PLAN_BENCH_SPECS_ONLY")) {
        std::fs::create_dir_all(dir)?;
        for inst in &instances {
            check_spec(&write_spec(dir, inst)?, inst)?;
        }
        println!("wrote {} plan specs to {}", instances.len(), dir.display());
        return Ok(());
    }
    report_set("few big VMs", &instances, specs)
}

/// Part 7: hosts of mixed thread counts (specs only for the real hosts:
/// offline siblings of the synthetic ones cannot be written in a spec).
fn part7(only: Option<&str>, specs: Option<&Path>) -> BoxResult<()> {
    println!();
    println!(
        "== mixed thread counts (issue 28): 6 hosts x loads {LOADS6:?} % (seeds {SEED7_BASE:#x}..), 4-20 VMs of 2-16 vCPUs; solve(): ILP, {} s, explain = true ==",
        TIME_LIMIT.as_secs()
    );
    let all = instances7(only)?;
    if let Some(dir) = specs {
        std::fs::create_dir_all(dir)?;
        for (inst, _) in all.iter().filter(|(_, real)| *real) {
            check_spec(&write_spec(dir, inst)?, inst)?;
        }
    }
    if std::env::var_os("PLAN_BENCH_SPECS_ONLY").is_some() {
        return Ok(());
    }
    let instances: Vec<Instance> = all.into_iter().map(|(i, _)| i).collect();
    report_set("mixed thread counts", &instances, None)
}

/// Part 4 (issue 16): the seeded set with memory on — every VM 1 GiB per
/// vCPU on 2 MiB pages — against memory off: with pools that hold every VM
/// (memory cannot bind: its constraints are left out) and with tight pools
/// (each node 80 % of an even share of all the pages: memory binds).
fn part4(only: Option<&str>) -> BoxResult<()> {
    println!();
    println!(
        "== seeded set, memory off / on with ample pools / on with tight pools (1 GiB per vCPU, 2 MiB pages): solve() ILP, {} s ==",
        TIME_LIMIT.as_secs()
    );
    memory_set(instances3(only)?)
}

/// Part 9: part 7's instances on hosts with few siblings offline.
fn part9(only: Option<&str>) -> BoxResult<()> {
    println!();
    println!(
        "== few offline siblings (issue 28): 3 hosts x loads {LOADS6:?} % (seeds {SEED7_BASE:#x}..), 4-20 VMs of 2-16 vCPUs; solve(): ILP, {} s, explain = true ==",
        TIME_LIMIT.as_secs()
    );
    let instances = mixed_instances(only, hosts9())?;
    let instances: Vec<Instance> = instances.into_iter().map(|(i, _)| i).collect();
    report_set("few offline siblings", &instances, None)
}

/// Part 8: part 7's hosts of mixed thread counts with memory, as part 4.
fn part8(only: Option<&str>) -> BoxResult<()> {
    println!();
    println!(
        "== mixed thread counts (part 7's instances), memory off / on with ample pools / on with tight pools (1 GiB per vCPU, 2 MiB pages): solve() ILP, {} s ==",
        TIME_LIMIT.as_secs()
    );
    memory_set(instances7(only)?.into_iter().map(|(i, _)| i).collect())
}

/// Each of `instances` solved without memory, with ample pools (every
/// node's pool holds all VMs) and with tight ones (80 % of the VMs' pages
/// over the nodes): times, VMs placed, proofs.
fn memory_set(instances: Vec<Instance>) -> BoxResult<()> {
    println!(
        "{:<16} {:>9} {:>9} {:>9} {:>11} {:>9} {:>7}",
        "instance", "off ms", "ample ms", "tight ms", "placed o/a/t", "same obj", "proven"
    );
    let options = SolveOptions {
        solver: SolverKind::Ilp,
        explain: true,
        progress: None,
    };
    let with_pools = |req: &PlanRequest, share: f64| {
        let mut req = req.clone();
        let pages: u64 = req.vms.iter().map(|v| u64::from(v.vcpus) * 512).sum();
        let nodes = req.host.numa_nodes.len().max(1) as f64;
        let pool = if share >= 1.0 {
            pages
        } else {
            (pages as f64 / nodes * share) as u64
        };
        for node in &mut req.host.numa_nodes {
            node.hugepages = vec![pinplan::topology::PagePool {
                size_kib: 2048,
                total: pool,
                free: Some(pool),
            }];
        }
        for vm in &mut req.vms {
            vm.memory = Some(pinplan::memory::VmMemory {
                bytes: u64::from(vm.vcpus) << 30,
                page_kib: 2048,
            });
        }
        req
    };
    let mut times: [Vec<f64>; 3] = Default::default();
    let (mut differ, mut unproven) = (0, [0; 3]);
    for inst in instances {
        let reqs = [
            inst.request.clone(),
            with_pools(&inst.request, 1.0),
            with_pools(&inst.request, 0.8),
        ];
        let mut plans = Vec::new();
        for (k, req) in reqs.iter().enumerate() {
            let start = Instant::now();
            let plan = solve::solve(req, &options, Deadline::after(TIME_LIMIT));
            times[k].push(ms(start.elapsed()));
            unproven[k] += usize::from(!plan.proven);
            plans.push(plan);
        }
        let same = plans[0].objective == plans[1].objective;
        differ += usize::from(!same);
        println!(
            "{:<16} {:>9.1} {:>9.1} {:>9.1} {:>3}/{:>3}/{:>3} {:>9} {}/{}/{}",
            inst.name,
            times[0].last().copied().unwrap_or(0.0),
            times[1].last().copied().unwrap_or(0.0),
            times[2].last().copied().unwrap_or(0.0),
            plans[0].vms.len(),
            plans[1].vms.len(),
            plans[2].vms.len(),
            same,
            plans[0].proven,
            plans[1].proven,
            plans[2].proven
        );
    }
    for (k, name) in ["memory off", "ample pools", "tight pools"]
        .iter()
        .enumerate()
    {
        let mut v = times[k].clone();
        v.sort_by(f64::total_cmp);
        println!(
            "{name}: median {:.1} ms, p90 {:.1} ms, max {:.1} ms, total {:.0} ms, not proven {}",
            quantile(&v, 0.5),
            quantile(&v, 0.9),
            v.last().copied().unwrap_or(0.0),
            v.iter().sum::<f64>(),
            unproven[k]
        );
    }
    println!("objectives off vs ample pools differ in {differ}");
    Ok(())
}

// ---------------------------------------------------------------------------
// Part 5 (issue 27): running VMs that may move.

/// Part 1's hosts, each with part 1's VMs running where part 1's plan put
/// them, all `movable`, and two new 8-vCPU VMs of a higher priority: the
/// time of the exact plan that places them and moves the fewest vCPUs
/// (the per-class program, which counts moves), against the same request
/// solved as if nothing ran (the aggregated program), and the vCPUs moved.
/// vCPUs are counted as moved from the plan's pins; those of VMs whose guest
/// sees sibling pairs of an odd count, or roles, are not minimised.
fn part5() -> BoxResult<()> {
    println!("== running VMs that may move (issue 27): part 1's hosts, every VM running and movable, 2 new 8-vCPU VMs ==");
    println!(
        "{:<52} {:>4} {:>8} {:>9} {:>9} {:>8} {:>12} {:>14}",
        "host (synthetic)",
        "vms",
        "placed",
        "moves ms",
        "fresh ms",
        "proven",
        "moved vCPUs",
        "of minimised"
    );
    let sizes: [(u32, u32, u32); 5] = [(2, 1, 4), (2, 2, 8), (2, 4, 8), (2, 8, 8), (2, 12, 8)];
    for (packages, l3, cores) in sizes {
        let text = synthetic(packages, 1, l3, cores, 2, true);
        let host = topology::load(&Source::Synthetic(text.clone()))?;
        let base = sized_request(host);
        let before = solve::solve(&base, &ilp_options(), ten_seconds());
        let mut request = base.clone();
        for vm in &mut request.vms {
            let Some(planned) = before.vms.iter().find(|p| p.name == vm.name) else {
                continue;
            };
            vm.running = true;
            // As the spec layer does: where vCPU ids may follow CPUs (one
            // thread per core in the guest, or sibling pairs that fill
            // their cores).
            let guest_threads = planned.guest_topology.threads;
            if solve::assign::can_keep_in_place(vm, guest_threads) {
                vm.now = planned.vcpus.iter().map(|p| (p.vcpu, p.cpu)).collect();
            }
        }
        for i in 0..2 {
            let mut vm = VmRequest::new(&format!("new{i}"), 8);
            vm.priority = 1;
            request.vms.push(vm);
        }
        let start = Instant::now();
        let plan = solve::solve(&request, &ilp_options(), ten_seconds());
        let moves_ms = ms(start.elapsed());
        let mut fresh = request.clone();
        for vm in &mut fresh.vms {
            vm.running = false;
            vm.now.clear();
        }
        let start = Instant::now();
        let fresh_plan = solve::solve(&fresh, &ilp_options(), ten_seconds());
        let fresh_ms = ms(start.elapsed());
        std::hint::black_box(&fresh_plan);
        let (mut moved, mut moved_counted, mut counted) = (0, 0, 0);
        for vm in &plan.vms {
            let Some(was) = before.vms.iter().find(|p| p.name == vm.name) else {
                continue;
            };
            let minimised = request
                .vms
                .iter()
                .any(|r| r.name == vm.name && !r.now.is_empty());
            for pin in &vm.vcpus {
                let stays = was
                    .vcpus
                    .iter()
                    .any(|p| p.vcpu == pin.vcpu && p.cpu == pin.cpu);
                if minimised {
                    counted += 1;
                }
                if !stays {
                    moved += 1;
                    if minimised {
                        moved_counted += 1;
                    }
                }
            }
        }
        let check = check_plan(&request, &plan);
        println!(
            "{:<52} {:>4} {:>8} {:>9.1} {:>9.1} {:>8} {:>12} {:>14}",
            text,
            request.vms.len(),
            format!("{}/{}", plan.vms.len(), request.vms.len()),
            moves_ms,
            fresh_ms,
            plan.proven,
            moved,
            format!("{moved_counted} of {counted}"),
        );
        if check.shared_cores > 0 || !check.errors.is_empty() {
            return Err(format!(
                "{text}: shared cores {}, errors {:?}",
                check.shared_cores, check.errors
            )
            .into());
        }
    }
    Ok(())
}

/// The parts to run: `PLAN_BENCH_PART` (`3`, `1,3`...), else parts 1–3; a
/// seed alone means part 2 only, an instance alone part 3 only.
fn parts(seed: Option<u64>, instance: Option<&str>) -> BoxResult<BTreeSet<u32>> {
    if let Ok(text) = std::env::var("PLAN_BENCH_PART") {
        let mut parts = BTreeSet::new();
        for item in text.split(',') {
            let part: u32 = item.trim().parse()?;
            if !(1..=9).contains(&part) {
                return Err(format!("PLAN_BENCH_PART: no part {part} (1 to 9)").into());
            }
            parts.insert(part);
        }
        return Ok(parts);
    }
    Ok(match (seed, instance) {
        (Some(_), None) => [2].into(),
        (None, Some(_)) => [3].into(),
        (Some(_), Some(_)) => [2, 3].into(),
        (None, None) => [1, 2, 3].into(),
    })
}

/// What the CLI reads from the environment for the solver (the library
/// reads none): `PINPLAN_ILP_TRACE=1` prints every objective's solve on
/// stderr, `PINPLAN_CBC_PARAMS=key=value,…` passes CBC more parameters.
fn solver_settings_from_env() {
    if std::env::var_os("PINPLAN_ILP_TRACE").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(format!("{}=debug", pinplan::solve::ilp::TRACE))
            .with_writer(std::io::stderr)
            .without_time()
            .with_level(false)
            .with_target(false)
            .try_init();
    }
    let params = std::env::var("PINPLAN_CBC_PARAMS").unwrap_or_default();
    pinplan::solve::backend::configure(pinplan::solve::backend::SolverSettings {
        cbc_params: pinplan::solve::backend::SolverSettings::parse_cbc_params(&params),
        fault: None,
    });
}

fn main() -> BoxResult<()> {
    solver_settings_from_env();
    // `PLAN_BENCH_SEED=0x5eed0007` reruns one scenario of part 2 only.
    let only = match std::env::var("PLAN_BENCH_SEED") {
        Ok(text) => {
            let digits = text.trim_start_matches("0x");
            Some(u64::from_str_radix(digits, 16)?)
        }
        Err(_) => None,
    };
    // `PLAN_BENCH_INSTANCE=epyc7763-110` runs one instance of part 3 only.
    let instance = std::env::var("PLAN_BENCH_INSTANCE").ok();
    let specs = std::env::var_os("PLAN_BENCH_SPECS").map(PathBuf::from);
    let parts = parts(only, instance.as_deref())?;
    if parts.contains(&1) {
        part1()?;
    }
    if parts.contains(&2) {
        part2(only)?;
    }
    if parts.contains(&4) {
        part4(instance.as_deref())?;
    }
    if parts.contains(&5) {
        part5()?;
    }
    if parts.contains(&3) {
        match (&specs, std::env::var_os("PLAN_BENCH_SPECS_ONLY")) {
            (Some(dir), Some(_)) => part3_specs(instance.as_deref(), dir)?,
            _ => part3(instance.as_deref(), specs.as_deref())?,
        }
    }
    if parts.contains(&6) {
        part6(instance.as_deref(), specs.as_deref())?;
    }
    if parts.contains(&7) {
        part7(instance.as_deref(), specs.as_deref())?;
    }
    if parts.contains(&8) {
        part8(instance.as_deref())?;
    }
    if parts.contains(&9) {
        part9(instance.as_deref())?;
    }
    Ok(())
}
