//! Symmetry breaking: NUMA nodes no VM can tell apart are ordered by the cores
//! they give, so that the models do not search every relabelling of them.

use super::super::backend::Model;
use super::super::expr::Expr;
use super::host::Host;
use crate::ids::NodeId;
use crate::solve::PlanRequest;
use std::collections::{BTreeMap, BTreeSet};

/// Nodes that no VM can tell apart: the same free cores per cell, and no VM
/// whose NIC is on one of them. Their contents can be swapped in any layout,
/// so the models may order them by cores used (symmetry breaking).
pub(super) fn interchangeable_nodes(
    request: &PlanRequest,
    host: &Host,
) -> Vec<Vec<Option<NodeId>>> {
    let named: BTreeSet<NodeId> = request
        .vms
        .iter()
        .flat_map(|v| v.nic_nodes.iter().copied())
        .collect();
    // Nodes are alike in their free cores per cell and, when VMs' memory
    // counts, in what each page size's pool offers.
    let memory = if crate::solve::memory::active(request) {
        crate::solve::memory::caps(request)
    } else {
        crate::solve::memory::Caps::new()
    };
    type Shape = (Vec<u32>, Vec<(u64, u64)>);
    let mut by_shape: BTreeMap<Shape, Vec<Option<NodeId>>> = BTreeMap::new();
    for (&k, cells) in &host.nodes {
        let Some(node) = k else { continue };
        if named.contains(&node) {
            continue;
        }
        let mut shape: Vec<u32> = cells.iter().map(|&e| host.cells[e].cap()).collect();
        shape.sort();
        let pools: Vec<(u64, u64)> = memory
            .iter()
            .filter(|((n, _), _)| *n == k)
            .map(|((_, page), bytes)| (*page, bytes.to_bits()))
            .collect();
        by_shape.entry((shape, pools)).or_default().push(k);
    }
    by_shape
        .into_values()
        .filter(|nodes| nodes.len() > 1)
        .collect()
}

/// `used(a) ≥ used(b)` for consecutive interchangeable nodes.
pub(super) fn order_nodes(
    m: &mut Model,
    used: &BTreeMap<Option<NodeId>, Expr>,
    groups: &[Vec<Option<NodeId>>],
) {
    for nodes in groups {
        for pair in nodes.windows(2) {
            let (Some(a), Some(b)) = (used.get(&pair[0]), used.get(&pair[1])) else {
                continue;
            };
            m.ge(a.clone(), b.clone());
        }
    }
}
