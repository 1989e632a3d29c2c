//! Objectives 1–5 on a pattern and arc-flow model over NUMA nodes, for hosts
//! of small nodes (and 6–7 as well where every node is one L3 domain).
//!
//! The counting node model's per-node counts have a weak LP on hosts of many
//! small nodes (the 24-node fixture left "vCPUs placed" unproven after 7 s).
//! Here nodes of the same free cores form one arc-flow group (a node some
//! VM's NIC is on is a group of its own); a strict VM is one piece, another VM
//! any partition of its cores into pieces on distinct nodes (extra NUMA nodes
//! = pieces − 1 for `numa = "preferred"`). Pieces of one VM that the flow puts
//! on one node are merged by the layout, which only lowers objective 4, so
//! the model's optima are layouts'.

use super::super::arcflow::{partitions_within, Flow};
use super::super::tiers::Tiers;
use super::host::{Host, Vms};
use super::layout::{lay_out, Units};
use super::lexicographic::{
    fewest_or_all, lexicographic, placed_everything, placing_tiers, stage2_bounds,
};
use super::patterns::{deal, fill_pool, kinds_of, Kind, Patterns, Piece, Pool, Scope};
use super::Stats;
use crate::deadline::Deadline;
use crate::ids::NodeId;
use crate::solve::{NumaPolicy, PlanRequest, Tier};
use std::collections::{BTreeMap, BTreeSet};

/// Nodes of at most this many free cores are packed by [`node_patterns`].
const SMALL_NODE: u32 = 32;

/// Nodes of one arc-flow group: (a NIC's node alone, free cores) and the nodes.
type NodeGroup = ((Scope, u32), Vec<Option<NodeId>>);

/// The model, and what its solution is read with.
struct NodePatterns {
    p: Patterns,
    kinds: Vec<Kind>,
    groups: Vec<NodeGroup>,
    flows: Vec<Flow>,
    /// Objectives 1–5.
    tiers: Tiers,
    /// Their lower bounds.
    bounds: BTreeMap<Tier, f64>,
    /// Objective 6's lower bound when every VM is placed.
    least_pieces: f64,
}

/// Objectives 1–5 on the node pattern model (and 6–7 where every node is one
/// L3 domain, unless `placing_only`): the layout of its answer, whether proven, and whether
/// objectives 6–7 are done too. `None` when the model does not apply (a big
/// node) or would be too big (VMs of many cores that may span nodes); the
/// counting node model is used then.
pub(super) fn node_patterns(
    request: &PlanRequest,
    (host, vms): (&Host, &Vms),
    deadline: Deadline,
    placing_only: bool,
    stats: &mut Stats,
) -> Option<(Units, bool, bool)> {
    // Big nodes are few bins that take many VMs each: there the counting
    // model's LP is tight and this one's graphs (one vertex per free core)
    // only cost time. Small nodes are where bin packing bites.
    if host.nodes.keys().any(|&k| host.node_cap(k) > SMALL_NODE) {
        return None;
    }
    // Its arc flows pack cores only: memory per node needs the counting
    // model. (Every node a group of its own, with memory rows, was tried: on
    // the 24-node fixture with tight pools it placed fewer VMs in the time
    // than the counting model, docs/benchmarks.md.)
    if crate::solve::memory::active(request) {
        return None;
    }
    // Patterns count pieces, not whose piece is where: a VM that must have
    // cores on given nodes (several required NICs) needs its own columns.
    if request.vms.iter().any(|v| !v.cell_nodes.is_empty()) {
        return None;
    }
    let mut np = NodePatterns::build(request, host, vms)?;
    stats.variables.0 = np.p.m.vars();
    let tiers = placing_tiers(std::mem::take(&mut np.tiers), placing_only);
    let (values, mut proven) = lexicographic(
        &mut np.p.m,
        &tiers,
        &np.bounds,
        &[],
        deadline,
        vms.placeable() == request.vms.len(),
        stats,
    );
    let mut values = values?;
    // Where every node is one L3 domain (or L3 is unknown), pieces are the
    // domains a VM touches and partly used nodes are partly used domains:
    // objectives 6–7 on this model too.
    let one_domain_per_node =
        host.one_cell_per_domain() && host.nodes.values().all(|cells| cells.len() == 1);
    // (Not for a re-solve that asks only which VMs fit.)
    let complete = proven && one_domain_per_node && !placing_only;
    if complete {
        let held: BTreeMap<Tier, f64> = stats.tiers.iter().map(|r| (r.tier, r.value)).collect();
        let all_placed = placed_everything(stats, request);
        let mut more = stage2_bounds(request, host, vms, &held, all_placed);
        if all_placed {
            more.insert(Tier::L3PerVm, np.least_pieces);
        }
        let partial = np.flows.iter().map(Flow::partial).sum();
        let rest: Tiers = vec![
            (Tier::L3PerVm, std::mem::take(&mut np.p.pieces)),
            (Tier::PartialL3, partial),
        ];
        let (v, p) = lexicographic(
            &mut np.p.m,
            &rest,
            &more,
            std::slice::from_ref(&values),
            deadline,
            all_placed,
            stats,
        );
        if let Some(v) = v {
            values = v;
        }
        proven = p;
    }
    Some((np.layout(host, &values)?, proven, complete))
}

impl NodePatterns {
    /// The model; `None` when it would have too many patterns.
    fn build(request: &PlanRequest, host: &Host, vms: &Vms) -> Option<NodePatterns> {
        let groups = node_groups(request, host);
        // Kinds: strict types (one piece), the others any partition over nodes.
        let kinds = kinds_of(request, vms, |_| false);
        let mut p = Patterns::new(groups.iter().map(|(key, _)| key.1).collect());
        let mut bounds: BTreeMap<Tier, f64> = BTreeMap::new();
        let (mut all_vcpus, mut all_cores, mut least_extra, mut least_pieces) =
            (0.0, 0.0, 0.0, 0.0);
        for kind in &kinds {
            let vm = &request.vms[kind.members[0]];
            let (c, strict) = (kind.cores, kind.one_node);
            let count = kind.members.len() as f64;
            *bounds.entry(Tier::Placed(vm.priority)).or_default() -= count;
            all_vcpus += f64::from(vm.vcpus) * count;
            all_cores += f64::from(c) * count;
            let usable: Vec<usize> = (0..groups.len())
                .filter(|&g| groups[g].1.iter().all(|&k| host.allows(vm, k)))
                .collect();
            let largest = usable.iter().map(|&g| groups[g].0 .1).max().unwrap_or(0);
            let nodes: u32 = usable
                .iter()
                .map(|&g| u32::try_from(groups[g].1.len()).unwrap_or(0))
                .sum();
            let patterns: Vec<Vec<u32>> = if !strict {
                partitions_within(c, largest.min(c), nodes.min(c), p.room())?
            } else if c <= largest {
                vec![vec![c]]
            } else {
                Vec::new()
            };
            let caps: Vec<u32> = usable
                .iter()
                .flat_map(|&g| std::iter::repeat_n(groups[g].0 .1, groups[g].1.len()))
                .collect();
            let least = if strict {
                1.0
            } else {
                f64::from(fewest_or_all(&caps, c))
            };
            least_pieces += least * count;
            let extra_nodes = !strict && vm.numa == NumaPolicy::Preferred;
            if extra_nodes {
                least_extra += (least - 1.0) * count;
            }
            p.next_kind();
            if p.too_many(patterns.len()) {
                return None;
            }
            // Every node is a bin: a piece may go to any usable one.
            let patterns = patterns
                .into_iter()
                .map(|sizes| sizes.into_iter().map(|c| (None, c)).collect())
                .collect();
            let extra = |pattern: &[Piece]| {
                if extra_nodes {
                    pattern.len().saturating_sub(1)
                } else {
                    0
                }
            };
            let (placed, per_size) = p.patterns(vm, kind, patterns, extra);
            if !placed.is_empty() {
                p.m.le(placed, count);
            }
            let off_nic = |g: usize| groups[g].1.iter().all(|&k| vm.nic_remote(k));
            p.links(kind, per_size, |_| usable.clone(), off_nic);
        }
        let bins: Vec<u32> = groups
            .iter()
            .map(|(_, nodes)| u32::try_from(nodes.len()).unwrap_or(u32::MAX))
            .collect();
        let flows = p.flows(&bins);
        bounds.insert(Tier::Vcpus, -all_vcpus);
        bounds.insert(Tier::Cores, all_cores);
        bounds.insert(Tier::ExtraNodes, least_extra);
        bounds.insert(Tier::NicRemote, 0.0);
        let tiers = std::mem::take(&mut p.objectives).tiers(request, Vec::new());
        Some(NodePatterns {
            p,
            kinds,
            groups,
            flows,
            tiers,
            bounds,
            least_pieces,
        })
    }

    /// The layout at `values`: flows → nodes → pieces per kind → VMs →
    /// per-node loads → cells.
    fn layout(&self, host: &Host, values: &[f64]) -> Option<Units> {
        let mut pool: Pool<Option<NodeId>> = vec![BTreeMap::new(); self.kinds.len()];
        for (g, ((_, nodes), flow)) in self.groups.iter().zip(&self.flows).enumerate() {
            fill_pool(&mut pool, g, nodes, flow, &self.p.rho, |_| None, values)?;
        }
        let mut per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>> = BTreeMap::new();
        let mut loose_per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>> = BTreeMap::new();
        deal(&self.kinds, &self.p.sigma, pool, values, |kind, i, mine| {
            let target = if kind.one_node {
                &mut per_node
            } else {
                &mut loose_per_node
            };
            for (k, amount) in mine {
                target.entry(k).or_default().push((i, amount));
            }
        })?;
        Some(lay_out(host, per_node, loose_per_node))
    }
}

/// Groups of nodes: (key, free cores) → nodes; a NIC's node or the node of
/// unknown id alone; nodes without free cores left out.
fn node_groups(request: &PlanRequest, host: &Host) -> Vec<NodeGroup> {
    let named: BTreeSet<Option<NodeId>> = request
        .vms
        .iter()
        .flat_map(|v| v.nic_nodes.iter().map(|&n| Some(n)))
        .collect();
    let mut by_group: BTreeMap<(Scope, u32), Vec<Option<NodeId>>> = BTreeMap::new();
    for &k in host.nodes.keys() {
        let own = (named.contains(&k) || k.is_none()).then_some(k);
        by_group.entry((own, host.node_cap(k))).or_default().push(k);
    }
    by_group
        .into_iter()
        .filter(|((_, cap), _)| *cap > 0)
        .collect()
}
