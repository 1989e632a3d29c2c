//! Objectives 6–7 on a pattern and arc-flow model over the cells of each
//! node, objectives 1–5 held, where every L3 domain is one cell.
//!
//! VMs that agree on everything placement sees form *kinds* (the strict types,
//! and the other VMs grouped alike). A VM is laid out by a *pattern*: a
//! partition of its cores into pieces, one piece per cell it touches (a VM
//! whole in one cell has the one-piece pattern). `σ` counts the VMs of a kind
//! (on a node, for VMs kept to one node) with each pattern; `ρ` the pieces of
//! each size a group of cells gets; each group is an arc-flow graph. A VM
//! with `numa = "preferred"` that may span nodes whose cells are several has
//! patterns whose pieces name their nodes (over no more nodes than objective
//! 4's optimum allows one VM), so that its extra nodes are counted.
//!
//! Exact: every layout is one of these (pieces = L3 domains touched, with one
//! cell per domain); conversely, pieces of one VM that a flow puts in one cell
//! are merged by the layout, which only lowers objective 6 — so the model's
//! optimum is a layout's.

use super::super::arcflow::{partitions_within, whole_and_rest, Flow, Item};
use super::super::backend::{run_below, Model};
use super::super::expr::{Expr, Var};
use super::super::memory_rows::MemoryRows;
use super::super::tiers::priority_levels;
use super::host::{Host, Vms};
use super::layout::{cores_of, partial_of, pieces_of, Units};
use super::lexicographic::trace_tier;
use super::patterns::{deal, fill_pool, kinds_of, Kind, PatternVar, Patterns, Piece, Pool, Scope};
use super::symmetry::{interchangeable_nodes, order_nodes};
use super::{Stats, TierRun};
use crate::deadline::Deadline;
use crate::ids::NodeId;
use crate::solve::{NumaPolicy, Placement, PlanRequest, Tier, VmRequest};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// A group of like cells: (node, free cores) and the cells.
type CellGroup = ((Option<NodeId>, u32), Vec<usize>);

/// Which layouts a pattern model has for VMs kept to one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layouts {
    /// Whole cells and one remainder ([`whole_and_rest`]): a small model,
    /// optimal only where it meets a lower bound.
    Compact,
    /// Every partition of a VM's cores: exact.
    Every,
}

/// The pattern model of objectives 6–7.
pub(super) struct PatternModel {
    model: Model,
    layouts: Layouts,
    kinds: Vec<Kind>,
    /// Per kind: whether its pieces are kept per node.
    by_node: Vec<bool>,
    /// Groups of cells: (node, free cores) and their cells.
    groups: Vec<CellGroup>,
    /// Per kind: (node for kinds kept to one, pattern, `σ`).
    sigma: Vec<Vec<PatternVar>>,
    /// Per kind: (group, piece size) → `ρ`.
    rho: Vec<BTreeMap<(usize, Item), Var>>,
    flows: Vec<Flow>,
    /// Objective 6: pieces (L3 domains touched), summed.
    pieces: Expr,
    /// Objective 7: partly used cells.
    partial: Expr,
}

impl PatternModel {
    /// The model, with the optima of objectives 1–5 (`held`) as constraints.
    /// Patterns have at most `most_parts` pieces: with a known layout of L
    /// pieces for P placed VMs, no better layout gives a VM more than
    /// L − P + 1. `None` when the model does not apply (preferred VMs over
    /// several nodes where a node has several cells) or would be too big
    /// (then the cell model is used).
    pub(super) fn new(
        request: &PlanRequest,
        host: &Host,
        vms: &Vms,
        held: &BTreeMap<Tier, f64>,
        most_parts: u32,
        layouts: Layouts,
    ) -> Option<PatternModel> {
        // A VM that must have cores on given nodes: the cell model's columns.
        if request.vms.iter().any(|v| !v.cell_nodes.is_empty()) {
            return None;
        }
        // Preferred VMs over several nodes: where each node is one cell, a
        // VM's pieces are its nodes and extra nodes = pieces − 1; else its
        // patterns name the node of each piece, and use no more nodes than
        // the VMs may take beyond one, together.
        let extra = held.get(&Tier::ExtraNodes).copied().unwrap_or(0.0).round();
        let spanning = extra > 0.5;
        let most_nodes = if host.nodes.values().all(|cells| cells.len() == 1) {
            None
        } else {
            Some(1 + extra as usize)
        };
        // Kinds kept to one node: strict, and preferred unless spanning.
        let kinds = kinds_of(request, vms, |vm| {
            vm.numa == NumaPolicy::Preferred && !spanning
        });
        // Whose pieces are kept per node: those kept to one node, and the
        // preferred VMs over nodes that have several cells.
        let by_node: Vec<bool> = kinds
            .iter()
            .map(|kind| {
                let vm = &request.vms[kind.members[0]];
                kind.one_node || (most_nodes.is_some() && vm.numa == NumaPolicy::Preferred)
            })
            .collect();
        // Groups: cells of one node with the same free cores.
        let mut by_group: BTreeMap<(Option<NodeId>, u32), Vec<usize>> = BTreeMap::new();
        for (e, cell) in host.cells.iter().enumerate() {
            by_group.entry((cell.node, cell.cap())).or_default().push(e);
        }
        let groups: Vec<CellGroup> = by_group.into_iter().collect();
        let mut p = Patterns::new(groups.iter().map(|(key, _)| key.1).collect());
        let mut memory = MemoryRows::new(request);
        for (kind, &by_node) in kinds.iter().zip(&by_node) {
            let vm = &request.vms[kind.members[0]];
            p.next_kind();
            let nodes = if kind.one_node {
                Some(1)
            } else if by_node {
                most_nodes
            } else {
                None
            };
            add_kind(
                &mut p,
                host,
                &groups,
                vm,
                kind,
                (spanning, nodes, most_parts, layouts),
            )?;
            add_memory(&p, &mut memory, &groups, kind);
        }
        memory.bound(&mut p.m);
        let bins: Vec<u32> = groups
            .iter()
            .map(|(_, cells)| u32::try_from(cells.len()).unwrap_or(u32::MAX))
            .collect();
        let flows = p.flows(&bins)?;
        let partial: Expr = flows.iter().map(Flow::partial).sum();
        let mut used: BTreeMap<Option<NodeId>, Expr> = BTreeMap::new();
        for (((node, _), _), flow) in groups.iter().zip(&flows) {
            *used.entry(*node).or_default() += flow.cores();
        }
        order_nodes(&mut p.m, &used, &interchangeable_nodes(request, host));
        hold(&mut p, request, held);
        Some(PatternModel {
            model: p.m,
            layouts,
            kinds,
            by_node,
            groups,
            sigma: p.sigma,
            rho: p.rho,
            flows,
            pieces: p.pieces,
            partial,
        })
    }

    /// Variables and constraints, for traces.
    pub(super) fn size(&self) -> (usize, usize) {
        (self.model.vars(), self.model.cons())
    }

    /// The layout at `values`: flows → cells → pieces per kind → VMs.
    fn layout(&self, values: &[f64]) -> Option<Units> {
        let mut pool: Pool<usize> = vec![BTreeMap::new(); self.kinds.len()];
        for (g, (((node, _), cells), flow)) in self.groups.iter().zip(&self.flows).enumerate() {
            let scope = |t: usize| -> Scope { self.by_node[t].then_some(*node) };
            fill_pool(&mut pool, g, cells, flow, &self.rho, scope, values)?;
        }
        let mut units = Units::new();
        deal(&self.kinds, &self.sigma, pool, values, |_, i, mine| {
            units.insert(i, mine);
        })?;
        Some(units)
    }
}

/// `σ` and `ρ` of one kind: its patterns (per node it may be kept to, over
/// the nodes it may span, or over the host), and the pieces of each size
/// each scope's groups get. `nodes`: for a kind whose pieces are kept per
/// node, the most nodes a VM of it may touch (1 for VMs kept to one node).
/// `None` when the model would be too big.
fn add_kind(
    p: &mut Patterns,
    host: &Host,
    groups: &[CellGroup],
    vm: &VmRequest,
    kind: &Kind,
    (spanning, nodes, most_parts, layouts): (bool, Option<usize>, u32, Layouts),
) -> Option<()> {
    let usable = Usable {
        groups,
        usable: (0..groups.len())
            .filter(|&g| host.allows(vm, groups[g].0 .0))
            .collect(),
    };
    let scopes = usable.scopes(nodes.is_some());
    let shape = (nodes, most_parts, layouts, p.room());
    let batches = batches(&usable, &scopes, kind.cores, shape)?;
    let preferred = spanning && vm.numa == NumaPolicy::Preferred;
    let extra = |pattern: &[Piece]| -> usize {
        if !preferred {
            0
        } else if nodes.is_some() {
            // Pieces name their nodes.
            let touched: BTreeSet<Scope> = pattern.iter().map(|&(s, _)| s).collect();
            touched.len() - 1
        } else {
            // Each node one cell: each piece a node.
            pattern.len().saturating_sub(1)
        }
    };
    let mut placed = Expr::default();
    for patterns in batches {
        if p.too_many(patterns.len()) {
            return None;
        }
        let (here, per_size) = p.patterns(vm, kind, patterns, extra);
        placed += here;
        // Pieces of each size in each scope's groups = those of its patterns.
        let off_nic = |g: usize| vm.nic_remote(groups[g].0 .0);
        p.links(kind, per_size, |scope| usable.in_scope(scope), off_nic);
    }
    if !placed.is_empty() {
        p.m.le(placed, kind.members.len() as f64);
    }
    Some(())
}

/// The groups of cells a VM may use (indices into `groups`).
struct Usable<'g> {
    groups: &'g [CellGroup],
    usable: Vec<usize>,
}

impl Usable<'_> {
    /// Those in `scope` (a node, or the host).
    fn in_scope(&self, scope: Scope) -> Vec<usize> {
        self.usable
            .iter()
            .copied()
            .filter(|&g| scope.is_none_or(|k| self.groups[g].0 .0 == k))
            .collect()
    }

    /// Per node (`per_node`) or for the host: the scope, its largest cell
    /// and its free cores; scopes with no cell left out.
    fn scopes(&self, per_node: bool) -> Vec<(Scope, u32, u32)> {
        let scopes: Vec<Scope> = if per_node {
            self.usable
                .iter()
                .map(|&g| self.groups[g].0 .0)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None]
        };
        scopes
            .into_iter()
            .map(|scope| {
                let mine = self.in_scope(scope);
                let g = self.groups;
                let largest = mine.iter().map(|&i| g[i].0 .1).max().unwrap_or(0);
                let room = mine
                    .iter()
                    .map(|&i| g[i].0 .1 * u32::try_from(g[i].1.len()).unwrap_or(0))
                    .sum();
                (scope, largest, room)
            })
            .filter(|&(_, largest, _)| largest > 0)
            .collect()
    }
}

/// Batches of patterns of a VM of `c` cores, each tied to its scopes'
/// groups in turn (the order of the model's variables, which steers the
/// backend's search). `shape`: the most nodes a VM may touch (none: the
/// host is one scope), the most pieces, the layouts, the patterns room left.
fn batches(
    usable: &Usable,
    scopes: &[(Scope, u32, u32)],
    c: u32,
    (nodes, most_parts, layouts, room_left): (Option<usize>, u32, Layouts, usize),
) -> Option<Vec<Vec<Vec<Piece>>>> {
    Some(match nodes {
        // Kept to one node: its patterns per node.
        Some(1) => {
            let mut batches = Vec::new();
            for &(scope, largest, room) in scopes {
                if room < c {
                    continue;
                }
                // In the compact model, whole cells and one remainder; else
                // any partition.
                let sizes = if layouts == Layouts::Compact {
                    let bins: Vec<(u32, u32)> = usable
                        .in_scope(scope)
                        .iter()
                        .map(|&g| {
                            let group = &usable.groups[g];
                            let cells = u32::try_from(group.1.len()).unwrap_or(u32::MAX);
                            (group.0 .1, cells)
                        })
                        .collect();
                    whole_and_rest(c, &bins, most_parts)
                } else {
                    partitions_within(c, largest.min(c), most_parts, room_left)?
                };
                batches.push(
                    sizes
                        .into_iter()
                        .map(|sizes| sizes.into_iter().map(|x| (scope, x)).collect())
                        .collect(),
                );
            }
            batches
        }
        Some(most_nodes) => vec![over_nodes(c, scopes, most_nodes, most_parts, room_left)?],
        None => {
            let (largest, room) = scopes.first().map_or((0, 0), |s| (s.1, s.2));
            if room < c {
                Vec::new()
            } else {
                vec![partitions_within(c, largest.min(c), most_parts, room_left)?
                    .into_iter()
                    .map(|sizes| sizes.into_iter().map(|x| (None, x)).collect())
                    .collect()]
            }
        }
    })
}

/// The patterns of a VM of `c` cores over at most `most_nodes` of the nodes
/// `scopes` (each with its largest cell and free cores), each piece naming
/// its node, at most `most_parts` pieces in all; `None` beyond `limit`
/// patterns.
fn over_nodes(
    c: u32,
    scopes: &[(Scope, u32, u32)],
    most_nodes: usize,
    most_parts: u32,
    limit: usize,
) -> Option<Vec<Vec<Piece>>> {
    // (nodes left to look at, cores left, pieces so far) → every way on.
    fn go(
        scopes: &[(Scope, u32, u32)],
        left: u32,
        nodes_left: usize,
        parts_left: u32,
        so_far: &mut Vec<Piece>,
        out: &mut Vec<Vec<Piece>>,
        limit: usize,
    ) -> Option<()> {
        if left == 0 {
            out.push(so_far.clone());
            return (out.len() <= limit).then_some(());
        }
        let [(scope, largest, room), rest @ ..] = scopes else {
            return Some(());
        };
        // Nothing on this node.
        go(rest, left, nodes_left, parts_left, so_far, out, limit)?;
        if nodes_left == 0 || parts_left == 0 {
            return Some(());
        }
        for here in 1..=left.min(*room) {
            let ways = partitions_within(here, (*largest).min(here), parts_left, limit)?;
            for sizes in ways {
                let n = so_far.len();
                so_far.extend(sizes.iter().map(|&x| (*scope, x)));
                let used = u32::try_from(sizes.len()).unwrap_or(u32::MAX);
                go(
                    rest,
                    left - here,
                    nodes_left - 1,
                    parts_left - used,
                    so_far,
                    out,
                    limit,
                )?;
                so_far.truncate(n);
            }
        }
        Some(())
    }
    let mut out = Vec::new();
    go(
        scopes,
        c,
        most_nodes,
        most_parts,
        &mut Vec::new(),
        &mut out,
        limit,
    )?;
    Some(out)
}

/// The memory of the current kind's VMs on each node: a VM kept to one node
/// has all of it on the node of its pattern's scope; a VM over nodes, per
/// core it has on a node (its pieces there, `ρ`) a share.
fn add_memory(p: &Patterns, memory: &mut MemoryRows, groups: &[CellGroup], kind: &Kind) {
    let first = kind.members[0];
    if kind.one_node {
        for (pattern, sigma) in p.sigma.last().into_iter().flatten() {
            if let Some(&(Some(node), _)) = pattern.first() {
                memory.add(first, node, 1.0, *sigma);
            }
        }
        return;
    }
    for (&(g, item), &rho) in p.rho.last().into_iter().flatten() {
        let share = f64::from(item.cores) / f64::from(kind.cores.max(1));
        memory.add(first, groups[g].0 .0, share, rho);
    }
}

/// Objectives 1–5 held at `held` (6 too, were it there).
fn hold(p: &mut Patterns, request: &PlanRequest, held: &BTreeMap<Tier, f64>) {
    let objectives = std::mem::take(&mut p.objectives);
    let mut placed = objectives.placed;
    for l in priority_levels(request) {
        if let Some(&value) = held.get(&Tier::Placed(l)) {
            p.m.le(placed.remove(&l).unwrap_or_default(), value);
        }
    }
    for (tier, terms) in [
        (Tier::Vcpus, objectives.vcpus),
        (Tier::Cores, objectives.cores),
        (Tier::NicRemote, objectives.remote),
        (Tier::L3PerVm, p.pieces.clone()),
        (Tier::ExtraNodes, objectives.extra),
    ] {
        if let Some(&value) = held.get(&tier) {
            p.m.le(terms, value);
        }
    }
}

/// `tiers` (objectives 6 and/or 7, in order) on the pattern model; `start`
/// is a layout that holds objectives 1–5 (and 6, when only 7 is asked).
/// `fewest` says that every VM kept to one node touches its fewest L3
/// domains (known when only 7 is asked; found after 6 otherwise): then the
/// compact layouts hold an optimum of objective 7. Never returns worse than
/// `start`; the placement is proven when every tier is.
pub(super) fn patterns_stage(
    (request, host): (&PlanRequest, &Host),
    pm: &mut PatternModel,
    (start, tiers, mut fewest): (&Units, &[Tier], bool),
    bounds: &BTreeMap<Tier, f64>,
    deadline: Deadline,
    stats: &mut Stats,
) -> Placement {
    let mut best = start.clone();
    for &tier in tiers {
        let started = Instant::now();
        let (terms, start_value) = match tier {
            Tier::L3PerVm => (pm.pieces.clone(), pieces_of(&best)),
            _ => (pm.partial.clone(), partial_of(host, &best)),
        };
        let at_bound = bounds.get(&tier).is_some_and(|&b| start_value <= b + 1e-6);
        let left = deadline.remaining();
        let mut outcome = (start_value, at_bound);
        if let Some(&b) = bounds.get(&tier).filter(|&&b| b > 0.0) {
            // A valid cut: the backend need not find the bound itself.
            pm.model.ge(terms.clone(), b);
        }
        // Where the model holds an optimum, one with no point better than
        // the start by a whole unit proves the start optimal.
        let exact = pm.layouts == Layouts::Every || (tier == Tier::PartialL3 && fewest);
        if !at_bound && !left.is_zero() {
            let answer = run_below(&pm.model, &terms, left, (None, start_value));
            if let Err(e) = &answer {
                e.keep_fault(&mut stats.fault);
            }
            if let Ok(None) = answer {
                outcome = (start_value, exact);
            }
            if let Ok(Some((values, proven))) = answer {
                let value = terms.value(&values).round();
                if let Some(units) = pm.layout(&values) {
                    // The layout may merge pieces: count what it is.
                    let real = match tier {
                        Tier::L3PerVm => pieces_of(&units),
                        _ => partial_of(host, &units),
                    };
                    if real <= start_value + 1e-6
                        && (tier != Tier::PartialL3 || pieces_of(&units) <= pieces_of(&best) + 1e-6)
                    {
                        best = units;
                        // Optimal if proven so by a model that holds an
                        // optimum, or if at the lower bound.
                        let at = bounds.get(&tier).is_some_and(|&b| real <= b + 1e-6);
                        outcome = (real, (exact && proven && real <= value + 1e-6) || at);
                    }
                }
            }
        }
        let (value, proven) = outcome;
        stats.tiers.push(TierRun {
            tier,
            value,
            ms: started.elapsed().as_secs_f64() * 1e3,
            proven,
            by_bound: at_bound,
        });
        trace_tier(tier, started, proven, value);
        if !proven {
            return cores_of(request, host, &best, false);
        }
        if tier == Tier::L3PerVm {
            fewest = at_fewest(request, host, &best);
        }
        pm.model.le(terms, value);
    }
    cores_of(request, host, &best, true)
}

impl PatternModel {
    /// Holds objective 6 at `value` (found on another model).
    pub(super) fn hold_pieces(&mut self, value: f64) {
        self.model.le(self.pieces.clone(), value);
    }
}

/// Whether every VM of `units` laid out on one node touches the fewest L3
/// domains of that node that can hold it.
pub(super) fn at_fewest(request: &PlanRequest, host: &Host, units: &Units) -> bool {
    units.iter().all(|(&i, cells)| {
        if request.vms.get(i).is_none() {
            return false;
        }
        let nodes: BTreeSet<Option<NodeId>> = cells.keys().map(|&e| host.cells[e].node).collect();
        // A VM over nodes has every partition in both models.
        let [node] = nodes.into_iter().collect::<Vec<_>>()[..] else {
            return true;
        };
        let cores: u32 = cells.values().sum();
        cells.len() <= host.fewest_cells(node, cores) as usize
    })
}
