//! The [`Plan`] value: where every vCPU, emulator and I/O thread of each VM
//! goes, what could not be placed and why, with typed fields (policies,
//! CPU lists, bindings, sentences and warnings of [`super`]). Serializes to
//! the JSON contract of `pinplan plan --format json` / `DIR/plan.json`.
//! Making plans is `solve`'s job; reading one back and printing it is
//! `plan`'s.

use super::ThreadPolicy;
use crate::cpuset::CpuSet;
use crate::demand::Basis;
use crate::ids::{CoreId, CpuId, NodeId};
use crate::topology::PciAddress;
use serde::{Deserialize, Serialize};

/// How sure the plan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every VM placed, and the solver proved no better placement exists.
    Optimal,
    /// Every VM placed, but optimality was not proven (time limit, greedy).
    Feasible,
    /// At least one VM could not be placed; the plan holds what fits.
    Infeasible,
}

/// What a vCPU does in the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Housekeeping: DPDK's main lcore, the guest OS.
    Main,
    /// A poll-mode vCPU receiving (table-sized VMs).
    Rx,
    /// A poll-mode vCPU sending (table-sized VMs).
    Tx,
    /// A poll-mode vCPU of a VM sized by hand (`housekeeping_vcpus`).
    Pmd,
}

impl Role {
    /// The plan's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Main => "main",
            Role::Rx => "rx",
            Role::Tx => "tx",
            Role::Pmd => "pmd",
        }
    }
}

/// One vCPU's host CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuPin {
    /// Guest vCPU number.
    pub vcpu: u32,
    /// Host CPU.
    pub cpu: CpuId,
    /// Its role, for VMs sized from a table or given housekeeping vCPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
}

/// One I/O thread's host CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IothreadPin {
    /// libvirt I/O thread id (1-based).
    pub iothread: u32,
    /// Host CPUs.
    pub cpus: CpuSet,
}

impl IothreadPin {
    /// A plan's I/O threads (numbered 1…n) on a domain whose own I/O thread
    /// ids are `ids`: in the plan's order, the lowest id first — how the
    /// patch, `apply` and `report --plan` all name them. `None` when the
    /// domain has another number of I/O threads.
    pub fn on_ids(
        planned: &[IothreadPin],
        ids: &std::collections::BTreeSet<u32>,
    ) -> Option<Vec<IothreadPin>> {
        if planned.len() != ids.len() {
            return None;
        }
        let mut ordered = planned.to_vec();
        ordered.sort_by_key(|t| t.iothread);
        Some(
            ordered
                .into_iter()
                .zip(ids)
                .map(|(t, &iothread)| IothreadPin {
                    iothread,
                    cpus: t.cpus,
                })
                .collect(),
        )
    }
}

/// The CPU topology the guest should see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestTopology {
    /// Sockets.
    pub sockets: u32,
    /// Dies per socket: the L3 domains the VM spans with `cache_aware`
    /// (evenly, each a run of guest vCPUs), else 1. Absent in JSON when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub dies: u32,
    /// Cores per die.
    pub cores: u32,
    /// Threads per core (2 when guest vCPU pairs 2k, 2k+1 are host siblings).
    pub threads: u32,
    /// The guest needs the `topoext` CPU feature to see its threads: an AMD
    /// host and threads > 1.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub topoext: bool,
    /// `<cache mode='passthrough'/>` (`cache_passthrough`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_passthrough: bool,
}

fn one() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_one(n: &u32) -> bool {
    *n == 1
}

impl GuestTopology {
    /// One socket of `cores` cores of `threads` threads, nothing else.
    pub fn new(cores: u32, threads: u32) -> GuestTopology {
        GuestTopology {
            sockets: 1,
            dies: 1,
            cores,
            threads,
            topoext: false,
            cache_passthrough: false,
        }
    }

    /// Whether `<cpu>` needs a CPU mode for it: a feature or cache mode is
    /// refused by libvirt on a `<cpu>` without a model or mode.
    pub fn needs_cpu_mode(&self) -> bool {
        self.topoext || self.cache_passthrough
    }
}

/// What the VM's vCPU count rests on, when it came from a throughput table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedDemand {
    /// Measured row or model.
    pub basis: Basis,
    /// Expected rate.
    pub predicted_gbps: f64,
    /// Profile.
    pub profile: String,
    /// Target asked for.
    pub target_gbps: f64,
    /// Share of the target accepted.
    pub min_fraction: f64,
    /// A model answer: the family that answered (absent in plans made
    /// before the model family, and for measured answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::demand::Family>,
    /// A model answer: its interval, beside the rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<crate::demand::Interval>,
    /// How the rows it rests on ran their forwarding threads: 1 (one per
    /// core) or 2 (both SMT siblings); absent when the table does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_per_core: Option<u32>,
    /// The `source` of the table rows it rests on (a report, a file@commit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
}

/// A guest NUMA cell, when a VM spans host nodes (`numa = "spread"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestCell {
    /// Guest cell id (0-based).
    pub id: u32,
    /// Guest vCPUs in the cell (vCPU numbers, in the CPU-list syntax).
    pub vcpus: CpuSet,
    /// The host node backing it.
    pub host_node: NodeId,
    /// Its distance to each guest cell, by cell (the host's between their
    /// nodes); absent when the host's are unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distances: Vec<u32>,
}

/// One VM's placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmPlan {
    /// Domain name.
    pub name: String,
    /// vCPU → host CPU, by vCPU.
    pub vcpus: Vec<VcpuPin>,
    /// Host cores the VM owns (all their CPUs are its, used or idle).
    pub cores: Vec<CoreId>,
    /// All host CPUs the VM owns (the union of its cores' usable CPUs).
    pub cpus: CpuSet,
    /// emulatorpin.
    pub emulator_cpus: CpuSet,
    /// iothreadpin, one per I/O thread.
    pub iothreads: Vec<IothreadPin>,
    /// Host NUMA nodes of its CPUs (and memory).
    pub numa_nodes: Vec<NodeId>,
    /// Guest NUMA cells (only when it spans nodes).
    pub guest_cells: Vec<GuestCell>,
    /// What the guest should see.
    pub guest_topology: GuestTopology,
    /// The thread policy used (`isolate`, `require`, `prefer`).
    pub threads: ThreadPolicy,
    /// The demand it was sized by, if from a table.
    pub demand: Option<PlannedDemand>,
    /// The VM's NIC from the spec (usually an SR-IOV PF whose VFs the VM
    /// gets); absent when the spec names none, and in plans written before
    /// the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<PciAddress>,
    /// All its NICs, when the spec names more than one (`nics`); the first
    /// is also `nic`. Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<PciAddress>,
    /// Its memory and page size, when the spec gives them; absent otherwise
    /// (and in plans written before the field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::memory::VmMemory>,
    /// Its real-time (FIFO) vCPUs, as guest vCPU ids (`realtime`); absent
    /// when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime_vcpus: Option<CpuSet>,
    /// A running VM kept where it runs (its pins as they are, not planned):
    /// `plan --out` writes no XML for it and `apply` finds it in place.
    /// Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
}

/// Where a tenant the plan works around comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FixedKind {
    /// A `[[fixed]]` table of the spec.
    #[default]
    Spec,
    /// A domain running on the host (read through `--connect`) that keeps
    /// the CPUs its threads may run on.
    Running,
    /// A shut-off domain's config pins, counted with `--count-shut-off`.
    ShutOff,
}

impl FixedKind {
    fn is_spec(&self) -> bool {
        *self == FixedKind::Spec
    }
}

impl VmPlan {
    /// Every CPU its threads are pinned to: its vCPUs', emulator's and I/O
    /// threads' (what [`crate::tenant::Tenant::every_cpu`] is of a running VM).
    pub fn every_cpu(&self) -> CpuSet {
        let vcpus: CpuSet = self.vcpus.iter().map(|p| p.cpu).collect();
        self.iothreads
            .iter()
            .fold(vcpus.union(&self.emulator_cpus), |all, t| {
                all.union(&t.cpus)
            })
    }
}

/// A tenant the plan works around.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixedPlan {
    /// Its name.
    pub name: String,
    /// Its CPUs.
    pub cpus: CpuSet,
    /// Where it comes from: `running`, `shut-off`; absent for a spec's
    /// `[[fixed]]`.
    #[serde(default, skip_serializing_if = "FixedKind::is_spec")]
    pub kind: FixedKind,
}

/// A running VM's vCPU that the plan pins elsewhere than it runs now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// The VM.
    pub vm: String,
    /// Its vCPU.
    pub vcpu: u32,
    /// The CPUs it may run on now.
    pub from: CpuSet,
    /// The CPU the plan gives it.
    pub to: CpuId,
}

/// Why a VM was not placed and what would change that.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The VM.
    pub vm: String,
    /// What it needs, e.g. `14 cores (14 vCPUs, threads=isolate) on one NUMA node`.
    pub needs: String,
    /// Free cores per node before and after the other VMs, e.g. `node 0: 9 (7 after vm2)`.
    pub free: Vec<super::Message>,
    /// The constraint that binds: `capacity`, `numa`, `nic`, `threads`.
    pub binding: super::Binding,
    /// The smallest change found that makes it fit (checked by re-solving), if any.
    pub fix: Option<super::Message>,
    /// The whole explanation in one sentence.
    pub message: super::Message,
}

/// The objective, in the order it is optimised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Objective {
    /// VMs placed.
    pub placed: u32,
    /// VMs placed per priority level, highest priority first: `[priority, count]`.
    pub placed_by_priority: Vec<(i64, u32)>,
    /// vCPUs of the VMs placed (the second objective: the bigger work first).
    #[serde(default)]
    pub vcpus_placed: u32,
    /// vCPUs of running VMs whose CPU changes (`moves`); absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vcpus_moved: u32,
    /// NUMA nodes beyond the first used by `numa = "preferred"` VMs.
    pub extra_numa_nodes: u32,
    /// Cores of `nic_affinity = "preferred"` VMs off their NIC's node.
    pub nic_remote_cores: u32,
    /// L3 domains (NUMA nodes where L3 is unknown) summed over VMs.
    pub vm_l3_domains: u32,
    /// L3 domains partly used by VMs (some cores taken, some still free).
    pub partial_l3_domains: u32,
    /// Cores given to VMs.
    pub cores_used: u32,
}

impl Objective {
    /// Its value at `tier` as the models minimise it (counts users want
    /// most of negated); `None` for a tier it does not hold (running VMs'
    /// moves, compaction's partly used nodes, the fleet's).
    pub fn at(&self, tier: super::Tier) -> Option<f64> {
        use super::Tier;
        let value = match tier {
            Tier::Placed(level) => {
                let placed = self.placed_by_priority.iter().find(|&&(l, _)| l == level);
                -f64::from(placed.map_or(0, |&(_, n)| n))
            }
            Tier::Vcpus => -f64::from(self.vcpus_placed),
            Tier::Cores => f64::from(self.cores_used),
            Tier::ExtraNodes => f64::from(self.extra_numa_nodes),
            Tier::NicRemote => f64::from(self.nic_remote_cores),
            Tier::L3PerVm => f64::from(self.vm_l3_domains),
            Tier::PartialL3 => f64::from(self.partial_l3_domains),
            Tier::RunningPlaced
            | Tier::RunningKept
            | Tier::VcpusMoved
            | Tier::PartialNodes
            | Tier::HostMoves
            | Tier::HostsTouched => return None,
        };
        Some(value)
    }

    /// The objectives it holds, in a plan's order: the priority levels
    /// (highest first), then [`super::Tier::AFTER_LEVELS`].
    pub fn tiers(&self) -> impl Iterator<Item = super::Tier> + '_ {
        let levels = self
            .placed_by_priority
            .iter()
            .map(|&(l, _)| super::Tier::Placed(l));
        levels.chain(super::Tier::AFTER_LEVELS)
    }

    /// Its values at [`Objective::tiers`], each as the models minimise it.
    /// Compared as a list, the smaller is the better plan.
    pub fn in_order(&self) -> Vec<f64> {
        self.tiers().filter_map(|t| self.at(t)).collect()
    }
}

/// The host the plan is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanHost {
    /// Topology source.
    pub source: String,
    /// CPUs reserved for the host (emulator threads with `emulator = "host"`).
    pub reserved_cpus: CpuSet,
    /// A fingerprint of the host's cores and CPUs: a plan is only applied to
    /// the host it was made for. Empty in hand-written plans without one
    /// (then every CPU and node the plan uses must exist).
    #[serde(default)]
    pub fingerprint: String,
}

/// Which solver: the exact integer program, or the first-fit baseline.
/// Serialised as `ilp`, `greedy` (the plan's `solver` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SolverKind {
    /// The aggregated integer program (exact).
    Ilp,
    /// First fit (baseline).
    Greedy,
}

impl std::fmt::Display for SolverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            SolverKind::Ilp => "ilp",
            SolverKind::Greedy => "greedy",
        })
    }
}

/// A placement for every VM that fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Optimal, feasible or infeasible.
    pub status: Status,
    /// Whether the solver proved that no better placement exists (also when
    /// not every VM fits: a plan placing 70 of 91 VMs can be proven best).
    #[serde(default)]
    pub proven: bool,
    /// The solver that made it.
    pub solver: SolverKind,
    /// The MIP backend of the `ilp` solver (`cbc`, `highs` or `microlp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// When VMs were left out: what they ask for, what is free, who is out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<super::Message>,
    /// Seconds the solver took (not in the JSON: the same input gives the same bytes).
    #[serde(skip)]
    pub solve_seconds: Option<f64>,
    /// The host.
    pub host: PlanHost,
    /// Placed VMs, in spec order.
    pub vms: Vec<VmPlan>,
    /// Tenants planned around.
    pub fixed: Vec<FixedPlan>,
    /// Running VMs' vCPUs the plan pins elsewhere than they run now, by VM
    /// (spec order) and vCPU; absent when none moves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<Move>,
    /// VMs that could not be placed.
    pub unplaced: Vec<String>,
    /// Per node and huge page size, the pages the placed VMs need, what is
    /// free, and the command for what is missing.
    #[serde(default)]
    pub hugepages: Vec<crate::memory::Allocation>,
    /// The kernel arguments that reserve the missing pages at boot instead.
    #[serde(default)]
    pub hugepages_boot_args: Vec<String>,
    /// Why, for each of them.
    pub explanations: Vec<Explanation>,
    /// Things to know (unknown NIC locality, time limit hit...).
    pub warnings: Vec<super::Warning>,
    /// The objective reached.
    pub objective: Objective,
}

impl Plan {
    /// The plan with every VM name put through `new`: the VMs, those left
    /// out, the tenants planned around (a running VM left out is one), the
    /// moves, and every sentence that names a VM (the summary, explanations,
    /// warnings). Nothing else changes.
    pub fn rename(&mut self, new: &dyn Fn(&str) -> String) {
        for vm in &mut self.vms {
            vm.name = new(&vm.name);
        }
        for tenant in &mut self.fixed {
            tenant.name = new(&tenant.name);
        }
        for name in &mut self.unplaced {
            *name = new(name);
        }
        for m in &mut self.moves {
            m.vm = new(&m.vm);
        }
        if let Some(summary) = &mut self.summary {
            summary.rename(new);
        }
        for e in &mut self.explanations {
            e.vm = new(&e.vm);
            for line in &mut e.free {
                line.rename(new);
            }
            if let Some(fix) = &mut e.fix {
                fix.rename(new);
            }
            e.message.rename(new);
        }
        for w in &mut self.warnings {
            w.rename(new);
        }
    }

    /// Every host CPU the plan uses (VMs' CPUs, emulator and I/O thread
    /// pins, the reserved CPUs, fixed tenants) and every host node.
    pub fn used(&self) -> (CpuSet, std::collections::BTreeSet<NodeId>) {
        let mut cpus = self.host.reserved_cpus.clone();
        let mut nodes = std::collections::BTreeSet::new();
        for vm in &self.vms {
            cpus = cpus.union(&vm.cpus).union(&vm.emulator_cpus);
            for pin in &vm.vcpus {
                cpus.insert(pin.cpu);
            }
            for io in &vm.iothreads {
                cpus = cpus.union(&io.cpus);
            }
            nodes.extend(vm.numa_nodes.iter().copied());
            nodes.extend(vm.guest_cells.iter().map(|c| c.host_node));
        }
        for f in &self.fixed {
            cpus = cpus.union(&f.cpus);
        }
        (cpus, nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::IothreadPin;
    use std::collections::BTreeSet;

    fn pins(list: &[(u32, &str)]) -> Vec<IothreadPin> {
        list.iter()
            .map(|&(iothread, cpus)| IothreadPin {
                iothread,
                cpus: cpus.parse().unwrap_or_default(),
            })
            .collect()
    }

    /// Issue 32: a plan written before the model family (no `model`, no
    /// `interval`) still loads, and a measured answer writes neither.
    #[test]
    fn planned_demands_without_an_interval_still_load() -> Result<(), serde_json::Error> {
        let old = r#"{"basis": "measured", "predicted_gbps": 97.0, "profile": "vm-64b",
                      "target_gbps": 100.0, "min_fraction": 0.97}"#;
        let d: super::PlannedDemand = serde_json::from_str(old)?;
        assert_eq!((&d.model, &d.interval), (&None, &None));
        let text = serde_json::to_string(&d)?;
        assert!(
            !text.contains("model") && !text.contains("interval"),
            "{text}"
        );
        Ok(())
    }

    #[test]
    fn a_plans_iothreads_take_the_domains_ids_in_order() {
        // Planned 1 → CPU 0 and 2 → CPU 1 (listed out of order); the
        // domain's ids 5 and 8: 5 gets the first, 8 the second.
        let planned = pins(&[(2, "1"), (1, "0")]);
        assert_eq!(
            IothreadPin::on_ids(&planned, &BTreeSet::from([8, 5])),
            Some(pins(&[(5, "0"), (8, "1")]))
        );
        assert_eq!(IothreadPin::on_ids(&planned, &BTreeSet::from([8])), None);
        assert_eq!(IothreadPin::on_ids(&planned, &BTreeSet::new()), None);
    }
}
