//! `pinplan watch`: the service that pins domains as the host changes (the
//! event loop around [`pinplan::watch::Watcher`]), the admission hook's
//! side (`--admit`), and what runs it (`--emit systemd`, `--emit hook`).

use crate::error::{print, Failure, Usage};
use clap::ValueEnum;
use pinplan::libvirt::events::{EventKind, Notice};
use pinplan::topology::Source;
use pinplan::watch::admission::{self, Pending};
use pinplan::watch::{Admissions, AfterAdmission, Decision, Happening, Settings, Watcher};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum WatchFormat {
    Text,
    Json,
}

#[derive(clap::Args)]
pub struct WatchArgs {
    /// A plan spec: the host's reservation and tables, and `[[vm]]`s that
    /// win over the domains' own requests. Optional.
    spec: Option<PathBuf>,
    /// The host's libvirt URI.
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// One line per decision (text), or one JSON object per line.
    #[arg(long, value_enum, default_value = "text")]
    format: WatchFormat,
    /// Decide and say, change nothing (reconcile reports conflicts only).
    #[arg(long)]
    dry_run: bool,
    /// The topology: a file (hwloc XML, `virsh capabilities`, `pinplan
    /// topology --format json`) or `synthetic:DESC`, when libvirt's does not
    /// say enough (the NICs' nodes); default: the spec's [host] source, else
    /// the host's through --connect. Read again on SIGHUP.
    #[arg(long, value_name = "SRC")]
    source: Option<String>,
    /// Each solve's time limit, in seconds.
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    time_limit: f64,
    /// The admission socket (default /run/pinplan/watch.sock).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// `systemd`: print a systemd unit that runs this watcher; `hook DIR`:
    /// write the qemu hook that asks it before a start into DIR/qemu.d/
    /// (DIR: libvirt's hooks directory, /etc/libvirt/hooks).
    #[arg(long, value_name = "WHAT", num_args = 1..=2)]
    emit: Vec<String>,
    /// The hook's side: may DOMAIN start? Its XML on standard input; exit 0
    /// yes, 1 no (the reason on standard error, which libvirt shows).
    #[arg(long, value_name = "DOMAIN")]
    admit: Option<String>,
    /// With --admit (and --emit hook): refuse a start when no watcher
    /// answers (by default it is let through, with a warning).
    #[arg(long)]
    strict: bool,
    /// Put back every pin the watcher (and repack) set on the host of
    /// --connect, from their journals, the latest first (with --dry-run:
    /// say what it would do).
    #[arg(long)]
    undo: bool,
    /// With --admit: how long to wait for the watcher, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    timeout_ms: u64,
}

pub fn run(args: &WatchArgs) -> Result<ExitCode, Failure> {
    let socket = match &args.socket {
        Some(path) => path.clone(),
        None => admission::default_socket()?,
    };
    if let Some(domain) = &args.admit {
        return admit(domain, &socket, args);
    }
    match args.emit.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => {}
        ["systemd"] => return emit_systemd(args),
        ["hook", dir] => return emit_hook(args, std::path::Path::new(dir), &socket),
        _ => {
            return Err(Usage::new(
                "--emit takes `systemd` (a unit on standard output) or `hook DIR` (the qemu hook into DIR/qemu.d/, DIR being /etc/libvirt/hooks)",
            )
            .into())
        }
    }
    let Some(uri) = &args.connect else {
        return Err(Usage::new("pinplan watch needs --connect URI (the host to watch)").into());
    };
    if args.undo {
        return undo(uri, args.dry_run);
    }
    let settings = Settings {
        uri: uri.clone(),
        spec: args.spec.clone(),
        dry_run: args.dry_run,
        refuse_in_dry_run: false,
        time_limit: Duration::from_secs_f64(args.time_limit.clamp(0.01, 600.0)),
        source: args.source.as_deref().map(Source::from_arg),
    };
    let mut watcher = Watcher::new(&settings)?;
    let (tx, rx) = mpsc::channel::<Input>();
    signals(tx.clone());
    let server = admission::Server::bind(&socket)?;
    // The hook's questions are answered on the server's thread, from what
    // the last decision read: the loop may be waiting on libvirt, which
    // holds its calls while a domain waits in its prepare hook.
    let admissions = watcher.admissions();
    let answered_tx = tx.clone();
    let _serving = server.serve(move |pending| {
        let _ = answered_tx.send(answer(&admissions, pending));
    })?;
    say(
        args,
        &format!("watching {uri} (admission socket {})", socket.display()),
    );
    serve(&mut watcher, args, &tx, &rx)
}

/// What the event loop waits for.
enum Input {
    Notice(Notice),
    /// The hook's question, answered.
    Answered(Box<Answered>),
    Hangup,
    Stop(&'static str),
}

/// A question of the hook, answered on the admission server's thread.
struct Answered {
    /// Its decision line.
    decision: Decision,
    /// Why the hook did not take the answer (it had given up).
    lost: Option<String>,
    /// The config pins of a refused start, for the loop to write.
    after: Option<AfterAdmission>,
}

/// The hook's question answered (on the admission server's thread).
fn answer(admissions: &Admissions, pending: Pending) -> Input {
    let asked = std::time::Instant::now();
    let (answer, after) = admissions.admit(&pending.ask);
    let millis = asked.elapsed().as_secs_f64() * 1000.0;
    let domain = pending.ask.domain.clone();
    let lost = pending.answer(&answer).err().map(|e| {
        format!(
            "{domain} admission: the hook did not take the answer: {}",
            pinplan::error::one_line(&e)
        )
    });
    let decision = Decision::admission(&domain, &answer, millis);
    Input::Answered(Box::new(Answered {
        decision,
        lost,
        after,
    }))
}

/// Sends SIGHUP, SIGTERM and SIGINT into the loop.
fn signals(tx: mpsc::Sender<Input>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGTERM]) else {
        crate::ui::warn("cannot handle SIGHUP, SIGINT and SIGTERM: they end pinplan watch at once");
        return;
    };
    std::thread::spawn(move || {
        for s in signals.forever() {
            let input = match s {
                SIGHUP => Input::Hangup,
                SIGINT => Input::Stop("SIGINT"),
                _ => Input::Stop("SIGTERM"),
            };
            if tx.send(input).is_err() {
                return;
            }
        }
    });
}

/// Connects (again after each close), reconciles, then reacts to each
/// input until SIGTERM or SIGINT.
fn serve(
    watcher: &mut Watcher,
    args: &WatchArgs,
    tx: &mpsc::Sender<Input>,
    rx: &mpsc::Receiver<Input>,
) -> Result<ExitCode, Failure> {
    let mut wait = Duration::from_millis(200);
    loop {
        let registered = connect(watcher.uri(), tx);
        let _listening = match registered {
            Ok(pair) => pair,
            Err(e) => {
                say(
                    args,
                    &format!(
                        "cannot watch {}: {}; again in {} ms",
                        watcher.uri(),
                        pinplan::error::one_line(&e),
                        wait.as_millis()
                    ),
                );
                if let Some(code) = idle(watcher, args, rx, wait) {
                    return Ok(code);
                }
                wait = (wait * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        wait = Duration::from_millis(200);
        for d in watcher.reconcile() {
            show(args, &d);
        }
        loop {
            let Ok(first) = rx.recv() else {
                return Ok(ExitCode::SUCCESS);
            };
            let batch: Vec<Input> = std::iter::once(first).chain(rx.try_iter()).collect();
            let mut closed = false;
            for input in batch {
                match input {
                    Input::Notice(Notice::Closed { .. }) => closed = true,
                    other => {
                        if let Some(code) = react(watcher, args, other) {
                            return Ok(code);
                        }
                    }
                }
            }
            if closed {
                say(
                    args,
                    &format!("connection to {} closed: reconnecting", watcher.uri()),
                );
                break;
            }
        }
    }
}

/// Waits `wait` while unconnected, still answering the hook and signals.
fn idle(
    watcher: &mut Watcher,
    args: &WatchArgs,
    rx: &mpsc::Receiver<Input>,
    wait: Duration,
) -> Option<ExitCode> {
    let until = std::time::Instant::now() + wait;
    while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(Input::Notice(_)) => {}
            Ok(other) => {
                if let Some(code) = react(watcher, args, other) {
                    return Some(code);
                }
            }
            Err(_) => break,
        }
    }
    None
}

/// One input: a domain event, a question of the hook, a signal.
fn react(watcher: &mut Watcher, args: &WatchArgs, input: Input) -> Option<ExitCode> {
    match input {
        Input::Notice(Notice::Domain(event)) => {
            let happening = match event.kind {
                EventKind::Defined { .. } => Happening::Defined,
                EventKind::DeviceAdded { .. }
                | EventKind::DeviceRemoved { .. }
                | EventKind::Tuned => Happening::Changed,
                EventKind::Started => Happening::Started,
                EventKind::Stopped => Happening::Stopped,
                EventKind::Undefined => Happening::Undefined,
            };
            let d = watcher.happened_at(&event.domain, happening, event.at);
            show(args, &d);
        }
        Input::Notice(Notice::Closed { .. }) => {}
        Input::Answered(answered) => {
            let Answered {
                decision,
                lost,
                after,
            } = *answered;
            if let Some(lost) = lost {
                say(args, &lost);
            }
            show(args, &decision);
            if let Some(after) = after {
                show(args, &watcher.after_admission(after));
            }
        }
        Input::Hangup => match watcher.reload() {
            Ok(()) => say(args, "SIGHUP: spec, tables and topology read again"),
            Err(e) => say(
                args,
                &format!(
                    "SIGHUP: kept the spec as it was: {}",
                    pinplan::error::one_line(&e)
                ),
            ),
        },
        Input::Stop(signal) => {
            say(args, &format!("{signal}: stopping"));
            return Some(ExitCode::SUCCESS);
        }
    }
    None
}

/// A connection to `uri` with its events sent into the loop.
fn connect(
    uri: &str,
    tx: &mpsc::Sender<Input>,
) -> Result<pinplan::watch::listen::Listening, pinplan::libvirt::LibvirtError> {
    let tx = std::sync::Mutex::new(tx.clone());
    pinplan::watch::listen::listen(uri, move |notice| {
        if let Ok(tx) = tx.lock() {
            let _ = tx.send(Input::Notice(notice));
        }
    })
}

/// A decision on standard output, one line, flushed.
fn show(args: &WatchArgs, d: &Decision) {
    let line = match args.format {
        WatchFormat::Text => d.to_line(),
        WatchFormat::Json => d.to_json_line(),
    };
    line_out(&line);
}

/// A line of the watcher's own (not a decision).
fn say(args: &WatchArgs, text: &str) {
    match args.format {
        WatchFormat::Text => line_out(text),
        WatchFormat::Json => line_out(&serde_json::json!({ "message": text }).to_string()),
    }
}

fn line_out(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `--admit DOMAIN`: ask the watcher; exit 0 to let the start through, 1
/// to refuse it (the reason on standard error, which libvirt shows).
fn admit(domain: &str, socket: &std::path::Path, args: &WatchArgs) -> Result<ExitCode, Failure> {
    let mut xml = String::new();
    let limit = u64::try_from(admission::MAX_XML).unwrap_or(u64::MAX);
    std::io::Read::read_to_string(&mut std::io::Read::take(std::io::stdin(), limit), &mut xml)
        .map_err(|e| {
            Usage::new(format!(
                "cannot read the domain's XML on standard input: {e}"
            ))
        })?;
    let ask = admission::Ask {
        version: admission::VERSION,
        domain: domain.to_owned(),
        xml,
    };
    let answer = admission::ask(socket, &ask, Duration::from_millis(args.timeout_ms))
        .unwrap_or_else(|e| {
            let answer = admission::when_no_answer(args.strict, &e);
            if answer.allow {
                crate::ui::warn(&format!(
                    "pinplan watch did not answer ({}): {domain} starts unchecked",
                    pinplan::error::one_line(&e)
                ));
            }
            answer
        });
    if answer.allow {
        return Ok(ExitCode::SUCCESS);
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "pinplan: {domain} may not start: {}",
        answer.reason.as_deref().unwrap_or("refused")
    );
    if let Some(fix) = &answer.fix {
        let _ = writeln!(err, "pinplan: fix: {fix}");
    }
    Ok(ExitCode::from(1))
}

fn emit_systemd(args: &WatchArgs) -> Result<ExitCode, Failure> {
    let uri = args.connect.as_deref().unwrap_or("qemu:///system");
    let pinplan =
        std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/usr/local/bin/pinplan"));
    // A service runs in `/`: the spec by its absolute path.
    let spec = args
        .spec
        .as_ref()
        .map(|s| std::path::absolute(s).unwrap_or_else(|_| s.clone()));
    print(&pinplan::watch::unit::unit(
        &pinplan,
        uri,
        spec.as_deref(),
        &[],
    )?)?;
    Ok(ExitCode::SUCCESS)
}

fn emit_hook(
    args: &WatchArgs,
    dir: &std::path::Path,
    socket: &std::path::Path,
) -> Result<ExitCode, Failure> {
    let pinplan = std::env::current_exe()
        .map_err(|e| Usage::new(format!("cannot tell where this pinplan is: {e}")))?;
    let text = pinplan::watch::hook::script(
        &pinplan,
        socket,
        args.strict,
        Duration::from_millis(args.timeout_ms),
    )?;
    let path = pinplan::watch::hook::install(dir, &text)?;
    print(&format!("{}\n", path.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// `--undo`: every journal of the watcher's put back, the latest first.
fn undo(uri: &str, dry_run: bool) -> Result<ExitCode, Failure> {
    let done = pinplan::watch::undo::undo(uri, dry_run)?;
    let mut out = String::new();
    let mut failed = false;
    for u in &done {
        match (&u.error, dry_run) {
            (Some(e), _) => {
                failed = true;
                out.push_str(&format!("{}: not rolled back: {e}\n", u.journal.display()));
            }
            (None, true) => {
                for line in &u.vms {
                    out.push_str(&format!("{}: {line}\n", u.journal.display()));
                }
            }
            (None, false) => out.push_str(&format!(
                "{}: rolled back {}\n",
                u.journal.display(),
                u.vms.join(", ")
            )),
        }
    }
    if done.is_empty() {
        out.push_str(&format!(
            "no journal of pinplan watch for {uri}: nothing to undo\n"
        ));
    } else if dry_run {
        out.push_str("dry run: nothing was changed\n");
    }
    print(&out)?;
    Ok(if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
