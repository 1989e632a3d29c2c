//! The objective order of every model: VMs placed per priority level (highest
//! first), then the other tiers of [`Tier`] (docs/plan.md, "Objective").

use super::expr::Expr;
use crate::solve::{PlanRequest, Tier};
use std::collections::{BTreeMap, BTreeSet};

/// A model's objectives, in order, each minimised.
pub(crate) type Tiers = Vec<(Tier, Expr)>;

/// The priority levels of `request`, highest first.
pub(crate) fn priority_levels(request: &PlanRequest) -> Vec<i64> {
    let levels: BTreeSet<std::cmp::Reverse<i64>> = request
        .vms
        .iter()
        .map(|v| std::cmp::Reverse(v.priority))
        .collect();
    levels.into_iter().map(|l| l.0).collect()
}

/// The objectives in their order: VMs placed per priority level (from
/// `placed`, level → minus the VMs placed), then `rest`; objectives without
/// terms left out.
pub(crate) fn in_order(
    request: &PlanRequest,
    mut placed: BTreeMap<i64, Expr>,
    rest: Tiers,
) -> Tiers {
    let mut tiers: Tiers = priority_levels(request)
        .into_iter()
        .map(|l| (Tier::Placed(l), placed.remove(&l).unwrap_or_default()))
        .collect();
    tiers.extend(rest);
    tiers.retain(|(_, t)| !t.is_empty());
    tiers
}
