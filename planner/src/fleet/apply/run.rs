//! The steps of `apply --fleet`: lock, prepare, journal, apply (and roll
//! back when all or nothing and a host failed).

use super::super::inventory::Inventory;
use super::super::pool;
use super::journal::{file_name, host_journal, lock_all};
use super::{
    FleetApplied, FleetApplyError, FleetApplyOptions, FleetJournal, Hook, HostOutcome, HostStatus,
    JournalHost,
};
use crate::error::{one_line, Diagnostic, Exit};
use crate::host::journal::{self as envelope, Write};
use crate::libvirt::apply::host::{check, Checked, PrepareError, Prepared};
use crate::libvirt::apply::{ApplyError, JournalStatus, Restored, Scope};
use crate::plan::Plan;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Per host: `None` when no VM of it is asked for, else its prepared apply
/// or why it was refused (the whole error, its exit status).
type Prepares = Vec<Option<Result<Prepared, (String, Exit)>>>;

/// Per host, its status once known.
type Statuses = Vec<Option<HostStatus>>;

/// Applies every host of `inventory` (a plan directory); `hook(host)` gives
/// the pin-call hook of each host.
pub fn apply(
    inventory: &Inventory,
    options: &FleetApplyOptions<'_>,
    hook: &(dyn Fn(&str) -> Hook + Sync),
    waiting: &mut dyn FnMut(&Path),
) -> Result<FleetApplied, FleetApplyError> {
    let run = Run {
        selected: selected(inventory, options)?,
        inventory,
        options,
    };
    let busy: Vec<usize> = (0..inventory.hosts.len())
        .filter(|&h| !run.selected[h].is_empty())
        .collect();
    if options.dry_run {
        return Ok(run.finish(run.dry_run(), None));
    }
    run.journals_are_new(&busy)?;
    let _locks = lock_all(
        busy.iter()
            .filter_map(|&h| inventory.hosts[h].connect.as_deref()),
        waiting,
    )?;
    // 2. Prepare every host with VMs to apply.
    let prepared = run.each_host(|checked, _, scope| checked.prepare(scope));
    let mut statuses = first_statuses(&prepared);
    let refused = statuses
        .iter()
        .any(|s| matches!(s, Some(HostStatus::Refused { .. })));
    let to_change: Vec<usize> = (0..statuses.len())
        .filter(|&h| statuses[h].is_none())
        .collect();
    if to_change.is_empty() || (refused && options.all_or_nothing) {
        hold(&prepared, &to_change, &mut statuses);
        return Ok(run.finish(statuses, None));
    }
    // 3. The fleet journal, then each host's, before any change.
    let journal_failed = run.write_journals(&prepared, &to_change, &mut statuses)?;
    if journal_failed && options.all_or_nothing {
        hold(&prepared, &to_change, &mut statuses);
        return Ok(run.finish(statuses, Some(options.journal.clone())));
    }
    // 4. Apply, in parallel.
    let changing: Vec<usize> = to_change
        .iter()
        .copied()
        .filter(|&h| statuses[h].is_none())
        .collect();
    let failed = run.apply_hosts(&prepared, &changing, &mut statuses, hook);
    // All or nothing: a host failed, so the ones applied go back. An
    // interrupted fleet apply is not done either: its hosts go back too.
    if (options.all_or_nothing && failed) || options.interrupt.first().is_some() {
        run.roll_back(&prepared, &changing, &mut statuses);
    }
    Ok(run.finish(statuses, Some(options.journal.clone())))
}

/// Per host, the VMs of its plan asked for; `NotPlanned` for an inventory
/// that is not a plan directory, `UnknownVm` for a name no host plans.
fn selected(
    inventory: &Inventory,
    options: &FleetApplyOptions<'_>,
) -> Result<Vec<Vec<String>>, FleetApplyError> {
    if !inventory.planned {
        return Err(FleetApplyError::NotPlanned {
            path: inventory.origin.clone(),
        });
    }
    let placed: BTreeSet<&str> = inventory
        .hosts
        .iter()
        .filter_map(|h| h.plan.as_ref())
        .flat_map(|(_, p)| p.vms.iter().map(|v| v.name.as_str()))
        .collect();
    let unknown: Vec<String> = options
        .vms
        .iter()
        .filter(|n| !placed.contains(n.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(FleetApplyError::UnknownVm {
            fleet: inventory.origin.clone(),
            names: unknown,
            placed: placed.iter().map(|&n| n.to_owned()).collect(),
        });
    }
    Ok(inventory
        .hosts
        .iter()
        .map(|h| {
            h.plan.as_ref().map_or_else(Vec::new, |(_, p)| {
                p.vms
                    .iter()
                    .filter(|v| options.vms.is_empty() || options.vms.contains(&v.name))
                    .map(|v| v.name.clone())
                    .collect()
            })
        })
        .collect())
}

/// The statuses known once hosts are prepared: skipped, refused, or in
/// effect already (`None` for the hosts to change).
fn first_statuses(prepared: &Prepares) -> Statuses {
    prepared
        .iter()
        .map(|p| match p {
            None => Some(HostStatus::Skipped),
            Some(Err((error, exit))) => Some(HostStatus::Refused {
                error: error.clone(),
                exit: *exit,
            }),
            Some(Ok(p)) if p.in_effect => Some(HostStatus::InEffect { vms: names_of(p) }),
            Some(Ok(_)) => None,
        })
        .collect()
}

/// The hosts of `to_change` not yet given a status: held, not changed.
fn hold(prepared: &Prepares, to_change: &[usize], statuses: &mut Statuses) {
    for &h in to_change {
        if let (None, Some(Ok(p))) = (&statuses[h], &prepared[h]) {
            statuses[h] = Some(HostStatus::Held { vms: names_of(p) });
        }
    }
}

/// One `apply --fleet` run: the inventory, the options, and per host the
/// VMs asked for.
struct Run<'a> {
    inventory: &'a Inventory,
    options: &'a FleetApplyOptions<'a>,
    selected: Vec<Vec<String>>,
}

impl Run<'_> {
    /// What the run did, from each host's status.
    fn finish(&self, statuses: Statuses, journal: Option<PathBuf>) -> FleetApplied {
        FleetApplied {
            fleet: self.inventory.origin.clone(),
            hosts: self
                .inventory
                .hosts
                .iter()
                .zip(statuses)
                .map(|(h, s)| HostOutcome {
                    name: h.name.clone(),
                    uri: h.connect.clone(),
                    status: s.unwrap_or(HostStatus::Skipped),
                })
                .collect(),
            journal,
            all_or_nothing: self.options.all_or_nothing,
            moves: self.inventory.moves.clone(),
        }
    }

    /// Host `h`'s journal, beside the fleet journal.
    fn journal_of(&self, h: usize) -> PathBuf {
        host_journal(&self.options.journal, &self.inventory.hosts[h].name)
    }

    /// A dry run: every host checked, what would change said.
    fn dry_run(&self) -> Statuses {
        self.each_host(|checked, plan, _| {
            let found = checked.dry_run(plan)?;
            let report =
                crate::report::Report::new(&checked.host, found.tenants, Some(&found.asked));
            Ok(HostStatus::DryRun {
                vms: checked.targets.iter().map(|t| t.name.clone()).collect(),
                report: Box::new(report),
                host: Box::new(checked.host),
            })
        })
        .into_iter()
        .map(|done| {
            Some(match done {
                None => HostStatus::Skipped,
                Some(Err((error, exit))) => HostStatus::Refused { error, exit },
                Some(Ok(status)) => status,
            })
        })
        .collect()
    }

    /// The fleet journal and every busy host's are new files: a journal is
    /// never overwritten.
    fn journals_are_new(&self, busy: &[usize]) -> Result<(), FleetApplyError> {
        let hosts = busy.iter().map(|&h| self.journal_of(h));
        for path in std::iter::once(self.options.journal.clone()).chain(hosts) {
            if let Err(ApplyError::Journal(w)) = crate::libvirt::apply::check_journal_is_new(&path)
            {
                return Err(FleetApplyError::Journal(w));
            }
        }
        Ok(())
    }

    /// The fleet journal, then each host's; a host whose journal cannot be
    /// written is refused. Whether one was.
    fn write_journals(
        &self,
        prepared: &Prepares,
        to_change: &[usize],
        statuses: &mut Statuses,
    ) -> Result<bool, FleetApplyError> {
        let options = self.options;
        let fleet_journal = FleetJournal {
            fleet: self.inventory.origin.clone(),
            hosts: to_change
                .iter()
                .map(|&h| {
                    let host = &self.inventory.hosts[h];
                    JournalHost {
                        name: host.name.clone(),
                        uri: host.connect.clone().unwrap_or_default(),
                        journal: file_name(&self.journal_of(h)),
                    }
                })
                .collect(),
        };
        (options.changing)();
        envelope::write(&options.journal, &fleet_journal, Write::New)
            .map_err(FleetApplyError::Journal)?;
        (options.journaled)(&options.journal);
        let mut failed = false;
        for &h in to_change {
            let Some(Ok(p)) = &prepared[h] else { continue };
            if let Err(e) = p.journal.write_new(&self.journal_of(h)) {
                let e = ApplyError::Journal(e);
                statuses[h] = Some(HostStatus::Refused {
                    error: one_line(&e),
                    exit: e.exit(),
                });
                failed = true;
            }
        }
        Ok(failed)
    }

    /// Applies the hosts `changing`, in parallel; whether one failed.
    fn apply_hosts(
        &self,
        prepared: &Prepares,
        changing: &[usize],
        statuses: &mut Statuses,
        hook: &(dyn Fn(&str) -> Hook + Sync),
    ) -> bool {
        let stop = AtomicBool::new(false);
        let applied: Vec<HostStatus> = pool::each(
            changing.len(),
            self.options.concurrency,
            |k| match &prepared[changing[k]] {
                Some(Ok(p)) => self.apply_host(changing[k], p, &stop, hook),
                _ => HostStatus::Skipped,
            },
            &|k, n| (self.options.progress)("applying", k, n),
        );
        for (k, status) in applied.into_iter().enumerate() {
            statuses[changing[k]] = Some(status);
        }
        stop.load(Ordering::SeqCst)
    }

    /// Applies host `h`, restored from its journal when it fails (which
    /// `stop`s the others when all or nothing).
    fn apply_host(
        &self,
        h: usize,
        p: &Prepared,
        stop: &AtomicBool,
        hook: &(dyn Fn(&str) -> Hook + Sync),
    ) -> HostStatus {
        let options = self.options;
        if options.all_or_nothing && stop.load(Ordering::SeqCst) {
            return HostStatus::Held { vms: names_of(p) };
        }
        let journal = self.journal_of(h);
        let mut hook = hook(&self.inventory.hosts[h].name);
        let result = p.session.apply(
            &p.targets,
            &p.journal,
            options.scope,
            &mut *hook,
            options.interrupt,
        );
        // The journal says whether this host's run finished (the next
        // apply there looks); a journal not marked stays unfinished,
        // the safe side.
        let _ = p.journal.mark(
            &journal,
            result
                .as_ref()
                .map_or_else(|f| f.journal_status(), |_| JournalStatus::Applied),
        );
        match result {
            Ok(vms) => HostStatus::Applied { vms, journal },
            Err(failure) => {
                stop.store(true, Ordering::SeqCst);
                let error =
                    ApplyError::of_failure(failure.clone(), &journal, &p.journal.uri).to_string();
                HostStatus::Failed {
                    error,
                    failure,
                    journal,
                }
            }
        }
    }

    /// The hosts of `changing` that were applied, rolled back from their
    /// journals, in parallel.
    fn roll_back(&self, prepared: &Prepares, changing: &[usize], statuses: &mut Statuses) {
        let options = self.options;
        let back: Vec<usize> = changing
            .iter()
            .copied()
            .filter(|&h| matches!(statuses[h], Some(HostStatus::Applied { .. })))
            .collect();
        let restored: Vec<Restored> = pool::each(
            back.len(),
            options.concurrency,
            |k| match &prepared[back[k]] {
                Some(Ok(p)) => {
                    let path = self.journal_of(back[k]);
                    let _ = p.journal.mark(&path, JournalStatus::RollingBack);
                    let done = p.session.rollback(&p.journal, false, options.interrupt);
                    if done.errors.is_empty() {
                        let _ = p.journal.mark(&path, JournalStatus::RolledBack);
                    }
                    done
                }
                _ => Restored::default(),
            },
            &|k, n| (options.progress)("rolling back", k, n),
        );
        for (k, restored) in restored.into_iter().enumerate() {
            let h = back[k];
            statuses[h] = Some(HostStatus::RolledBack {
                journal: self.journal_of(h),
                restored,
            });
        }
    }

    /// Checks every host with VMs asked for ([`check`]) and runs `job` on it, in
    /// parallel, `options.concurrency` at a time, each within `options.timeout`:
    /// per host `None` when no VM of it is asked for, else the job's result or
    /// why it was refused (the whole error, its exit status). Nothing changes.
    fn each_host<T: Send + 'static>(&self, job: Job<T>) -> Vec<Option<Result<T, (String, Exit)>>> {
        let (inventory, options, selected) = (self.inventory, self.options, &self.selected);
        pool::each(
            inventory.hosts.len(),
            options.concurrency,
            |h| {
                if selected[h].is_empty() {
                    return None;
                }
                let host = &inventory.hosts[h];
                let Some(uri) = host.connect.clone() else {
                    return Some(Err((
                        format!(
                        "fleet.json gives host {} no connect URI: apply reaches a host through \
                         libvirt (add connect = \"qemu+ssh://root@HOST/system\" to its [[host]] \
                         and plan again)",
                        host.name
                    ),
                        Exit::Error,
                    )));
                };
                let (plan_path, plan) = host.plan.clone()?;
                // Every VM of the host, or the ones asked for by name.
                let names = if options.vms.is_empty() {
                    Vec::new()
                } else {
                    selected[h].clone()
                };
                let (scope, force) = (options.scope, options.force);
                let timeout = options.timeout;
                Some(
                    pool::within(timeout, move || {
                        check(&plan_path, &plan, &uri, &names, scope, force)
                            .and_then(|checked| job(checked, &plan, scope))
                            .map_err(|e| (one_line(&e), e.exit()))
                    })
                    .unwrap_or_else(|| {
                        Err((
                            format!(
                                "no answer within {:.0} s: nothing was changed on it",
                                timeout.as_secs_f64()
                            ),
                            Exit::Error,
                        ))
                    }),
                )
            },
            &|k, n| (options.progress)("checking", k, n),
        )
    }
}

/// What one host's checked connection gives: its prepared apply, or a dry
/// run's status.
type Job<T> = fn(Checked, &Plan, Scope) -> Result<T, PrepareError>;

/// The VMs of a prepared host.
fn names_of(p: &Prepared) -> Vec<String> {
    p.targets.iter().map(|t| t.name.clone()).collect()
}
