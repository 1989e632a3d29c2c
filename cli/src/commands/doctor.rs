//! `pinplan doctor`: turns arguments into a [`pinplan::doctor::run`] call
//! and prints the report. Exit status: 0 when no check fails, 1 when one
//! does, 2 for bad input.

use super::Format;
use crate::error::{print, verdict, Failure};
use pinplan::doctor::{self, DoctorOptions};
use pinplan::fleet::{inventory::Inventory, survey};
use pinplan::plan::Plan;
use pinplan::topology::PciAddress;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct DoctorArgs {
    /// The directory holding sys/ and proc/: / for this machine, or an
    /// unpacked capture of another (as hwloc's HWLOC_FSROOT).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Check the host against this plan (`pinplan plan SPEC --out DIR`
    /// writes DIR/plan.json): SR-IOV VFs, SMT, isolation, IRQ affinity.
    #[arg(long, value_name = "PLAN.json")]
    plan: Option<PathBuf>,
    /// NICs to check besides the plan's (default when neither names one:
    /// every network PCI function that is not an SR-IOV VF).
    #[arg(long, value_name = "ADDR", num_args = 1.., value_parser = parse_address)]
    nic: Vec<PciAddress>,
    /// Check against a plan made for another host topology anyway (the CPUs
    /// and NUMA nodes it uses must still exist under --root); with --fleet,
    /// each host's plan.
    #[arg(long, requires = "plan")]
    force: bool,
    /// Check a host reached through libvirt (`qemu+ssh://root@b1/system`)
    /// from its PCI node devices: IOMMU groups, VFIO viability, SR-IOV VFs,
    /// PCIe links, NIC locality; the checks of the kernel's settings are
    /// skipped (they read sysfs and procfs).
    #[arg(long, value_name = "URI", conflicts_with = "root")]
    connect: Option<String>,
    /// Check every host of a fleet: a fleet plan directory (`pinplan plan
    /// FLEET.toml --out DIR`; each host against its plan) or the fleet spec.
    /// A host is read at its `doctor_root`, or at / when its URI is this
    /// machine's system libvirtd; others are named as not checked.
    #[arg(long, value_name = "DIR|SPEC", conflicts_with_all = ["root", "plan", "nic", "connect"])]
    fleet: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

fn parse_address(text: &str) -> Result<PciAddress, String> {
    text.parse::<PciAddress>().map_err(|e| e.to_string())
}

/// Runs every check and prints the report.
pub fn run(args: &DoctorArgs) -> Result<ExitCode, Failure> {
    if let Some(path) = &args.fleet {
        let inventory = Inventory::load(path)?;
        let hosts = survey::doctor(&inventory, super::survey_options(args.force, 0));
        print(&match args.format {
            Format::Text => survey::to_text(
                &hosts,
                doctor::Report::to_text,
                doctor::Report::has_failures,
                "with a failed check",
            ),
            Format::Json => survey::to_json(&hosts, "doctor", doctor::Report::to_json),
        })?;
        return Ok(super::exit_of(survey::exit(
            &hosts,
            doctor::Report::has_failures,
        )));
    }
    let plan = args.plan.as_deref().map(Plan::load).transpose()?;
    let options = DoctorOptions {
        root: args.root.clone(),
        plan,
        plan_path: args.plan.clone(),
        force: args.force,
        nics: args.nic.clone(),
    };
    let report = match &args.connect {
        Some(uri) => doctor::run_libvirt(uri, &options)?,
        None => doctor::run(&options)?,
    };
    print(&match args.format {
        Format::Text => report.to_text(),
        Format::Json => report.to_json(),
    })?;
    Ok(verdict(!report.has_failures()))
}
