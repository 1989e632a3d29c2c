//! Which VM goes to which host: an integer program over hosts and their NUMA
//! nodes, with VMs that agree on everything the assignment sees (their
//! cores on each host, node policy, priority, vCPUs, allowed hosts, where
//! they run) counted as one *kind*. Its capacities are each node's free
//! cores usable by the kind (threads policy, NIC nodes), so it is the
//! single-host counting model (objectives 1–3) lifted to a fleet, plus
//! fewest moves of running VMs and fewest hosts touched. Memory counts as
//! in the single-host model: each node's free memory per page size (where
//! the source gives it) bounds the VMs there, a strict VM's memory on its
//! node, a spanning VM's split with its cores. L3 domains and the SMT
//! layout are left to each host's exact plan (`super`).

mod model;
mod start;

pub use model::solve;
pub use start::Member;

use super::index::{BinIx, KindIx, Per, VmIx};
use crate::ids::NodeId;
use crate::solve::classes;
use crate::solve::ilp::backend;
use crate::solve::ilp::expr::{Expr, Var};
use crate::solve::{NumaPolicy, PlanRequest, VmRequest};
use std::collections::BTreeMap;

/// (kind, bin) → per node its count (strict kinds) or cores (the others):
/// the program's variables, which its first-fit start fills too.
type NodeVars = BTreeMap<(KindIx, BinIx), Vec<(Option<NodeId>, Var)>>;

/// A bin's hosts-touched count, the cores it gets, one host's cores, and
/// each kind's count there with one host's worth of it.
type Touched = (Var, Expr, u32, Vec<(Var, f64)>);

/// One kind of VM: VMs alike for the assignment, on the places `P` (hosts,
/// or the assignment's bins).
#[derive(Debug, Clone)]
pub struct Kind<P> {
    /// Members, in spec order.
    pub members: Vec<VmIx>,
    /// Per allowed place: which, and the cores a member needs there.
    pub hosts: Vec<(P, u32)>,
    /// Kept to one node (`numa = "strict"`).
    pub strict: bool,
    /// Priority (higher placed first).
    pub priority: i64,
    /// vCPUs of one member.
    pub vcpus: u32,
    /// The place its members run on now, when running.
    pub running_on: Option<P>,
    /// Running members may move.
    pub movable: bool,
    /// One member's memory: its page size in KiB and KiB in whole pages,
    /// when the spec (or its domain) gives it.
    pub memory: Option<(u64, u64)>,
}

/// Per node: the free cores (`free`, of its host) a VM may use there.
pub fn usable(free: &[classes::FreeCore], vm: &VmRequest) -> Capacity {
    let mut out = Capacity::new();
    for c in free {
        if classes::allowed(vm, c.node, c.threads()) {
            *out.entry(c.node).or_insert(0) += 1;
        }
    }
    out
}

/// The most common usable thread count of `free` (every host measured has
/// one).
pub fn threads(free: &[classes::FreeCore]) -> u32 {
    let mut by_threads: BTreeMap<u32, usize> = BTreeMap::new();
    for c in free {
        *by_threads.entry(c.threads()).or_default() += 1;
    }
    by_threads
        .iter()
        .max_by_key(|(t, n)| (**n, **t))
        .map_or(1, |(t, _)| *t)
}

/// Cores `vm` needs on a host whose free cores have `threads` threads.
pub fn cores_needed(threads: u32, vm: &VmRequest) -> u32 {
    classes::cores_needed(vm, threads)
}

/// The objectives of the assignment: the fleet's of the one enum.
pub use crate::model::Tier;

/// What the assignment gives: per kind, per host, how many members.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    /// (kind, bin) → members placed there.
    pub counts: BTreeMap<(KindIx, BinIx), u32>,
    /// Every objective proven optimal.
    pub proven: bool,
    /// Each objective solved, in order, with its optimum (or, when
    /// stopped, the best value found): a count, never negative.
    pub tiers: Vec<(Tier, u64)>,
    /// The failure of the backend's process that stopped the objectives,
    /// if one did (the fleet plan says it in a warning).
    pub fault: Option<backend::SolveError>,
}

/// One host's capacity: free cores per node (all threads).
pub type Capacity = BTreeMap<Option<NodeId>, u32>;

/// The host-side inputs, per *bin* — one host, or a group of hosts alike
/// for every kind (counted together: a relaxation of each host's packing,
/// which the caller then packs host by host): its free cores per node (of
/// one host), how many hosts it holds, and per kind the usable cores per
/// node of one host.
pub struct Hosts<'a> {
    /// Per bin: free cores per node of one of its hosts.
    pub capacity: &'a Per<BinIx, Capacity>,
    /// Per bin: its hosts.
    pub hosts: &'a Per<BinIx, u32>,
    /// (kind, bin) → usable free cores per node for a member on one host.
    pub usable: &'a BTreeMap<(KindIx, BinIx), Capacity>,
    /// Per bin: the memory one of its hosts offers per (node, page size),
    /// in MiB, where known (`solve::memory::caps`, finite values only).
    pub memory: &'a Per<BinIx, MemoryCaps>,
}

/// Memory per (node, page size in KiB), in MiB.
pub type MemoryCaps = BTreeMap<(Option<NodeId>, u64), f64>;

/// A kind's memory in the model's unit, as [`Member::memory`] takes it:
/// (page size in KiB, MiB).
pub fn mib<P>(kind: &Kind<P>) -> Option<(u64, f64)> {
    kind.memory.map(|(page, kib)| (page, kib as f64 / 1024.0))
}

/// Free cores per node of `request`'s host (usable by anyone).
pub fn capacity(request: &PlanRequest) -> Capacity {
    let mut out = Capacity::new();
    for c in classes::free_cores(request) {
        *out.entry(c.node).or_insert(0) += 1;
    }
    out
}

/// Whether `vm` is kept to one node for the assignment.
pub fn strict(vm: &VmRequest) -> bool {
    vm.numa == NumaPolicy::Strict
}
