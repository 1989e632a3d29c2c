//! What the solver is asked: a [`PlanRequest`] (its types are
//! [`crate::model::request`]'s, re-exported here with the policies for the
//! callers that name them through the solver) and the [`SolveOptions`]
//! (which solver, whether to explain, a progress hook).

pub use crate::model::request::*;

pub use crate::plan::SolverKind;

/// Solver settings: what to do. By when is the caller's [`Deadline`](crate::deadline::Deadline),
/// handed to [`crate::solve::solve`] beside them.
#[derive(Debug, Clone, PartialEq)]
pub struct SolveOptions {
    /// Which solver.
    pub solver: SolverKind,
    /// Look for the smallest change that fits unplaced VMs (re-solves).
    pub explain: bool,
    /// Told where the exact solver is (for a progress line).
    pub progress: Option<super::ProgressHook>,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            solver: SolverKind::Ilp,
            explain: true,
            progress: None,
        }
    }
}

impl VmRequest {
    /// How many of its vCPUs can keep their CPU on a core holding `home` of
    /// the CPUs they run on now, `threads` usable: at most the vCPUs one such
    /// core carries (the solver's rule of how many CPUs of a core a VM takes).
    pub fn can_stay(&self, threads: u32, home: u32) -> u32 {
        super::classes::pus_per_core(self, threads).min(home)
    }
}
