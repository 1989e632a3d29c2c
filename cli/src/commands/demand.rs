//! `pinplan demand`: size a VM from measured throughput tables, or check
//! the packet-rate model on a table (`--leave-one-out`).

use super::Format;
use crate::error::{print, Failure};
use clap::ValueEnum;
use pinplan::demand::{self, Basis, DemandOptions, Table};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum)]
enum BasisArg {
    Measured,
    Model,
}

#[derive(clap::Args)]
pub struct DemandArgs {
    /// Throughput table (CSV: profile,packet_bytes,tx_cores,rx_cores,gbps[,vcpus][,note]);
    /// repeat to read several.
    #[arg(long, value_name = "FILE", required = true)]
    table: Vec<PathBuf>,
    /// The measured configuration to size (a `profile` of the table).
    #[arg(long, value_name = "NAME", required_unless_present = "leave_one_out")]
    profile: Option<String>,
    /// Target rate in Gb/s on the wire.
    #[arg(long, value_name = "GBPS", required_unless_present = "leave_one_out")]
    target: Option<f64>,
    /// Instead of a demand, check the packet-rate model on the table: predict
    /// each row not at line rate from the others and print the linear
    /// model's errors, then each model family's (linear, ceiling, power, USL,
    /// similar profile),
    /// the family chosen per profile without the row checked, and how many
    /// rows fell inside their interval.
    #[arg(long, conflicts_with_all = ["profile", "target", "basis", "packet_bytes", "min_fraction", "allow_extrapolation"])]
    leave_one_out: bool,
    /// Share of the target that is good enough (0.97 accepts 97 G for 100 G).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    min_fraction: f64,
    /// Packet size in bytes (default: the profile's only measured size).
    #[arg(long, value_name = "N")]
    packet_bytes: Option<u32>,
    /// The port's line rate in Gb/s.
    #[arg(long, value_name = "GBPS", default_value_t = 100.0)]
    line_rate: f64,
    /// Force the basis of the answer (default: measured when a row reaches the
    /// target, else the packet-rate model).
    #[arg(long, value_enum)]
    basis: Option<BasisArg>,
    /// Give the model's answer beyond line rate or 1.5x the measured core counts.
    #[arg(long)]
    allow_extrapolation: bool,
    /// Level of a model answer's interval, from the profile's leave-one-out
    /// errors (0.9: the 5 % and 95 % quantiles); the vCPU count follows its
    /// conservative end (more cores). With --leave-one-out, the level whose
    /// coverage is checked.
    #[arg(long, value_name = "P", default_value_t = 0.9)]
    confidence: f64,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

pub fn run(args: &DemandArgs) -> Result<ExitCode, Failure> {
    let table = Table::load_all(&args.table)?;
    super::verbose_tables(&args.table, &table);
    let (Some(profile), Some(target)) = (&args.profile, args.target) else {
        if !(args.confidence > 0.0 && args.confidence < 1.0) {
            return Err(demand::DemandError::BadOption(format!(
                "--confidence must be above 0 and below 1 (0.9 for 90 %), not {}",
                args.confidence
            ))
            .into());
        }
        let checks = demand::leave_one_out(&table, args.line_rate);
        let families = demand::families(&table, args.line_rate, args.confidence);
        print(&match args.format {
            Format::Json => checks.to_json_with(&families),
            Format::Text => checks.to_text() + &families.to_text(args.confidence),
        })?;
        return Ok(ExitCode::SUCCESS);
    };
    let options = DemandOptions {
        min_fraction: args.min_fraction,
        packet_bytes: args.packet_bytes,
        line_rate_gbps: args.line_rate,
        basis: args.basis.map(|b| match b {
            BasisArg::Measured => Basis::Measured,
            BasisArg::Model => Basis::Model,
        }),
        allow_extrapolation: args.allow_extrapolation,
        in_spec: false,
        confidence: args.confidence,
    };
    let result = demand::demand(&table, profile, target, &options)?;
    super::warn_json(args.format, &result.warnings);
    print(&match args.format {
        Format::Text => result.to_text(),
        Format::Json => result.to_json(),
    })?;
    Ok(ExitCode::SUCCESS)
}
