//! `pinplan report`: who shares CPUs and cores now (from domain XML files or
//! a libvirt connection), and with `--plan` what the plan would change.

use super::{use_colour, ColorArg};
use crate::error::{print, verdict, Failure, Usage};
use clap::ValueEnum;
use pinplan::libvirt::{self, tenants, tenants::Domains};
use pinplan::plan::Plan;
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
    #[arg(long, value_name = "FILE", num_args = 1.., required_unless_present = "connect")]
    domains: Vec<PathBuf>,
    /// Read every domain (running: live pins; defined: config) and the
    /// topology from libvirt instead.
    #[arg(long, value_name = "URI", conflicts_with_all = ["domains", "source"])]
    connect: Option<String>,
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
    /// and NUMA nodes it uses must still exist).
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
    let source = super::source(args.connect.as_ref(), &args.source);
    let host = topology::load(&source)?;
    super::verbose_host(&host);
    let plan = args.plan.as_deref().map(Plan::load).transpose()?;
    if let (Some(plan), Some(path)) = (&plan, &args.plan) {
        plan.check_host(path, &host, args.force)?;
    }
    let live = match &source {
        Source::LiveHost => true,
        Source::Libvirt(uri) => libvirt::is_local_uri(uri),
        _ => false,
    };
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
    let host_cpus = tenants::host_cpus(&host, given.as_ref(), plan.as_ref(), live)?;
    let domains = match &args.connect {
        Some(uri) => Domains::Connect(uri),
        None => Domains::Files(&args.domains),
    };
    let tenants = tenants::tenants(&host, host_cpus.as_ref(), domains)?;
    let mut result = Report::new(&host, tenants, plan.as_ref());
    if let Some(uri) = &args.connect {
        result.notes.extend(tenants::pending_pins(uri, &host)?);
        if libvirt::is_local_system_uri(uri) {
            result.add_live_host(std::path::Path::new("/"), args.top);
        }
    }
    print(&match args.format {
        ReportFormat::Text => result.to_text(&host, use_colour(args.color)),
        ReportFormat::Json => result.to_json(),
        ReportFormat::Svg => report::svg::render(&host, &result, plan.as_ref()),
    })?;
    Ok(verdict(!result.has_errors()))
}
