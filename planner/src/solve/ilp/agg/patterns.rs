//! What the two pattern models share: VM *kinds*, pattern and piece counts
//! (`σ`, `ρ`) tied to arc-flow graphs, and dealing a solution's pieces to VMs.
//!
//! Both models have one arc-flow graph per group of like bins (NUMA nodes, or
//! the cells of a node).

use super::super::arcflow::{Flow, Item, MOST_ARCS};
use super::super::backend::Model;
use super::super::expr::{Expr, Var};
use super::host::Vms;
use super::lexicographic::Objectives;
use crate::ids::NodeId;
use crate::solve::{EmulatorPolicy, NicAffinity, NumaPolicy, PlanRequest, VmRequest};
use std::collections::{BTreeMap, BTreeSet};

/// Patterns of all kinds together beyond which a pattern model is not built.
const MOST_PATTERNS: usize = 20_000;

/// VMs that agree on everything placement sees.
#[derive(Debug, Clone)]
pub(super) struct Kind {
    /// Members, in spec order.
    pub(super) members: Vec<usize>,
    /// Cores per VM.
    pub(super) cores: u32,
    /// Kept to one node.
    pub(super) one_node: bool,
}

/// What the models see of a VM that may span nodes: vCPUs, thread policy,
/// emulator isolated, `numa = "preferred"` (or kept to one node), required
/// and preferred NIC nodes, nodes it must touch, priority, memory (bytes,
/// page size).
type LooseKey = (
    u32,
    &'static str,
    (bool, u32),
    bool,
    (NicAffinity, Vec<NodeId>, Vec<NodeId>),
    i64,
    Option<(u64, u64)>,
);

/// VM kinds for the pattern models: the strict types (kept to one node),
/// then the other VMs grouped by what placement sees of them (a kind of these
/// is kept to one node when `one_node` says so of its VMs).
pub(super) fn kinds_of(
    request: &PlanRequest,
    vms: &Vms,
    one_node: impl Fn(&VmRequest) -> bool,
) -> Vec<Kind> {
    let mut kinds: Vec<Kind> = vms
        .types
        .iter()
        .map(|(members, c)| Kind {
            members: members.clone(),
            cores: *c,
            one_node: true,
        })
        .collect();
    let mut loose: BTreeMap<LooseKey, Kind> = BTreeMap::new();
    for &(i, c) in &vms.loose {
        let vm = &request.vms[i];
        let key = (
            vm.vcpus,
            vm.threads.name(),
            (vm.emulator == EmulatorPolicy::Isolate, vm.roles.pad),
            vm.numa == NumaPolicy::Preferred,
            vm.nic_key(),
            vm.priority,
            vm.memory.map(|m| (m.bytes, m.page_kib)),
        );
        loose
            .entry(key)
            .or_insert_with(|| Kind {
                members: Vec::new(),
                cores: c,
                one_node: one_node(vm),
            })
            .members
            .push(i);
    }
    let mut loose: Vec<Kind> = loose.into_values().collect();
    loose.sort_by_key(|kind| kind.members.first().copied());
    kinds.extend(loose);
    kinds
}

/// Where a piece lives: `Some(node)` for pieces kept to a node (all of a VM
/// kept to one node, or one node's share of a VM over nodes on a host whose
/// nodes have several cells), `None` for pieces of a VM that may go to any
/// bin.
pub(super) type Scope = Option<Option<NodeId>>;

/// A piece of a pattern: where it lives, and its cores.
pub(super) type Piece = (Scope, u32);

/// A pattern's count variable: its pieces, and `σ`.
pub(super) type PatternVar = (Vec<Piece>, Var);

/// A pattern model while it is written: `σ` and `ρ` per kind, the piece sizes
/// each group of bins gets, and the objective terms.
pub(super) struct Patterns {
    pub(super) m: Model,
    /// Free cores of each group's bins.
    caps: Vec<u32>,
    /// Memory each group's bins hold, where it can bind (see [`Self::count_memory`]).
    memory_caps: Vec<Option<u64>>,
    items_of_group: Vec<BTreeSet<Item>>,
    /// Per kind: its patterns' counts.
    pub(super) sigma: Vec<Vec<PatternVar>>,
    /// Per kind: (group, piece) → `ρ`.
    pub(super) rho: Vec<BTreeMap<(usize, Item), Var>>,
    /// Per kind: its VMs' memory in the model's units, and their cores (a
    /// piece of s cores takes s / cores of the memory).
    memory: Vec<(u64, u32)>,
    pub(super) objectives: Objectives,
    /// Objective 6: pieces (L3 domains or nodes touched), summed.
    pub(super) pieces: Expr,
}

impl Patterns {
    /// A model over groups of bins of `caps` free cores each.
    pub(super) fn new(caps: Vec<u32>) -> Patterns {
        Patterns {
            m: Model::default(),
            items_of_group: vec![BTreeSet::new(); caps.len()],
            memory_caps: vec![None; caps.len()],
            caps,
            sigma: Vec::new(),
            rho: Vec::new(),
            memory: Vec::new(),
            objectives: Objectives::default(),
            pieces: Expr::default(),
        }
    }

    /// Counts memory in the flows: each group's bins hold `caps` (in the
    /// model's units; `None` where memory cannot bind there).
    pub(super) fn count_memory(&mut self, caps: Vec<Option<u64>>) {
        self.memory_caps = caps;
    }

    /// Starts the next kind's `σ` and `ρ`.
    pub(super) fn next_kind(&mut self) {
        self.next_kind_with_memory(0, 1);
    }

    /// Starts the next kind, whose VMs of `cores` cores take `memory` each
    /// (in the units of [`Self::count_memory`]).
    pub(super) fn next_kind_with_memory(&mut self, memory: u64, cores: u32) {
        self.sigma.push(Vec::new());
        self.rho.push(BTreeMap::new());
        self.memory.push((memory, cores.max(1)));
    }

    /// Kind `t`'s piece of `cores` cores as group `g`'s flow sees it: with
    /// its memory where the group counts memory, else cores alone (so that
    /// pieces of equal cores share their arcs there).
    pub(super) fn item_in(&self, g: usize, t: usize, cores: u32) -> Item {
        match self.memory_caps.get(g) {
            Some(Some(_)) => self.item_of(t, cores),
            _ => Item { cores, memory: 0 },
        }
    }

    /// Kind `t`'s piece of `cores` cores, with its share of the VM's memory
    /// (rounded up, never down: the units are chosen so that it divides
    /// exactly).
    fn item_of(&self, t: usize, cores: u32) -> Item {
        let (memory, of) = self.memory.get(t).copied().unwrap_or((0, 1));
        let memory = u128::from(memory) * u128::from(cores);
        Item {
            cores,
            memory: u64::try_from(memory.div_ceil(u128::from(of))).unwrap_or(u64::MAX),
        }
    }

    /// Whether `more` patterns on top of the earlier kinds' would make the
    /// model too big.
    pub(super) fn too_many(&self, more: usize) -> bool {
        more > self.room()
    }

    /// How many more patterns the current kind may have.
    pub(super) fn room(&self) -> usize {
        let earlier: usize = self.sigma.iter().rev().skip(1).map(Vec::len).sum();
        MOST_PATTERNS.saturating_sub(earlier)
    }

    /// `σ` for the current kind's `patterns`, each counting VMs like `vm`;
    /// `extra_nodes` says how many extra NUMA nodes a pattern takes.
    /// Returns the VMs they place and, per scope and piece size, the pieces
    /// they hold.
    pub(super) fn patterns(
        &mut self,
        vm: &VmRequest,
        kind: &Kind,
        patterns: Vec<Vec<Piece>>,
        extra_nodes: impl Fn(&[Piece]) -> usize,
    ) -> (Expr, BTreeMap<Piece, Expr>) {
        let mut placed = Expr::default();
        let mut per_size: BTreeMap<Piece, Expr> = BTreeMap::new();
        for pattern in patterns {
            let v = self.m.int(kind.members.len() as f64);
            placed += v;
            self.objectives.place(vm, v, kind.cores);
            self.pieces += pattern.len() as f64 * v;
            let extra = extra_nodes(&pattern);
            if extra > 0 {
                self.objectives.extra += extra as f64 * v;
            }
            // Pieces of each size in this pattern (`v` is new: no term of it
            // to merge with in `per_size`, which would cost a search per piece).
            let mut sizes: BTreeMap<Piece, f64> = BTreeMap::new();
            for &piece in &pattern {
                *sizes.entry(piece).or_default() += 1.0;
            }
            for (piece, n) in sizes {
                *per_size.entry(piece).or_default() += n * v;
            }
            if let Some(sig) = self.sigma.last_mut() {
                sig.push((pattern, v));
            }
        }
        (placed, per_size)
    }

    /// `ρ` of the current kind: the pieces of each size in each scope that
    /// the scope's groups (`in_scope`) get equal those of its patterns
    /// (`per_size`). `remote`: whether a group is off the NIC's node of a VM
    /// that prefers it.
    pub(super) fn links(
        &mut self,
        kind: &Kind,
        per_size: BTreeMap<Piece, Expr>,
        in_scope: impl Fn(Scope) -> Vec<usize>,
        remote: impl Fn(usize) -> bool,
    ) {
        for ((scope, p), from_patterns) in per_size {
            let mut pieces = Expr::default();
            let current = self.memory.len().saturating_sub(1);
            for g in in_scope(scope) {
                let item = self.item_in(g, current, p);
                let fits = self.memory_caps[g].is_none_or(|most| item.memory <= most);
                if p > self.caps[g] || !fits {
                    continue;
                }
                let bound = f64::from(kind.cores) * kind.members.len() as f64;
                let r = self.m.int(bound);
                if let Some(rh) = self.rho.last_mut() {
                    rh.insert((g, item), r);
                }
                pieces += r;
                self.items_of_group[g].insert(item);
                if remote(g) {
                    self.objectives.remote += f64::from(p) * r;
                }
            }
            self.m.eq(pieces, from_patterns);
        }
    }

    /// One arc-flow graph per group of `bins` bins, its arcs of each piece
    /// tied to the kinds' pieces of that item in the group (`ρ`); `None`
    /// when a graph would be too big (memory counted in fine units).
    pub(super) fn flows(&mut self, bins: &[u32]) -> Option<Vec<Flow>> {
        let mut flows: Vec<Flow> = Vec::new();
        let mut arcs = 0;
        for (g, (&cells, &cap)) in bins.iter().zip(&self.caps).enumerate() {
            let flow = Flow::add(
                &mut self.m,
                (cells, cap, self.memory_caps[g]),
                &self.items_of_group[g],
            )?;
            for &item in &self.items_of_group[g] {
                let rho: Expr = self
                    .rho
                    .iter()
                    .filter_map(|rh| rh.get(&(g, item)))
                    .copied()
                    .sum();
                self.m.eq(flow.pieces(item), rho);
            }
            arcs += flow.arcs();
            if arcs > 2 * MOST_ARCS {
                return None;
            }
            flows.push(flow);
        }
        Some(flows)
    }
}

/// Per kind: (scope, piece size) → the places (nodes or cells) that the
/// flows put pieces of that size in for the kind.
pub(super) type Pool<P> = Vec<BTreeMap<(Scope, u32), Vec<P>>>;

/// Adds group `g`'s pieces at `values` to `pool`: `places` are the group's
/// bins, `flow` its graph; a kind's pieces go under `scope` of it.
pub(super) fn fill_pool<P: Copy>(
    pool: &mut Pool<P>,
    g: usize,
    places: &[P],
    flow: &Flow,
    rho: &[BTreeMap<(usize, Item), Var>],
    scope: impl Fn(usize) -> Scope,
    values: &[f64],
) -> Option<()> {
    let mut positions: BTreeMap<Item, Vec<P>> = BTreeMap::new();
    for (&place, pattern) in places.iter().zip(flow.patterns(values)) {
        for item in pattern {
            positions.entry(item).or_default().push(place);
        }
    }
    for (item, of_item) in positions {
        let mut next = of_item.into_iter();
        for (t, rh) in rho.iter().enumerate() {
            let Some(&r) = rh.get(&(g, item)) else {
                continue;
            };
            for _ in 0..r.count(values) {
                pool[t]
                    .entry((scope(t), item.cores))
                    .or_default()
                    .push(next.next()?);
            }
        }
    }
    Some(())
}

/// Deals the pieces in `pool` to the VMs of each kind by their patterns'
/// counts at `values`: each piece in a place of its own while one is left
/// (one always is at an optimum; pieces in one place are merged). `give`
/// gets the kind, the VM and its cores per place.
pub(super) fn deal<P: Ord + Copy>(
    kinds: &[Kind],
    sigma: &[Vec<PatternVar>],
    mut pool: Pool<P>,
    values: &[f64],
    mut give: impl FnMut(&Kind, usize, BTreeMap<P, u32>),
) -> Option<()> {
    for (t, sig) in sigma.iter().enumerate() {
        let mut members = kinds[t].members.iter().copied();
        for (pattern, v) in sig {
            for _ in 0..v.count(values) {
                let i = members.next()?;
                let mut mine: BTreeMap<P, u32> = BTreeMap::new();
                for &(scope, p) in pattern {
                    let places = pool[t].get_mut(&(scope, p))?;
                    let at = places
                        .iter()
                        .rposition(|k| !mine.contains_key(k))
                        .unwrap_or(places.len().checked_sub(1)?);
                    *mine.entry(places.remove(at)).or_default() += p;
                }
                give(&kinds[t], i, mine);
            }
        }
    }
    Some(())
}
