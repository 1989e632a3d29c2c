//! Why the exact solver gave no placement at all: `solve` then gives the
//! greedy first fit, and says why in a warning made of this error's message
//! (so each message is a whole sentence, causes included).

use super::ilp::backend::SolveError;
use super::Tier;
use std::time::Duration;

/// Why the exact solver gave no placement.
#[derive(Debug, thiserror::Error)]
pub enum ExactError {
    /// The backend failed on the first objective, before any point was
    /// known. The cause is in the message, not a source: the message
    /// becomes a plan warning whole.
    #[error("the integer program failed while optimising {tier}: {cause}")]
    Tier {
        /// The objective being optimised.
        tier: Tier,
        /// What the backend said.
        cause: SolveError,
    },
    /// The objectives ran without any answer.
    #[error("the integer program produced no solution")]
    NoSolution,
    /// No thread could be started for the solve. In the message, not a
    /// source, as for [`ExactError::Tier`].
    #[error("cannot start the solver thread: {cause}")]
    Thread {
        /// What the OS said.
        cause: std::io::Error,
    },
    /// The solver overran its limit and had published no placement yet.
    #[error(
        "the integer program did not finish within the {} s time limit",
        limit.as_secs_f64()
    )]
    Overran {
        /// The limit it was given.
        limit: Duration,
    },
}
