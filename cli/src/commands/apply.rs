//! `pinplan apply`: preconditions, journal, pin calls with read-back, and
//! rollback. The work is `pinplan::libvirt::apply`'s; this module turns the
//! arguments into its calls and prints what happened. SIGINT and SIGTERM stop
//! it between two pin calls and restore what was changed ([`signals`]).
//! With the `fault-injection` feature (tests only), the environment can make
//! the N-th pin call fail, abort the process, or signal it.

use super::{use_colour, ColorArg, Format};
use crate::error::{print, verdict, Failure, Usage};
use crate::signals;
use pinplan::fleet::apply::{self as fleet_apply, FleetApplyOptions, FleetJournal, RollbackStatus};
use pinplan::fleet::inventory::Inventory;
use pinplan::host::journal::Tool;
use pinplan::interrupt::Interrupt;
use pinplan::libvirt::apply::host::{Checked, Prepared};
use pinplan::libvirt::apply::outcome::{millis, AppliedVm, Outcome, Status};
use pinplan::libvirt::apply::{
    self, lock, ApplyError, HookRefusal, Journal, JournalStatus, Scope, Session,
};
use pinplan::plan::Plan;
use pinplan::report::Report;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ApplyArgs {
    /// The plan (`pinplan plan SPEC --connect URI --out DIR` writes DIR/plan.json).
    #[arg(value_name = "PLAN.json", required_unless_present_any = ["rollback", "fleet"])]
    plan: Option<PathBuf>,
    /// The libvirt host to change (default: the URI the plan was made
    /// through, `plan --connect URI`; with --rollback: the journal's).
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// Apply a fleet plan: every host of DIR (`pinplan plan FLEET.toml --out
    /// DIR`) through its own URI, in parallel, each all or nothing with its
    /// own journal.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["plan", "connect", "rollback"])]
    fleet: Option<PathBuf>,
    /// With --fleet: change no host unless every host passes its checks, and
    /// roll back the hosts applied when one fails.
    #[arg(long, requires = "fleet")]
    all_or_nothing: bool,
    /// Pin running domains now (default with --config: both).
    #[arg(long)]
    live: bool,
    /// Pin the persistent definitions, for the next start (default with --live: both).
    #[arg(long)]
    config: bool,
    /// Only these VMs of the plan (repeat; default all).
    #[arg(long = "vm", value_name = "NAME")]
    vms: Vec<String>,
    /// Check the preconditions and print what would change; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Where to write the journal (default STATE/pinplan-journal-SECONDS-PID.json,
    /// STATE being /var/lib/pinplan as root, else $XDG_STATE_HOME/pinplan, or
    /// $PINPLAN_STATE_DIR; with --fleet the fleet journal, default
    /// STATE/pinplan-fleet-journal-SECONDS-PID.json, each host's beside it as
    /// NAME-HOST.json).
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
    /// Apply despite these three refusals, each then a warning: a domain
    /// outside the plan that may run on the planned CPUs (pinned there, or
    /// not pinned at all); an earlier apply on the host that did not finish
    /// (its journal is not rolled back); a plan made for another host
    /// topology, as in report, xml, doctor and isolate (the CPUs and NUMA
    /// nodes it uses must still exist).
    #[arg(long)]
    force: bool,
    /// Restore every VM of a journal (e.g. after an interrupted apply).
    #[arg(long, value_name = "JOURNAL", conflicts_with_all = ["plan", "live", "config", "vms", "journal", "force"])]
    rollback: Option<PathBuf>,
    /// With --rollback: a domain deleted and defined again since (another
    /// UUID) gets the journal's definition, keeping its new UUID.
    #[arg(long, requires = "rollback")]
    redefine: bool,
    /// Output format: text, or one JSON object (journal, per-VM changes, timing).
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// The fault-injection hook: `PINPLAN_FAULT_PIN_CALL=N` makes the N-th pin
/// call fail (`PINPLAN_FAULT_MODE=error`, the default) or abort the process
/// (`abort`), as if it were killed mid-apply; `sigint`, `sigterm` and
/// `sigkill` send this process that signal there instead (for SIGINT and
/// SIGTERM the hook waits until the handler has seen it, so the N-th call is
/// the first one not made). With `PINPLAN_FAULT_EXEC=CMD` the failing call
/// first runs `sh -c CMD` with `PINPLAN_PID` set (tests use it to drop this
/// process's libvirt connection); with `continue` the call runs `CMD` and
/// then goes ahead (tests stall the connection under it). With `--fleet`,
/// `PINPLAN_FAULT_HOST=NAME` keeps the fault to that host.
#[cfg(feature = "fault-injection")]
fn hook(
    host: Option<&str>,
    interrupt: &Interrupt,
) -> impl FnMut(u32) -> Result<(), HookRefusal> + Send {
    let only = std::env::var("PINPLAN_FAULT_HOST").ok();
    let at: Option<u32> = std::env::var("PINPLAN_FAULT_PIN_CALL")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|_| only.is_none() || only.as_deref() == host);
    let mode = std::env::var("PINPLAN_FAULT_MODE").unwrap_or_default();
    let exec = std::env::var("PINPLAN_FAULT_EXEC").ok();
    let (abort, carry_on) = (mode == "abort", mode == "continue");
    let signal = mode.strip_prefix("sig").map(str::to_uppercase);
    let interrupt = interrupt.clone();
    move |call| match at {
        Some(n) if n == call && exec.is_some() => {
            let status = std::process::Command::new("sh")
                .arg("-c")
                .args(exec.as_deref())
                .env("PINPLAN_PID", std::process::id().to_string())
                .status();
            if carry_on {
                return Ok(());
            }
            Err(HookRefusal(format!(
                "fault injected at pin call {call} after running PINPLAN_FAULT_EXEC ({status:?})"
            )))
        }
        Some(n) if n == call && abort => {
            eprintln!("fault injection: aborting before pin call {call}");
            std::process::abort()
        }
        Some(n) if n == call && signal.is_some() => {
            let name = signal.as_deref().unwrap_or("INT");
            eprintln!("fault injection: SIG{name} before pin call {call}");
            let sent = std::process::Command::new("sh")
                .args(["-c", &format!("kill -s {name} {}", std::process::id())])
                .status();
            // SIGKILL ends the process; SIGINT and SIGTERM reach the
            // handler's thread, which sets `interrupt`.
            for _ in 0..500 {
                if interrupt.first().is_some() {
                    return Ok(());
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(HookRefusal(format!(
                "fault injection: SIG{name} sent ({sent:?}) but not seen in 5 s"
            )))
        }
        Some(n) if n == call => Err(HookRefusal(format!("fault injected at pin call {call}"))),
        _ => Ok(()),
    }
}

#[cfg(not(feature = "fault-injection"))]
fn hook(
    _host: Option<&str>,
    _interrupt: &Interrupt,
) -> impl FnMut(u32) -> Result<(), HookRefusal> + Send {
    |_| Ok(())
}

/// The default journal in the state directory.
fn default_journal(tool: Tool) -> Result<PathBuf, Failure> {
    pinplan::state::default_journal(tool).map_err(|e| ApplyError::StateDir(e).into())
}

/// Prints the text, or with `--format json` the object.
fn say<T: serde::Serialize>(
    args: &ApplyArgs,
    text: &str,
    object: impl FnOnce() -> T,
) -> Result<(), Failure> {
    match args.format {
        Format::Text => print(text),
        Format::Json => {
            let mut out = serde_json::to_string_pretty(&object()).unwrap_or_default();
            out.push('\n');
            print(&out)
        }
    }
}

/// `--live`, `--config`, or both when neither is given.
fn scope(args: &ApplyArgs) -> Scope {
    if args.live || args.config {
        Scope {
            live: args.live,
            config: args.config,
        }
    } else {
        Scope {
            live: true,
            config: true,
        }
    }
}

pub fn run(args: &ApplyArgs) -> Result<ExitCode, Failure> {
    let started = std::time::Instant::now();
    // Until a change starts, a signal ends pinplan at once (nothing to undo).
    let interrupt = signals::install();
    if let Some(journal) = &args.rollback {
        if let Some(fleet) = FleetJournal::load_if(journal)? {
            return rollback_fleet(journal, &fleet, args, &interrupt);
        }
        return rollback(journal, args, &interrupt);
    }
    if let Some(dir) = &args.fleet {
        return run_fleet(dir, args, &interrupt);
    }
    let Some(plan_path) = &args.plan else {
        return Err(Usage::new("give a plan: pinplan apply PLAN.json --connect URI").into());
    };
    if let Some(journal) = &args.journal {
        apply::check_journal_is_new(journal)?;
    }
    let plan = Plan::load(plan_path)?;
    let connect = host_uri(args, plan_path, &plan)?;
    let scope = scope(args);
    // One run that changes pins per host at a time, from the checks to the
    // read-back (a dry run only reads).
    let _lock = (!args.dry_run).then(|| host_lock(&connect)).transpose()?;
    let checked = apply::host::check(plan_path, &plan, &connect, &args.vms, scope, args.force)?;
    for w in &checked.warnings {
        crate::ui::warn(&format!("{}: {}", w.vm, w.reason));
    }
    let text_only = matches!(args.format, Format::Text);
    if let Some(note) = apply::unplaced_note(&plan).filter(|_| text_only) {
        print(&note)?;
    }
    if args.dry_run {
        return dry_run(args, &connect, &plan, &checked);
    }
    let Prepared {
        session,
        targets,
        journal,
        in_effect,
        ..
    } = checked.prepare(scope)?;
    let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
    if in_effect {
        let text = format!(
            "the plan is already in effect for {}: nothing changed\n",
            apply::names(&targets)
        );
        say(args, &text, || Outcome::Unchanged {
            journal: (),
            report: None,
            status: Status::InEffect,
            unplaced: plan.unplaced.clone(),
            uri: Some(connect.clone()),
            vms: names,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let journal_path = match &args.journal {
        Some(path) => path.clone(),
        None => default_journal(Tool::Apply)?,
    };
    // From here a signal stops the apply between pin calls and restores.
    signals::changing(apply::retry(&journal_path, &connect));
    journal
        .write_new(&journal_path)
        .map_err(ApplyError::Journal)?;
    if text_only {
        print(&format!(
            "journal: {} (undo: {})\n",
            journal_path.display(),
            apply::retry(&journal_path, &connect)
        ))?;
    }
    let result = session.apply(
        &targets,
        &journal,
        scope,
        &mut hook(None, &interrupt),
        &interrupt,
    );
    let status = result
        .as_ref()
        .map_or_else(|f| f.journal_status(), |_| JournalStatus::Applied);
    mark(&journal, &journal_path, status);
    let done =
        result.map_err(|failure| ApplyError::of_failure(failure, &journal_path, &connect))?;
    say(args, &apply::summary(&done), || Outcome::Applied {
        journal: journal_path.clone(),
        ms: millis(started.elapsed()),
        status: Status::Applied,
        undo: apply::retry(&journal_path, &connect),
        unplaced: plan.unplaced.clone(),
        uri: connect.clone(),
        vms: done.iter().map(AppliedVm::from).collect(),
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `report --plan` for the selected VMs: what would move, which conflicts go.
fn dry_run(
    args: &ApplyArgs,
    uri: &str,
    plan: &Plan,
    checked: &Checked,
) -> Result<ExitCode, Failure> {
    let found = checked.dry_run(plan)?;
    let result = Report::new(&checked.host, found.tenants, Some(&found.asked));
    let targets = &checked.targets;
    let text = format!(
        "{}\ndry run: the preconditions hold for {}; nothing was changed\n",
        result.to_text(&checked.host, use_colour(ColorArg::Auto)),
        apply::names(targets)
    );
    say(args, &text, || {
        let names = targets.iter().map(|t| t.name.clone()).collect();
        Outcome::dry_run(Some(uri), names, &plan.unplaced, &result)
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The host to apply to: `--connect`, else the URI the plan was made
/// through (said on stderr, since the user did not type it), else a usage
/// error. A `--connect` other than the plan's URI is not refused here: the
/// plan's host fingerprint decides, as for any host.
fn host_uri(args: &ApplyArgs, plan_path: &Path, plan: &Plan) -> Result<String, Failure> {
    if let Some(uri) = &args.connect {
        return Ok(uri.clone());
    }
    match apply::recorded_uri(plan) {
        Some(uri) => {
            crate::ui::note(&format!(
                "applying to {uri}, where {} was planned (plan --connect): --connect URI for another host",
                plan_path.display()
            ));
            Ok(uri.to_owned())
        }
        None => Err(Usage {
            message: format!(
                "give the host to change: --connect URI ({} records no libvirt URI: it was planned from {})",
                plan_path.display(),
                plan.host.source
            ),
            hint: Some(format!(
                "name the host: pinplan apply {} --connect URI (qemu:///system for this machine's), or plan through it: pinplan plan SPEC --connect URI",
                plan_path.display()
            )),
            cause: None,
        }
        .into()),
    }
}

/// Records how the journal's run ended; a journal that cannot be marked
/// stays unfinished (the safe side: the next apply asks for its rollback or
/// --force), and the user is told.
fn mark(journal: &Journal, path: &Path, status: JournalStatus) {
    if let Err(e) = journal.mark(path, status) {
        crate::ui::warn(&format!(
            "cannot record in the journal that its run ended ({e}): the next apply on this host will take it as unfinished"
        ));
    }
}

/// The apply lock of `uri`'s host, saying on stderr when it waits for it.
fn host_lock(uri: &str) -> Result<lock::HostLock, Failure> {
    Ok(lock::lock(uri, &mut waiting)?)
}

fn rollback(path: &Path, args: &ApplyArgs, interrupt: &Interrupt) -> Result<ExitCode, Failure> {
    let journal = Journal::load(path, args.connect.as_deref())?;
    let uri = journal.uri.clone();
    let session = Session::open(&uri)?;
    if args.dry_run {
        let lines = session.rollback_preview(&journal);
        let mut out = String::new();
        for line in &lines {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&format!(
            "dry run: rolling back {} on {uri} would do the above; nothing was changed\n",
            path.display()
        ));
        say(args, &out, || Outcome::RollbackPreview {
            journal: path.to_owned(),
            status: Status::RollbackDryRun,
            uri: uri.clone(),
            vms: lines.clone(),
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let _lock = host_lock(&uri)?;
    // A first signal lets the rollback finish; a second stops it.
    signals::changing(apply::retry(path, &uri));
    mark(&journal, path, JournalStatus::RollingBack);
    let done = session.rollback(&journal, args.redefine, interrupt);
    if !done.errors.is_empty() {
        return Err(ApplyError::Rollback {
            journal: path.to_owned(),
            uri,
            restored: done.restored,
            errors: done.errors,
            interrupted: done.interrupted,
        }
        .into());
    }
    mark(&journal, path, JournalStatus::RolledBack);
    let mut out = String::new();
    for note in &done.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push_str(&format!(
        "rolled back {} from {} and verified: {}\n",
        done.restored.join(", "),
        path.display(),
        if done.notes.is_empty() {
            "as they were before the apply"
        } else {
            "their configs are as they were before the apply (see the notes)"
        }
    ));
    say(args, &out, || Outcome::RolledBack {
        journal: path.to_owned(),
        notes: done.notes.clone(),
        restored: done.restored.clone(),
        status: Status::RolledBack,
        uri: uri.clone(),
    })?;
    Ok(finished_despite(interrupt, "the rollback"))
}

/// A run that a signal asked to stop but that finished what it was doing
/// (a rollback): it says so, and exits 130/143 all the same.
fn finished_despite(interrupt: &Interrupt, what: &str) -> ExitCode {
    match interrupt.first() {
        Some(signal) => {
            eprintln!("interrupted ({signal}): {what} was finished first");
            ExitCode::from(signal.exit_code())
        }
        None => ExitCode::SUCCESS,
    }
}

/// `apply --fleet DIR`: every host in parallel, the outcome per host.
fn run_fleet(dir: &Path, args: &ApplyArgs, interrupt: &Interrupt) -> Result<ExitCode, Failure> {
    let inventory = Inventory::from_dir(dir)?;
    let journal = match &args.journal {
        Some(path) => path.clone(),
        None if args.dry_run => PathBuf::new(),
        None => default_journal(Tool::FleetApply)?,
    };
    let resume = format!("pinplan apply --rollback {}", journal.display());
    let options = FleetApplyOptions {
        scope: scope(args),
        vms: &args.vms,
        force: args.force,
        dry_run: args.dry_run,
        all_or_nothing: args.all_or_nothing,
        journal,
        concurrency: super::FLEET_CONCURRENCY,
        timeout: super::FLEET_TIMEOUT,
        progress: &super::host_progress,
        journaled: &|path| {
            if matches!(args.format, Format::Text) {
                // As for one host: the undo is known before the first change.
                let _ = print(&fleet_apply::journal_line(path));
            }
        },
        changing: &|| signals::changing(resume.clone()),
        interrupt,
    };
    let done = fleet_apply::apply(
        &inventory,
        &options,
        &|host| Box::new(hook(Some(host), interrupt)),
        &mut waiting,
    )?;
    print(&match args.format {
        Format::Text => done.to_text(use_colour(ColorArg::Auto)),
        Format::Json => done.to_json(),
    })?;
    Ok(super::exit_of(done.exit()))
}

/// Says on stderr that a host's apply lock is held by another run.
fn waiting(path: &Path) {
    crate::ui::note(&format!(
        "waiting for another pinplan apply on this host to finish (lock {})",
        path.display()
    ));
}

/// `apply --rollback FLEET-JOURNAL`: every host of a fleet apply put back.
fn rollback_fleet(
    path: &Path,
    journal: &FleetJournal,
    args: &ApplyArgs,
    interrupt: &Interrupt,
) -> Result<ExitCode, Failure> {
    if args.connect.is_some() || args.dry_run {
        return Err(Usage::new(
            "a fleet journal names each host's URI: drop --connect and --dry-run (roll back one host with its own journal: pinplan apply --rollback HOST-JOURNAL --dry-run)",
        )
        .into());
    }
    let resume = format!("pinplan apply --rollback {}", path.display());
    let done = journal.rollback(
        path,
        super::FLEET_CONCURRENCY,
        args.redefine,
        &mut waiting,
        interrupt,
        &|| signals::changing(resume.clone()),
    )?;
    let mut out = String::new();
    let json = fleet_apply::FleetRollback::of(path, &done);
    let failed = json.status == fleet_apply::RollbackState::Failed;
    for (host, status) in &done {
        let line = match status {
            RollbackStatus::NoJournal => "no journal: the apply changed nothing there".to_owned(),
            RollbackStatus::Done(r) if r.errors.is_empty() => {
                format!("rolled back {} and verified", r.restored.join(", "))
            }
            RollbackStatus::Done(r) => format!(
                "did not restore everything: {} (restored: {})",
                r.errors.join("; "),
                r.restored.join(", ")
            ),
            RollbackStatus::Failed(e) => e.clone(),
        };
        out.push_str(&format!("{}  {}  {line}\n", host.name, host.uri));
    }
    out.push_str(&if failed {
        format!("the fleet rollback did not restore every host: fix the cause and run again: pinplan apply --rollback {}\n", path.display())
    } else {
        format!("fleet rolled back from {}: every host as it was before the apply\n", path.display())
    });
    let again = done.iter().find_map(|(_, s)| match s {
        RollbackStatus::Done(r) => r.interrupted,
        _ => None,
    });
    if let Some(signal) = again {
        out.push_str(&format!(
            "interrupted again ({signal}): the hosts are partly restored; finish with: {resume}\n"
        ));
    }
    say(args, &out, || json)?;
    if let Some(signal) = again {
        return Ok(ExitCode::from(signal.exit_code()));
    }
    if failed {
        return Ok(verdict(false));
    }
    Ok(finished_despite(interrupt, "the fleet rollback"))
}
