//! The memory rows every model shares (see [`crate::solve::memory`]): per
//! node and page size, what the VMs placed there take, at most what the
//! node offers.

use super::backend::Model;
use super::expr::Expr;
use crate::ids::NodeId;
use crate::solve::PlanRequest;
use std::collections::BTreeMap;

/// The memory rows of a model while it is written. Empty when memory cannot
/// bind (its rows would be redundant) or is not counted
/// ([`crate::solve::memory::countable`]). A node the host does not name
/// offers none: cores of no known node take no VM's memory.
pub(super) struct MemoryRows<'a> {
    request: &'a PlanRequest,
    terms: Option<BTreeMap<(Option<NodeId>, u64), Expr>>,
}

impl<'a> MemoryRows<'a> {
    pub(super) fn new(request: &'a PlanRequest) -> MemoryRows<'a> {
        MemoryRows {
            request,
            terms: (crate::solve::memory::active(request)
                && crate::solve::memory::countable(request))
            .then(BTreeMap::new),
        }
    }

    /// `share` of VM `i`'s memory (1 for a whole VM; for a VM that spans
    /// nodes, per core it has there: 1 / its cores) times `count`, on
    /// `node`.
    pub(super) fn add(
        &mut self,
        i: usize,
        node: Option<NodeId>,
        share: f64,
        count: impl Into<Expr>,
    ) {
        let Some(terms) = &mut self.terms else { return };
        if let Some((page, mib)) = crate::solve::memory::need(&self.request.vms[i]) {
            *terms.entry((node, page)).or_default() += (mib * share) * count.into();
        }
    }

    /// The rows, into `m`.
    pub(super) fn bound(self, m: &mut Model) {
        let caps = crate::solve::memory::caps(self.request);
        for (key, terms) in self.terms.into_iter().flatten() {
            let cap = caps.get(&key).copied().unwrap_or(0.0);
            if cap.is_finite() {
                m.le(terms, cap);
            }
        }
    }
}
