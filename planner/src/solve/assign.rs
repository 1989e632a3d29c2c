//! From a VM's cores to its pins: which guest vCPU runs on which host CPU,
//! where the emulator and I/O threads go, the NUMA nodes and the guest
//! topology. Deterministic: cores in order of (node, threads, id), CPUs
//! ascending within a core, so that guest vCPUs 2k and 2k+1 are host siblings
//! whenever a VM fills both threads of its cores.

use super::{EmulatorPolicy, ThreadPolicy, VmRequest};
use crate::cpuset::CpuSet;
use crate::ids::{CoreId, CpuId, NodeId};
use crate::plan::{GuestCell, GuestTopology, IothreadPin, VcpuPin, VmPlan};
use crate::topology::HostTopology;
use std::collections::{BTreeMap, BTreeSet};

/// The VM's plan on `cores` (which must satisfy [`super::classes::fits_exactly`]).
pub fn layout(
    host: &HostTopology,
    vm: &VmRequest,
    cores: &[CoreId],
    emulator_host: &CpuSet,
) -> VmPlan {
    let owned = owned_cores(host, cores);
    let Pinning {
        mut pins,
        idle,
        per_core_used,
        main_cpus,
    } = pin_vcpus(vm, &owned);
    for pin in &mut pins {
        pin.role = vm.roles.of(pin.vcpu);
    }

    // The host's reserved CPUs on the VM's own node(s), when there are any
    // there (`reserved_cores_per_node`); else all of them.
    let vm_nodes: BTreeSet<NodeId> = owned.iter().filter_map(|c| c.node).collect();
    let local: CpuSet = emulator_host
        .iter()
        .filter(|&c| {
            host.pu(c)
                .and_then(|p| p.numa_node)
                .is_some_and(|n| vm_nodes.contains(&n))
        })
        .collect();
    let emulator_cpus: CpuSet = match vm.emulator {
        EmulatorPolicy::Host if !local.is_empty() => local,
        EmulatorPolicy::Host => emulator_host.clone(),
        // The first idle CPU: with housekeeping vCPUs (on the first cores)
        // the sibling of one, away from the poll-mode vCPUs.
        EmulatorPolicy::Isolate => idle.first().copied().into_iter().collect(),
        EmulatorPolicy::WithHousekeeping => main_cpus,
    };
    let iothreads = (1..=vm.iothreads)
        .map(|iothread| IothreadPin {
            iothread,
            cpus: emulator_cpus.clone(),
        })
        .collect();

    let nodes: BTreeSet<NodeId> = owned.iter().filter_map(|c| c.node).collect();
    let numa_nodes: Vec<NodeId> = nodes.iter().copied().collect();
    let guest_cells = guest_cells(host, &numa_nodes, &pins);
    let mut guest_topology = guest_topology(vm, &per_core_used);
    if vm.guest.cache_aware {
        let dies = even_l3_runs(host, &pins, guest_topology.threads);
        if let Some(dies) = dies {
            guest_topology.dies = dies;
            guest_topology.cores /= dies;
        }
    }
    guest_topology.topoext = host.is_amd() && guest_topology.threads > 1;
    guest_topology.cache_passthrough = vm.guest.cache_passthrough;
    let cpus: CpuSet = owned.iter().flat_map(|c| c.pus.iter().copied()).collect();
    let mut core_ids: Vec<CoreId> = cores.to_vec();
    core_ids.sort();
    VmPlan {
        name: vm.name.clone(),
        vcpus: pins,
        cores: core_ids,
        cpus,
        emulator_cpus,
        iothreads,
        numa_nodes,
        guest_cells,
        guest_topology,
        threads: vm.threads,
        demand: vm.demand.clone(),
        nic: vm.nic,
        nics: vm.plan_nics(),
        memory: vm.memory,
        realtime_vcpus: (!vm.roles.realtime.is_empty()).then(|| vm.roles.realtime.clone()),
        kept: false,
    }
}

/// One of the VM's cores with its usable CPUs, ascending.
struct OwnedCore {
    node: Option<NodeId>,
    pus: Vec<CpuId>,
    id: CoreId,
}

/// The VM's cores in the order vCPUs fill them: by node, fuller cores
/// first, then by id.
fn owned_cores(host: &HostTopology, cores: &[CoreId]) -> Vec<OwnedCore> {
    let usable = host.usable_cpus();
    let mut owned: Vec<OwnedCore> = cores
        .iter()
        .filter_map(|&id| host.core(id))
        .map(|c| OwnedCore {
            node: c.numa_node,
            pus: c.cpus.intersection(&usable).iter().collect(),
            id: c.id,
        })
        .collect();
    owned.sort_by_key(|c| (c.node, std::cmp::Reverse(c.pus.len()), c.id));
    owned
}

/// Where the vCPUs went.
struct Pinning {
    pins: Vec<VcpuPin>,
    /// Owned CPUs that carry no vCPU, in core order.
    idle: Vec<CpuId>,
    /// vCPUs on each owned core, in core order.
    per_core_used: Vec<usize>,
    /// Every CPU of the cores carrying housekeeping vCPUs.
    main_cpus: CpuSet,
}

/// Per core of `owned`, the vCPUs kept back for the cores after it: one for
/// each node the VM must have a vCPU on ([`VmRequest::cell_nodes`]) whose
/// first core comes later. Filling cores in order reaches every core of a
/// placement with no core to spare, so this only binds when a node's one
/// core is there for the node's sake.
fn owed_after(vm: &VmRequest, owned: &[OwnedCore]) -> Vec<u32> {
    let first: BTreeMap<NodeId, usize> = vm
        .cell_nodes
        .iter()
        .filter_map(|&node| Some((node, owned.iter().position(|c| c.node == Some(node))?)))
        .collect();
    (0..owned.len())
        .map(|i| u32::try_from(first.values().filter(|&&f| f > i).count()).unwrap_or(0))
        .collect()
}

/// vCPUs in order onto the cores: one per core with `isolate`, every
/// thread of a core before the next otherwise — except that with
/// `emulator = "with-housekeeping"` the housekeeping vCPUs' last core takes
/// no poll-mode vCPU (its other threads stay idle, for the emulator) — and a node the VM
/// must have a vCPU on keeps one for its core ([`owed_after`]).
fn pin_vcpus(vm: &VmRequest, owned: &[OwnedCore]) -> Pinning {
    let mut pins: Vec<VcpuPin> = Vec::new();
    let mut idle: Vec<CpuId> = Vec::new();
    let mut main_cpus = CpuSet::new();
    let mut vcpu = 0u32;
    let housekeeping = vm.roles.housekeeping;
    let apart = vm.emulator == EmulatorPolicy::WithHousekeeping;
    let pin = |vcpu, cpu| VcpuPin {
        vcpu,
        cpu,
        role: None,
    };
    let per_core_used: Vec<usize> = match vm.threads {
        ThreadPolicy::Isolate => {
            let mut used = Vec::new();
            for (OwnedCore { pus, .. }, keep) in owned.iter().zip(owed_after(vm, owned)) {
                if vcpu < vm.vcpus.saturating_sub(keep) {
                    if let Some(&first) = pus.first() {
                        if vcpu < housekeeping {
                            main_cpus.extend(pus.iter().copied());
                        }
                        pins.push(pin(vcpu, first));
                        vcpu += 1;
                    }
                    idle.extend(pus.iter().skip(1));
                    used.push(1);
                } else {
                    idle.extend(pus.iter());
                    used.push(0);
                }
            }
            used
        }
        ThreadPolicy::Require | ThreadPolicy::Prefer => {
            let mut used = Vec::new();
            let owed = owed_after(vm, owned);
            for (OwnedCore { pus, .. }, keep) in owned.iter().zip(owed) {
                let mut n = 0;
                let main_core = vcpu < housekeeping;
                if main_core {
                    main_cpus.extend(pus.iter().copied());
                }
                for &cpu in pus {
                    let poll_mode_on_main = apart && main_core && vcpu >= housekeeping;
                    if vcpu < vm.vcpus.saturating_sub(keep) && !poll_mode_on_main {
                        pins.push(pin(vcpu, cpu));
                        vcpu += 1;
                        n += 1;
                    } else {
                        idle.push(cpu);
                    }
                }
                used.push(n);
            }
            used
        }
    };
    Pinning {
        pins,
        idle,
        per_core_used,
        main_cpus,
    }
}

/// One guest cell per host node carrying vCPUs, when the VM spans nodes.
fn guest_cells(host: &HostTopology, numa_nodes: &[NodeId], pins: &[VcpuPin]) -> Vec<GuestCell> {
    if numa_nodes.len() <= 1 {
        return Vec::new();
    }
    let mut cells: Vec<GuestCell> = numa_nodes
        .iter()
        .enumerate()
        .filter_map(|(i, &node)| {
            let vcpus: CpuSet = pins
                .iter()
                .filter(|p| host.pu(p.cpu).and_then(|pu| pu.numa_node) == Some(node))
                .map(|p| CpuId(p.vcpu))
                .collect();
            (!vcpus.is_empty()).then(|| GuestCell {
                id: u32::try_from(i).unwrap_or(u32::MAX),
                vcpus,
                host_node: node,
                distances: Vec::new(),
            })
        })
        .collect();
    // The host's distances between the cells' nodes, when it has them all.
    let matrix: Option<Vec<Vec<u32>>> = cells
        .iter()
        .map(|a| {
            cells
                .iter()
                .map(|b| host.distance(a.host_node, b.host_node))
                .collect()
        })
        .collect();
    if let Some(matrix) = matrix {
        for (cell, row) in cells.iter_mut().zip(matrix) {
            cell.distances = row;
        }
    }
    cells
}

/// With `cache_aware`: the number of L3 domains the guest's vCPUs span, when
/// that can be dies — each domain one run of consecutive vCPUs, every run as
/// long, whole cores of `threads` — and more than one; `None` otherwise (one
/// die). Unknown domains count as none.
pub(crate) fn even_l3_runs(host: &HostTopology, pins: &[VcpuPin], threads: u32) -> Option<u32> {
    let mut ordered: Vec<&VcpuPin> = pins.iter().collect();
    ordered.sort_by_key(|p| p.vcpu);
    let domains: Vec<_> = ordered
        .iter()
        .map(|p| {
            let core = host.pu(p.cpu)?.core?;
            host.cores.iter().find(|c| c.id == core)?.l3
        })
        .collect::<Option<Vec<_>>>()?;
    let mut runs: Vec<(crate::ids::L3Id, u32)> = Vec::new();
    for d in domains {
        match runs.last_mut() {
            Some((last, n)) if *last == d => *n += 1,
            _ => runs.push((d, 1)),
        }
    }
    let distinct: BTreeSet<_> = runs.iter().map(|(d, _)| *d).collect();
    let len = runs.first()?.1;
    let even = runs.iter().all(|&(_, n)| n == len) && len % threads.max(1) == 0;
    (runs.len() > 1 && distinct.len() == runs.len() && even)
        .then(|| u32::try_from(runs.len()).unwrap_or(1))
}

/// Guest vCPU pairs (2k, 2k+1) mirror host siblings only when every core
/// carrying vCPUs carries exactly t of them.
fn guest_topology(vm: &VmRequest, per_core_used: &[usize]) -> GuestTopology {
    let used: Vec<usize> = per_core_used.iter().copied().filter(|&n| n > 0).collect();
    let threads = match used.first() {
        Some(&t) if t >= 2 && used.iter().all(|&n| n == t) => u32::try_from(t).unwrap_or(1),
        _ => 1,
    };
    GuestTopology::new(vm.vcpus / threads.max(1), threads)
}

/// Whether [`keep_in_place`] may reorder `vm`'s vCPUs: it has no roles
/// (vCPU ids carry them) and no L3 dies (runs of vCPU ids), and its guest
/// sees one thread per core, or sibling pairs (2k, 2k+1) that fill its
/// cores (an even count, the emulator on the host's CPUs), which move
/// together.
pub fn can_keep_in_place(vm: &VmRequest, guest_threads: u32) -> bool {
    let plain = vm.roles == super::Roles::default() && !vm.guest.cache_aware;
    match guest_threads {
        1 => plain,
        2 => plain && vm.vcpus.is_multiple_of(2) && vm.emulator == EmulatorPolicy::Host,
        _ => false,
    }
}

/// [`keep_in_place`] for a guest of sibling pairs: each core of the plan
/// that a pair (2k, 2k+1) runs on now keeps that pair on its CPUs; the
/// other pairs take the other cores in order, 2k on the lower CPU.
fn keep_pairs(host: &HostTopology, vm: &VmRequest, plan: &mut VmPlan) {
    let home: std::collections::BTreeMap<CpuId, u32> =
        vm.now.iter().map(|&(vcpu, cpu)| (cpu, vcpu)).collect();
    // The plan's cores in the layout's order, each with its two CPUs.
    let mut cores: Vec<(CoreId, Vec<CpuId>)> = Vec::new();
    for pin in &plan.vcpus {
        let Some(core) = host.pu(pin.cpu).and_then(|p| p.core) else {
            return;
        };
        match cores.iter_mut().find(|(c, _)| *c == core) {
            Some((_, cpus)) => cpus.push(pin.cpu),
            None => cores.push((core, vec![pin.cpu])),
        }
    }
    if cores.iter().any(|(_, cpus)| cpus.len() != 2) {
        return;
    }
    let mut pins: Vec<VcpuPin> = Vec::with_capacity(plan.vcpus.len());
    let mut taken: BTreeSet<u32> = BTreeSet::new();
    let mut open: Vec<Vec<CpuId>> = Vec::new();
    for (_, cpus) in &mut cores {
        cpus.sort_unstable();
        let pair: Vec<u32> = cpus.iter().filter_map(|c| home.get(c).copied()).collect();
        match pair.as_slice() {
            &[a, b] if a / 2 == b / 2 && a != b && !taken.contains(&(a / 2)) => {
                taken.insert(a / 2);
                for (&cpu, &vcpu) in cpus.iter().zip(&pair) {
                    pins.push(VcpuPin {
                        vcpu,
                        cpu,
                        role: None,
                    });
                }
            }
            _ => open.push(cpus.clone()),
        }
    }
    let pairs = u32::try_from(cores.len()).unwrap_or(u32::MAX);
    let mut rest = (0..pairs).filter(|k| !taken.contains(k));
    for cpus in open {
        let Some(k) = rest.next() else { return };
        for (i, &cpu) in cpus.iter().enumerate() {
            pins.push(VcpuPin {
                vcpu: 2 * k + u32::try_from(i).unwrap_or(0),
                cpu,
                role: None,
            });
        }
    }
    if pins.len() != plan.vcpus.len() {
        return;
    }
    pins.sort_by_key(|p| p.vcpu);
    plan.vcpus = pins;
    if !plan.guest_cells.is_empty() {
        plan.guest_cells = guest_cells(host, &plan.numa_nodes, &plan.vcpus);
    }
}

/// A running VM's plan with as many vCPUs as possible on the CPUs they run
/// on now ([`VmRequest::now`]): on each of its cores, the CPUs that carry
/// vCPUs are taken among those first, an isolated emulator goes where no
/// vCPU stays (on hosts of one thread per core, to a core no vCPU of it
/// runs on now when there is one), and every vCPU whose CPU is among them
/// keeps it; the others take the rest in order. Its cores do not change, so
/// the count the integer program made of what stays is what the plan does.
/// Only where [`can_keep_in_place`] holds.
pub fn keep_in_place(host: &HostTopology, vm: &VmRequest, plan: &mut VmPlan) {
    if vm.now.is_empty() || !can_keep_in_place(vm, plan.guest_topology.threads) {
        return;
    }
    if plan.guest_topology.threads == 2 {
        keep_pairs(host, vm, plan);
        return;
    }
    let home: BTreeMap<CpuId, u32> = vm.now.iter().map(|&(vcpu, cpu)| (cpu, vcpu)).collect();
    let emulator = (vm.emulator == EmulatorPolicy::Isolate
        && plan.emulator_cpus.len() == 1
        && plan.emulator_cpus.is_subset(&plan.cpus))
    .then(|| plan.emulator_cpus.first())
    .flatten();
    let slots = CoreSlots::of(host, plan, &home, emulator);
    let (chosen, new_emulator) = slots.choose(host, plan, &home);
    if chosen.len() != plan.vcpus.len() {
        return;
    }
    let Some(pins) = staying_first(plan, &home, &chosen) else {
        return;
    };
    plan.vcpus = pins;
    if let (Some(old), Some(new)) = (emulator, new_emulator) {
        move_emulator(plan, old, new);
    }
    if !plan.guest_cells.is_empty() {
        plan.guest_cells = guest_cells(host, &plan.numa_nodes, &plan.vcpus);
    }
}

/// A running VM's cores in the order its layout used them, each with the
/// vCPUs it carries and whether it holds the isolated emulator.
struct CoreSlots {
    order: Vec<CoreId>,
    slots: BTreeMap<CoreId, (usize, bool)>,
}

impl CoreSlots {
    /// The slots of `plan`'s cores; with an isolated `emulator` on a core of
    /// its own that vCPUs ran on, while a core of one vCPU holds none of
    /// theirs, the two swap.
    fn of(
        host: &HostTopology,
        plan: &VmPlan,
        home: &BTreeMap<CpuId, u32>,
        emulator: Option<CpuId>,
    ) -> CoreSlots {
        let core_of = |cpu: CpuId| host.pu(cpu).and_then(|p| p.core);
        let homes_on = |core: CoreId| -> usize {
            host.core(core).map_or(0, |c| {
                c.cpus.iter().filter(|cpu| home.contains_key(cpu)).count()
            })
        };
        let mut this = CoreSlots {
            order: Vec::new(),
            slots: BTreeMap::new(),
        };
        for core in plan.vcpus.iter().filter_map(|pin| core_of(pin.cpu)) {
            this.slot(core).0 += 1;
        }
        let Some(core) = emulator.and_then(core_of) else {
            return this;
        };
        this.slot(core).1 = true;
        if this.slots.get(&core).is_some_and(|s| s.0 == 0) && homes_on(core) > 0 {
            let swap = this.order.iter().copied().find(|&k| {
                this.slots.get(&k).is_some_and(|s| s.0 == 1 && !s.1) && homes_on(k) == 0
            });
            if let Some(k) = swap {
                this.slots.insert(core, (1, false));
                this.slots.insert(k, (0, true));
            }
        }
        this
    }

    /// The slot of `core`, added last in the order when new.
    fn slot(&mut self, core: CoreId) -> &mut (usize, bool) {
        if !self.order.contains(&core) {
            self.order.push(core);
        }
        self.slots.entry(core).or_default()
    }

    /// The CPUs that carry vCPUs, core by core, those vCPUs run on now
    /// first; and the isolated emulator's CPU, where no vCPU of it ran when
    /// there is such a CPU left.
    fn choose(
        &self,
        host: &HostTopology,
        plan: &VmPlan,
        home: &BTreeMap<CpuId, u32>,
    ) -> (Vec<CpuId>, Option<CpuId>) {
        let mut chosen: Vec<CpuId> = Vec::new();
        let mut new_emulator = None;
        for &core in &self.order {
            let (vcpus, emu) = self.slots.get(&core).copied().unwrap_or_default();
            let cpus: Vec<CpuId> = host
                .core(core)
                .map(|c| c.cpus.intersection(&plan.cpus).iter().collect())
                .unwrap_or_default();
            let (mut first, mut rest): (Vec<CpuId>, Vec<CpuId>) =
                cpus.iter().partition(|cpu| home.contains_key(cpu));
            first.append(&mut rest);
            let (mine, left) = first.split_at(vcpus.min(first.len()));
            chosen.extend_from_slice(mine);
            if emu {
                new_emulator = left
                    .iter()
                    .find(|c| !home.contains_key(c))
                    .or_else(|| left.first())
                    .copied();
            }
        }
        (chosen, new_emulator)
    }
}

/// `plan`'s vCPUs on `chosen`: each whose CPU is among them keeps it, the
/// others take the rest in order. `None` when the CPUs run out.
fn staying_first(
    plan: &VmPlan,
    home: &BTreeMap<CpuId, u32>,
    chosen: &[CpuId],
) -> Option<Vec<VcpuPin>> {
    let stay: BTreeMap<u32, CpuId> = chosen
        .iter()
        .filter_map(|&cpu| home.get(&cpu).map(|&vcpu| (vcpu, cpu)))
        .collect();
    let mut rest = chosen
        .iter()
        .copied()
        .filter(|cpu| !stay.values().any(|s| s == cpu));
    let mut vcpus: Vec<u32> = plan.vcpus.iter().map(|p| p.vcpu).collect();
    vcpus.sort_unstable();
    let mut pins: Vec<VcpuPin> = Vec::with_capacity(vcpus.len());
    for vcpu in vcpus {
        let cpu = stay.get(&vcpu).copied().or_else(|| rest.next())?;
        pins.push(VcpuPin {
            vcpu,
            cpu,
            role: None,
        });
    }
    pins.sort_by_key(|p| p.vcpu);
    Some(pins)
}

/// The isolated emulator (and the I/O threads pinned with it) from `old`
/// to `new`.
fn move_emulator(plan: &mut VmPlan, old: CpuId, new: CpuId) {
    let new_set: CpuSet = std::iter::once(new).collect();
    let old_set: CpuSet = std::iter::once(old).collect();
    plan.emulator_cpus = new_set.clone();
    for io in plan.iothreads.iter_mut().filter(|io| io.cpus == old_set) {
        io.cpus = new_set.clone();
    }
}
