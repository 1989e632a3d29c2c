//! Issue 28: a crash of the MIP backend is an error, not a dead process.
//! Every solve runs in a child process (the thread's solver worker); with the `fault-injection` feature
//! (`cargo test --features pinplan-cli/fault-injection`, as scripts/test.sh
//! runs them; without it these tests fail, never skip),
//! `PINPLAN_FAULT_SOLVER=abort:N` (`kill:N`, `hang:N`) makes the worker of the
//! N-th solve abort (be killed, hang); `abort:N+` every solve from the N-th. `pinplan plan` must still answer: exit
//! 0 or 1, never a signal, with the plan it fell back to (complete, no CPU
//! shared), not proven, and a warning that names the crash.

use crate::util::{self, describe, plan_json, stdout_json, text};
use serde_json::Value;
use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

/// Six VMs, one left out, whose first objective needs a real solve: crashes
/// cost the proof.
const SPEC: &str = "tests/fixtures/inputs/split-vms.toml";

fn needs_the_feature() {
    if !cfg!(feature = "fault-injection") {
        panic!("run with --features pinplan-cli/fault-injection (scripts/test.sh does)");
    }
}

/// `pinplan plan SPEC --format json ARGS` with `PINPLAN_FAULT_SOLVER=fault`:
/// its exit code (0 or 1, else the test fails), its plan and its stderr.
fn plan_with_fault(fault: &str, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["plan", SPEC, "--format", "json"];
    all.extend_from_slice(args);
    let out = util::command()
        .args(&all)
        .env("PINPLAN_FAULT_SOLVER", fault)
        .output()
        .expect("cannot run pinplan");
    let run = describe(&all, &out);
    assert_eq!(out.status.signal(), None, "pinplan died by a signal: {run}");
    let code = out.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 1, "exit {code}: {run}");
    (code, stdout_json(&out), text(&out.stderr))
}

/// Every VM of the spec placed or listed as unplaced, none twice; no CPU or
/// core given to two VMs, none of the host's reserved CPUs to a vCPU.
fn check_complete_and_sound(plan: &Value) {
    let names = |key: &str| -> Vec<String> {
        plan[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                v["name"]
                    .as_str()
                    .unwrap_or_else(|| v.as_str().unwrap())
                    .to_owned()
            })
            .collect()
    };
    let mut all = names("vms");
    all.extend(names("unplaced"));
    all.sort();
    assert_eq!(all, ["a", "b", "c", "d", "e", "f"], "{plan}");
    let reserved = util::cpuset(plan["host"]["reserved_cpus"].as_str().unwrap());
    let (mut cpus, mut cores) = (BTreeSet::new(), BTreeSet::new());
    for vm in plan["vms"].as_array().unwrap() {
        let mine = util::cpuset(vm["cpus"].as_str().unwrap());
        for pin in vm["vcpus"].as_array().unwrap() {
            let cpu = u32::try_from(pin["cpu"].as_u64().unwrap()).unwrap();
            assert!(mine.contains(&cpu), "vCPU pinned off its VM's CPUs: {vm}");
        }
        assert!(mine.is_disjoint(&reserved), "a reserved CPU given to {vm}");
        assert!(cpus.is_disjoint(&mine), "a CPU given twice: {plan}");
        cpus.extend(mine);
        for core in vm["cores"].as_array().unwrap() {
            assert!(
                cores.insert(core.as_u64().unwrap()),
                "core {core} given twice: {plan}"
            );
        }
    }
}

/// The spec's plan is proven when nothing crashes (one VM left out: exit 1,
/// "infeasible"): what the crash changes below is the crash's doing.
#[test]
fn the_crash_spec_is_proven_without_a_fault() {
    let plan = plan_json(1, &[SPEC]);
    assert_eq!(plan["status"], "infeasible", "{plan}");
    assert_eq!(plan["proven"], true, "{plan}");
    check_complete_and_sound(&plan);
}

/// Every solve's child aborts (as CBC 2.10's failed assertions do) or is
/// killed (as by the OOM killer) — one crash alone can be made good by the
/// next model (the compact one's objective 7 by the exact one's): the plan
/// falls back to the best placement
/// found before, says it is not proven, and names the crash and its signal,
/// in the JSON and on stderr.
#[test]
fn a_crashed_solve_gives_the_fallback_plan_and_a_warning() {
    needs_the_feature();
    for (fault, signal) in [
        ("abort:1+", "signal 6 (SIGABRT)"),
        ("kill:1+", "signal 9 (SIGKILL)"),
    ] {
        let (_, plan, stderr) = plan_with_fault(fault, &[]);
        check_complete_and_sound(&plan);
        assert_ne!(plan["status"], "optimal", "{fault}: {plan}");
        assert_eq!(plan["proven"], false, "{fault}: {plan}");
        let backend = plan["backend"].as_str().unwrap();
        let crash = format!("the MIP backend ({backend}) died with {signal}");
        let warnings: Vec<&str> = plan["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        let warning = warnings
            .iter()
            .find(|w| w.starts_with(&crash))
            .unwrap_or_else(|| panic!("{fault}: no warning names the crash: {warnings:?}"));
        assert!(warning.contains("not proven optimal"), "{warning}");
        // The crash is why: no time-limit warning besides.
        assert!(
            !warnings.iter().any(|w| w.contains("within the time limit")),
            "{warnings:?}"
        );
        assert!(stderr.contains(&format!("warning: {crash}")), "{stderr}");
    }
}

/// A child that hangs past its time limit is killed by the watchdog: the
/// whole command still keeps to `--time-limit`, with the best plan found
/// before, marked not proven within the time limit.
#[test]
fn a_hung_solve_is_killed_within_the_time_limit() {
    needs_the_feature();
    let started = Instant::now();
    let (_, plan, _) = plan_with_fault("hang:1", &["--time-limit", "1"]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    check_complete_and_sound(&plan);
    assert_eq!(plan["proven"], false, "{plan}");
    let warnings = plan["warnings"].to_string();
    assert!(
        warnings.contains("not proven optimal within the time limit"),
        "{warnings}"
    );
}
