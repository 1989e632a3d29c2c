//! `pinplan`: parses the command line, hands each subcommand to its module
//! in [`commands`], and prints any error through [`error::Failure`]. Exit
//! status: 0 success, 1 "the answer is no", 2 error. The global `--quiet`
//! and `--verbose` set how much [`ui`] says on standard error.

mod commands;
mod env;
mod error;
mod pages;
mod progress;
mod signals;
mod ui;
mod version;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use commands::{
    apply, completions, demand, doctor, help, isolate, man, plan, repack, report, tag, topology,
    watch, xml,
};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "pinplan",
    version = version::text(),
    about = "Plans CPU pinning for packet-processing libvirt/KVM VMs",
    disable_help_subcommand = true
)]
struct Cli {
    /// Print no warnings or notes on standard error (errors, standard output
    /// and the exit status stay as they are).
    #[arg(
        short,
        long,
        global = true,
        conflicts_with = "verbose",
        display_order = 900
    )]
    quiet: bool,
    /// Say more on standard error: the build, where the topology was read
    /// from, what the solver did and how long it took.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, display_order = 901)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the host's CPU topology: packages, NUMA nodes, L3 domains, cores, NICs.
    Topology(topology::TopologyArgs),
    /// Derive a VM's vCPU demand from measured throughput tables.
    Demand(demand::DemandArgs),
    /// Place every VM of a plan spec on the host: no core shared between tenants.
    Plan(plan::PlanArgs),
    /// Write a planned VM's pinning as libvirt domain XML, or patch it into a domain.
    Xml(xml::XmlArgs),
    /// Show who shares CPUs and cores now, from domain XML files (dry run).
    Report(report::ReportArgs),
    /// Pin running and defined VMs as a plan says: verified, all-or-nothing, reversible.
    Apply(apply::ApplyArgs),
    /// Pin VMs as the host changes: a service on libvirt's domain events, its
    /// admission hook, its systemd unit.
    Watch(watch::WatchArgs),
    /// Make room for a VM, or make the free cores whole: move movable running VMs live, the fewest vCPUs.
    Repack(repack::RepackArgs),
    /// Write a domain's own request (a spec's [[vm]] keys) into its libvirt metadata.
    Tag(tag::TagArgs),
    /// Check the host's IOMMU, VFIO groups, SR-IOV, PCIe links, NIC locality,
    /// SMT, CPU isolation and IRQ affinity, from sysfs and procfs.
    Doctor(doctor::DoctorArgs),
    /// Keep the host off the plan's VM CPUs: cgroups, IRQs and workqueues at
    /// runtime (journalled, --undo), the boot-time way, or a per-VM libvirt hook.
    Isolate(isolate::IsolateArgs),
    /// Print the shell completion script for bash, zsh or fish.
    Completions(completions::CompletionsArgs),
    /// Print pinplan's man page, or write one per command into a directory.
    Man(man::ManArgs),
    /// Print the help of a command, or a reference topic: formats, policies, exit-codes.
    Help(help::HelpArgs),
}

/// pinplan's clap command, with the examples and exit status of every
/// subcommand in its help ([`pages`]).
fn cli() -> clap::Command {
    pages::decorate(Cli::command())
}

fn main() -> ExitCode {
    let started = Instant::now();
    let mut command = cli();
    let matches = command.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    ui::set_level(match (cli.quiet, cli.verbose) {
        (true, _) => ui::Level::Quiet,
        (false, 0) => ui::Level::Normal,
        (false, _) => ui::Level::Verbose,
    });
    env::install_trace(cli.verbose);
    ui::verbose(|| format!("pinplan {}", version::text()));
    // Checked before any command, so that a typo is not a silent default.
    if let Err(usage) = env::configure() {
        return error::Failure::from(usage).report();
    }
    let result = match &cli.command {
        Command::Topology(args) => topology::run(args),
        Command::Demand(args) => demand::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Xml(args) => xml::run(args),
        Command::Report(args) => report::run(args),
        Command::Apply(args) => apply::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Tag(args) => tag::run(args),
        Command::Repack(args) => repack::run(args),
        Command::Watch(args) => watch::run(args),
        Command::Isolate(args) => isolate::run(args),
        Command::Completions(args) => completions::run(args, &mut command),
        Command::Man(args) => man::run(args, &mut command),
        Command::Help(args) => help::run(args, &command),
    };
    let code = result.unwrap_or_else(|failure| failure.report());
    ui::verbose(|| format!("finished in {:.3} s", started.elapsed().as_secs_f64()));
    code
}
