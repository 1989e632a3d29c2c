//! `pinplan plan`: place every VM of a spec on the host, print the plan and
//! with `--out DIR` write it with each VM's domain XML.

use super::Format;
use crate::error::{print, verdict, Failure, Usage};
use clap::ValueEnum;
use pinplan::deadline::{self, Deadline};
use pinplan::output;
use pinplan::solve::{SolveOptions, SolverKind};
use pinplan::spec::{AnySpec, FleetSpec, Spec};
use pinplan::topology::{self, Source};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum)]
enum SolverArg {
    Ilp,
    Greedy,
}

#[derive(clap::Args)]
pub struct PlanArgs {
    /// The plan spec (TOML, see `pinplan help formats`): one `[host]`, or a
    /// fleet of `[[host]]` tables (each VM's host chosen too). Optional with
    /// --connect: every domain there that carries its own request (pinplan
    /// metadata, `pinplan tag`) is planned; with a spec too, the spec's
    /// `[[vm]]` wins for a VM both name.
    spec: Option<PathBuf>,
    /// Topology source (overrides the spec's [host] source): `host`, a file, or
    /// `synthetic:DESC`. With --connect, the topology comes from here and the
    /// domains through the URI.
    #[arg(long, value_name = "SRC")]
    source: Option<String>,
    /// The host's libvirt URI (overrides the spec's [host] connect): its
    /// topology (unless --source) and every domain defined there. Running
    /// domains the spec does not name are planned around; running VMs it
    /// names stay where they run unless `movable = true`.
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// Plan around shut-off domains' config pins too (by default they are
    /// only reported).
    #[arg(long)]
    count_shut_off: bool,
    /// The exact integer program, or the first-fit baseline.
    #[arg(long, value_enum, default_value = "ilp")]
    solver: SolverArg,
    /// Wall-clock limit for the whole command (topology, solve, explanations),
    /// in seconds; the best plan found by then is given, marked not proven.
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = parse_time_limit)]
    time_limit: f64,
    /// Write DIR/plan.json (atomically); the directory is created if needed.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// With --out: resize a VM's `domain_xml` to the planned vCPU count
    /// (as the spec key `set_vcpus = true` does per VM or in [defaults]).
    #[arg(long, requires = "out")]
    set_vcpus: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// The range `--time-limit` accepts, in seconds: a millisecond to a day.
const TIME_LIMIT: (f64, f64) = (0.001, 86_400.0);

/// `--time-limit S`: a number of seconds in [`TIME_LIMIT`] (outside it a
/// duration would overflow, or the plan never come).
fn parse_time_limit(text: &str) -> Result<f64, String> {
    let (least, most) = TIME_LIMIT;
    match text.trim().parse::<f64>() {
        Ok(s) if (least..=most).contains(&s) => Ok(s),
        _ => Err(format!(
            "give a number of seconds from {least} to {most} (a day)"
        )),
    }
}

pub fn run(args: &PlanArgs) -> Result<ExitCode, Failure> {
    // --time-limit bounds the whole command: reading the topology counts.
    let deadline = Deadline::after(Duration::from_secs_f64(args.time_limit));
    let spec = match (&args.spec, &args.connect) {
        (Some(path), _) => match AnySpec::load(path)? {
            AnySpec::One(spec) => spec,
            AnySpec::Fleet(fleet) => return run_fleet(args, &fleet, deadline),
        },
        (None, Some(uri)) => Spec::without_file(uri)?,
        (None, None) => {
            return Err(Usage::new(
                "give a plan spec, or --connect URI to plan the domains there that carry their own request (pinplan tag)",
            )
            .into())
        }
    };
    // The host's URI: given, else the spec's [host] connect.
    let uri = args.connect.clone().or_else(|| spec.connect.clone());
    // Through a connection, the domains' own requests join the spec's VMs.
    let (spec, request_warnings) = match &uri {
        Some(uri) => with_domain_requests(&spec, uri)?,
        None => (spec, Vec::new()),
    };
    let given = match (&args.source, &args.connect) {
        (Some(src), _) => Some(Source::from_arg(src)),
        (None, Some(uri)) => Some(Source::Libvirt(uri.clone())),
        (None, None) => None,
    };
    if args.count_shut_off && uri.is_none() {
        return Err(Usage::new(
            "--count-shut-off counts the shut-off domains of a host read through libvirt: give --connect URI (or [host] connect in the spec)",
        )
        .into());
    }
    let host = topology::load(&spec.topology_source(given))?;
    super::verbose_host(&host);
    // Through a connection, a VM's defined domain gives its memory defaults,
    // and every domain there is planned around or kept.
    let mut domains = std::collections::BTreeMap::new();
    let mut tenants = Vec::new();
    if let Some(uri) = &uri {
        for name in spec.vms_without_domain_xml() {
            if let Ok(xml) = pinplan::libvirt::inactive_xml(uri, name) {
                domains.insert(name.to_owned(), (format!("{uri} domain {name}"), xml));
            }
        }
        tenants = pinplan::libvirt::tenants::domain_tenants(uri, &host)?;
    }
    let (request, spec_warnings, residents) = match &uri {
        Some(uri) => spec.request_running(
            host.clone(),
            &domains,
            &pinplan::spec::Running {
                uri,
                domains: &tenants,
                count_shut_off: args.count_shut_off,
            },
        )?,
        None => {
            let (request, warnings) = spec.request_with(host.clone(), &domains)?;
            (request, warnings, pinplan::spec::Residents::default())
        }
    };
    let left = deadline.solve_budget(deadline::HOST_PLAN);
    let (line, progress) = crate::progress::Line::start(left);
    let options = SolveOptions {
        solver: match args.solver {
            SolverArg::Ilp => SolverKind::Ilp,
            SolverArg::Greedy => SolverKind::Greedy,
        },
        explain: true,
        progress,
    };
    let mut plan = residents.solve(&request, &options, Deadline::after(left));
    if let Some(line) = line {
        line.finish();
    }
    plan.warnings
        .splice(0..0, request_warnings.into_iter().chain(spec_warnings));
    super::verbose_solve(&plan);
    super::warn_json(args.format, &plan.warnings);
    let json = plan.to_json();
    let mut not_written = Vec::new();
    if let Some(dir) = &args.out {
        let set = output::plan_files(&plan, &json, &spec, dir, args.set_vcpus)?;
        let written = output::write_files(dir, &set.files)?;
        crate::ui::note(&written.to_text());
        crate::ui::note(&set.notes_text());
        not_written = set.not_written;
    }
    print(&match args.format {
        Format::Text => plan.to_text(&host),
        Format::Json => json,
    })?;
    if !not_written.is_empty() {
        return Err(output::OutputError::VcpusDiffer { not_written }.into());
    }
    Ok(verdict(plan.unplaced.is_empty()))
}

/// `spec` with the requests of the domains at `uri` added (the spec's own
/// `[[vm]]` wins for a VM both name); the first invalid request stops it.
fn with_domain_requests(
    spec: &Spec,
    uri: &str,
) -> Result<(Spec, Vec<pinplan::model::Warning>), Failure> {
    let mut requests = Vec::new();
    for (_, request) in pinplan::libvirt::metadata::domain_requests(uri)? {
        requests.push(request?);
    }
    Ok(spec.with_domains(&requests)?)
}

/// Hosts read at once, and how long one may take.
const READ_CONCURRENCY: usize = 16;
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// `plan` of a fleet spec: read every host (in parallel, with a progress
/// count on a terminal), assign and plan, print the per-host summary (or
/// fleet.json), and with `--out DIR` write DIR/HOST/plan.json (and each
/// VM's files) for every host with a plan, and DIR/fleet.json, as one set.
fn run_fleet(args: &PlanArgs, fleet: &FleetSpec, deadline: Deadline) -> Result<ExitCode, Failure> {
    if args.connect.is_some() || args.source.is_some() || args.count_shut_off {
        return Err(Usage::new(
            "a fleet spec names each host's source in its [[host]] (connect or source): drop --connect/--source/--count-shut-off",
        )
        .into());
    }
    if matches!(args.solver, SolverArg::Greedy) {
        return Err(Usage::new(
            "a fleet spec is planned with the exact solver: drop --solver greedy",
        )
        .into());
    }
    let inputs =
        pinplan::fleet::read::read_hosts(fleet, READ_CONCURRENCY, READ_TIMEOUT, &|k, n| {
            super::host_progress("reading", k, n);
        });
    let left = deadline.solve_budget(deadline::FLEET_PLAN);
    let plan = pinplan::fleet::plan_fleet(
        fleet,
        inputs,
        &pinplan::fleet::FleetOptions {
            deadline: Deadline::after(left),
        },
    )?;
    super::warn_json(args.format, &plan.warnings);
    let json = plan.to_json();
    let mut not_written = Vec::new();
    if let Some(dir) = &args.out {
        // Each host's directory as `plan --out` writes one host's, and
        // fleet.json, which names them, last: one set, swapped in at once.
        let mut files = Vec::new();
        let mut notes = String::new();
        for (host, outcome) in fleet.hosts.iter().zip(&plan.hosts) {
            let Some(host_plan) = &outcome.plan else {
                continue;
            };
            let set = output::plan_files(
                host_plan,
                &host_plan.to_json(),
                &host.spec,
                &dir.join(&host.name),
                args.set_vcpus,
            )?;
            notes.push_str(&set.notes_text());
            files.extend(set.files);
            not_written.extend(set.not_written);
        }
        files.push(output::OutputFile {
            path: dir.join("fleet.json"),
            text: json.clone(),
        });
        let written = output::write_fleet(dir, &files)?;
        crate::ui::note(&written.to_text());
        // What patching the hosts' domains changed beyond the pins.
        crate::ui::note(&notes);
    }
    print(&match args.format {
        Format::Text => plan.to_text(),
        Format::Json => json,
    })?;
    if !not_written.is_empty() {
        return Err(output::OutputError::VcpusDiffer { not_written }.into());
    }
    Ok(verdict(plan.vms.iter().all(|v| v.host.is_some())))
}
