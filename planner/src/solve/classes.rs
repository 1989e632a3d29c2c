//! Free cores and classes of interchangeable cores: same NUMA node, same L3
//! domain, same number of usable threads. Two cores of one class are
//! equivalent for every constraint and objective term, so the integer program
//! only decides how many of each a VM gets.

use super::{PlanRequest, ThreadPolicy, VmRequest};
use crate::cpuset::CpuSet;
use crate::ids::{CoreId, L3Id, NodeId};

/// The domain that "keep free cores together" and "fewest L3 domains" count:
/// the L3 cache when the topology knows it, else the NUMA node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Domain {
    /// An L3 cache domain.
    L3(L3Id),
    /// A NUMA node (or none known), where L3 is unknown.
    Node(Option<NodeId>),
}

/// A core no tenant owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeCore {
    /// The core.
    pub core: CoreId,
    /// Its NUMA node.
    pub node: Option<NodeId>,
    /// Its L3 domain.
    pub l3: Option<L3Id>,
    /// Its usable CPUs, ascending.
    pub pus: CpuSet,
}

impl FreeCore {
    /// Usable threads.
    pub fn threads(&self) -> u32 {
        u32::try_from(self.pus.len()).unwrap_or(u32::MAX)
    }

    /// Its domain.
    pub fn domain(&self) -> Domain {
        match self.l3 {
            Some(l3) => Domain::L3(l3),
            None => Domain::Node(self.node),
        }
    }
}

/// Interchangeable free cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    /// NUMA node.
    pub node: Option<NodeId>,
    /// Domain.
    pub domain: Domain,
    /// Usable threads per core.
    pub threads: u32,
    /// Running VMs whose vCPUs run on its cores now: `(VM index, how many
    /// of its vCPUs' CPUs each core holds)`; empty for most classes.
    pub home: Vec<(usize, u32)>,
    /// Its cores, ascending.
    pub cores: Vec<CoreId>,
}

impl Class {
    /// Number of cores.
    pub fn size(&self) -> u32 {
        u32::try_from(self.cores.len()).unwrap_or(u32::MAX)
    }
}

/// Usable cores none of whose CPUs is reserved or belongs to a fixed tenant.
pub fn free_cores(request: &PlanRequest) -> Vec<FreeCore> {
    let mut taken = request.reserved.clone();
    for f in &request.fixed {
        taken = taken.union(&f.cpus);
    }
    let usable = request.host.usable_cpus();
    request
        .host
        .cores
        .iter()
        .filter(|c| !c.cpus.intersects(&taken))
        .map(|c| FreeCore {
            core: c.id,
            node: c.numa_node,
            l3: c.l3,
            pus: c.cpus.intersection(&usable),
        })
        .filter(|c| !c.pus.is_empty())
        .collect()
}

/// Groups free cores into classes, ordered by (node, domain, threads).
pub fn classes(free: &[FreeCore]) -> Vec<Class> {
    group(free, |_| Vec::new())
}

/// [`classes`], each split further by the running VMs whose vCPUs run on a
/// core now ([`VmRequest::now`]) and how many: a VM that keeps such a core
/// keeps those vCPUs in place, so those cores are not interchangeable with
/// the others for the objective "vCPUs moved".
pub fn classes_with_homes(request: &PlanRequest, free: &[FreeCore]) -> Vec<Class> {
    group(free, |c| {
        // Only a usable CPU of a free core can keep a vCPU.
        request
            .vms
            .iter()
            .enumerate()
            .filter_map(|(i, vm)| {
                let n = vm
                    .now
                    .iter()
                    .filter(|&&(_, cpu)| c.pus.contains(cpu))
                    .count();
                (n > 0).then(|| (i, u32::try_from(n).unwrap_or(u32::MAX)))
            })
            .collect()
    })
}

/// A class's key with the running VMs whose vCPUs run on its cores now.
pub type HomeKey = (Option<NodeId>, Domain, u32, Vec<(usize, u32)>);

/// Free cores grouped by (node, domain, threads, `home`), in that order.
fn group(free: &[FreeCore], home: impl Fn(&FreeCore) -> Vec<(usize, u32)>) -> Vec<Class> {
    let mut map: std::collections::BTreeMap<HomeKey, Vec<CoreId>> =
        std::collections::BTreeMap::new();
    for c in free {
        map.entry((c.node, c.domain(), c.threads(), home(c)))
            .or_default()
            .push(c.core);
    }
    map.into_iter()
        .map(|((node, domain, threads, home), mut cores)| {
            cores.sort();
            Class {
                node,
                domain,
                threads,
                home,
                cores,
            }
        })
        .collect()
}

/// Whether `vm` may use cores of `class` at all. A `numa = "strict"` VM
/// never uses cores with no known NUMA node: its plan must name its node.
pub fn allowed(vm: &VmRequest, node: Option<NodeId>, threads: u32) -> bool {
    if !vm.threads.accepts(threads) {
        return false;
    }
    if vm.numa == super::NumaPolicy::Strict && node.is_none() {
        return false;
    }
    vm.nic_allows(node)
}

/// vCPU-bearing CPUs one core of `threads` usable threads gives `vm`.
pub fn pus_per_core(vm: &VmRequest, threads: u32) -> u32 {
    vm.threads.cpus_per_core(threads)
}

/// Whole cores `vm` needs on cores of `threads` usable threads each: one per
/// vCPU with `threads = "isolate"` (one more for an isolated emulator when
/// there is no idle sibling), else its CPUs over the threads, rounded up;
/// at least one on each node it must touch ([`cells`]).
pub fn cores_needed(vm: &VmRequest, threads: u32) -> u32 {
    let t = threads.max(1);
    let cores = match vm.threads {
        ThreadPolicy::Isolate => {
            vm.vcpus + u32::from(vm.emulator == super::EmulatorPolicy::Isolate && t < 2)
        }
        ThreadPolicy::Require | ThreadPolicy::Prefer => vm.threads.cores_for(vm.pus_needed(), t),
    };
    match vm.threads {
        ThreadPolicy::Isolate => cores,
        ThreadPolicy::Require | ThreadPolicy::Prefer => cores.max(cells(vm)),
    }
}

/// The nodes `vm` must have a core on (its required NICs' nodes, when they
/// are several; else none): as many cores at least.
pub fn cells(vm: &VmRequest) -> u32 {
    u32::try_from(vm.cell_nodes.len()).unwrap_or(u32::MAX)
}

/// Whether `vm` has too few vCPUs for one on each node it must touch
/// ([`cells`]): then it fits nowhere.
pub fn too_few_vcpus_for_cells(vm: &VmRequest) -> bool {
    vm.vcpus < cells(vm)
}

/// Whether `cores` (given as their usable thread counts) are exactly what `vm`
/// needs: enough CPUs for its vCPUs and emulator, and no whole core to spare.
/// A VM that must touch several nodes (`cell_nodes`) takes a core on each:
/// one core per such node is never a spare, whatever its threads hold.
/// Every solver (ILP, greedy, oracle) must agree with this rule.
pub fn fits_exactly(vm: &VmRequest, threads: &[u32]) -> bool {
    let n = u32::try_from(threads.len()).unwrap_or(u32::MAX);
    // A vCPU on each node it must touch needs as many vCPUs.
    if threads.iter().any(|&t| !vm.threads.accepts(t)) || too_few_vcpus_for_cells(vm) {
        return false;
    }
    match vm.threads {
        ThreadPolicy::Isolate => {
            let spare_sibling = threads.iter().any(|&t| t >= 2);
            let emulator = u32::from(vm.emulator == super::EmulatorPolicy::Isolate);
            if emulator == 1 && !spare_sibling {
                n == vm.vcpus + 1
            } else {
                n == vm.vcpus
            }
        }
        ThreadPolicy::Require | ThreadPolicy::Prefer => {
            let total: u32 = threads.iter().sum();
            let max_t = threads.iter().copied().max().unwrap_or(1);
            let need = vm.pus_needed();
            let one_per_cell = cells(vm) > 0 && n == cells(vm);
            total >= need && n >= cells(vm) && (total < need + max_t || one_per_cell)
        }
    }
}
