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
//!
//! Where memory can bind, each node's load is its cores and its memory
//! (`memory_axis`): nodes of one group also hold the same memory, and a
//! piece takes its share of its VM's memory.

use super::super::arcflow::{partitions_within, Flow, Item};
use super::super::tiers::Tiers;
use super::host::{Host, Vms};
use super::layout::{lay_out, Units};
use super::lexicographic::{
    fewest_or_all, lexicographic, placed_everything, placing_tiers, stage2_bounds, Ask,
};
use super::memory_axis::Axis;
use super::patterns::{deal, fill_pool, kinds_of, Kind, Patterns, Piece, Pool, Scope};
use super::Stats;
use crate::deadline::Deadline;
use crate::ids::NodeId;
use crate::solve::{NumaPolicy, PlanRequest, Tier};
use std::collections::{BTreeMap, BTreeSet};

/// Nodes of at most this many free cores are packed by [`node_patterns`].
const SMALL_NODE: u32 = 32;

/// Nodes of one arc-flow group: (a NIC's node alone, free cores, memory
/// where it binds) and the nodes.
type NodeGroup = ((Scope, u32, Option<u64>), Vec<Option<NodeId>>);

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
    start_units: &[Units],
    deadline: Deadline,
    placing_only: bool,
    stats: &mut Stats,
) -> Option<(Units, bool, bool)> {
    // Big nodes are few bins that take many VMs each: there the counting
    // model's LP is tight and this one's graphs (one vertex per free core)
    // only cost time. Small nodes are where bin packing bites.
    let built = if host.nodes.keys().any(|&k| host.node_cap(k) > SMALL_NODE) {
        Err(Aside::BigNode)
    } else if request.vms.iter().any(|v| !v.cell_nodes.is_empty()) {
        // Patterns count pieces, not whose piece is where: a VM that must
        // have cores on given nodes (several required NICs) needs its own
        // columns.
        Err(Aside::GivenNodes)
    } else {
        NodePatterns::build(request, host, vms)
    };
    let mut np = match built {
        Ok(np) => np,
        Err(why) => {
            tracing::debug!(target: super::TRACE, "agg: node pattern model steps aside: {why}");
            return None;
        }
    };
    stats.variables.0 = np.p.m.vars();
    let starts: Vec<Vec<f64>> = start_units
        .iter()
        .filter_map(|units| np.start(host, units))
        .collect();
    let ask = Ask::first_stage(request, vms, placing_only);
    let tiers = placing_tiers(std::mem::take(&mut np.tiers), ask);
    let (values, mut proven) = lexicographic(
        &mut np.p.m,
        &tiers,
        &np.bounds,
        &starts,
        deadline,
        ask,
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
            // Both bound it: the VMs' pieces on the nodes, and the parts of
            // a full host (`stage2_bounds`).
            let parts = more.get(&Tier::L3PerVm).copied().unwrap_or(0.0);
            more.insert(Tier::L3PerVm, np.least_pieces.max(parts));
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
            Ask::optima(all_placed),
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
    /// The model; why not when it would have too many patterns, or memory
    /// cannot be counted in its flows.
    fn build(request: &PlanRequest, host: &Host, vms: &Vms) -> Result<NodePatterns, Aside> {
        // Kinds: strict types (one piece), the others any partition over nodes.
        let kinds = kinds_of(request, vms, |_| false);
        let axis = Axis::of(request, &kinds).map_err(|()| Aside::Memory)?;
        let groups = node_groups(request, host, axis.as_ref());
        let mut p = Patterns::new(groups.iter().map(|(key, _)| key.1).collect());
        if axis.is_some() {
            p.count_memory(groups.iter().map(|(key, _)| key.2).collect());
        }
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
                partitions_within(c, largest.min(c), nodes.min(c), p.room())
                    .ok_or(Aside::Patterns)?
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
            let memory = match &axis {
                Some(a) => a.of_vm(vm).ok_or(Aside::Memory)?,
                None => 0,
            };
            p.next_kind_with_memory(memory, c);
            if p.too_many(patterns.len()) {
                return Err(Aside::Patterns);
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
        let flows = p.flows(&bins).ok_or(Aside::Graph)?;
        bounds.insert(Tier::Vcpus, -all_vcpus);
        bounds.insert(Tier::Cores, all_cores);
        bounds.insert(Tier::ExtraNodes, least_extra);
        bounds.insert(Tier::NicRemote, 0.0);
        let tiers = std::mem::take(&mut p.objectives).tiers(request, Vec::new());
        Ok(NodePatterns {
            p,
            kinds,
            groups,
            flows,
            tiers,
            bounds,
            least_pieces,
        })
    }

    /// The model's values for the layout `units` (a start point): each
    /// VM's cores per node as one of its kind's patterns, the pieces per
    /// group, and each node's path in its group's flow. `None` where the
    /// layout is not one of the model's (a VM in more pieces than its
    /// patterns have, a node over its memory).
    fn start(&self, host: &Host, units: &Units) -> Option<Vec<f64>> {
        let mut values = self.p.m.zeros();
        let group_of: BTreeMap<Option<NodeId>, usize> = self
            .groups
            .iter()
            .enumerate()
            .flat_map(|(g, (_, nodes))| nodes.iter().map(move |&k| (k, g)))
            .collect();
        let mut bins: BTreeMap<Option<NodeId>, Vec<Item>> = BTreeMap::new();
        for (t, kind) in self.kinds.iter().enumerate() {
            for i in &kind.members {
                let Some(cells) = units.get(i) else { continue };
                let mut per_node: BTreeMap<Option<NodeId>, u32> = BTreeMap::new();
                for (&e, &c) in cells {
                    *per_node.entry(host.cells[e].node).or_default() += c;
                }
                let mut sizes: Vec<u32> = per_node.values().copied().collect();
                sizes.sort_unstable_by(|a, b| b.cmp(a));
                let &(_, sigma) = self.p.sigma[t].iter().find(|(pattern, _)| {
                    pattern.iter().map(|&(_, c)| c).eq(sizes.iter().copied())
                })?;
                values[sigma.index()] += 1.0;
                for (k, c) in per_node {
                    let g = *group_of.get(&k)?;
                    let item = self.p.item_in(g, t, c);
                    let &rho = self.p.rho[t].get(&(g, item))?;
                    values[rho.index()] += 1.0;
                    bins.entry(k).or_default().push(item);
                }
            }
        }
        for ((_, nodes), flow) in self.groups.iter().zip(&self.flows) {
            let held: Vec<Vec<Item>> = nodes
                .iter()
                .map(|k| bins.remove(k).unwrap_or_default())
                .collect();
            flow.add_start(&held, &mut values)?;
        }
        Some(values)
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

/// Why the node pattern model steps aside for the counting node model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Aside {
    #[error("a node has more than {SMALL_NODE} free cores")]
    BigNode,
    #[error("a VM must have cores on given nodes")]
    GivenNodes,
    #[error("memory cannot be counted in one axis of whole units")]
    Memory,
    #[error("the VMs would have too many patterns")]
    Patterns,
    #[error("a node group's flow graph would have too many arcs")]
    Graph,
}

/// Groups of nodes: (key, free cores, memory) → nodes; a NIC's node or the
/// node of unknown id alone; nodes without free cores left out.
fn node_groups(request: &PlanRequest, host: &Host, axis: Option<&Axis>) -> Vec<NodeGroup> {
    let named: BTreeSet<Option<NodeId>> = request
        .vms
        .iter()
        .flat_map(|v| v.nic_nodes.iter().map(|&n| Some(n)))
        .collect();
    let mut by_group: BTreeMap<(Scope, u32, Option<u64>), Vec<Option<NodeId>>> = BTreeMap::new();
    for &k in host.nodes.keys() {
        let own = (named.contains(&k) || k.is_none()).then_some(k);
        let memory = axis.and_then(|a| a.cap(k));
        by_group
            .entry((own, host.node_cap(k), memory))
            .or_default()
            .push(k);
    }
    by_group
        .into_iter()
        .filter(|((_, cap, _), _)| *cap > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::solve::{ThreadPolicy, VmRequest};
    use crate::topology::{load, Source};

    /// A first-fit layout is a start point of the model, memory counted:
    /// its values satisfy every row, and they count the layout's VMs. Four
    /// nodes of 4 cores with 6 free 2 MiB pages each; VMs of 3, 2, 2 and 1
    /// cores (strict, preferred, strict, preferred) of 2 pages per core,
    /// so memory binds (32 pages asked, 24 free).
    #[test]
    fn a_first_fit_layout_is_a_start_of_the_model() {
        let mut request = PlanRequest {
            host: load(&Source::Synthetic(
                "package:1 numa:4 core:4 pu:1".to_owned(),
            ))
            .unwrap(),
            reserved: crate::cpuset::CpuSet::new(),
            fixed: Vec::new(),
            vms: [
                (3, true),
                (2, false),
                (2, true),
                (1, false),
                (3, true),
                (2, true),
            ]
            .iter()
            .enumerate()
            .map(|(i, &(c, strict))| VmRequest {
                threads: ThreadPolicy::Prefer,
                numa: if strict {
                    NumaPolicy::Strict
                } else {
                    NumaPolicy::Preferred
                },
                memory: Some(crate::memory::VmMemory {
                    bytes: u64::from(c) * 2 * 2048 * 1024,
                    page_kib: 2048,
                }),
                ..VmRequest::new(&format!("vm{i}"), c)
            })
            .collect(),
            order: Default::default(),
            max_moves: None,
        };
        for node in &mut request.host.numa_nodes {
            node.hugepages = vec![crate::topology::PagePool {
                size_kib: 2048,
                total: 6,
                free: Some(6),
            }];
        }
        assert!(crate::solve::memory::active(&request));
        let host = Host::new(&request);
        let vms = Vms::new(&request, &host);
        let np = NodePatterns::build(&request, &host, &vms).unwrap();
        let greedy = crate::solve::greedy::place(&request);
        assert!(greedy.cores.len() >= 4, "{:?}", greedy.cores);
        let units = super::super::layout::units_of(&host, &greedy).unwrap();
        let values = np.start(&host, &units).unwrap();
        assert!(np.p.m.feasible(&values));
        let placed: f64 =
            np.p.sigma
                .iter()
                .flatten()
                .map(|&(_, v)| values[v.index()])
                .sum();
        assert_eq!(placed, greedy.cores.len() as f64);
    }
}
