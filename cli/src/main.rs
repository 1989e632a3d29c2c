//! `pinplan`: turns command-line arguments into planner calls and prints the
//! results. Exit status: 0 success, 1 "the answer is no", 2 error.

mod apply;
mod doctor;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use pinplan::demand::{self, Basis, DemandError, DemandOptions, Table, TableError};
use pinplan::topology::{self, Source, TopologyError};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "pinplan",
    version = pinplan::solve::backend::VERSION,
    about = "Plans CPU pinning for packet-processing libvirt/KVM VMs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the host's CPU topology: packages, NUMA nodes, L3 domains, cores, NICs.
    Topology(TopologyArgs),
    /// Derive a VM's vCPU demand from measured throughput tables.
    Demand(DemandArgs),
    /// Place every VM of a plan spec on the host: no core shared between tenants.
    Plan(PlanArgs),
    /// Write a planned VM's pinning as libvirt domain XML, or patch it into a domain.
    Xml(XmlArgs),
    /// Show who shares CPUs and cores now, from domain XML files (dry run).
    Report(ReportArgs),
    /// Pin running and defined VMs as a plan says: verified, all-or-nothing, reversible.
    Apply(apply::ApplyArgs),
    /// Check the host's IOMMU, VFIO groups, SR-IOV, PCIe links, NIC locality,
    /// SMT, CPU isolation and IRQ affinity, from sysfs and procfs.
    Doctor(doctor::DoctorArgs),
}

#[derive(clap::Args)]
struct ReportArgs {
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
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: ReportFormat,
    /// Colour in the text host map: `auto` on a terminal unless `NO_COLOR` is set.
    #[arg(long, value_enum, default_value = "auto")]
    color: ColorArg,
}

#[derive(Clone, Copy, ValueEnum)]
enum ColorArg {
    Auto,
    Always,
    Never,
}

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
struct XmlArgs {
    /// The plan (`pinplan plan --out DIR` writes DIR/plan.json).
    #[arg(long, value_name = "PLAN.json")]
    plan: PathBuf,
    /// The plan's VM (default: the patched domain's name, or the plan's only VM).
    #[arg(long, value_name = "NAME")]
    vm: Option<String>,
    /// Patch this domain XML (virsh dumpxml --inactive) and print it whole.
    #[arg(long, value_name = "DOMAIN.xml", conflicts_with = "connect")]
    patch: Option<PathBuf>,
    /// Read the defined domain named like the VM from libvirt and print it patched.
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// Write to FILE (atomically) instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Change the domain's vCPU count to the plan's instead of refusing.
    #[arg(long)]
    set_vcpus: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum SolverArg {
    Ilp,
    Greedy,
}

#[derive(clap::Args)]
struct PlanArgs {
    /// The plan spec (TOML, see docs/formats.md).
    spec: PathBuf,
    /// Topology source (overrides the spec's [host] source): `host`, a file, or
    /// `synthetic:DESC`.
    #[arg(long, value_name = "SRC", conflicts_with = "connect")]
    source: Option<String>,
    /// Read the topology through libvirt (overrides the spec's source).
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// The exact integer program, or the first-fit baseline.
    #[arg(long, value_enum, default_value = "ilp")]
    solver: SolverArg,
    /// Wall-clock limit for the whole command (topology, solve, explanations),
    /// in seconds; the best plan found by then is given, marked not proven.
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    time_limit: f64,
    /// Write DIR/plan.json (atomically); the directory is created if needed.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

#[derive(Clone, Copy, ValueEnum)]
enum BasisArg {
    Measured,
    Model,
}

#[derive(clap::Args)]
struct DemandArgs {
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
    /// each row not at line rate from the others and print the errors.
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
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(clap::Args)]
struct TopologyArgs {
    /// Where to read the topology: `host` (live, through hwloc), a file (hwloc XML
    /// from `lstopo --of xml`, or `virsh capabilities`), or `synthetic:DESC`.
    #[arg(
        long,
        value_name = "SRC",
        default_value = "host",
        conflicts_with = "connect"
    )]
    source: String,
    /// Read the topology through libvirt instead (`qemu:///system`,
    /// `qemu+ssh://host/system`, `test:///default`).
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// An error with a known fix (printed as `hint:` after the cause chain) and
/// its exit status: 1 for "the answer is no", 2 for bad input and errors.
struct Hinted {
    error: anyhow::Error,
    hint: Option<String>,
    code: u8,
}

impl From<TopologyError> for Hinted {
    fn from(error: TopologyError) -> Self {
        let hint = error.hint();
        Hinted {
            error: error.into(),
            hint,
            code: 2,
        }
    }
}

impl From<TableError> for Hinted {
    fn from(error: TableError) -> Self {
        Hinted {
            error: error.into(),
            hint: Some(
                "see docs/formats.md (Throughput tables) for the columns and an example".to_owned(),
            ),
            code: 2,
        }
    }
}

impl From<DemandError> for Hinted {
    fn from(error: DemandError) -> Self {
        let hint = match &error {
            DemandError::UnknownProfile { known, .. } => {
                Some(format!("profiles in the table: {}", known.join(", ")))
            }
            _ => None,
        };
        let code = if error.is_unreachable() { 1 } else { 2 };
        Hinted {
            error: error.into(),
            hint,
            code,
        }
    }
}

fn leave_one_out(table: &Table, args: &DemandArgs) -> Result<(), Hinted> {
    let checks = demand::leave_one_out(table, args.line_rate);
    let text = match args.format {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&checks).unwrap_or_default();
            text.push('\n');
            text
        }
        Format::Text => {
            let mut text =
                String::from("row\tprofile\tbytes\ttx\tmeasured G\tpredicted G\terror\n");
            for c in &checks {
                text.push_str(&format!(
                    "{}\t{}\t{}\t{}\t{:.1}\t{:.1}\t{:+.1} %\n",
                    c.row,
                    c.profile,
                    c.packet_bytes,
                    c.tx_cores,
                    c.measured_gbps,
                    c.predicted_gbps,
                    c.relative_error * 100.0
                ));
            }
            text
        }
    };
    print(&text)
}

fn demand_command(args: &DemandArgs) -> Result<(), Hinted> {
    let table = Table::load_all(&args.table)?;
    let (Some(profile), Some(target)) = (&args.profile, args.target) else {
        return leave_one_out(&table, args);
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
    };
    let result = demand::demand(&table, profile, target, &options)?;
    let text = match args.format {
        Format::Text => result.to_text(),
        Format::Json => result.to_json(),
    };
    print(&text)
}

impl From<pinplan::spec::SpecError> for Hinted {
    fn from(error: pinplan::spec::SpecError) -> Self {
        let hint = error.hint.clone();
        Hinted {
            error: error.into(),
            hint,
            code: 2,
        }
    }
}

fn io_error(error: anyhow::Error) -> Hinted {
    Hinted {
        error,
        hint: None,
        code: 2,
    }
}

/// Writes `text` to `path` through a temporary file in the same directory and
/// a rename, so that readers never see a half-written file.
fn write_atomically(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    write_atomically_with_mode(path, text, 0o644)
}

/// [`write_atomically`] with the file's permission bits (0o600 for files
/// that may hold secrets, such as an apply journal).
fn write_atomically_with_mode(path: &std::path::Path, text: &str, mode: u32) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = path.parent().unwrap_or_else(|| std::path::Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&temp)
            .with_context(|| format!("cannot create {}", temp.display()))?;
        file.write_all(text.as_bytes())
            .with_context(|| format!("cannot write {}", temp.display()))?;
        file.sync_all()
            .with_context(|| format!("cannot flush {}", temp.display()))?;
        std::fs::rename(&temp, path)
            .with_context(|| format!("cannot rename {} to {}", temp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// A libvirt failure (exit 2), with the usual first thing to check.
fn libvirt_error(message: String) -> Hinted {
    Hinted {
        error: anyhow::anyhow!(message),
        hint: Some("check that libvirtd is running and the URI is right".to_owned()),
        code: 2,
    }
}

fn bad_input(message: String, hint: Option<String>) -> Hinted {
    Hinted {
        error: anyhow::anyhow!(message),
        hint,
        code: 2,
    }
}

impl From<pinplan::libvirt::patch::PatchError> for Hinted {
    fn from(error: pinplan::libvirt::patch::PatchError) -> Self {
        Hinted {
            error: error.into(),
            hint: None,
            code: 2,
        }
    }
}

fn read_plan(path: &std::path::Path) -> Result<pinplan::plan::Plan, Hinted> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad_input(
            format!("cannot read the plan {}: {e}", path.display()),
            None,
        )
    })?;
    serde_json::from_str(&text).map_err(|e| {
        bad_input(
            format!("{}:{}: not a pinplan plan: {e}", path.display(), e.line()),
            Some("give the plan.json written by `pinplan plan SPEC --out DIR`".to_owned()),
        )
    })
}

/// The plan's VM by name, or a clear error listing the plan's VMs.
fn plan_vm<'p>(
    plan: &'p pinplan::plan::Plan,
    name: &str,
    plan_path: &std::path::Path,
) -> Result<&'p pinplan::plan::VmPlan, Hinted> {
    plan.vms.iter().find(|v| v.name == name).ok_or_else(|| {
        let placed: Vec<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
        let why = if plan.unplaced.iter().any(|u| u == name) {
            " (it was not placed: see the plan's explanations)"
        } else {
            ""
        };
        bad_input(
            format!(
                "the plan {} has no placed VM {name:?}{why}",
                plan_path.display()
            ),
            Some(format!("VMs in the plan: {}", placed.join(", "))),
        )
    })
}

fn xml_command(args: &XmlArgs) -> Result<(), Hinted> {
    use pinplan::libvirt::{emit, patch};
    let plan = read_plan(&args.plan)?;
    let input: Option<(String, String)> = match (&args.patch, &args.connect) {
        (Some(path), _) => Some((
            path.display().to_string(),
            std::fs::read_to_string(path).map_err(|e| {
                bad_input(
                    format!("cannot read the domain XML {}: {e}", path.display()),
                    None,
                )
            })?,
        )),
        (None, Some(uri)) => {
            let name = args
                .vm
                .clone()
                .or_else(|| (plan.vms.len() == 1).then(|| plan.vms[0].name.clone()));
            let name = name.ok_or_else(|| {
                bad_input(
                    "--connect needs --vm NAME: the plan has several VMs".to_owned(),
                    None,
                )
            })?;
            let xml = pinplan::libvirt::inactive_xml(uri, &name).map_err(|e| Hinted {
                error: anyhow::anyhow!(e),
                hint: Some(
                    "the domain must be defined in libvirt under the VM's name (virsh list --all)"
                        .to_owned(),
                ),
                code: 2,
            })?;
            Some((format!("{uri} domain {name}"), xml))
        }
        (None, None) => None,
    };
    let name = match (&args.vm, &input) {
        (Some(n), _) => n.clone(),
        (None, Some((source, xml))) => {
            let (name, line) = patch::domain_name(source, xml)?;
            if !plan.vms.iter().any(|v| v.name == name) {
                let names: Vec<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
                return Err(bad_input(
                    format!(
                        "{source}:{line}: the domain is named {name:?}, which is not a VM of the plan {}",
                        args.plan.display()
                    ),
                    Some(format!(
                        "pass --vm NAME to patch it with one of the plan's VMs: {}",
                        names.join(", ")
                    )),
                ));
            }
            name
        }
        (None, None) if plan.vms.len() == 1 => plan.vms[0].name.clone(),
        (None, None) => {
            let names: Vec<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
            return Err(bad_input(
                "the plan has several VMs: say which with --vm NAME".to_owned(),
                Some(format!("VMs in the plan: {}", names.join(", "))),
            ));
        }
    };
    let vm = plan_vm(&plan, &name, &args.plan)?;
    let text = match &input {
        None => emit::fragment(vm),
        Some((source, xml)) => patch::patch(
            source,
            xml,
            vm,
            &patch::PatchOptions {
                set_vcpus: args.set_vcpus,
                name_given: args.vm.is_some(),
            },
        )?,
    };
    match &args.out {
        Some(path) => write_atomically(path, &text).map_err(io_error),
        None => print(&text),
    }
}

/// Whether a libvirt URI names this machine (no host part), so that its
/// kernel command line is ours to read.
fn is_local_uri(uri: &str) -> bool {
    // qemu:///system, qemu+unix:///system: yes; qemu+ssh://h/system, test:///default: no.
    let Some((scheme, rest)) = uri.split_once("://") else {
        return false;
    };
    let transport_local = !scheme.contains('+') || scheme.ends_with("+unix");
    transport_local && rest.starts_with('/') && !scheme.starts_with("test")
}

/// The host's CPUs by `isolcpus=` on this machine's kernel command line:
/// every usable CPU not isolated, or `None` without `isolcpus=`.
fn host_cpus_from_isolcpus(
    host: &topology::HostTopology,
) -> Result<Option<pinplan::CpuSet>, Hinted> {
    let cmdline = pinplan::cmdline::KernelCmdline::read(std::path::Path::new("/"))
        .map_err(|e| bad_input(format!("cannot read /proc/cmdline: {e}"), None))?;
    pinplan::tenant::host_cpus_from_cmdline(&cmdline, host).map_err(|e| {
        bad_input(
            format!("/proc/cmdline: {e}"),
            Some("give the host's CPUs with --host-cpus CPUSET".to_owned()),
        )
    })
}

/// Colour when asked, or on `auto` when standard output is a terminal and
/// `NO_COLOR` is unset or empty.
fn use_colour(arg: ColorArg) -> bool {
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

fn report_command(args: &ReportArgs) -> Result<ExitCode, Hinted> {
    use pinplan::report;
    let source = match &args.connect {
        Some(uri) => Source::Libvirt(uri.clone()),
        None => Source::from_arg(&args.source),
    };
    let host = topology::load(&source)?;
    let plan = args.plan.as_deref().map(read_plan).transpose()?;
    let live = match &source {
        Source::LiveHost => true,
        Source::Libvirt(uri) => is_local_uri(uri),
        _ => false,
    };
    let host_cpus = match (&args.host_cpus, &plan) {
        (Some(cpus), _) => Some(
            cpus.parse::<pinplan::CpuSet>()
                .map_err(|e| bad_input(format!("--host-cpus: {e}"), None))?,
        ),
        (None, Some(plan)) if !plan.host.reserved_cpus.is_empty() => {
            Some(plan.host.reserved_cpus.clone())
        }
        (None, _) if live => host_cpus_from_isolcpus(&host)?,
        (None, _) => None,
    };
    let mut tenants = Vec::new();
    if let Some(set) = host_cpus.filter(|s| !s.is_empty()) {
        tenants.push(pinplan::tenant::host_tenant(&set));
    }
    if let Some(uri) = &args.connect {
        tenants.extend(pinplan::libvirt::domain_tenants(uri, &host).map_err(libvirt_error)?);
    }
    // --domains and --connect exclude each other: only files can repeat a domain.
    let mut seen = std::collections::BTreeMap::new();
    for path in &args.domains {
        let source_name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad_input(format!("cannot read {source_name}: {e}"), None))?;
        let tenant = pinplan::libvirt::domain::tenant_from_domain(&source_name, &text, &host)
            .map_err(|e| bad_input(e.to_string(), None))?;
        if let Some(first) = seen.insert(tenant.name.clone(), source_name.clone()) {
            return Err(bad_input(
                format!(
                    "{source_name}: domain {:?} is already given by {first}",
                    tenant.name
                ),
                Some("give each domain once".to_owned()),
            ));
        }
        tenants.push(tenant);
    }
    let result = report::Report::new(&host, tenants, plan.as_ref());
    let text = match args.format {
        ReportFormat::Text => result.to_text(&host, use_colour(args.color)),
        ReportFormat::Json => result.to_json(),
        ReportFormat::Svg => pinplan::report::svg::render(&host, &result),
    };
    print(&text)?;
    Ok(if result.has_errors() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn plan_command(args: &PlanArgs) -> Result<ExitCode, Hinted> {
    // --time-limit bounds the whole command: reading the topology counts.
    let started = std::time::Instant::now();
    if !(args.time_limit.is_finite() && args.time_limit > 0.0) {
        return Err(Hinted {
            error: anyhow::anyhow!("--time-limit must be a number of seconds above 0"),
            hint: None,
            code: 2,
        });
    }
    let spec = pinplan::spec::Spec::load(&args.spec)?;
    let source = match (&args.connect, &args.source, &spec.source) {
        (Some(uri), _, _) => Source::Libvirt(uri.clone()),
        (None, Some(src), _) => Source::from_arg(src),
        (None, None, Some(path)) => Source::File(path.clone()),
        (None, None, None) => Source::LiveHost,
    };
    let host = topology::load(&source)?;
    let (request, spec_warnings) = spec.request(host.clone())?;
    // What is left of the limit, less a little for writing the plan out.
    let left = std::time::Duration::from_secs_f64(args.time_limit)
        .saturating_sub(started.elapsed())
        .saturating_sub(std::time::Duration::from_millis(20))
        .max(std::time::Duration::from_millis(10));
    let options = pinplan::solve::SolveOptions {
        solver: match args.solver {
            SolverArg::Ilp => pinplan::solve::SolverKind::Ilp,
            SolverArg::Greedy => pinplan::solve::SolverKind::Greedy,
        },
        time_limit: left,
        explain: true,
    };
    let mut plan = pinplan::solve::solve(&request, &options);
    plan.warnings.splice(0..0, spec_warnings);
    let json = plan.to_json();
    if let Some(dir) = &args.out {
        // Everything is generated before anything is written.
        let mut files = vec![(dir.join("plan.json"), json.clone())];
        for vm in &plan.vms {
            match spec.domain_xml(&vm.name) {
                Some(path) => {
                    let xml = std::fs::read_to_string(&path).map_err(|e| {
                        bad_input(
                            format!(
                                "{}: cannot read domain_xml {}: {e}",
                                spec.file.display(),
                                path.display()
                            ),
                            None,
                        )
                    })?;
                    let patched = pinplan::libvirt::patch::patch(
                        &path.display().to_string(),
                        &xml,
                        vm,
                        &pinplan::libvirt::patch::PatchOptions {
                            set_vcpus: false,
                            name_given: true,
                        },
                    )?;
                    files.push((dir.join(format!("{}.xml", vm.name)), patched));
                }
                None => files.push((
                    dir.join(format!("{}.fragment.xml", vm.name)),
                    pinplan::libvirt::emit::fragment(vm),
                )),
            }
        }
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the output directory {}", dir.display()))
            .map_err(io_error)?;
        for (path, text) in &files {
            write_atomically(path, text).map_err(io_error)?;
        }
    }
    let text = match args.format {
        Format::Text => plan.to_text(&host),
        Format::Json => json,
    };
    print(&text)?;
    Ok(if plan.unplaced.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print(text: &str) -> Result<(), Hinted> {
    write_stdout(text)
        .context("cannot write to standard output")
        .map_err(|error| Hinted {
            error,
            hint: None,
            code: 2,
        })
}

fn topology_command(args: &TopologyArgs) -> Result<(), Hinted> {
    let source = match &args.connect {
        Some(uri) => Source::Libvirt(uri.clone()),
        None => Source::from_arg(&args.source),
    };
    let host = topology::load(&source)?;
    let text = match args.format {
        Format::Text => host.to_text(),
        Format::Json => host.to_json(),
    };
    print(&text)
}

fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn report(failure: &Hinted) {
    eprintln!("error: {}", failure.error);
    let mut causes = failure.error.chain().skip(1).peekable();
    if causes.peek().is_some() {
        eprintln!("\nCaused by:");
        for cause in causes {
            eprintln!("    {cause}");
        }
    }
    if let Some(hint) = &failure.hint {
        eprintln!("\nhint: {hint}");
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Topology(args) => topology_command(args).map(|()| ExitCode::SUCCESS),
        Command::Demand(args) => demand_command(args).map(|()| ExitCode::SUCCESS),
        Command::Plan(args) => plan_command(args),
        Command::Xml(args) => xml_command(args).map(|()| ExitCode::SUCCESS),
        Command::Report(args) => report_command(args),
        Command::Apply(args) => apply::command(args),
        Command::Doctor(args) => doctor::command(args),
    };
    match result {
        Ok(code) => code,
        Err(failure) => {
            // A closed pipe (`pinplan topology | head`) is not an error worth a message.
            let broken_pipe = failure
                .error
                .chain()
                .filter_map(|e| e.downcast_ref::<std::io::Error>())
                .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
            if broken_pipe {
                return ExitCode::SUCCESS;
            }
            report(&failure);
            ExitCode::from(failure.code)
        }
    }
}
