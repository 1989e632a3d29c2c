//! One host's apply up to its first change, shared by `apply PLAN` and
//! `apply --fleet DIR`: the connected host's topology and the preconditions
//! of every VM ([`check`]), then either the journal of what the VMs have now,
//! not yet written ([`Checked::prepare`]), or what a dry run's report
//! compares ([`Checked::dry_run`]).

use super::{ApplyError, Journal, Problem, Scope, Session, Target};
use crate::error::LibvirtError;
use crate::libvirt::tenants::{self, Domains, TenantsError};
use crate::plan::{Plan, PlanError};
use crate::topology::{self, HostTopology, Source, TopologyError};
use std::path::Path;

/// A host whose preconditions hold, its pins not read yet.
pub struct Checked {
    /// The connection.
    pub session: Session,
    /// The connected host's topology.
    pub host: HostTopology,
    /// The VMs to pin, in order.
    pub targets: Vec<Target>,
    /// What holds but is worth a word (a shut-off domain pinned in its
    /// config onto planned cores), per VM.
    pub warnings: Vec<Problem>,
    /// The plan file and the host's reserved CPUs (where emulator threads
    /// of several VMs may be together), for the order of live pin calls.
    plan_path: std::path::PathBuf,
    reserved: crate::cpuset::CpuSet,
}

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

crate::error::transparent_error! {
    /// Why a host could not be prepared; nothing was changed on it.
    pub enum PrepareError {
        /// Its topology could not be read.
        Topology(TopologyError),
        /// libvirt refused a call.
        Libvirt(LibvirtError),
        /// A precondition failed, or there is nothing to apply.
        Apply(ApplyError),
        /// A dry run could not read the domains there now.
        Tenants(TenantsError),
        /// The plan is another host's, or uses CPUs or NUMA nodes this
        /// host lacks.
        Plan(PlanError),
    }
}

/// What `--force` overrides in [`check_with`]; each refusal it lifts says
/// so in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overrides {
    /// A plan made for another host topology (its fingerprint differs) is
    /// used all the same; one that uses CPUs or NUMA nodes the host lacks is
    /// refused still ([`Plan::check_host`]).
    pub other_host: bool,
    /// Running domains outside the plan that may run on the planned cores
    /// are left there.
    pub in_the_way: bool,
    /// An unfinished journal of an earlier apply on the host is left as it
    /// is ([`refuse_unfinished`]).
    pub unfinished: bool,
}

impl Overrides {
    /// `apply --force`: all of them, or none.
    pub fn all(force: bool) -> Overrides {
        Overrides {
            other_host: force,
            in_the_way: force,
            unfinished: force,
        }
    }
}

/// [`check_with`] where `force` overrides every refusal it can
/// ([`Overrides::all`]): `apply --force`.
pub fn check(
    plan_path: &Path,
    plan: &Plan,
    uri: &str,
    names: &[String],
    scope: Scope,
    force: bool,
) -> Result<Checked, PrepareError> {
    check_with(plan_path, plan, uri, names, scope, Overrides::all(force))
}

/// Checks `plan` (read from `plan_path`) against the host at `uri` for the
/// VMs `names` (all when empty); changes nothing. `--live` alone on a domain
/// that is not running is refused here too: there is nothing to pin, and all
/// or nothing means before any change. Each refusal `force` names is lifted:
/// an unfinished journal of an earlier apply on the host, checked first
/// ([`refuse_unfinished`]); a plan made for another host, checked as every
/// command checks it ([`Plan::check_host`]) and alone (the per-VM reasons
/// of another host's plan are its consequences, not news); domains in the
/// way.
pub fn check_with(
    plan_path: &Path,
    plan: &Plan,
    uri: &str,
    names: &[String],
    scope: Scope,
    force: Overrides,
) -> Result<Checked, PrepareError> {
    if plan.vms.is_empty() {
        return Err(ApplyError::NothingToApply {
            plan: plan_path.to_owned(),
            unplaced: plan.unplaced.clone(),
        }
        .into());
    }
    // What --force lets through is said, as a warning each.
    let mut forced = Vec::new();
    match refuse_unfinished(uri) {
        Err(ApplyError::Unfinished { journals, .. }) if force.unfinished => {
            forced.extend(journals.iter().map(|j| Problem {
                vm: uri.to_owned(),
                reason: format!(
                    "an earlier apply did not finish (journal {}): applied all the same \
                     (--force); the new journal records the VMs as they are now",
                    j.path.display()
                ),
            }));
        }
        other => other?,
    }
    let host = topology::load(&Source::Libvirt(uri.to_owned()))?;
    plan.check_host(plan_path, &host, force.other_host)?;
    let fingerprint = host.fingerprint();
    if !plan.host.fingerprint.is_empty() && plan.host.fingerprint != fingerprint {
        forced.push(Problem {
            vm: plan_path.display().to_string(),
            reason: format!(
                "made for {} (fingerprint {}), not for this host ({uri}, fingerprint \
                 {fingerprint}): used all the same (--force)",
                plan.host.source, plan.host.fingerprint
            ),
        });
    }
    let session = Session::open(uri)?;
    let refused = |problems| ApplyError::Refused {
        plan: plan_path.to_owned(),
        uri: uri.to_owned(),
        problems,
    };
    let (targets, mut warnings) = session
        .check(plan, names, &host, force.in_the_way)
        .map_err(refused)?;
    forced.append(&mut warnings);
    let warnings = forced;
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
    Ok(Checked {
        session,
        host,
        targets,
        warnings,
        plan_path: plan_path.to_owned(),
        reserved: plan.host.reserved_cpus.clone(),
    })
}

/// Refuses while an earlier apply on `uri`'s host has an unfinished journal
/// in the state directory (see [`super::journal::unfinished`]).
pub fn refuse_unfinished(uri: &str) -> Result<(), ApplyError> {
    // No state directory (no HOME): nothing can have been recorded there.
    let Ok(dir) = crate::state::state_dir_path() else {
        return Ok(());
    };
    let journals = super::journal::unfinished(&dir, uri);
    if journals.is_empty() {
        Ok(())
    } else {
        Err(ApplyError::Unfinished {
            uri: uri.to_owned(),
            journals,
        })
    }
}

impl Checked {
    /// Captures the targets' pins: the journal to write before the first
    /// change, and whether the plan is in effect already.
    ///
    /// Live, the VMs go in an order where no VM is pinned onto a core
    /// another VM still to go runs on (the order module of apply): two
    /// VMs never hold one core, not even between two pin calls. VMs that
    /// would wait on each other (a swap) are refused before any change.
    pub fn prepare(self, scope: Scope) -> Result<Prepared, PrepareError> {
        let mut journal = self.session.capture(&self.targets)?;
        let mut targets = self.targets;
        let in_effect = self.session.in_effect(&targets, &journal, scope);
        if scope.live && !in_effect {
            let order =
                live_order(&targets, &journal, &self.host, &self.reserved).map_err(|problems| {
                    ApplyError::Refused {
                        plan: self.plan_path.clone(),
                        uri: self.session.uri().to_owned(),
                        problems,
                    }
                })?;
            let mut slots: Vec<Option<(Target, super::JournalVm)>> = targets
                .into_iter()
                .zip(std::mem::take(&mut journal.vms))
                .map(Some)
                .collect();
            targets = Vec::with_capacity(slots.len());
            for i in order {
                if let Some((t, j)) = slots.get_mut(i).and_then(Option::take) {
                    targets.push(t);
                    journal.vms.push(j);
                }
            }
        }
        Ok(Prepared {
            session: self.session,
            host: self.host,
            targets,
            journal,
            in_effect,
        })
    }

    /// What a dry run's report compares (`report --plan` for `plan`'s VMs
    /// asked for, against the domains there now): the report itself is the
    /// report stage's, a floor above (`report::Report::new`).
    ///
    /// It refuses what [`Checked::prepare`] refuses: VMs that would wait on
    /// each other's cores.
    pub fn dry_run(&self, plan: &Plan) -> Result<DryRun, PrepareError> {
        let now = self.session.capture(&self.targets)?;
        live_order(&self.targets, &now, &self.host, &self.reserved).map_err(|problems| {
            ApplyError::Refused {
                plan: self.plan_path.clone(),
                uri: self.session.uri().to_owned(),
                problems,
            }
        })?;
        let mut asked = plan.clone();
        asked
            .vms
            .retain(|v| self.targets.iter().any(|t| t.name == v.name));
        let host_cpus = tenants::host_cpus(&self.host, None, Some(plan), false)?;
        let tenants = tenants::tenants(
            &self.host,
            host_cpus.as_ref(),
            Domains::Connect(&self.session.uri),
        )?;
        Ok(DryRun { tenants, asked })
    }
}

/// What a dry run found: the domains there now, and the plan of the VMs
/// asked for.
#[derive(Debug, Clone)]
pub struct DryRun {
    /// Every domain at the URI, as tenants.
    pub tenants: Vec<crate::tenant::Tenant>,
    /// The plan, with only the VMs applied.
    pub asked: Plan,
}

/// The order to pin `targets` live ([`super::order::live_order`] on their
/// live pins now, from `journal`), or the VMs that wait on each other's
/// cores, each with why.
fn live_order(
    targets: &[Target],
    journal: &Journal,
    host: &HostTopology,
    reserved: &crate::cpuset::CpuSet,
) -> Result<Vec<usize>, Vec<Problem>> {
    let planned: Vec<super::Pins> = targets.iter().map(|t| t.planned.clone()).collect();
    let now: Vec<Option<super::Pins>> = journal.vms.iter().map(|v| v.live.clone()).collect();
    super::order::live_order(&planned, &now, host, reserved).map_err(|waiting| {
        let names: Vec<&str> = waiting
            .iter()
            .filter_map(|&i| targets.get(i).map(|t| t.name.as_str()))
            .collect();
        waiting
            .iter()
            .filter_map(|&i| targets.get(i))
            .map(|t| Problem {
                vm: t.name.clone(),
                reason: format!(
                    "it is planned onto cores that another of {} runs on now, which waits for this one's cores in turn: no order of pin calls moves them without two VMs on one core for a moment; move one of them to a free core first (a plan that moves only it, applied with --vm), then apply this plan",
                    names.join(", ")
                ),
            })
            .collect()
    })
}
