//! The host and the VMs as the aggregated models see them: *cells* (the free
//! cores of one NUMA node and L3 domain, interchangeable) and VM *types*
//! (strict VMs alike in everything placement sees) beside the other VMs.

use crate::ids::{CoreId, NodeId};
use crate::solve::classes::{self, Domain, FreeCore};
use crate::solve::{EmulatorPolicy, NicAffinity, NumaPolicy, PlanRequest, VmRequest};
use std::collections::{BTreeMap, BTreeSet};

/// Cores one VM needs on cores of `threads` usable threads, if it may use them.
pub(super) fn cores_per_vm(vm: &VmRequest, threads: u32) -> Option<u32> {
    let unplaceable =
        vm.vcpus == 0 || classes::too_few_vcpus_for_cells(vm) || !vm.threads.accepts(threads);
    (!unplaceable).then(|| classes::cores_needed(vm, threads))
}

/// A NUMA node and L3 domain: interchangeable free cores.
#[derive(Debug, Clone)]
pub(super) struct Cell {
    pub(super) node: Option<NodeId>,
    pub(super) domain: Domain,
    pub(super) cores: Vec<CoreId>,
}

impl Cell {
    /// Its free cores.
    pub(super) fn cap(&self) -> u32 {
        u32::try_from(self.cores.len()).unwrap_or(u32::MAX)
    }
}

/// The host as the models see it.
pub(super) struct Host {
    pub(super) cells: Vec<Cell>,
    /// Node → its cells (indices into `cells`).
    pub(super) nodes: BTreeMap<Option<NodeId>, Vec<usize>>,
    pub(super) threads: u32,
}

impl Host {
    pub(super) fn new(request: &PlanRequest) -> Host {
        let free = classes::free_cores(request);
        let threads = free.iter().map(FreeCore::threads).max().unwrap_or(1);
        let mut by_cell: BTreeMap<(Option<NodeId>, Domain), Vec<CoreId>> = BTreeMap::new();
        for c in &free {
            by_cell
                .entry((c.node, c.domain()))
                .or_default()
                .push(c.core);
        }
        let cells: Vec<Cell> = by_cell
            .into_iter()
            .map(|((node, domain), mut cores)| {
                cores.sort();
                Cell {
                    node,
                    domain,
                    cores,
                }
            })
            .collect();
        let mut nodes: BTreeMap<Option<NodeId>, Vec<usize>> = BTreeMap::new();
        for (e, cell) in cells.iter().enumerate() {
            nodes.entry(cell.node).or_default().push(e);
        }
        Host {
            cells,
            nodes,
            threads,
        }
    }

    /// Free cores of node `node`.
    pub(super) fn node_cap(&self, node: Option<NodeId>) -> u32 {
        self.nodes
            .get(&node)
            .map_or(0, |cells| cells.iter().map(|&e| self.cells[e].cap()).sum())
    }

    /// The fewest cells of `node` that hold `cores` (all of them when they
    /// do not).
    pub(super) fn fewest_cells(&self, node: Option<NodeId>, cores: u32) -> u32 {
        let caps: Vec<u32> = self
            .nodes
            .get(&node)
            .into_iter()
            .flatten()
            .map(|&e| self.cells[e].cap())
            .collect();
        super::super::groups::fewest_or_all(&caps, cores)
    }

    /// Free cores per L3 domain.
    pub(super) fn domain_caps(&self) -> BTreeMap<Domain, u32> {
        let mut capacity: BTreeMap<Domain, u32> = BTreeMap::new();
        for cell in &self.cells {
            *capacity.entry(cell.domain).or_default() += cell.cap();
        }
        capacity
    }

    /// Whether every L3 domain is one cell (no domain spans nodes).
    pub(super) fn one_cell_per_domain(&self) -> bool {
        let domains: BTreeSet<Domain> = self.cells.iter().map(|c| c.domain).collect();
        domains.len() == self.cells.len()
    }

    /// Whether `vm` may use the cores of `node`.
    pub(super) fn allows(&self, vm: &VmRequest, node: Option<NodeId>) -> bool {
        classes::allowed(vm, node, self.threads)
    }
}

/// VMs, grouped: strict VMs by type, the others one by one.
pub(super) struct Vms {
    /// Strict types: member VM indices (spec order) and cores per VM.
    pub(super) types: Vec<(Vec<usize>, u32)>,
    /// Other VMs: index and cores.
    pub(super) loose: Vec<(usize, u32)>,
}

impl Vms {
    /// Groups the VMs of `request` that can be placed on `host` at all.
    pub(super) fn new(request: &PlanRequest, host: &Host) -> Vms {
        type Key = (
            u32,
            &'static str,
            (bool, u32),
            (NicAffinity, Vec<NodeId>, Vec<NodeId>),
            i64,
            Option<(u64, u64)>,
        );
        let mut types: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
        let mut loose = Vec::new();
        for (i, vm) in request.vms.iter().enumerate() {
            let Some(cores) = cores_per_vm(vm, host.threads) else {
                continue;
            };
            if vm.numa == NumaPolicy::Strict {
                let key = (
                    vm.vcpus,
                    vm.threads.name(),
                    (vm.emulator == EmulatorPolicy::Isolate, vm.roles.pad),
                    vm.nic_key(),
                    vm.priority,
                    vm.memory.map(|m| (m.bytes, m.page_kib)),
                );
                types.entry(key).or_default().push(i);
            } else {
                loose.push((i, cores));
            }
        }
        let mut types: Vec<(Vec<usize>, u32)> = types
            .into_values()
            .filter_map(|members| {
                let first = *members.first()?;
                let cores = cores_per_vm(&request.vms[first], host.threads)?;
                Some((members, cores))
            })
            .collect();
        // Spec order of the first member: deterministic and readable in traces.
        types.sort_by_key(|(members, _)| members.first().copied());
        Vms { types, loose }
    }

    /// Every placeable VM with its cores: the types' members, then the others.
    pub(super) fn each(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.types
            .iter()
            .flat_map(|(members, c)| members.iter().map(move |&i| (i, *c)))
            .chain(self.loose.iter().copied())
    }

    /// How many VMs can be placed at all.
    pub(super) fn placeable(&self) -> usize {
        self.types.iter().map(|(m, _)| m.len()).sum::<usize>() + self.loose.len()
    }
}
