//! `pinplan isolate`: keeps the host off the plan's VM CPUs at runtime
//! (journalled, `--undo`), prints the boot-time way (`--emit kernel-args`,
//! `--emit tuned`), installs the per-VM libvirt hook (`--emit hook DIR`) and
//! is what that hook calls (`--vm-start`, `--vm-stop`). The work is
//! [`pinplan::isolate`]'s. SIGINT and SIGTERM stop an isolation between two
//! changes and undo it; during `--undo` the first lets it finish, a second
//! stops it ([`crate::signals`]). With the `fault-injection` feature (tests
//! only), `PINPLAN_FAULT_ISOLATE_KILL_AT=N` aborts the process before change
//! N, and `PINPLAN_FAULT_ISOLATE_SIGNAL_AT=N` sends it SIGINT there.

use super::Format;
use crate::error::{print, Failure, Usage};
use crate::signals;
use pinplan::interrupt::Interrupt;
use pinplan::isolate::journal::{Change, Journal, Status, Undone};
use pinplan::isolate::outcome::Outcome;
use pinplan::isolate::{self, boot, hook, IsolateError, State, Target};
use pinplan::plan::Plan;
use pinplan::topology::{self, Source};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct IsolateArgs {
    /// The plan whose VM CPUs the host is kept off.
    #[arg(long, value_name = "PLAN.json", required_unless_present = "undo")]
    plan: Option<PathBuf>,
    /// Check the plan against this libvirt host's topology (default: the
    /// live host's, under --root /).
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// The directory holding sys/, proc/ and run/: / for this machine, or a
    /// tree of the same shape (tests).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Where the isolation in effect and the hook's count of running VMs
    /// are kept (default: pinplan's runtime directory, /run/pinplan, or
    /// $XDG_RUNTIME_DIR/pinplan for a user who may not write /run).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Where to write the journal (default STATE/pinplan-isolate-SECONDS-PID.json,
    /// STATE being /var/lib/pinplan as root, else $XDG_STATE_HOME/pinplan, or
    /// $PINPLAN_STATE_DIR).
    #[arg(long, value_name = "FILE", conflicts_with = "undo")]
    journal: Option<PathBuf>,
    /// Print the changes; make none.
    #[arg(long)]
    dry_run: bool,
    /// Restore every value a journal recorded, exactly.
    #[arg(long, value_name = "JOURNAL", conflicts_with_all = ["plan", "emit", "vm_start", "vm_stop"])]
    undo: Option<PathBuf>,
    /// Print the boot-time isolation (`kernel-args`, `tuned`), or write the
    /// per-VM libvirt hook into a directory (`hook DIR`).
    #[arg(long, value_names = ["KIND", "DIR"], num_args = 1..=2, conflicts_with_all = ["dry_run", "journal", "vm_start", "vm_stop"])]
    emit: Vec<String>,
    /// The hook's call when VM NAME starts (libvirt's `prepare begin`).
    #[arg(long, value_name = "NAME", conflicts_with = "vm_stop")]
    vm_start: Option<String>,
    /// The hook's call when VM NAME has stopped (`release end`).
    #[arg(long, value_name = "NAME")]
    vm_stop: Option<String>,
    /// Use a plan made for another host topology anyway (the CPUs and NUMA
    /// nodes it uses must still exist).
    #[arg(long)]
    force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// Aborts before change N when the fault-injection feature and
/// `PINPLAN_FAULT_ISOLATE_KILL_AT=N` say so: as if killed mid-isolation;
/// `PINPLAN_FAULT_ISOLATE_SIGNAL_AT=N` sends this process SIGINT there and
/// waits until the handler has seen it (change N is the first not made).
fn hook_before(_interrupt: &Interrupt) -> impl FnMut(usize) {
    #[cfg(feature = "fault-injection")]
    let number =
        |name: &str| -> Option<usize> { std::env::var(name).ok().and_then(|v| v.parse().ok()) };
    #[cfg(feature = "fault-injection")]
    let (kill_at, signal_at) = (
        number("PINPLAN_FAULT_ISOLATE_KILL_AT"),
        number("PINPLAN_FAULT_ISOLATE_SIGNAL_AT"),
    );
    #[cfg(feature = "fault-injection")]
    let interrupt = _interrupt.clone();
    move |_i| {
        #[cfg(feature = "fault-injection")]
        if kill_at == Some(_i) {
            std::process::abort();
        }
        #[cfg(feature = "fault-injection")]
        if signal_at == Some(_i) {
            let _ = std::process::Command::new("sh")
                .args(["-c", &format!("kill -s INT {}", std::process::id())])
                .status();
            for _ in 0..500 {
                if interrupt.first().is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

fn say(format: Format, text: &str, object: impl FnOnce() -> Outcome) -> Result<(), Failure> {
    match format {
        Format::Text => print(text),
        Format::Json => {
            let mut out = serde_json::to_string_pretty(&object()).unwrap_or_default();
            out.push('\n');
            print(&out)
        }
    }
}

pub fn run(args: &IsolateArgs) -> Result<ExitCode, Failure> {
    // One rule for pinplan's runtime directory: apply's locks use it too.
    let state = State {
        dir: match &args.state {
            Some(dir) => dir.clone(),
            // Not creatable here (no /run, no XDG_RUNTIME_DIR): the lock
            // says so if this run needs it; --emit and --dry-run do not.
            None => pinplan::state::runtime_dir().unwrap_or_else(|_| PathBuf::from("/run/pinplan")),
        },
    };
    if let Some(journal) = &args.undo {
        return undo(args, &state, journal, &signals::install());
    }
    let Some(plan_path) = &args.plan else {
        return Err(Usage::new("give a plan: pinplan isolate --plan PLAN.json").into());
    };
    let plan = Plan::load(plan_path)?;
    check_host(args, &plan, plan_path)?;
    if let Some(name) = args.vm_start.as_ref().or(args.vm_stop.as_ref()) {
        return vm_hook(args, &state, &plan, name, args.vm_start.is_some());
    }
    let online = isolate::online_cpus(&args.root)?;
    let target = Target::from_plan(&plan, &online)?;
    if !args.emit.is_empty() {
        return emit(args, &state, &target, plan_path);
    }
    // Until a change starts, a signal ends pinplan at once (nothing to
    // undo). Not for the hook (--vm-start, --vm-stop, above): libvirt runs
    // it, and its changes are not announced to the handler.
    let interrupt = signals::install();
    if !args.dry_run {
        state.check_idle()?;
    }
    let (mut journal, notes) = isolate::prepare(&args.root, &target)?;
    if args.dry_run {
        let mut text = header(&target, &journal);
        for entry in &journal.changes {
            text.push_str(&format!("would {}\n", describe(&entry.change)));
        }
        text.push_str(&notes_text(&notes));
        say(args.format, &text, || {
            Outcome::dry_run(&journal, Some(notes.clone()))
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = match &args.journal {
        Some(path) => path.clone(),
        None => pinplan::state::default_journal(pinplan::host::journal::Tool::Isolate)?,
    };
    signals::changing(format!("pinplan isolate --undo {}", path.display()));
    isolate::isolate(
        &state,
        &mut journal,
        &path,
        &mut hook_before(&interrupt),
        &interrupt,
    )?;
    let undo_command = format!("pinplan isolate --undo {}", path.display());
    let mut text = header(&target, &journal);
    text.push_str(&outcome(&journal));
    text.push_str(&notes_text(&notes));
    text.push_str(&format!(
        "journal: {} (undo: {undo_command})\n",
        path.display()
    ));
    say(args.format, &text, || {
        Outcome::applied(&journal, path.clone(), undo_command.clone(), notes.clone())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The plan must be this host's: by fingerprint through `--connect` or on
/// this machine; under another root, its CPUs must be online there.
fn check_host(args: &IsolateArgs, plan: &Plan, path: &Path) -> Result<(), Failure> {
    let this_machine = args.root.canonicalize().is_ok_and(|r| r == Path::new("/"));
    let source = match &args.connect {
        Some(uri) => Some(Source::Libvirt(uri.clone())),
        None if this_machine => Some(Source::LiveHost),
        None => None,
    };
    if let Some(source) = source {
        let host = topology::load(&source)?;
        plan.check_host(path, &host, args.force)?;
    } else {
        let online = isolate::online_cpus(&args.root)?;
        let (cpus, _) = plan.used();
        let missing = cpus.difference(&online);
        if !missing.is_empty() {
            return Err(Usage {
                message: format!(
                    "the plan {} uses CPUs {missing}, which are not online under {}",
                    path.display(),
                    args.root.display()
                ),
                hint: Some("give the plan made for this host".to_owned()),
                cause: None,
            }
            .into());
        }
    }
    Ok(())
}

fn header(target: &Target, journal: &Journal) -> String {
    format!(
        "isolating VM CPUs {} ({}); the host keeps {} ({}); cgroups: {}\n",
        target.vm_cpus,
        target.vms.join(", "),
        target.housekeeping,
        target.basis,
        journal.cgroups
    )
}

/// One change in words.
fn describe(change: &Change) -> String {
    match change {
        Change::Write {
            what,
            path,
            before,
            after,
        } => format!("set {what} to {after} (was {before}): {}", path.display()),
        Change::Create { path, cpus, .. } => {
            format!("create cgroup {} on CPUs {cpus}", path.display())
        }
        Change::Enable { path, controller } => {
            format!("enable the {controller} controller: {}", path.display())
        }
        Change::Move {
            tid,
            name,
            to,
            file,
            ..
        } => format!(
            "move {} {tid} ({name}) to {}",
            if file == "tasks" { "thread" } else { "process" },
            to.display()
        ),
        Change::Systemd {
            unit,
            before,
            after,
        } => format!(
            "systemctl set-property --runtime {unit} AllowedCPUs={after} (was {})",
            if before.is_empty() { "unset" } else { before }
        ),
    }
}

/// What the isolation did: moved tasks counted, refusals listed.
fn outcome(journal: &Journal) -> String {
    let mut text = String::new();
    let mut moved = (0usize, 0usize, 0usize);
    for entry in &journal.changes {
        if let Change::Move { .. } = entry.change {
            match entry.status {
                Status::Applied => moved.0 += 1,
                Status::Refused => moved.1 += 1,
                _ => moved.2 += 1,
            }
            continue;
        }
        match entry.status {
            Status::Applied => text.push_str(&format!("done: {}\n", describe(&entry.change))),
            Status::Refused => text.push_str(&format!(
                "refused: {}: {}\n",
                describe(&entry.change),
                entry.reason.as_deref().unwrap_or("")
            )),
            _ => {}
        }
    }
    if moved != (0, 0, 0) {
        text.push_str(&format!(
            "moved {} threads or processes to the housekeeping cgroup ({} refused by the kernel, {} ended)\n",
            moved.0, moved.1, moved.2
        ));
    }
    text
}

fn notes_text(notes: &[String]) -> String {
    notes.iter().map(|n| format!("note: {n}\n")).collect()
}

fn undo(
    args: &IsolateArgs,
    state: &State,
    path: &Path,
    interrupt: &Interrupt,
) -> Result<ExitCode, Failure> {
    if args.dry_run {
        let journal = Journal::load(path)?;
        let mut text = String::new();
        for entry in journal.changes.iter().rev() {
            if matches!(entry.status, Status::Refused | Status::Gone) {
                continue;
            }
            text.push_str(&format!("would undo: {}\n", describe(&entry.change)));
        }
        say(args.format, &text, || Outcome::dry_run(&journal, None))?;
        return Ok(ExitCode::SUCCESS);
    }
    // A first signal lets the undo finish; a second stops it.
    signals::changing(format!("pinplan isolate --undo {}", path.display()));
    let done: Undone = isolate::undo(state, path, interrupt)?;
    if let Some(signal) = done.interrupted {
        return Err(IsolateError::InterruptedAgain {
            signal,
            journal: path.to_owned(),
        }
        .into());
    }
    let mut text = undone_text(&done);
    for f in &done.failed {
        text.push_str(&format!("not restored: {f}\n"));
    }
    let ok = done.failed.is_empty();
    say(args.format, &text, || Outcome::undone(&done))?;
    if let Some(signal) = interrupt.first() {
        eprintln!("interrupted ({signal}): the undo was finished first");
        return Ok(ExitCode::from(signal.exit_code()));
    }
    Ok(crate::error::verdict(ok))
}

/// What an undo did, its moves counted against the isolation's own count
/// (`moved N threads or processes`): every one moved back, ended, or
/// left elsewhere.
fn undone_text(done: &Undone) -> String {
    use pinplan::text::plural;
    let tasks = |n: usize| plural(n, "thread or process", "threads or processes");
    let mut text = format!(
        "restored {}, removed {}\n",
        plural(done.restored, "value", "values"),
        plural(done.removed, "cgroup", "cgroups")
    );
    if done.to_move > 0 {
        let were = if done.elsewhere == 1 { "was" } else { "were" };
        text.push_str(&format!(
            "moved back {} of the {} the isolation moved ({} had ended, {} {were} no longer in \
             pinplan's cgroup: left in place)\n",
            done.moved_back,
            tasks(done.to_move),
            done.gone,
            done.elsewhere
        ));
    }
    if done.swept > 0 {
        text.push_str(&format!(
            "moved out with pinplan's cgroup: {} started in it since\n",
            tasks(done.swept)
        ));
    }
    text
}

fn emit(
    args: &IsolateArgs,
    state: &State,
    target: &Target,
    plan_path: &Path,
) -> Result<ExitCode, Failure> {
    let kind = args.emit[0].as_str();
    let dir = args.emit.get(1);
    match (kind, dir) {
        ("kernel-args", None) => print(&boot::kernel_args_text(target))?,
        ("tuned", None) => print(&boot::tuned_text(target))?,
        ("hook", Some(dir)) => {
            let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
            let exe = std::env::current_exe().map_err(|source| IsolateError::Io {
                what: "cannot find",
                path: PathBuf::from("the pinplan executable"),
                source,
            })?;
            let script = hook::script(
                &exe,
                &absolute(plan_path),
                &absolute(&args.root),
                &absolute(&state.dir),
            )?;
            let path = hook::install(Path::new(dir), &script)?;
            print(&format!(
                "wrote {}: libvirt runs it at each VM's start and stop (restart libvirtd once \
                 so that it sees a new hook)\n",
                path.display()
            ))?;
        }
        ("hook", None) => {
            return Err(
                Usage::new("--emit hook needs a directory: --emit hook /etc/libvirt/hooks").into(),
            )
        }
        (other, _) => {
            return Err(Usage {
                message: format!("--emit {}: not a kind pinplan emits", args.emit.join(" ")),
                hint: Some(format!(
                    "use --emit kernel-args, --emit tuned or --emit hook DIR (not {other:?})"
                )),
                cause: None,
            }
            .into())
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn vm_hook(
    args: &IsolateArgs,
    state: &State,
    plan: &Plan,
    name: &str,
    start: bool,
) -> Result<ExitCode, Failure> {
    let out = isolate::hook(state, &args.root, plan, name, start)?;
    let mut text = match &out.journal {
        Some(j) => format!(
            "{name} {}: VM CPUs {} isolated for {}; the host keeps {}\n",
            if start { "started" } else { "stopped" },
            j.vm_cpus,
            j.vms.join(", "),
            j.housekeeping
        ),
        None => format!(
            "{name} {}: no VM of the plan runs: every value restored\n",
            if start { "started" } else { "stopped" }
        ),
    };
    for f in &out.failed {
        text.push_str(&format!("not restored: {f}\n"));
    }
    text.push_str(&notes_text(&out.notes));
    say(args.format, &text, || Outcome::hook(name, &out))?;
    Ok(crate::error::verdict(out.failed.is_empty()))
}
