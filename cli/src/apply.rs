//! `pinplan apply`: preconditions, journal, pin calls with read-back, and
//! rollback, printed for a person. The work is `pinplan::libvirt::apply`'s;
//! this module parses arguments, writes the journal file and says what
//! happened. With the `fault-injection` feature (tests only), the
//! environment can make the N-th pin call fail or abort the process.

use crate::{bad_input, libvirt_error, print, read_plan, write_atomically_with_mode, Hinted};
use anyhow::Context as _;
use pinplan::libvirt::apply::{Journal, Scope, Session, JOURNAL_VERSION};
use pinplan::topology::{self, Source};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ApplyArgs {
    /// The plan (`pinplan plan SPEC --connect URI --out DIR` writes DIR/plan.json).
    #[arg(value_name = "PLAN.json", required_unless_present = "rollback")]
    plan: Option<PathBuf>,
    /// The libvirt host to change.
    #[arg(long, value_name = "URI")]
    connect: String,
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
    /// Where to write the journal (default ./pinplan-journal-SECONDS-PID.json).
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
    /// Apply even if domains outside the plan are pinned onto the planned CPUs.
    #[arg(long)]
    force: bool,
    /// Restore every VM of a journal (e.g. after an interrupted apply).
    #[arg(long, value_name = "JOURNAL", conflicts_with_all = ["plan", "live", "config", "vms", "dry_run", "journal", "force"])]
    rollback: Option<PathBuf>,
}

/// The fault-injection hook: `PINPLAN_FAULT_PIN_CALL=N` makes the N-th pin
/// call fail (`PINPLAN_FAULT_MODE=error`, the default) or abort the process
/// (`abort`), as if it were killed mid-apply.
#[cfg(feature = "fault-injection")]
fn hook() -> impl FnMut(u32) -> Result<(), String> {
    let at: Option<u32> = std::env::var("PINPLAN_FAULT_PIN_CALL")
        .ok()
        .and_then(|v| v.parse().ok());
    let abort = std::env::var("PINPLAN_FAULT_MODE").is_ok_and(|m| m == "abort");
    move |call| match at {
        Some(n) if n == call && abort => {
            eprintln!("fault injection: aborting before pin call {call}");
            std::process::abort()
        }
        Some(n) if n == call => Err(format!("fault injected at pin call {call}")),
        _ => Ok(()),
    }
}

#[cfg(not(feature = "fault-injection"))]
fn hook() -> impl FnMut(u32) -> Result<(), String> {
    |_| Ok(())
}

fn default_journal() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from(format!(
        "pinplan-journal-{secs}-{}.json",
        std::process::id()
    ))
}

pub fn command(args: &ApplyArgs) -> Result<ExitCode, Hinted> {
    if let Some(journal) = &args.rollback {
        return rollback(journal, &args.connect);
    }
    let Some(plan_path) = &args.plan else {
        return Err(bad_input(
            "give a plan: pinplan apply PLAN.json --connect URI".to_owned(),
            None,
        ));
    };
    let plan = read_plan(plan_path)?;
    let host = topology::load(&Source::Libvirt(args.connect.clone()))?;
    let session = Session::open(&args.connect).map_err(libvirt_error)?;
    let scope = if args.live || args.config {
        Scope {
            live: args.live,
            config: args.config,
        }
    } else {
        Scope {
            live: true,
            config: true,
        }
    };
    let targets = match session.check(&plan, &args.vms, &host, args.force) {
        Ok(t) => t,
        Err(problems) => {
            let lines: Vec<String> = problems
                .iter()
                .map(|p| format!("  {}: {}", p.vm, p.reason))
                .collect();
            return Err(bad_input(
                format!(
                    "{} cannot be applied to {}; nothing was changed:\n{}",
                    plan_path.display(),
                    args.connect,
                    lines.join("\n")
                ),
                None,
            ));
        }
    };
    if args.dry_run {
        return dry_run(&plan, &targets, &host, &args.connect);
    }
    let journal = session.capture(&targets).map_err(libvirt_error)?;
    if session.in_effect(&targets, &journal, scope) {
        print(&format!(
            "the plan is already in effect for {}: nothing changed\n",
            names(&targets)
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    let journal_path = args.journal.clone().unwrap_or_else(default_journal);
    write_atomically_with_mode(&journal_path, &journal.to_json(), 0o600)
        .context("cannot write the journal; nothing was changed")
        .map_err(|error| Hinted {
            error,
            hint: Some("give a writable path with --journal FILE".to_owned()),
            code: 2,
        })?;
    let retry = format!(
        "pinplan apply --rollback {} --connect {}",
        journal_path.display(),
        args.connect
    );
    print(&format!(
        "journal: {} (undo: {retry})\n",
        journal_path.display()
    ))?;
    let mut hook = hook();
    match session.apply(&targets, &journal, scope, &mut hook) {
        Ok(done) => {
            let mut out = String::new();
            for a in &done {
                let what = match (a.live, a.config) {
                    (true, true) => "live + config",
                    (true, false) => "live",
                    (false, true) => "config (not running)",
                    (false, false) => "nothing",
                };
                out.push_str(&format!(
                    "  {:<16} {what:<20} {:>3} pin calls, read back and verified in {:.1} ms\n",
                    a.vm,
                    a.calls,
                    a.elapsed.as_secs_f64() * 1000.0
                ));
            }
            out.push_str(&format!(
                "applied: {} VM{} pinned as planned\n",
                done.len(),
                if done.len() == 1 { "" } else { "s" }
            ));
            print(&out)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(failure) => {
            let state = if failure.restore_errors.is_empty() {
                format!(
                    "restored {} from the journal and verified: the host is back as it was",
                    failure.restored.join(", ")
                )
            } else {
                format!(
                    "the restore failed too, so these are NOT as they were:\n  {}\nrestored: {}\nretry with: {retry}",
                    failure.restore_errors.join("\n  "),
                    if failure.restored.is_empty() {
                        "none".to_owned()
                    } else {
                        failure.restored.join(", ")
                    }
                )
            };
            Err(Hinted {
                error: anyhow::anyhow!("{}: {}\n{state}", failure.vm, failure.error),
                hint: None,
                code: 1,
            })
        }
    }
}

fn names(targets: &[pinplan::libvirt::apply::Target]) -> String {
    targets
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `report --plan` for the selected VMs: what would move, which conflicts go.
fn dry_run(
    plan: &pinplan::plan::Plan,
    targets: &[pinplan::libvirt::apply::Target],
    host: &topology::HostTopology,
    uri: &str,
) -> Result<ExitCode, Hinted> {
    use pinplan::report;
    let mut selected = plan.clone();
    selected
        .vms
        .retain(|v| targets.iter().any(|t| t.name == v.name));
    let mut tenants = Vec::new();
    if !plan.host.reserved_cpus.is_empty() {
        tenants.push(pinplan::tenant::host_tenant(&plan.host.reserved_cpus));
    }
    tenants.extend(pinplan::libvirt::domain_tenants(uri, host).map_err(libvirt_error)?);
    let result = report::Report::new(host, tenants, Some(&selected));
    print(&result.to_text(host, crate::use_colour(crate::ColorArg::Auto)))?;
    print(&format!(
        "\ndry run: the preconditions hold for {}; nothing was changed\n",
        names(targets)
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn rollback(path: &Path, uri: &str) -> Result<ExitCode, Hinted> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad_input(
            format!("cannot read the journal {}: {e}", path.display()),
            None,
        )
    })?;
    let journal: Journal = serde_json::from_str(&text).map_err(|e| {
        bad_input(
            format!(
                "{}:{}: not a pinplan journal: {e}",
                path.display(),
                e.line()
            ),
            Some("give the journal file that `pinplan apply` printed".to_owned()),
        )
    })?;
    if journal.pinplan_journal != JOURNAL_VERSION {
        return Err(bad_input(
            format!(
                "{}: journal version {}, this pinplan reads version {JOURNAL_VERSION}",
                path.display(),
                journal.pinplan_journal
            ),
            None,
        ));
    }
    if journal.uri != uri {
        return Err(bad_input(
            format!(
                "{} was written for {}, not {uri}",
                path.display(),
                journal.uri
            ),
            Some(format!("use --connect {}", journal.uri)),
        ));
    }
    let session = Session::open(uri).map_err(libvirt_error)?;
    let (restored, errors) = session.rollback(&journal);
    if errors.is_empty() {
        print(&format!(
            "rolled back {} from {} and verified: as they were before the apply\n",
            restored.join(", "),
            path.display()
        ))?;
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Hinted {
            error: anyhow::anyhow!(
                "the rollback did not restore everything:\n  {}\nrestored: {}",
                errors.join("\n  "),
                restored.join(", ")
            ),
            hint: Some(format!(
                "fix the cause and run again: pinplan apply --rollback {} --connect {uri}",
                path.display()
            )),
            code: 1,
        })
    }
}
