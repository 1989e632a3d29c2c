//! One host's apply up to its first change, shared by `apply PLAN` and
//! `apply --fleet DIR`: the connected host's topology, the preconditions of
//! every VM, and the journal of what the VMs have now (not yet written).

use super::{ApplyError, Journal, Problem, Scope, Session, Target};
use crate::error::{Diagnostic, Exit, LibvirtError};
use crate::plan::Plan;
use crate::topology::{self, HostTopology, Source, TopologyError};
use std::path::Path;

/// A host whose preconditions hold: what [`Session::apply`] needs.
pub struct Prepared {
    /// The connection.
    pub session: Session,
    /// The connected host's topology.
    pub host: HostTopology,
    /// The VMs to pin, in order.
    pub targets: Vec<Target>,
    /// What they have now: the journal to write before the first change.
    pub journal: Journal,
    /// Whether every target has its planned pins already.
    pub in_effect: bool,
}

/// Why a host could not be prepared; nothing was changed on it.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// Its topology could not be read.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// libvirt refused a call.
    #[error(transparent)]
    Libvirt(#[from] LibvirtError),
    /// A precondition failed, or there is nothing to apply.
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

impl Diagnostic for PrepareError {
    fn hint(&self) -> Option<String> {
        match self {
            PrepareError::Topology(e) => e.hint(),
            PrepareError::Libvirt(e) => e.hint(),
            PrepareError::Apply(e) => e.hint(),
        }
    }

    fn exit(&self) -> Exit {
        match self {
            PrepareError::Topology(e) => e.exit(),
            PrepareError::Libvirt(e) => e.exit(),
            PrepareError::Apply(e) => e.exit(),
        }
    }
}

/// Checks `plan` (read from `plan_path`) against the host at `uri` for the
/// VMs `names` (all when empty) and captures their pins; changes nothing.
/// `--live` alone on a domain that is not running is refused here too: there
/// is nothing to pin, and all or nothing means before any change.
pub fn prepare(
    plan_path: &Path,
    plan: &Plan,
    uri: &str,
    names: &[String],
    scope: Scope,
    force: bool,
) -> Result<Prepared, PrepareError> {
    if plan.vms.is_empty() {
        return Err(ApplyError::NothingToApply {
            plan: plan_path.to_owned(),
            unplaced: plan.unplaced.clone(),
        }
        .into());
    }
    let host = topology::load(&Source::Libvirt(uri.to_owned()))?;
    let session = Session::open(uri)?;
    let refused = |problems| ApplyError::Refused {
        plan: plan_path.to_owned(),
        uri: uri.to_owned(),
        problems,
    };
    let targets = session.check(plan, names, &host, force).map_err(refused)?;
    if scope.live && !scope.config {
        let problems: Vec<Problem> = targets
            .iter()
            .filter(|t| !t.running())
            .map(|t| Problem {
                vm: t.name.clone(),
                reason: "not running: nothing to pin live (use --config, or start it)".to_owned(),
            })
            .collect();
        if !problems.is_empty() {
            return Err(refused(problems).into());
        }
    }
    let journal = session.capture(&targets)?;
    let in_effect = session.in_effect(&targets, &journal, scope);
    Ok(Prepared {
        session,
        host,
        targets,
        journal,
        in_effect,
    })
}
