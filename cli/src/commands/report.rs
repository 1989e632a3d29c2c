//! `pinplan report`: who shares CPUs and cores now (from domain XML files or
//! a libvirt connection), and with `--plan` what the plan would change.

use super::{use_colour, ColorArg};
use crate::error::{print, verdict, Failure, Usage};
use clap::ValueEnum;
use pinplan::fleet::{inventory::Inventory, survey};
use pinplan::libvirt::{tenants, tenants::Domains};
use pinplan::plan::Plan;
use pinplan::report::connected::{self, Connected};
use pinplan::report::{self, Report};
use pinplan::topology::{self, Source};
use pinplan::CpuSet;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    /// Summary, conflicts and a host map (colour on a terminal unless NO_COLOR).
    Text,
    /// `{"tenants", "conflicts", "moves"[, "plan"]}`.
    Json,
    /// A picture of the host coloured by tenant.
    Svg,
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Domain XML files (virsh dumpxml) of the tenants to check.
    #[arg(long, value_name = "FILE", num_args = 1.., required_unless_present_any = ["connect", "fleet"])]
    domains: Vec<PathBuf>,
    /// Read every domain (running: live pins; defined: config) and the
    /// topology from libvirt instead.
    #[arg(long, value_name = "URI", conflicts_with_all = ["domains", "source"])]
    connect: Option<String>,
    /// Report on every host of a fleet through its URI: a fleet plan
    /// directory (`pinplan plan FLEET.toml --out DIR`; each host compared
    /// with its plan) or the fleet spec.
    #[arg(long, value_name = "DIR|SPEC", conflicts_with_all = ["domains", "source", "connect", "plan", "host_cpus"])]
    fleet: Option<PathBuf>,
    /// Topology source: `host`, a file, or `synthetic:DESC`.
    #[arg(long, value_name = "SRC", default_value = "host")]
    source: String,
    /// The host's own CPUs (default: the plan's reserved CPUs, else on the
    /// live host the CPUs not in `isolcpus=`).
    #[arg(long, value_name = "CPUSET")]
    host_cpus: Option<String>,
    /// Compare with a plan (plan.json): which threads move, which conflicts go.
    #[arg(long, value_name = "PLAN.json")]
    plan: Option<PathBuf>,
    /// Compare with a plan made for another host topology anyway (the CPUs
    /// and NUMA nodes it uses must still exist); with --fleet, each host's
    /// plan.
    #[arg(long, requires = "plan")]
    force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: ReportFormat,
    /// On this machine's system libvirtd (--connect qemu:///system): how
    /// many stray threads to list, busiest first.
    #[arg(long, value_name = "N", default_value_t = 10)]
    top: usize,
    /// Colour in the text host map: `auto` on a terminal unless `NO_COLOR` is set.
    #[arg(long, value_enum, default_value = "auto")]
    color: ColorArg,
}

pub fn run(args: &ReportArgs) -> Result<ExitCode, Failure> {
    if let Some(path) = &args.fleet {
        return run_fleet(path, args);
    }
    let plan = args.plan.as_deref().map(Plan::load).transpose()?;
    let given = args
        .host_cpus
        .as_deref()
        .map(|text| {
            text.parse::<CpuSet>().map_err(|e| Usage {
                message: "--host-cpus is not a CPU list".to_owned(),
                hint: Some("give CPUs as libvirt writes them, e.g. 0-1,28-29".to_owned()),
                cause: Some(Box::new(e)),
            })
        })
        .transpose()?;
    let (host, result) = if let Some(uri) = &args.connect {
        let (host, result) = connected::report(&Connected {
            uri,
            plan: args.plan.as_deref().zip(plan.as_ref()),
            force: args.force,
            host_cpus: given.as_ref(),
            top: args.top,
        })?;
        super::verbose_host(&host);
        (host, result)
    } else {
        let source = super::source(None, &args.source);
        let host = topology::load(&source)?;
        super::verbose_host(&host);
        if let (Some(plan), Some(path)) = (&plan, &args.plan) {
            plan.check_host(path, &host, args.force)?;
        }
        let live = matches!(source, Source::LiveHost);
        let host_cpus = tenants::host_cpus(&host, given.as_ref(), plan.as_ref(), live)?;
        let tenants = tenants::tenants(&host, host_cpus.as_ref(), Domains::Files(&args.domains))?;
        report::check_pins(&host, &tenants)?;
        let result = Report::new(&host, tenants, plan.as_ref());
        (host, result)
    };
    print(&match args.format {
        ReportFormat::Text => result.to_text(&host, use_colour(args.color)),
        ReportFormat::Json => result.to_json(),
        ReportFormat::Svg => report::svg::render(&host, &result, plan.as_ref()),
    })?;
    Ok(verdict(!result.has_errors()))
}

/// `report --fleet`: every host's report through its URI, per host.
fn run_fleet(path: &std::path::Path, args: &ReportArgs) -> Result<ExitCode, Failure> {
    let inventory = Inventory::load(path)?;
    let hosts = survey::report(&inventory, super::survey_options(args.force, args.top));
    let colour = use_colour(args.color);
    print(&match args.format {
        ReportFormat::Text => survey::to_text(
            &hosts,
            |(host, r)| r.to_text(host, colour),
            |(_, r)| r.has_errors(),
            "with errors",
        ),
        ReportFormat::Json => survey::to_json(&hosts, "report", |(_, r)| r.to_json()),
        ReportFormat::Svg => {
            return Err(Usage::new("--fleet reports as text or json: one picture per host is `pinplan report --connect URI --format svg`").into())
        }
    })?;
    Ok(super::exit_of(survey::exit(&hosts, |(_, r)| {
        r.has_errors()
    })))
}
