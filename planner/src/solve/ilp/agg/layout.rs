//! Layouts: which cells each VM's cores come from ([`Units`]), how per-node
//! loads are laid out in cells, and how a layout becomes concrete cores.

use super::host::Host;
use crate::ids::{CoreId, NodeId};
use crate::solve::classes::Domain;
use crate::solve::Placement;
use crate::solve::PlanRequest;
use std::collections::BTreeMap;

/// Where each placed VM's cores come from: cell → count.
pub(super) type Units = BTreeMap<usize, BTreeMap<usize, u32>>;

/// Turns a placement into cell counts per VM (`None` for a core the cells do
/// not know).
pub(super) fn units_of(host: &Host, placement: &Placement) -> Option<Units> {
    let mut cell_of: BTreeMap<CoreId, usize> = BTreeMap::new();
    for (e, cell) in host.cells.iter().enumerate() {
        for &core in &cell.cores {
            cell_of.insert(core, e);
        }
    }
    let mut units = Units::new();
    for (&i, cores) in &placement.cores {
        let entry = units.entry(i).or_default();
        for core in cores {
            *entry.entry(*cell_of.get(core)?).or_default() += 1;
        }
    }
    Some(units)
}

/// Per-node loads → cells: strict VMs `(vm, cores)` and pieces of the other
/// VMs `(vm, cores)` on each node. Per node, VMs largest first, each whole in
/// the fullest cell that holds it (best fit), the rest split; if that splits
/// more VMs than the cell model has slots, a plain sequential fill (at most
/// one split per cell boundary) instead.
pub(super) fn lay_out(
    host: &Host,
    mut per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>>,
    mut loose_per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>>,
) -> Units {
    let mut units = Units::new();
    for (&k, cells) in &host.nodes {
        let strict = per_node.remove(&k).unwrap_or_default();
        let loose = loose_per_node.remove(&k).unwrap_or_default();
        let slots = cells.len().saturating_sub(1);
        let fitted = best_fit(host, cells, &strict, &loose).filter(|(_, splits)| *splits <= slots);
        let layout = match fitted {
            Some((layout, _)) => layout,
            None => sequential(host, cells, &strict, &loose),
        };
        for (i, per_cell) in layout {
            let entry = units.entry(i).or_default();
            for (e, c) in per_cell {
                *entry.entry(e).or_default() += c;
            }
        }
    }
    units
}

/// Per VM: its cores per cell.
type Layout = Vec<(usize, Vec<(usize, u32)>)>;

/// Best fit decreasing; `None` when something does not fit at all. Returns
/// the layout and how many strict VMs it split.
fn best_fit(
    host: &Host,
    cells: &[usize],
    strict: &[(usize, u32)],
    loose: &[(usize, u32)],
) -> Option<(Layout, usize)> {
    let mut left: BTreeMap<usize, u32> = cells.iter().map(|&e| (e, host.cells[e].cap())).collect();
    let mut layout = Layout::new();
    let mut items: Vec<(usize, u32, bool)> = strict
        .iter()
        .map(|&(i, c)| (i, c, true))
        .chain(loose.iter().map(|&(i, c)| (i, c, false)))
        .collect();
    items.sort_by_key(|&(i, c, _)| (std::cmp::Reverse(c), i));
    let mut splits = 0;
    for (i, c, is_strict) in items {
        let whole = left
            .iter()
            .filter(|(_, &l)| l >= c)
            .min_by_key(|(&e, &l)| (l, e))
            .map(|(&e, _)| e);
        if let Some(e) = whole {
            *left.get_mut(&e)? -= c;
            layout.push((i, vec![(e, c)]));
            continue;
        }
        // Split: the emptiest cells first (fewest pieces).
        let mut order: Vec<(usize, u32)> = left.iter().map(|(&e, &l)| (e, l)).collect();
        order.sort_by_key(|&(e, l)| (std::cmp::Reverse(l), e));
        let mut need = c;
        let mut pieces = Vec::new();
        for (e, l) in order {
            if need == 0 {
                break;
            }
            let take = l.min(need);
            if take > 0 {
                pieces.push((e, take));
                *left.get_mut(&e)? -= take;
                need -= take;
            }
        }
        if need > 0 {
            return None;
        }
        if is_strict && pieces.len() > 1 {
            splits += 1;
        }
        layout.push((i, pieces));
    }
    Some((layout, splits))
}

/// Fills the cells in order: at most one VM split per cell boundary.
fn sequential(
    host: &Host,
    cells: &[usize],
    strict: &[(usize, u32)],
    loose: &[(usize, u32)],
) -> Layout {
    let mut layout = Layout::new();
    let mut cursor = cells.iter().map(|&e| (e, host.cells[e].cap())).peekable();
    let mut current: Option<(usize, u32)> = cursor.next();
    for &(i, c) in loose.iter().chain(strict) {
        let mut need = c;
        let mut pieces = Vec::new();
        while need > 0 {
            let Some((e, l)) = current.as_mut() else {
                break;
            };
            let take = (*l).min(need);
            if take > 0 {
                pieces.push((*e, take));
                *l -= take;
                need -= take;
            }
            if *l == 0 {
                current = cursor.next();
            }
        }
        layout.push((i, pieces));
    }
    layout
}

/// Per-VM cell counts → concrete cores: VMs by priority, then spec order,
/// take the lowest free cores of each cell.
pub(super) fn cores_of(
    request: &PlanRequest,
    host: &Host,
    units: &Units,
    proven: bool,
) -> Placement {
    let mut next = vec![0usize; host.cells.len()];
    let mut order: Vec<usize> = units.keys().copied().collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(request.vms[i].priority), i));
    let mut cores = BTreeMap::new();
    for i in order {
        let mut mine = Vec::new();
        for (&e, &c) in &units[&i] {
            let cell = &host.cells[e];
            let end = (next[e] + c as usize).min(cell.cores.len());
            mine.extend_from_slice(&cell.cores[next[e]..end]);
            next[e] = end;
        }
        mine.sort();
        cores.insert(i, mine);
    }
    Placement {
        cores,
        proven,
        fault: None,
    }
}

/// L3 domains touched, summed over VMs (one cell per domain).
pub(super) fn pieces_of(units: &Units) -> f64 {
    units.values().map(|cells| cells.len() as f64).sum()
}

/// Partly used domains of a layout.
pub(super) fn partial_of(host: &Host, units: &Units) -> f64 {
    let mut used: BTreeMap<Domain, u32> = BTreeMap::new();
    let capacity = host.domain_caps();
    for cells in units.values() {
        for (&e, &c) in cells {
            *used.entry(host.cells[e].domain).or_default() += c;
        }
    }
    used.iter()
        .filter(|(d, &u)| u > 0 && capacity.get(d).is_some_and(|&cap| u < cap))
        .count() as f64
}
