//! `pinplan doctor`: turns arguments into a [`pinplan::doctor::run`] call
//! and prints the report. Exit status: 0 when no check fails, 1 when one
//! does, 2 for bad input.

use crate::{print, read_plan, Format, Hinted};
use pinplan::doctor::{self, DoctorError, DoctorOptions};
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
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

fn parse_address(text: &str) -> Result<PciAddress, String> {
    text.parse::<PciAddress>().map_err(|e| e.to_string())
}

impl From<DoctorError> for Hinted {
    fn from(error: DoctorError) -> Self {
        let hint = error.hint();
        Hinted {
            error: error.into(),
            hint,
            code: 2,
        }
    }
}

/// Runs every check and prints the report.
pub fn command(args: &DoctorArgs) -> Result<ExitCode, Hinted> {
    let plan = args.plan.as_deref().map(read_plan).transpose()?;
    let report = doctor::run(&DoctorOptions {
        root: args.root.clone(),
        plan,
        nics: args.nic.clone(),
    })?;
    let text = match args.format {
        Format::Text => report.to_text(),
        Format::Json => report.to_json(),
    };
    print(&text)?;
    Ok(if report.has_failures() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
