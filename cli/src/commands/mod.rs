//! One module per subcommand: its clap arguments and the library calls they
//! turn into. What the arguments share is here.

pub mod apply;
pub mod completions;
pub mod demand;
pub mod doctor;
pub mod help;
pub mod isolate;
pub mod man;
pub mod plan;
pub mod repack;
pub mod report;
pub mod tag;
pub mod topology;
pub mod watch;
pub mod xml;

use crate::ui;
use clap::ValueEnum;
use pinplan::text::plural;
use pinplan::topology::{HostTopology, Source};

/// `--format` for commands with a text and a JSON form.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// `--color`.
#[derive(Clone, Copy, ValueEnum)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

/// Colour when asked, or on `auto` when standard output is a terminal and
/// `NO_COLOR` is unset or empty.
pub fn use_colour(arg: ColorArg) -> bool {
    use std::io::IsTerminal as _;
    match arg {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => {
            std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    }
}

/// The topology source of `--connect URI` or else `--source SRC`.
pub fn source(connect: Option<&String>, source: &str) -> Source {
    match connect {
        Some(uri) => Source::Libvirt(uri.clone()),
        None => Source::from_arg(source),
    }
}

/// With `--format json` the warnings are in the JSON, where people do not
/// read them: say them on standard error too (the text output holds them
/// already). `--quiet` silences them there, never in the output.
pub fn warn_json(format: Format, warnings: &[impl std::fmt::Display]) {
    if matches!(format, Format::Json) {
        for warning in warnings {
            ui::warn(&warning.to_string());
        }
    }
}

/// `--verbose`: where the topology was read from, and what it holds.
pub fn verbose_host(host: &HostTopology) {
    ui::verbose(|| {
        format!(
            "topology from {}: {} ({} usable), {}, {}, {}",
            host.source,
            plural(host.pus.len(), "CPU", "CPUs"),
            host.usable_cpus().len(),
            plural(host.cores.len(), "core", "cores"),
            plural(host.numa_nodes.len(), "NUMA node", "NUMA nodes"),
            plural(host.pci.len(), "PCI device", "PCI devices"),
        )
    });
}

/// `--verbose`: which solver made the plan, whether it is proven, how long
/// the solve took, how many VMs it placed.
pub fn verbose_solve(plan: &pinplan::plan::Plan) {
    ui::verbose(|| {
        let backend = plan
            .backend
            .as_deref()
            .map(|b| format!(" ({b} backend)"))
            .unwrap_or_default();
        let time = plan
            .solve_seconds
            .map(|s| format!(" in {s:.3} s"))
            .unwrap_or_default();
        format!(
            "solved by the {} solver{backend}{time}: {} of {} placed, {}",
            plan.solver,
            plan.vms.len(),
            plural(plan.vms.len() + plan.unplaced.len(), "VM", "VMs"),
            if plan.proven { "proven" } else { "not proven" },
        )
    });
}

/// `--verbose`: the throughput tables read.
pub fn verbose_tables(files: &[std::path::PathBuf], table: &pinplan::demand::Table) {
    ui::verbose(|| {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        format!(
            "read {} from {}",
            plural(table.rows.len(), "measurement", "measurements"),
            names.join(", ")
        )
    });
}

/// Hosts a fleet command works on at once, and how long one may take.
const FLEET_CONCURRENCY: usize = 16;
const FLEET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How `report --fleet` and `doctor --fleet` go over the hosts.
pub fn survey_options(force: bool, top: usize) -> pinplan::fleet::survey::SurveyOptions {
    pinplan::fleet::survey::SurveyOptions {
        force,
        top,
        concurrency: FLEET_CONCURRENCY,
        timeout: FLEET_TIMEOUT,
        progress: host_progress,
    }
}

/// The exit status of a fleet command: success, or the worst host's.
pub fn exit_of(worst: Option<pinplan::error::Exit>) -> std::process::ExitCode {
    worst.map_or(std::process::ExitCode::SUCCESS, |e| {
        std::process::ExitCode::from(e.code())
    })
}

/// A fleet command's progress on standard error when it is a terminal
/// (and not `--quiet`): `STAGE hosts: k/N`, erased when the stage is done.
pub fn host_progress(stage: &str, k: usize, n: usize) {
    use std::io::Write as _;
    if ui::level() == ui::Level::Quiet || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return;
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[K{stage} hosts: {k}/{n}");
    if k == n {
        let _ = write!(err, "\r\x1b[K");
    }
    let _ = err.flush();
}
