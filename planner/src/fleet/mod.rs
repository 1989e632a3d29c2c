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
mod bins;
mod classes;
mod hosts;
pub mod index;
pub mod inventory;
mod kinds;
mod names;
mod outcome;
mod pack;
pub mod pool;
pub mod read;
pub mod survey;
mod text;

use crate::deadline::{Deadline, FLEET_ASSIGN_SHARE};
use crate::doctor::HostFacts;
use crate::plan::Plan;
use crate::spec::{FleetHost, FleetSpec, FleetVm, SpecError};
use crate::topology::HostTopology;
use index::{HostIx, Index, Per, VmIx};
pub use read::{FactsError, HostReadError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What was read of one host.
#[derive(Debug)]
pub struct HostInput {
    /// Its topology.
    pub topology: HostTopology,
    /// Domains running on it (through `connect`), with their pins.
    pub running: Vec<crate::tenant::Tenant>,
    /// `doctor`'s facts from its `doctor_root`, or from its node devices
    /// through its URI; `Err` says why they could not be read.
    pub facts: Option<Result<HostFacts, FactsError>>,
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
    /// When planning ends (the assignment and every host's plan).
    pub deadline: Deadline,
}

/// Plans `spec` on the hosts as read (`inputs`, in spec order): the
/// classes of hosts alike, the kinds of VMs alike and the assignment's
/// bins, the assignment, each VM onto a host, each host's plan, the repair
/// of what a host's plan left out, and the outcomes.
pub fn plan_fleet(
    spec: &FleetSpec,
    inputs: Vec<Result<HostInput, HostReadError>>,
    options: &FleetOptions,
) -> Result<FleetPlan, SpecError> {
    let started = Instant::now();
    let deadline = options.deadline;
    let inputs: Per<HostIx, _> = Per::from(inputs);
    let mut warnings = Vec::new();
    let fleet = Fleet::new(spec, &inputs, &mut warnings);
    let classes = classes::Classes::read(&fleet)?;
    trace(started, "host classes read");
    let mut kinds = kinds::Kinds::form(&fleet, &classes);
    let refused = std::mem::take(&mut kinds.refused);
    trace(started, "kinds formed");
    let bins = bins::Bins::group(&fleet, &classes, &kinds);
    tracing::debug!(
        target: "pinplan::ilp",
        "fleet: {} kinds, {} host classes, {} bins, assignment starts after {:.1} ms",
        kinds.all.len(),
        classes.all.len(),
        bins.hosts.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let assignment = bins.assign(deadline.share(FLEET_ASSIGN_SHARE, Duration::ZERO));
    if let Some(fault) = &assignment.fault {
        warnings.push(fault.to_string());
    }
    trace(started, "assignment solved");
    let packed = pack::members_to_hosts(&fleet, &classes, &kinds, &bins, &assignment);
    trace(started, "VMs packed onto hosts");
    let mut planned = hosts::HostPlans::plan(&fleet, &classes, &kinds, packed.host_of, deadline);
    trace(started, "hosts planned");
    planned.repair();
    if packed.short > 0 {
        warnings.push(format!(
            "{} VM(s) the assignment gave to a group of hosts alike did not fit the host first fit chose: placed on another host they may use, or left out",
            packed.short
        ));
    }
    trace(started, "repaired");
    Ok(outcome::fleet_plan(
        &fleet,
        &classes,
        refused,
        planned,
        assignment,
        warnings,
        outcome::Clock { started, deadline },
    ))
}

/// The fleet as every step sees it: the spec, what was read of each host,
/// the names' indexes, and where each VM of the spec runs now.
struct Fleet<'a> {
    spec: &'a FleetSpec,
    inputs: &'a Per<HostIx, Result<HostInput, HostReadError>>,
    vm_index: BTreeMap<&'a str, VmIx>,
    host_index: BTreeMap<&'a str, HostIx>,
    running_on: BTreeMap<VmIx, HostIx>,
}

impl<'a> Fleet<'a> {
    /// The fleet of `spec` as read; a VM of the spec running on two hosts is
    /// a warning (it is planned as running on the first).
    fn new(
        spec: &'a FleetSpec,
        inputs: &'a Per<HostIx, Result<HostInput, HostReadError>>,
        warnings: &mut Vec<String>,
    ) -> Fleet<'a> {
        let mut fleet = Fleet {
            spec,
            inputs,
            vm_index: spec
                .vms
                .iter()
                .enumerate()
                .map(|(i, v)| (v.name.as_str(), VmIx::at(i)))
                .collect(),
            host_index: spec
                .hosts
                .iter()
                .enumerate()
                .map(|(h, host)| (host.name.as_str(), HostIx::at(h)))
                .collect(),
            running_on: BTreeMap::new(),
        };
        for (h, input) in inputs.enumerate() {
            let Ok(input) = input else { continue };
            for name in input.running.iter().map(|t| &t.name) {
                let Some(&v) = fleet.vm_index.get(name.as_str()) else {
                    continue;
                };
                if let Some(&other) = fleet.running_on.get(&v) {
                    let first = &fleet.host(other).name;
                    warnings.push(format!(
                        "{name} runs on both {first} and {}: planned as running on {first}",
                        fleet.host(h).name
                    ));
                } else {
                    fleet.running_on.insert(v, h);
                }
            }
        }
        fleet
    }

    /// Host `h` of the spec.
    fn host(&self, h: HostIx) -> &'a FleetHost {
        &self.spec.hosts[h.get()]
    }

    /// VM `v` of the spec.
    fn vm(&self, v: VmIx) -> &'a FleetVm {
        &self.spec.vms[v.get()]
    }

    /// Every host, in spec order.
    fn hosts(&self) -> impl Iterator<Item = HostIx> {
        (0..self.spec.hosts.len()).map(HostIx::at)
    }

    /// How many hosts.
    fn hosts_len(&self) -> usize {
        self.spec.hosts.len()
    }

    /// Every VM, in spec order.
    fn vms(&self) -> impl Iterator<Item = VmIx> {
        (0..self.spec.vms.len()).map(VmIx::at)
    }
}

/// How long planning has taken at `step` (the ILP trace).
fn trace(started: Instant, step: &str) {
    tracing::debug!(
        target: "pinplan::ilp",
        "fleet: {step} after {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::{self, SolveOptions};
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
    fn solved(
        spec: &FleetSpec,
        inputs: Vec<Result<HostInput, HostReadError>>,
        seconds: u64,
    ) -> FleetPlan {
        plan_fleet(
            spec,
            inputs,
            &FleetOptions {
                deadline: Deadline::after(Duration::from_secs(seconds)),
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

    /// A VM left out that no host refuses says, per host it may use, why it
    /// does not fit there even alone: the one-host plan's reason (h0's node
    /// has 1 GiB, 256 MiB kept for the host: 768 MiB for a 1 GiB VM; h1 and
    /// h2, alike, one free core each for a 2-core VM). It was `refused: []`
    /// and "no room on the hosts it may use".
    #[test]
    fn a_vm_that_fits_no_host_even_alone_says_why_per_host() {
        let text = "[[host]]\nname = \"h0\"\n\
                    source = \"synthetic:package:1 numa:1(memory=1073741824) core:4 pu:1\"\n\
                    reserved_cores = 1\nreserved_memory = 256\n\
                    [[host]]\nname = \"h1\"\n\
                    source = \"synthetic:package:1 numa:1(memory=4294967296) core:2 pu:1\"\n\
                    reserved_cores = 1\nreserved_memory = 256\n\
                    [[host]]\nname = \"h2\"\n\
                    source = \"synthetic:package:1 numa:1(memory=4294967296) core:2 pu:1\"\n\
                    reserved_cores = 1\nreserved_memory = 256\n\
                    [[vm]]\nname = \"big\"\nvcpus = 2\nmemory = \"1GiB\"\nhugepages = \"none\"\n\
                    [[vm]]\nname = \"a\"\nvcpus = 3\n[[vm]]\nname = \"b\"\nvcpus = 1\n\
                    [[vm]]\nname = \"c\"\nvcpus = 2\n";
        let spec = fleet_spec(text);
        let inputs = spec
            .hosts
            .iter()
            .map(|h| {
                Ok(HostInput {
                    topology: crate::topology::load(&h.source).unwrap_or_else(|e| panic!("{e}")),
                    running: Vec::new(),
                    facts: None,
                })
            })
            .collect();
        let plan = solved(&spec, inputs, 10);
        let big = &plan.vms[0];
        assert_eq!(big.host, None);
        let hosts: Vec<&str> = big.refused.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["h0", "h1"], "{big:?}");
        assert!(
            big.refused[0]
                .reason
                .contains("it needs 1.0 GiB of memory on one node; node 0 has 768.0 MiB free"),
            "{big:?}"
        );
        // h1 and h2 are alike: one refusal, on h1, naming h2.
        assert!(
            big.refused[1].reason.starts_with(
                "even alone on this host (and on 1 other host alike: h2): big needs 2 cores"
            ) && big.refused[1].reason.contains("1 core free"),
            "{big:?}"
        );
        // a, b and c need 6 cores of the 5 free: c is left out (a on h0
        // and b on h1 place 4 vCPUs, c and b only 3). c fits h0 alone, so
        // h0 does not refuse it (h0 was full); h1 and h2, of one free core
        // each, do.
        let left: Vec<&FleetVmOutcome> =
            plan.vms[1..].iter().filter(|v| v.host.is_none()).collect();
        assert_eq!(left.len(), 1, "{:?}", plan.vms);
        let hosts: Vec<&str> = left[0].refused.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["h1"], "{:?}", left[0]);
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
        let plan = solve::solve(
            &request,
            &SolveOptions::default(),
            Deadline::after(Duration::from_secs(10)),
        );
        let solved: Vec<String> = ["a", "b", "c"].map(str::to_owned).to_vec();
        let left = plan.unplaced.clone();
        assert_eq!(left.len(), 1, "{:?}", plan.summary);
        let summary = plan
            .summary
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(
            summary.ends_with(&format!("left out: {}", left[0])),
            "{summary}"
        );
        assert_eq!(
            request
                .vms
                .iter()
                .map(|v| v.name.clone())
                .collect::<Vec<_>>(),
            solved
        );
        let kept = names::Names::placeholders(&request).rename(&plan);
        let theirs = names::Names::real(&["x", "y", "z"]).rename(&kept);
        let theirs_left = match left[0].as_str() {
            "a" => "x",
            "b" => "y",
            _ => "z",
        };
        assert_eq!(theirs.unplaced, [theirs_left]);
        let summary = theirs
            .summary
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(
            summary.starts_with("3 VMs ask for 6 cores, 4 are free: 2 fit; left out: ")
                && summary.ends_with(&format!("left out: {theirs_left}")),
            "{summary}"
        );
        let mut names: Vec<&str> = theirs.vms.iter().map(|v| v.name.as_str()).collect();
        names.push(theirs_left);
        names.sort_unstable();
        assert_eq!(names, ["x", "y", "z"]);
        // The explanation names the others too ("left after x, y"), which
        // editing the text at the VM's own name never reached.
        let placed: Vec<&str> = theirs.vms.iter().map(|v| v.name.as_str()).collect();
        let why = &theirs.explanations[0];
        assert_eq!(why.vm, theirs_left);
        let after = format!("left after {}", placed.join(", "));
        assert!(
            why.message
                .to_string()
                .starts_with(&format!("{theirs_left} needs "))
                && why.message.to_string().contains(&after)
                && why.free.iter().any(|l| l.to_string().ends_with(&after)),
            "{why:?}"
        );
        let json = theirs.to_json();
        assert!(!json.contains('#'), "{json}");
        for old in [
            "\"a\"", "\"b\"", "\"c\"", " a,", " b,", " c,", " a ", " b ", " c ",
        ] {
            assert!(!json.contains(old), "{old} in {json}");
        }
    }

    /// A fleet of one-node hosts of `cores` cores (one thread each, core 0
    /// reserved) and VMs of (vCPUs, priority), each vCPU a core.
    fn fleet(
        cores: &[u32],
        vms: &[(u32, i64)],
    ) -> (FleetSpec, Vec<Result<HostInput, HostReadError>>) {
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
                    .map_err(HostReadError::from)
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
            let inputs: Vec<Result<HostInput, HostReadError>> = spec
                .hosts
                .iter()
                .enumerate()
                .map(|(h, host)| {
                    let topology = crate::topology::load(&host.source)?;
                    let running = if h == 0 {
                        let xml = "<domain><name>old</name><vcpu cpuset='1-3'>3</vcpu></domain>";
                        vec![crate::libvirt::domain::tenant_from_domain(
                            "old.xml", xml, &topology,
                        )?]
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
    fn v0_running_on(cpu: &str) -> (FleetSpec, Vec<Result<HostInput, HostReadError>>) {
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
        inputs[0] = Err(HostReadError::Timeout { seconds: 30.0 });
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
