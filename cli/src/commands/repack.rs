//! `pinplan repack`: make room for VMs by moving `movable` running VMs,
//! live, the fewest vCPUs, or without `--for` make the free cores as whole
//! as moves can (through apply's order, journal and rollback).

use crate::error::{print, Failure, Usage};
use pinplan::topology::Source;
use pinplan::watch::repack::For;
use pinplan::watch::{Settings, Watcher};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct RepackArgs {
    /// The host's libvirt URI.
    #[arg(long, value_name = "URI")]
    connect: String,
    /// What to make room for: a number of vCPUs (a new VM with the spec's
    /// defaults), a shut-off domain with a request (its config is pinned
    /// where it fits), or a plan spec (its [[vm]]s that do not run, all in
    /// one plan: each fits, or nothing changes). Without it: the free cores
    /// made as whole as moves can — the fewest partly used L3 domains, then
    /// NUMA nodes — with the fewest vCPUs moved.
    #[arg(long = "for", value_name = "SPEC-OR-SIZE")]
    for_what: Option<String>,
    /// The spec (reservation, tables, [[vm]]s); with --for SPEC, that one.
    #[arg(long, value_name = "SPEC")]
    spec: Option<PathBuf>,
    /// Refuse (change nothing) when room needs more vCPUs moved than this;
    /// without --for, the most whole free cores this many moves reach.
    #[arg(long, value_name = "N")]
    max_moves: Option<usize>,
    /// Say what would move, move nothing.
    #[arg(long)]
    dry_run: bool,
    /// The topology: a file (hwloc XML, `virsh capabilities`, `pinplan
    /// topology --format json`) or `synthetic:DESC`, when libvirt's does not
    /// say enough (the NICs' nodes); default: the spec's [host] source, else
    /// the host's through --connect. The domains are read through --connect.
    #[arg(long, value_name = "SRC")]
    source: Option<String>,
    /// The solve's time limit, in seconds.
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    time_limit: f64,
}

pub fn run(args: &RepackArgs) -> Result<ExitCode, Failure> {
    let Some(for_what) = &args.for_what else {
        let mut watcher = Watcher::new(&settings(args, args.spec.clone()))?;
        let done = watcher.compact(args.max_moves)?;
        print(&done.to_text(args.dry_run))?;
        return Ok(ExitCode::SUCCESS);
    };
    let as_file = PathBuf::from(for_what);
    let (spec, target) = if as_file.is_file() {
        if args.spec.is_some() {
            return Err(Usage::new("--for SPEC is the spec: drop --spec").into());
        }
        (Some(as_file), None)
    } else if let Ok(n) = for_what.trim().parse::<u32>() {
        if n == 0 {
            return Err(Usage::new("--for 0: give at least one vCPU").into());
        }
        (args.spec.clone(), Some(For::Vcpus(n)))
    } else {
        (args.spec.clone(), Some(For::Domain(for_what.clone())))
    };
    let mut watcher = Watcher::new(&settings(args, spec))?;
    let targets = match target {
        Some(t) => vec![t],
        None => watcher.not_running().into_iter().map(For::Domain).collect(),
    };
    if targets.is_empty() {
        return Err(Usage::new(
            "--for SPEC: every [[vm]] of the spec runs already: nothing to make room for",
        )
        .into());
    }
    let done = watcher.repack(&targets, args.max_moves)?;
    print(&done.to_text(args.dry_run))?;
    Ok(ExitCode::SUCCESS)
}

/// The watcher `repack` works through: the host, the spec, `--dry-run`.
fn settings(args: &RepackArgs, spec: Option<PathBuf>) -> Settings {
    Settings {
        uri: args.connect.clone(),
        spec,
        dry_run: args.dry_run,
        refuse_in_dry_run: false,
        time_limit: Duration::from_secs_f64(args.time_limit.clamp(0.01, 3600.0)),
        source: args.source.as_deref().map(Source::from_arg),
    }
}
