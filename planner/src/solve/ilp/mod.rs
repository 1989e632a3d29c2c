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
pub(crate) mod lexicographic;
mod memory_rows;
mod model;
#[cfg(test)]
pub(crate) mod oracle;
pub mod per_class;
mod settings;
mod tiers;
mod wire;

use super::{ExactError, Placement, PlanRequest};
use crate::deadline::Deadline;

/// The `tracing` target of the solver's trace: each objective's model size,
/// time and value, and every failed solve (the CLI shows it with
/// `PINPLAN_ILP_TRACE=1`, or `RUST_LOG=pinplan::ilp=debug`).
pub const TRACE: &str = "pinplan::ilp";

/// Whether only the per-class model serves `request`: its free cores differ
/// in usable threads, or running VMs' moves count (they split classes by
/// where the VMs run now, which the aggregated models do not), or it is
/// compaction's order or has a ceiling on moves (only the per-class model
/// has them).
pub fn per_class_only(request: &PlanRequest) -> bool {
    !agg::supported(request)
        || request.vms.iter().any(|v| v.running)
        || request.order == super::Order::Compact
        || request.max_moves.is_some()
}

/// Solves `request` exactly by `deadline`: the aggregated model where it
/// applies (every free core with the same usable threads, no running VM
/// whose moves count), else the per-class model; the best placement found
/// so far is published in `progress`.
pub fn place(
    request: &PlanRequest,
    deadline: Deadline,
    progress: &super::Progress,
) -> Result<Placement, ExactError> {
    if !per_class_only(request) {
        return Ok(agg::place(request, deadline, progress).0);
    }
    // An explanation's re-solve asks whether every VM of its question
    // fits, and if so on how many cores. Most answers are no, which the
    // VMs placed per level give alone, without the relaxation and its
    // start (two solves of the aggregated model each time); a yes is then
    // solved whole, as a plan is, for the cores it gives each VM
    // (docs/benchmarks.md, thirteenth pass).
    if progress.placing_only() {
        if let Ok(levels) = per_class::place_bounded(request, deadline, None, None, true) {
            if levels.cores.len() < request.vms.len() {
                return Ok(levels);
            }
        }
    }
    if !relaxable(request) {
        return per_class::place(request, deadline);
    }
    let share = || deadline.share(RELAXATION_SHARE, crate::deadline::QUALITY_FLOOR);
    let relaxed = agg::relaxed(request, deadline.within(share()));
    let start = agg::on_most_threads(request, deadline.within(share()));
    per_class::place_bounded(request, deadline, relaxed.as_ref(), start, false)
}

/// The share of the time left that the relaxation of a host of mixed
/// thread counts, and then the start on its cores of the most threads,
/// may each take ([`relaxable`]).
const RELAXATION_SHARE: f64 = 0.125;

/// Whether the aggregated model on `request` is a relaxation of the
/// per-class model's (`agg::relaxed`): only the thread counts keep the
/// aggregated model away — no running VM, no compaction, no move ceiling —
/// and the per-class model counts the memory of every VM that has it, as
/// the aggregated model does.
///
/// Where memory can bind, a VM whose memory goes to several nodes in
/// proportion to its cores there must need as many cores on every core of
/// the host: the relaxation drops the cores a VM has beyond its fewest,
/// which would move its memory between nodes (a VM kept by its NIC to cores
/// of one thread, say: its share per core is counted at one thread per
/// core).
pub(crate) fn relaxable(request: &PlanRequest) -> bool {
    let threads: std::collections::BTreeSet<u32> = super::classes::free_cores(request)
        .iter()
        .map(super::classes::FreeCore::threads)
        .collect();
    // Memory that cannot bind is left out of both models; else each VM's
    // share per core the same on every core of the host (`memory::split`
    // over all its thread counts, not only those the VM may use).
    let memory_stays = !super::memory::active(request)
        || request
            .vms
            .iter()
            .filter(|vm| vm.memory.is_some())
            .all(|vm| {
                super::memory::split(vm, threads.iter().copied()) != super::memory::Split::Uncounted
            });
    threads.len() > 1 && per_class::counted_alike(request) && memory_stays
}
