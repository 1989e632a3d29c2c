//! `pinplan`: parses the command line, hands each subcommand to its module
//! in [`commands`], and prints any error through [`error::Failure`]. Exit
//! status: 0 success, 1 "the answer is no", 2 error.

mod commands;
mod error;
mod version;

use clap::{Parser, Subcommand};
use commands::{apply, demand, doctor, plan, report, topology, xml};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "pinplan",
    version = version::text(),
    about = "Plans CPU pinning for packet-processing libvirt/KVM VMs"
)]
struct Cli {
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
    /// Check the host's IOMMU, VFIO groups, SR-IOV, PCIe links, NIC locality,
    /// SMT, CPU isolation and IRQ affinity, from sysfs and procfs.
    Doctor(doctor::DoctorArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Topology(args) => topology::run(args),
        Command::Demand(args) => demand::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Xml(args) => xml::run(args),
        Command::Report(args) => report::run(args),
        Command::Apply(args) => apply::run(args),
        Command::Doctor(args) => doctor::run(args),
    };
    result.unwrap_or_else(|failure| failure.report())
}
