//! The exact solver: integer programs over counts of interchangeable cores,
//! optimised lexicographically (docs/plan.md, "Objective" and "The model").
//!
//! [`agg`] is the aggregated model, used where every free core has the same
//! usable threads (every host measured so far); [`per_class`] counts cores of
//! each class per VM and serves every other host. Both are written in the
//! backend-neutral model of [`backend`] and solved by the MIP backend of the build.

pub mod agg;
mod arcflow;
pub mod backend;
mod child;
pub(crate) mod expr;
mod groups;
#[cfg(test)]
pub(crate) mod oracle;
pub mod per_class;
mod settings;
mod tiers;
mod wire;

use super::{Placement, PlanRequest};

/// The `tracing` target of the solver's trace: each objective's model size,
/// time and value, and every failed solve (the CLI shows it with
/// `PINPLAN_ILP_TRACE=1`, or `RUST_LOG=pinplan::ilp=debug`).
pub const TRACE: &str = "pinplan::ilp";
use std::time::Duration;

/// Whether only the per-class model serves `request`: its free cores differ
/// in usable threads, or running VMs' moves count (they split classes by
/// where the VMs run now, which the aggregated models do not).
pub fn per_class_only(request: &PlanRequest) -> bool {
    !agg::supported(request) || request.vms.iter().any(|v| v.running)
}

/// Solves `request` exactly within `time_limit`: the aggregated model where it
/// applies (every free core with the same usable threads), else the per-class
/// model.
pub fn place(request: &PlanRequest, time_limit: Duration) -> Result<Placement, String> {
    place_with_progress(request, time_limit, &super::Progress::default())
}

/// [`place`], publishing the best placement found so far in `progress`.
pub fn place_with_progress(
    request: &PlanRequest,
    time_limit: Duration,
    progress: &super::Progress,
) -> Result<Placement, String> {
    if !per_class_only(request) {
        agg::place_with_progress(request, time_limit, progress).map(|(p, _)| p)
    } else {
        per_class::place(request, time_limit)
    }
}
