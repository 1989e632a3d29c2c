//! `cargo bench -p pinplan --bench fleet_out`: `pinplan plan FLEET --out
//! DIR` of the fleet bench's fleet (1,000 synthetic hosts; 12,000 VMs by
//! default, issue 31's run) in the CLI's steps: parse, read every host and
//! plan; make every host's files and `fleet.json`; write them as one set
//! into a fresh `DIR`, then again over that set. Prints each step's time,
//! and the write's own steps (written, made durable, swapped in, earlier set
//! removed). `PINPLAN_FLEET_OUT_BEFORE=1` also writes the set as it was
//! written before issue 31 (each host's directory on its own, every file
//! fsynced) and checks both sets are the same files with the same bytes.
//! `PINPLAN_FLEET_HOSTS`, `PINPLAN_FLEET_VMS` change the size; the output
//! goes to a scratch directory in `TMPDIR`.

use pinplan::deadline::Deadline;
use pinplan::fleet::{self, FleetOptions};
use pinplan::output::{self, OutputFile};
use pinplan::spec::{AnySpec, FleetSpec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "common/fleet_spec.rs"]
mod fleet_spec;

type Error = Box<dyn std::error::Error>;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every host's files and `fleet.json` last, as `plan --out` makes them.
fn fleet_files(
    fleet: &FleetSpec,
    plan: &fleet::FleetPlan,
    dir: &Path,
) -> Result<Vec<OutputFile>, Error> {
    let mut files = Vec::new();
    for (host, outcome) in fleet.hosts.iter().zip(&plan.hosts) {
        let Some(host_plan) = &outcome.plan else {
            continue;
        };
        let host_dir = dir.join(&host.name);
        let json = host_plan.to_json();
        files.extend(output::plan_files(host_plan, &json, &host.spec, &host_dir, false)?.files);
    }
    files.push(OutputFile {
        path: dir.join("fleet.json"),
        text: plan.to_json(),
    });
    Ok(files)
}

/// The set written per host, as before issue 31: each host's directory as
/// one set of its own (every file fsynced), then `fleet.json`, each with
/// the one-host writer of today (which fsyncs each file after writing them
/// all, where the old one also fsynced the directory after each file).
fn write_per_host(files: &[OutputFile]) -> Result<(), Error> {
    let mut by_dir: Vec<(PathBuf, Vec<OutputFile>)> = Vec::new();
    for f in files {
        let parent = f.path.parent().map(Path::to_owned).unwrap_or_default();
        let file = OutputFile {
            path: f.path.clone(),
            text: f.text.clone(),
        };
        match by_dir.last_mut() {
            Some((d, set)) if *d == parent => set.push(file),
            _ => by_dir.push((parent, vec![file])),
        }
    }
    for (host_dir, set) in &by_dir {
        output::write_files(host_dir, set)?;
    }
    Ok(())
}

/// The files under `dir`, two levels, by relative path, with their bytes.
fn read_set(dir: &Path) -> Result<BTreeMap<PathBuf, Vec<u8>>, Error> {
    let mut set = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let rel = path.strip_prefix(dir)?.to_owned();
        if path.is_dir() {
            for (inner, bytes) in read_set(&path)? {
                set.insert(rel.join(inner), bytes);
            }
        } else {
            set.insert(rel, std::fs::read(&path)?);
        }
    }
    Ok(set)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn main() -> Result<(), Error> {
    let hosts = env("PINPLAN_FLEET_HOSTS", 1000);
    let vms = env("PINPLAN_FLEET_VMS", 12_000);
    let scratch = tempfile::tempdir()?;
    let path = scratch.path().join("fleet.toml");
    std::fs::write(&path, fleet_spec::spec(hosts, vms))?;

    let started = Instant::now();
    let AnySpec::Fleet(fleet) = AnySpec::load(&path)? else {
        return Err("not a fleet spec".into());
    };
    let inputs = fleet::read::read_hosts(&fleet, 16, Duration::from_secs(30), &|_, _| {});
    let deadline = Deadline::at(started + Duration::from_secs(10));
    let plan = fleet::plan_fleet(&fleet, inputs, &FleetOptions { deadline })?;
    let planned = started.elapsed();

    let dir = scratch.path().join("out");
    let clock = Instant::now();
    let files = fleet_files(&fleet, &plan, &dir)?;
    let made = clock.elapsed();
    let bytes: usize = files.iter().map(|f| f.text.len()).sum();
    println!(
        "fleet of {hosts} hosts, {vms} VMs: {} placed; {} files, {:.1} MB",
        plan.objective.placed,
        files.len(),
        bytes as f64 / 1e6
    );
    // The write's own steps are the library's debug events.
    let steps = tracing_subscriber::fmt()
        .with_env_filter("pinplan::output=debug")
        .with_writer(std::io::stdout)
        .without_time()
        .with_level(false)
        .with_target(false)
        .finish();
    let (first, again) = tracing::subscriber::with_default(steps, || {
        let clock = Instant::now();
        output::write_fleet(&dir, &files)?;
        let first = clock.elapsed();
        let clock = Instant::now();
        output::write_fleet(&dir, &files)?;
        Ok::<_, Error>((first, clock.elapsed()))
    })?;
    println!(
        "  plan (parse, read, plan) {}, files made {}, written into a fresh DIR {}, over the earlier set {}",
        secs(planned),
        secs(made),
        secs(first),
        secs(again)
    );
    println!(
        "  plan --out, fresh DIR: {} ({:.2}× the plan alone)",
        secs(planned + made + first),
        (planned + made + first).as_secs_f64() / planned.as_secs_f64()
    );
    if std::env::var_os("PINPLAN_FLEET_OUT_BEFORE").is_some() {
        let before_dir = scratch.path().join("before");
        let files = fleet_files(&fleet, &plan, &before_dir)?;
        let clock = Instant::now();
        write_per_host(&files)?;
        println!(
            "  written per host (fsync per file): {}",
            secs(clock.elapsed())
        );
        let same = read_set(&dir)? == read_set(&before_dir)?;
        println!("  the same files with the same bytes: {same}");
        if !same {
            return Err("the two sets differ".into());
        }
    }
    Ok(())
}
