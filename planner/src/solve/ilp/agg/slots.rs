//! Split slots of the cell model: per node, places for strict VMs split over
//! several of its cells.
//!
//! A slot takes one VM of one type (`τ`), its cores per cell (`s`), and
//! touches cells (`w`).
//!
//! A node with E cells needs at most E − 1 slots: if split VMs formed a cycle
//! over cells, moving one core at a time around it keeps every cell's use and
//! every earlier objective and ends with a VM touching one cell less, so some
//! optimum has a forest of split VMs.

use super::super::expr::{Expr, Var};
use super::cells::{Builder, Slot};
use super::lexicographic::fewest_or_all;
use crate::ids::NodeId;

impl Builder<'_> {
    /// The split slots of every node, used slots first on each.
    pub(super) fn slots(&mut self) -> Vec<Slot> {
        let (request, host, vms) = (self.request, self.host, self.vms);
        let mut slots = Vec::new();
        for (&k, cells) in &host.nodes {
            let node_cap = host.node_cap(k);
            let types: Vec<usize> = vms
                .types
                .iter()
                .enumerate()
                .filter(|(_, (members, c))| {
                    *c >= 2 && *c <= node_cap && host.allows(&request.vms[members[0]], k)
                })
                .map(|(t, _)| t)
                .collect();
            let vms_here: usize = types.iter().map(|&t| vms.types[t].0.len()).sum();
            let count = cells.len().saturating_sub(1).min(vms_here);
            let mut previous: Option<Expr> = None;
            for _ in 0..count {
                let slot = self.slot(k, cells, &types);
                let used: Expr = slot.tau.iter().map(|&(_, v)| v).sum();
                if let Some(prev) = previous {
                    // Used slots first.
                    self.m.ge(prev, used.clone());
                }
                previous = Some(used);
                slots.push(slot);
            }
        }
        slots
    }

    /// One slot on node `k` (its `cells`) for VMs of `types`.
    fn slot(&mut self, k: Option<NodeId>, cells: &[usize], types: &[usize]) -> Slot {
        let (host, vms) = (self.host, self.vms);
        let biggest = types.iter().map(|&t| vms.types[t].1).max().unwrap_or(0);
        let tau: Vec<(usize, Var)> = types.iter().map(|&t| (t, self.m.binary())).collect();
        let used: Expr = tau.iter().map(|&(_, v)| v).sum();
        self.m.le(used.clone(), 1.0);
        let (mut s, mut w) = (Vec::new(), Vec::new());
        let (mut total, mut touched) = (Expr::default(), Expr::default());
        for &e in cells {
            let cap = host.cells[e].cap();
            let most = cap.min(biggest.saturating_sub(1));
            if most == 0 {
                continue;
            }
            let sv = self.m.int(f64::from(most));
            let wv = self.m.binary();
            // A piece is smaller than its VM (a VM whole in one cell is
            // counted by `a`), and only where the slot touches.
            let piece: Expr = tau
                .iter()
                .map(|&(t, tv)| f64::from(cap.min(vms.types[t].1 - 1)) * tv)
                .sum();
            self.m.le(sv, piece);
            self.m.le(sv, f64::from(most) * wv);
            self.m.le(wv, used.clone());
            *self.used.entry(e).or_default() += sv;
            total += sv;
            touched += wv;
            s.push((e, sv));
            w.push((e, wv));
            self.l3 += wv;
        }
        let mut demand = Expr::default();
        for &(t, tv) in &tau {
            demand += f64::from(vms.types[t].1) * tv;
            self.placed_t[t] += tv;
        }
        self.m.eq(total, demand);
        // It touches at least as many cells as its pieces need (2 or more).
        let least: Expr = tau
            .iter()
            .map(|&(t, tv)| {
                let c = vms.types[t].1;
                let caps: Vec<u32> = cells
                    .iter()
                    .map(|&e| host.cells[e].cap().min(c - 1))
                    .collect();
                f64::from(fewest_or_all(&caps, c).max(2)) * tv
            })
            .sum();
        self.m.ge(touched, least);
        Slot { node: k, tau, s, w }
    }
}
