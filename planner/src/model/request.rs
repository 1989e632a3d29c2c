//! What a plan is asked to do: a [`PlanRequest`] (the host, its reserved and
//! fixed CPUs, the VMs with their vCPU counts, roles, policies and memory).
//! The spec and a fleet build it; the solvers read it.

pub use super::{EmulatorPolicy, NicAffinity, NumaPolicy, ThreadPolicy};

use super::plan::PlannedDemand;
use crate::cpuset::CpuSet;
use crate::ids::NodeId;
use crate::topology::{HostTopology, PciAddress};

/// What a VM's vCPUs do in the guest: the housekeeping vCPUs first (DPDK's
/// main lcore, the guest OS), then the poll-mode ones (`rx` then `tx` when
/// sized from a table).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roles {
    /// Housekeeping vCPUs: vCPU 0 up to this count.
    pub housekeeping: u32,
    /// rx vCPUs after them, for a VM sized from a table (the rest are tx).
    pub rx: Option<u32>,
    /// CPUs left idle so that the housekeeping vCPUs' cores carry no
    /// poll-mode vCPU (`emulator = "with-housekeeping"` on SMT cores).
    pub pad: u32,
    /// Real-time (FIFO) vCPUs, as guest vCPU ids.
    pub realtime: CpuSet,
}

impl Roles {
    /// CPUs left idle so that `housekeeping` vCPUs keep their cores to
    /// themselves on `host`, whose cores have at most `t` usable threads: the
    /// rest of the last housekeeping core, `(t − housekeeping mod t) mod t`.
    pub fn pad_for(host: &crate::topology::HostTopology, housekeeping: u32) -> u32 {
        let usable = host.usable_cpus();
        let t = host
            .cores
            .iter()
            .map(|c| u32::try_from(c.cpus.intersection(&usable).len()).unwrap_or(1))
            .max()
            .unwrap_or(1)
            .max(1);
        (t - housekeeping % t) % t
    }

    /// [`Roles::pad_for`] where a VM pads at all: its emulator runs with its
    /// housekeeping vCPUs (`emulator = "with-housekeeping"`) and its threads
    /// are not isolated (an isolated VM's vCPUs have their cores to
    /// themselves already); else 0. The one rule of the spec and of an
    /// explanation's fix that changes the thread policy.
    pub fn pad_of(
        host: &HostTopology,
        (emulator, threads): (EmulatorPolicy, ThreadPolicy),
        housekeeping: u32,
    ) -> u32 {
        if emulator == EmulatorPolicy::WithHousekeeping && threads != ThreadPolicy::Isolate {
            Roles::pad_for(host, housekeeping)
        } else {
            0
        }
    }

    /// The role of guest vCPU `vcpu`: none when the VM has no roles.
    pub fn of(&self, vcpu: u32) -> Option<super::plan::Role> {
        use super::plan::Role;
        if self.housekeeping == 0 && self.rx.is_none() {
            return None;
        }
        Some(if vcpu < self.housekeeping {
            Role::Main
        } else {
            match self.rx {
                Some(rx) if vcpu < self.housekeeping + rx => Role::Rx,
                Some(_) => Role::Tx,
                None => Role::Pmd,
            }
        })
    }
}

/// A VM to place.
#[derive(Debug, Clone, PartialEq)]
pub struct VmRequest {
    /// Domain name.
    pub name: String,
    /// vCPUs.
    pub vcpus: u32,
    /// SMT policy.
    pub threads: ThreadPolicy,
    /// Emulator placement.
    pub emulator: EmulatorPolicy,
    /// NUMA policy.
    pub numa: NumaPolicy,
    /// Its first NIC, if it names any.
    pub nic: Option<PciAddress>,
    /// All its NICs (`nics`, or the one `nic`), the first being `nic`.
    pub nics: Vec<PciAddress>,
    /// The nodes its NIC affinity names, ascending; empty when no NIC node is
    /// known. With `required`: the only nodes it may use (its NICs' nodes,
    /// or with `affinity = "socket"` every node of their package); with
    /// `preferred`: the nodes whose cores are not counted remote.
    pub nic_nodes: Vec<NodeId>,
    /// How much the NICs' nodes matter.
    pub nic_affinity: NicAffinity,
    /// Nodes a VM that may span nodes must have vCPUs on, ascending: those of
    /// its several `required` NICs, so that the guest has a cell on each.
    /// Empty for a VM kept to one node (`numa = "strict"`: the models do not
    /// read it there) or with one NIC node.
    pub cell_nodes: Vec<NodeId>,
    /// libvirt I/O threads (pinned with the emulator).
    pub iothreads: u32,
    /// Higher is placed first when not all fit.
    pub priority: i64,
    /// The demand it was sized by, if from a table.
    pub demand: Option<PlannedDemand>,
    /// Smaller demands to try when it does not fit (`("min_fraction = 0.97", 14)`).
    pub alternatives: Vec<(String, u32)>,
    /// Its memory and page size, when the spec (or its domain) says.
    pub memory: Option<crate::memory::VmMemory>,
    /// Its vCPUs' roles, real-time vCPUs.
    pub roles: Roles,
    /// What the guest's CPU topology shows besides the pins.
    pub guest: GuestOptions,
    /// It runs on the host now (a movable VM the spec names, or one whose
    /// vCPUs float): placed before any priority level, since left out it
    /// would go on running where the plan may put others.
    pub running: bool,
    /// Its vCPUs that run pinned to one CPU now, `(vCPU, CPU)`, of a
    /// running VM: the plan moves as few as it can (objective "vCPUs
    /// moved").
    pub now: Vec<(u32, crate::ids::CpuId)>,
}

/// Guest CPU topology options (`cache_aware`, `cache_passthrough`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuestOptions {
    /// `dies` = the L3 domains the VM spans.
    pub cache_aware: bool,
    /// `<cache mode='passthrough'/>`: the host's cache data in the guest.
    pub cache_passthrough: bool,
}

impl VmRequest {
    /// A VM with default policies (require, host emulator, strict NUMA).
    pub fn new(name: &str, vcpus: u32) -> Self {
        VmRequest {
            name: name.to_owned(),
            vcpus,
            threads: ThreadPolicy::Require,
            emulator: EmulatorPolicy::Host,
            numa: NumaPolicy::Strict,
            nic: None,
            nics: Vec::new(),
            nic_nodes: Vec::new(),
            nic_affinity: NicAffinity::Ignore,
            cell_nodes: Vec::new(),
            iothreads: 0,
            priority: 0,
            demand: None,
            alternatives: Vec::new(),
            memory: None,
            roles: Roles::default(),
            guest: GuestOptions::default(),
            running: false,
            now: Vec::new(),
        }
    }

    /// Its NICs as the plan lists them (`nics`): all of them when it has
    /// several, else none (the one NIC is `nic`).
    pub fn plan_nics(&self) -> Vec<PciAddress> {
        if self.nics.len() > 1 {
            self.nics.clone()
        } else {
            Vec::new()
        }
    }

    /// CPUs the VM needs for itself: vCPUs, plus one with `emulator =
    /// "isolate"`, plus the idle CPUs that keep its housekeeping vCPUs'
    /// cores to themselves.
    pub fn pus_needed(&self) -> u32 {
        self.vcpus + u32::from(self.emulator == EmulatorPolicy::Isolate) + self.roles.pad
    }

    /// The nodes it must keep to: its NICs' nodes when affinity is required
    /// and they are known.
    pub fn required_nodes(&self) -> Option<&[NodeId]> {
        (self.nic_affinity == NicAffinity::Required && !self.nic_nodes.is_empty())
            .then_some(self.nic_nodes.as_slice())
    }

    /// The one node it must keep to, when [`VmRequest::required_nodes`] is
    /// a single node.
    pub fn required_node(&self) -> Option<NodeId> {
        match self.required_nodes() {
            Some(&[node]) => Some(node),
            _ => None,
        }
    }

    /// Whether it may use cores of `node` as far as its NICs say.
    pub fn nic_allows(&self, node: Option<NodeId>) -> bool {
        match self.required_nodes() {
            Some(nodes) => node.is_some_and(|n| nodes.contains(&n)),
            None => true,
        }
    }

    /// Whether a core of `node` is remote to the NICs it prefers (affinity
    /// preferred, their nodes known, `node` none of them).
    pub fn nic_remote(&self, node: Option<NodeId>) -> bool {
        self.nic_affinity == NicAffinity::Preferred
            && !self.nic_nodes.is_empty()
            && !node.is_some_and(|n| self.nic_nodes.contains(&n))
    }

    /// What tells VMs apart as far as their NICs matter to placement.
    pub fn nic_key(&self) -> (NicAffinity, Vec<NodeId>, Vec<NodeId>) {
        let nodes = match self.nic_affinity {
            NicAffinity::Ignore => Vec::new(),
            _ => self.nic_nodes.clone(),
        };
        (self.nic_affinity, nodes, self.cell_nodes.clone())
    }
}

/// A tenant that already runs and keeps its CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedTenant {
    /// Its name.
    pub name: String,
    /// Its CPUs.
    pub cpus: CpuSet,
    /// Where it comes from.
    pub kind: super::plan::FixedKind,
}

/// Everything the solver needs.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    /// The host.
    pub host: HostTopology,
    /// The host's own CPUs (whole cores are kept from VMs).
    pub reserved: CpuSet,
    /// Tenants planned around.
    pub fixed: Vec<FixedTenant>,
    /// VMs to place, in spec order.
    pub vms: Vec<VmRequest>,
    /// The order of the objectives: a plan's, or compaction's.
    pub order: Order,
    /// The most vCPUs of running VMs the plan may move, all told (a row of
    /// the model, not an objective); `None`: no ceiling.
    pub max_moves: Option<u32>,
}

#[cfg(test)]
impl PlanRequest {
    /// `vms` on a synthetic host of hwloc's `description`, nothing reserved
    /// or fixed (tests).
    #[allow(clippy::unwrap_used)]
    pub(crate) fn on_synthetic(description: &str, vms: Vec<VmRequest>) -> PlanRequest {
        PlanRequest {
            host: crate::topology::load(&crate::topology::Source::Synthetic(
                description.to_owned(),
            ))
            .unwrap(),
            reserved: CpuSet::new(),
            fixed: Vec::new(),
            vms,
            order: Default::default(),
            max_moves: None,
        }
    }
}

/// The order in which the objectives are optimised (docs/plan.md,
/// "Objective").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    /// A plan's: VMs placed, vCPUs, the fewest vCPUs moved, then cores and
    /// the quality objectives.
    #[default]
    Plan,
    /// Compaction's (`pinplan repack` without `--for`): VMs placed, vCPUs,
    /// cores, then the free cores as whole as they can be — the fewest
    /// partly used L3 domains, then NUMA nodes — and only then the fewest
    /// vCPUs moved.
    Compact,
}
