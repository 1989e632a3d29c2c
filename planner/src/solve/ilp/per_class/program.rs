//! The per-class integer program written down: a VM's core counts per
//! class and the rows that tie them to nodes, L3 domains, threads and
//! capacity, and the objective tiers in order ([`build`]). Solving it is
//! the parent module's.

use super::super::backend::Model;
use super::super::expr::{Expr, Var};
use super::super::groups::{fewest, partly_used_groups};
use super::super::memory_rows::MemoryRows;
use super::super::tiers::{in_order, Tiers};
use crate::ids::NodeId;
use crate::solve::classes::{self, Class, Domain};
use crate::solve::memory::{self, Split};
use crate::solve::{EmulatorPolicy, NumaPolicy, Order, PlanRequest, ThreadPolicy, Tier, VmRequest};
use std::collections::{BTreeMap, BTreeSet};

/// The integer program for one request.
pub(super) struct Program {
    pub(super) model: Model,
    pub(super) classes: Vec<Class>,
    /// Per VM: its columns, `None` for a VM that can be placed nowhere.
    pub(super) vms: Vec<Option<VmVars>>,
    /// Per domain: (touched, full, capacity in cores).
    pub(super) domains: BTreeMap<Domain, (Var, Var, u32)>,
    /// Per NUMA node, likewise: only in compaction's order (the only one
    /// with [`Tier::PartialNodes`]).
    pub(super) nodes: BTreeMap<Option<NodeId>, (Var, Var, u32)>,
    /// Objective tiers, in order (each minimised).
    pub(super) tiers: Tiers,
    /// A lower bound of each non-placement tier when every VM is placed: a
    /// start point that reaches it is optimal without a solve.
    pub(super) bounds: BTreeMap<Tier, f64>,
}

/// One VM's variables.
pub(super) struct VmVars {
    pub(super) placed: Var,
    /// `n[v]`: `(class index, variable)` for the classes the VM may use.
    pub(super) n: Vec<(usize, Var)>,
    /// `y[v]`: node → variable, for VMs kept to few nodes.
    pub(super) y: BTreeMap<Option<NodeId>, Var>,
    /// `u[v]`: domain → variable, for VMs that may touch several.
    pub(super) u: BTreeMap<Domain, Var>,
    /// `z[v]`: the emulator takes an idle sibling (isolate + emulator isolate).
    pub(super) z: Option<Var>,
    /// Its fewest cores on the classes it may use: its term of the
    /// cores' lower bound.
    pub(super) fewest: u32,
}

/// One VM's core counts while its rows are written.
struct Columns<'a> {
    vm: &'a VmRequest,
    placed: Var,
    /// `(class, n[v][c], the most cores of the class it can take)`.
    n: Vec<(usize, Var, u32)>,
    /// What it needs, in vCPU-bearing CPUs (vCPUs with `threads = "isolate"`).
    demand: u32,
}

impl Columns<'_> {
    /// `Σ n[v][c]` over the classes `keep` accepts.
    fn cores(&self, classes: &[Class], keep: impl Fn(&Class) -> bool) -> Expr {
        self.n
            .iter()
            .filter(|&&(c, _, _)| keep(&classes[c]))
            .map(|&(_, v, _)| v)
            .sum()
    }

    /// How much of its demand `most` cores of class `c` hold.
    fn units(&self, classes: &[Class], c: usize, most: u32) -> u32 {
        most * classes::pus_per_core(self.vm, classes[c].threads)
    }

    /// The most usable threads of its classes.
    fn most_threads(&self, classes: &[Class]) -> u32 {
        self.n
            .iter()
            .map(|&(c, _, _)| classes[c].threads)
            .max()
            .unwrap_or(1)
    }
}

/// The objective terms the VMs' rows add up to, and their lower bounds.
#[derive(Default)]
struct Sums {
    placed: BTreeMap<i64, Expr>,
    vcpus: Expr,
    cores: Expr,
    extra_nodes: Expr,
    nic_remote: Expr,
    l3: Expr,
    /// Per class: the cores VMs take of it.
    class_users: Vec<Expr>,
    /// Minus the running VMs placed (objective 0).
    running: Expr,
    /// vCPUs of running VMs that move: placed vCPUs less those that can
    /// keep their CPU.
    moves: Expr,
    bound_cores: f64,
    bound_nodes: f64,
    bound_l3: f64,
}

/// Writes the program, one VM after the other.
struct Builder<'a> {
    classes: &'a [Class],
    m: Model,
    sums: Sums,
    /// Memory per node and page size.
    memory: MemoryRows<'a>,
}

/// The VMs with memory that the per-class model may place but does not
/// count (by [`memory::split`]; all of them where memory is not
/// [`memory::countable`]), in spec order; empty where memory cannot bind.
pub(crate) fn uncounted_memory(request: &PlanRequest) -> Vec<usize> {
    if !memory::active(request) {
        return Vec::new();
    }
    let countable = memory::countable(request);
    let free = classes::free_cores(request);
    let classes = classes::classes_with_homes(request, &free);
    request
        .vms
        .iter()
        .enumerate()
        .filter(|(_, vm)| vm.memory.is_some() && placeable(vm, &classes))
        .filter(|&(_, vm)| !countable || memory_split(vm, &classes) == Split::Uncounted)
        .map(|(i, _)| i)
        .collect()
}

/// Whether `vm` has columns at all (see `Builder::columns`): some class it
/// may use, and vCPUs enough for the nodes it must touch.
fn placeable(vm: &VmRequest, classes: &[Class]) -> bool {
    vm.vcpus > 0
        && !classes::too_few_vcpus_for_cells(vm)
        && classes
            .iter()
            .any(|c| classes::allowed(vm, c.node, c.threads))
}

/// [`memory::split`] of `vm` over the classes it may use.
pub(super) fn memory_split(vm: &VmRequest, classes: &[Class]) -> Split {
    memory::split(
        vm,
        classes
            .iter()
            .filter(|c| classes::allowed(vm, c.node, c.threads))
            .map(|c| c.threads),
    )
}

pub(super) fn build(request: &PlanRequest) -> Program {
    let free = classes::free_cores(request);
    let classes = classes::classes_with_homes(request, &free);
    let mut b = Builder {
        classes: &classes,
        m: Model::default(),
        sums: Sums {
            class_users: vec![Expr::default(); classes.len()],
            ..Sums::default()
        },
        memory: MemoryRows::new(request),
    };
    let vms: Vec<Option<VmVars>> = request
        .vms
        .iter()
        .enumerate()
        .map(|(i, vm)| b.vm(i, vm))
        .collect();
    b.capacity();
    let (domains, partial) = b.partly_used(|c| c.domain);
    let compact = request.order == Order::Compact;
    let (nodes, partial_nodes) = if compact {
        b.partly_used(|c| c.node)
    } else {
        (BTreeMap::new(), Expr::default())
    };
    let Builder {
        mut m,
        sums,
        memory,
        ..
    } = b;
    memory.bound(&mut m);
    // The ceiling on moves: a row, whatever the order.
    if let Some(most) = request.max_moves.filter(|_| !sums.moves.is_empty()) {
        m.le(sums.moves.clone(), f64::from(most));
    }
    let total_vcpus: f64 = request.vms.iter().map(|v| f64::from(v.vcpus)).sum();
    let mut bounds: BTreeMap<Tier, f64> = [
        (Tier::Vcpus, -total_vcpus),
        (Tier::Cores, sums.bound_cores),
        (Tier::ExtraNodes, sums.bound_nodes),
        (Tier::NicRemote, 0.0),
        (Tier::L3PerVm, sums.bound_l3),
        (Tier::PartialL3, 0.0),
    ]
    .into_iter()
    .collect();
    if compact {
        bounds.insert(Tier::PartialNodes, 0.0);
    }
    let running = sums.running.clone();
    let rest = if compact {
        vec![
            (Tier::Vcpus, sums.vcpus),
            (Tier::Cores, sums.cores),
            (Tier::PartialL3, partial),
            (Tier::PartialNodes, partial_nodes),
            (Tier::VcpusMoved, sums.moves),
            (Tier::ExtraNodes, sums.extra_nodes),
            (Tier::NicRemote, sums.nic_remote),
            (Tier::L3PerVm, sums.l3),
        ]
    } else {
        vec![
            (Tier::Vcpus, sums.vcpus),
            (Tier::VcpusMoved, sums.moves),
            (Tier::Cores, sums.cores),
            (Tier::ExtraNodes, sums.extra_nodes),
            (Tier::NicRemote, sums.nic_remote),
            (Tier::L3PerVm, sums.l3),
            (Tier::PartialL3, partial),
        ]
    };
    let mut tiers = in_order(request, sums.placed, rest);
    if !running.is_empty() {
        tiers.insert(0, (Tier::RunningPlaced, running));
    }
    Program {
        model: m,
        classes,
        vms,
        domains,
        nodes,
        tiers,
        bounds,
    }
}

impl Builder<'_> {
    /// VM `vm` (index `i`)'s variables and rows; `None` when it can be
    /// placed nowhere.
    fn vm(&mut self, i: usize, vm: &VmRequest) -> Option<VmVars> {
        let cols = self.columns(vm)?;
        self.moves(i, &cols);
        let (z, fewest) = self.demand(&cols);
        let y = self.numa(&cols);
        // NIC locality as a cost.
        self.sums.nic_remote += cols.cores(self.classes, |c| vm.nic_remote(c.node));
        // Several required NICs: vCPUs on each of their nodes.
        for &node in &vm.cell_nodes {
            let there = cols.cores(self.classes, |c| c.node == Some(node));
            self.m.ge(there, cols.placed);
        }
        let u = self.l3(&cols);
        self.vm_memory(i, &cols, &y);
        Some(VmVars {
            placed: cols.placed,
            n: cols.n.iter().map(|&(c, v, _)| (c, v)).collect(),
            y,
            u,
            z,
            fewest,
        })
    }

    /// VM `i`'s memory on the nodes of its cores ([`memory::split`]): all
    /// on its node (`y`) for a strict VM, else per core where its core
    /// count is fixed.
    fn vm_memory(&mut self, i: usize, cols: &Columns, y: &BTreeMap<Option<NodeId>, Var>) {
        let rows = &mut self.memory;
        match memory_split(cols.vm, self.classes) {
            Split::Whole => {
                for (&node, &yk) in y {
                    rows.add(i, node, 1.0, yk);
                }
            }
            Split::PerCore(c) => {
                for &(k, v, _) in &cols.n {
                    rows.add(i, self.classes[k].node, 1.0 / f64::from(c), v);
                }
            }
            Split::Uncounted => {}
        }
    }

    /// `placed[v]` and `n[v][c]` for the classes `vm` may use.
    fn columns<'v>(&mut self, vm: &'v VmRequest) -> Option<Columns<'v>> {
        let classes = self.classes;
        let usable: Vec<usize> = classes
            .iter()
            .enumerate()
            .filter(|(_, c)| classes::allowed(vm, c.node, c.threads))
            .map(|(i, _)| i)
            .collect();
        // Too few vCPUs for one on each node it must touch: nowhere.
        if !placeable(vm, classes) {
            return None;
        }
        let placed = self.m.binary();
        // The most cores of one class the VM can take: a tight bound keeps the
        // LP relaxation of the big-M links below close to the integer problem.
        let t_max_all = usable
            .iter()
            .map(|&c| classes[c].threads)
            .max()
            .unwrap_or(1);
        let most = |c: usize| -> u32 {
            let bound = match vm.threads {
                ThreadPolicy::Isolate => vm.vcpus + 1,
                ThreadPolicy::Require | ThreadPolicy::Prefer => {
                    (vm.pus_needed() + t_max_all - 1)
                        / classes::pus_per_core(vm, classes[c].threads).max(1)
                }
            };
            bound.min(classes[c].size())
        };
        let n: Vec<(usize, Var, u32)> = usable
            .iter()
            .map(|&c| (c, self.m.int(f64::from(most(c))), most(c)))
            .collect();
        for &(c, v, _) in &n {
            self.sums.class_users[c] += v;
            self.sums.cores += v;
        }
        *self.sums.placed.entry(vm.priority).or_default() -= placed;
        self.sums.vcpus -= f64::from(vm.vcpus) * placed;
        let demand = match vm.threads {
            ThreadPolicy::Isolate => vm.vcpus,
            ThreadPolicy::Require | ThreadPolicy::Prefer => vm.pus_needed(),
        };
        Some(Columns {
            vm,
            placed,
            n,
            demand,
        })
    }

    /// A running VM: placed before any priority level (objective 0), and
    /// its vCPUs that cannot keep their CPU counted (objective "vCPUs
    /// moved"): on each core of a class that holds `h` of its vCPUs' CPUs
    /// now, [`VmRequest::can_stay`] of them stay.
    fn moves(&mut self, i: usize, cols: &Columns) {
        let vm = cols.vm;
        if vm.running {
            self.sums.running -= cols.placed;
        }
        if !vm.running {
            return;
        }
        self.sums.moves += f64::from(vm.vcpus) * cols.placed;
        for &(c, v, _) in &cols.n {
            let class = &self.classes[c];
            let home = class
                .home
                .iter()
                .find(|&&(j, _)| j == i)
                .map_or(0, |&(_, h)| h);
            let stay = vm.can_stay(class.threads, home);
            if stay > 0 {
                self.sums.moves -= f64::from(stay) * v;
            }
        }
    }

    /// The VM's demand, by thread policy: `z[v]` when it has one, and its
    /// fewest cores.
    fn demand(&mut self, cols: &Columns) -> (Option<Var>, u32) {
        let (vm, classes) = (cols.vm, self.classes);
        let fewest = match vm.threads {
            ThreadPolicy::Isolate => {
                let spare = cols.n.iter().any(|&(c, _, _)| classes[c].threads >= 2);
                vm.vcpus
                    .saturating_add(u32::from(vm.emulator == EmulatorPolicy::Isolate && !spare))
            }
            ThreadPolicy::Require | ThreadPolicy::Prefer => vm
                .pus_needed()
                .div_ceil(cols.most_threads(classes).max(1))
                .max(classes::cells(vm)),
        };
        self.sums.bound_cores += f64::from(fewest);
        let z = match vm.threads {
            ThreadPolicy::Isolate => self.isolate(cols),
            ThreadPolicy::Require | ThreadPolicy::Prefer => {
                self.fill_threads(cols);
                None
            }
        };
        (z, fewest)
    }

    /// One vCPU per core; an isolated emulator takes an idle sibling (`z`)
    /// or one more core.
    fn isolate(&mut self, cols: &Columns) -> Option<Var> {
        let (vm, p, classes) = (cols.vm, cols.placed, self.classes);
        let count = cols.cores(classes, |_| true);
        if vm.emulator != EmulatorPolicy::Isolate {
            self.m.eq(count, f64::from(vm.vcpus) * p);
            return None;
        }
        let z = self.m.binary();
        self.m.eq(count + z, (f64::from(vm.vcpus) + 1.0) * p);
        self.m.le(z, p);
        // …and must take it when it has one: no core to spare.
        for &(c, v, most) in &cols.n {
            if classes[c].threads >= 2 {
                self.m.le(v, f64::from(most) * z);
            }
        }
        self.m.le(z, cols.cores(classes, |c| c.threads >= 2));
        Some(z)
    }

    /// vCPUs (and an isolated emulator) fill the threads of their cores:
    /// `need ≤ CPUs < need + most threads`, or, for a VM that must touch
    /// several nodes, one core on each of them whatever they hold.
    fn fill_threads(&mut self, cols: &Columns) {
        let (vm, p, classes) = (cols.vm, cols.placed, self.classes);
        let need = f64::from(vm.pus_needed());
        let pus: Expr = cols
            .n
            .iter()
            .map(|&(c, v, _)| f64::from(classes::pus_per_core(vm, classes[c].threads)) * v)
            .sum();
        let t_max = f64::from(cols.most_threads(classes));
        let cells = f64::from(classes::cells(vm));
        self.m.ge(pus.clone(), need * p);
        // At least ceil(need / most threads) cores, and one per node it must
        // touch: the relaxation otherwise takes fractions of cores.
        let least = (need / t_max).ceil().max(cells);
        let cores = cols.cores(classes, |_| true);
        self.m.ge(cores.clone(), least * p);
        if cells == 0.0 {
            self.m.le(pus, (need + t_max - 1.0) * p);
            return;
        }
        // Either the bound above, or exactly one core per node (`one_each`),
        // as the rule has it: lifted by more than any total, and the cores
        // held to the nodes' count.
        let one_each = self.m.binary();
        let all: f64 = classes.iter().map(|c| c.cores.len() as f64).sum();
        self.m.le(one_each, p);
        self.m
            .le(pus - all * t_max * one_each, (need + t_max - 1.0) * p);
        self.m.le(cores + all * one_each, cells * p + all);
    }

    /// `y[v][k]` for VMs kept to one node (strict) or few (preferred).
    fn numa(&mut self, cols: &Columns) -> BTreeMap<Option<NodeId>, Var> {
        if !matches!(cols.vm.numa, NumaPolicy::Strict | NumaPolicy::Preferred) {
            return BTreeMap::new();
        }
        let (y, fewest) = self.touch(cols, |c| c.node);
        let nodes: Expr = y.values().copied().sum();
        if cols.vm.numa == NumaPolicy::Strict {
            self.m.eq(nodes, cols.placed);
        } else {
            self.m.ge(nodes.clone(), cols.placed);
            self.sums.extra_nodes += nodes - cols.placed;
            self.sums.bound_nodes += fewest - 1.0;
        }
        y
    }

    /// `u[v][d]` for the L3 domains a VM touches, when it may touch several.
    fn l3(&mut self, cols: &Columns) -> BTreeMap<Domain, Var> {
        let domains: BTreeSet<Domain> = cols
            .n
            .iter()
            .map(|&(c, _, _)| self.classes[c].domain)
            .collect();
        if domains.len() <= 1 {
            // One domain: it counts 1 when placed. Left out of the sum, a
            // level not placed whole would prefer placing such VMs over
            // others with the same L3 count (issue 27's CI found it).
            self.sums.l3 += cols.placed;
            self.sums.bound_l3 += 1.0;
            return BTreeMap::new();
        }
        let (u, fewest) = self.touch(cols, |c| c.domain);
        self.sums.bound_l3 += fewest;
        self.sums.l3 += u.values().copied().sum::<Expr>();
        u
    }

    /// One binary per group (node or domain, by `key`) of the VM's classes,
    /// 1 when it has cores there; with cover cuts: the groups it uses must
    /// hold its demand, and there are at least as many as the fewest that
    /// can. Valid for every integer solution, they make the LP relaxation of
    /// the links far tighter (branch and bound then closes quickly). Returns
    /// the binaries and that fewest.
    fn touch<K: Ord + Copy>(
        &mut self,
        cols: &Columns,
        key: impl Fn(&Class) -> K,
    ) -> (BTreeMap<K, Var>, f64) {
        let (p, classes) = (cols.placed, self.classes);
        let keys: BTreeSet<K> = cols.n.iter().map(|&(c, _, _)| key(&classes[c])).collect();
        let g: BTreeMap<K, Var> = keys.iter().map(|&k| (k, self.m.binary())).collect();
        for &(c, v, most) in &cols.n {
            if let Some(&gk) = g.get(&key(&classes[c])) {
                self.m.le(v, f64::from(most) * gk);
            }
        }
        let caps: Vec<(Var, u32)> = g
            .iter()
            .map(|(&k, &gk)| {
                let cap = cols
                    .n
                    .iter()
                    .filter(|&&(c, _, _)| key(&classes[c]) == k)
                    .map(|&(c, _, most)| cols.units(classes, c, most))
                    .sum();
                (gk, cap)
            })
            .collect();
        let held: Vec<u32> = caps.iter().map(|&(_, cap)| cap).collect();
        let least = fewest(&held, cols.demand).map_or(1.0, f64::from);
        let cover: Expr = caps.iter().map(|&(gk, cap)| f64::from(cap) * gk).sum();
        self.m.ge(cover, f64::from(cols.demand) * p);
        self.m.ge(g.values().copied().sum::<Expr>(), least * p);
        (g, least)
    }

    /// Capacity per class.
    fn capacity(&mut self) {
        for (c, users) in self.sums.class_users.iter().enumerate() {
            if !users.is_empty() {
                self.m.le(users.clone(), f64::from(self.classes[c].size()));
            }
        }
    }

    /// Partially used groups of cores (L3 domains or NUMA nodes, by `key`):
    /// touched but not full. Their binaries and the objective that counts
    /// them.
    fn partly_used<K: Ord + Copy>(
        &mut self,
        key: impl Fn(&Class) -> K,
    ) -> (BTreeMap<K, (Var, Var, u32)>, Expr) {
        let mut per_group: BTreeMap<K, (Expr, u32)> = BTreeMap::new();
        for (c, class) in self.classes.iter().enumerate() {
            let entry = per_group.entry(key(class)).or_default();
            entry.0 += self.sums.class_users[c].clone();
            entry.1 += class.size();
        }
        let (domains, partial) = partly_used_groups(&mut self.m, per_group, false);
        // A domain is full only if each class of cores in it is (and touched
        // when any class is, each by its own size): on a host
        // of mixed thread counts the relaxation otherwise fills a domain with
        // cores of one class while another (single-thread cores no VM needs)
        // stays free, and objective 7 keeps no bound (8 of the mixed-thread
        // bench's hosts ran out the clock there).
        let mut classes_in: BTreeMap<K, usize> = BTreeMap::new();
        for class in self.classes {
            *classes_in.entry(key(class)).or_default() += 1;
        }
        for (c, class) in self.classes.iter().enumerate() {
            let (Some(&(touched, full, _)), Some(2..)) =
                (domains.get(&key(class)), classes_in.get(&key(class)))
            else {
                continue;
            };
            let users = self.sums.class_users[c].clone();
            let size = f64::from(class.size());
            self.m.le(size * full, users.clone());
            // And touched as soon as any class is: the class's own size
            // bounds its use (the domain's would let the relaxation spread
            // a class's cores thinly over many domains).
            self.m.le(users, size * touched);
        }
        (domains, partial)
    }
}
