//! `cargo bench -p pinplan --bench fleet`: a fleet of 1,000 synthetic hosts
//! (three shapes: 2 × 2 × 16, 2 × 2 × 24 and 2 × 4 × 8 cores of 2 threads,
//! one core per node kept for the host) and 20,000 VMs (2–8 vCPUs, threads
//! = "require", one in four spread, a third at priority 1, one in ten kept
//! to every seventh host), written as a fleet spec and planned as `pinplan
//! plan` does: parse, read every host, assign, plan each host. Prints the
//! time of each step and what was reached. `PINPLAN_FLEET_HOSTS`,
//! `PINPLAN_FLEET_VMS`, `PINPLAN_FLEET_SECONDS` change the size and limit.

use pinplan::deadline::Deadline;
use pinplan::fleet::{self, FleetOptions};
use pinplan::spec::AnySpec;
use std::time::{Duration, Instant};

#[path = "common/fleet_spec.rs"]
mod fleet_spec;
use fleet_spec::spec;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hosts = env("PINPLAN_FLEET_HOSTS", 1000);
    let vms = env("PINPLAN_FLEET_VMS", 20_000);
    let limit = Duration::from_secs(env("PINPLAN_FLEET_SECONDS", 10));
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("fleet.toml");
    std::fs::write(&path, spec(hosts, vms))?;

    let started = Instant::now();
    let AnySpec::Fleet(fleet) = AnySpec::load(&path)? else {
        return Err("not a fleet spec".into());
    };
    let parsed = started.elapsed();
    let inputs = fleet::read::read_hosts(&fleet, 16, Duration::from_secs(30), &|_, _| {});
    let read = started.elapsed() - parsed;
    let deadline = Deadline::at(started + limit);
    let plan = fleet::plan_fleet(&fleet, inputs, &FleetOptions { deadline })?;
    let total = started.elapsed();
    println!(
        "fleet of {hosts} hosts, {vms} VMs (limit {} s)",
        limit.as_secs()
    );
    println!(
        "  parse {:.2} s, read hosts {:.2} s, plan {:.2} s, total {:.2} s",
        parsed.as_secs_f64(),
        read.as_secs_f64(),
        plan.solve_seconds,
        total.as_secs_f64()
    );
    let o = &plan.objective;
    println!(
        "  placed {} of {vms} (by priority {:?}), vCPUs {}, cores {}, hosts touched {}, moves {}",
        o.placed, o.placed_by_priority, o.vcpus_placed, o.cores_used, o.hosts_touched, o.moves
    );
    println!("  assignment (bounds): {:?}", plan.assignment);
    match (&plan.gap, plan.proven) {
        (_, true) => println!("  proven optimal"),
        (Some(g), false) => println!(
            "  not proven: {} reached {}, bound {}",
            g.objective, g.reached, g.bound
        ),
        (None, false) => println!("  not proven (a host's plan or the assignment stopped)"),
    }
    for w in plan.warnings.iter().take(3) {
        println!("  warning: {w}");
    }
    Ok(())
}
