//! The watcher's changes, made as `pinplan apply` makes them: the same
//! preconditions and read-back, the host's apply lock, a journal written
//! before the first change (`pinplan apply --rollback JOURNAL` undoes it,
//! `pinplan watch --undo` undoes them all), all-or-nothing.

use super::{Outcome, WatchError};
use crate::interrupt::Interrupt;
use crate::libvirt::apply::{self, host, JournalStatus, Scope};
use crate::plan::Plan;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The persistent definition only: a domain that does not run.
pub(super) const CONFIG: Scope = Scope {
    live: false,
    config: true,
};
/// The running domain and its definition, so that it starts there again.
pub(super) const LIVE_AND_CONFIG: Scope = Scope {
    live: true,
    config: true,
};

/// What a plan is called in apply's messages.
const PLAN_NAME: &str = "(pinplan watch's plan)";

/// The prefix of the watcher's journals in the state directory.
pub const JOURNAL_PREFIX: &str = "pinplan-watch-journal-";

impl super::Watcher {
    /// Pins `domain` (and the VMs `moved` for it) as `plan` says, in
    /// `scope`; with `--dry-run` says what it would do.
    pub(super) fn pin(
        &mut self,
        plan: &Plan,
        domain: &str,
        moved: &[String],
        scope: Scope,
    ) -> Result<Outcome, WatchError> {
        let Some(vm) = plan.vms.iter().find(|v| v.name == domain) else {
            let (why, fix) = unplaced_words(plan, domain);
            return Ok(Outcome::Unplaced { why, fix });
        };
        let placed = |journal: Option<PathBuf>| Outcome::Pinned {
            vcpus: vm.vcpus.iter().map(|p| p.cpu).collect(),
            emulator: vm.emulator_cpus.clone(),
            proven: plan.proven,
            live: scope.live,
            moved: moved.to_vec(),
            journal,
        };
        if self.frame.dry_run {
            return Ok(placed(None));
        }
        let names: Vec<String> = std::iter::once(domain.to_owned())
            .chain(moved.iter().cloned())
            .collect();
        Ok(match self.apply(plan, &names, scope, PLAN_NAME)? {
            Some(journal) => {
                // What the admission question is answered from: as changed.
                let _ = self.snapshot();
                placed(Some(journal))
            }
            None => placed(None),
        })
    }

    /// Applies `plan` (called `what` in apply's messages) to the VMs
    /// `names` in `scope`, as `pinplan apply` does: under the host's lock,
    /// its preconditions, the journal written first, every pin read back,
    /// all or nothing. The journal's path, or none when the plan is in
    /// effect already. A live change claims the CPUs it moves running VMs
    /// onto first, so that the admission question (answered on its own
    /// thread) lets no start onto them meanwhile.
    pub(super) fn apply(
        &self,
        plan: &Plan,
        names: &[String],
        scope: Scope,
        what: &str,
    ) -> Result<Option<PathBuf>, WatchError> {
        if scope.live {
            self.admissions.claim(plan, names);
        }
        let result = self.apply_now(plan, names, scope, what);
        if !matches!(result, Ok(Some(_))) {
            self.admissions.unclaim();
        }
        result
    }

    fn apply_now(
        &self,
        plan: &Plan,
        names: &[String],
        scope: Scope,
        what: &str,
    ) -> Result<Option<PathBuf>, WatchError> {
        let _lock = apply::lock::lock(&self.frame.uri, &mut |_| {})?;
        // The watcher's own plans: no earlier apply to wait for, no domain
        // in the way it did not place; but a host changed under it is not
        // planned for.
        let force = host::Overrides {
            other_host: false,
            ..host::Overrides::all(true)
        };
        let checked =
            host::check_with(Path::new(what), plan, &self.frame.uri, names, scope, force)?;
        let prepared = checked.prepare(scope)?;
        if prepared.in_effect {
            return Ok(None);
        }
        let path = self.next_journal()?;
        prepared.journal.write_new(&path)?;
        let result = prepared.session.apply(
            &prepared.targets,
            &prepared.journal,
            scope,
            &mut |_| Ok(()),
            &Interrupt::new(),
        );
        let status = result
            .as_ref()
            .map_or_else(|f| f.journal_status(), |_| JournalStatus::Applied);
        // A journal that cannot be marked stays "applying": the next
        // reconcile reads the host as it is all the same.
        let _ = prepared.journal.mark(&path, status);
        result.map_err(|failure| {
            WatchError::Apply(Box::new(apply::ApplyError::of_failure(
                failure,
                &path,
                &self.frame.uri,
            )))
        })?;
        Ok(Some(path))
    }

    /// A new journal's path: the state directory, the time and a count, so
    /// that two changes in one second never share a file.
    pub(super) fn next_journal(&self) -> Result<PathBuf, WatchError> {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let dir = crate::state::state_dir()?;
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        Ok(dir.join(format!(
            "{JOURNAL_PREFIX}{secs}-{}-{n}.json",
            std::process::id()
        )))
    }
}

/// Why `plan` left `domain` out, and its smallest fix, in words.
pub(super) fn unplaced_words(plan: &Plan, domain: &str) -> (String, Option<String>) {
    match plan.explanations.iter().find(|e| e.vm == domain) {
        Some(e) => (
            e.message.to_string(),
            e.fix.as_ref().map(ToString::to_string),
        ),
        None => ("it was left out".to_owned(), None),
    }
}
