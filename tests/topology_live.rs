//! The live host read two ways — hwloc directly and libvirt's capabilities
//! through a running libvirtd — must give the same cores and CPUs; and read
//! by a pinplan confined to one CPU, the same usable CPUs and fingerprint.
//!
//! The comparison with libvirt needs a libvirtd: `scripts/test.sh` starts one
//! and sets `PINPLAN_TEST_LIBVIRT_URI`; then it runs and must pass. Without
//! the variable (a plain `cargo test` on a laptop) it says so and does
//! nothing.

use crate::util::{self, pinplan_json, text, TempDir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `(id, cpus)` of every core and `(cpu, core, online)` of every PU.
fn shape(topology: &Value) -> (Vec<String>, Vec<String>) {
    let cores = topology["cores"]
        .as_array()
        .map(|cores| {
            cores
                .iter()
                .map(|c| format!("core {} cpus {}", c["id"], c["cpus"]))
                .collect()
        })
        .unwrap_or_default();
    let pus = topology["pus"]
        .as_array()
        .map(|pus| {
            pus.iter()
                .map(|p| format!("cpu {} core {} online {}", p["cpu"], p["core"], p["online"]))
                .collect()
        })
        .unwrap_or_default();
    (cores, pus)
}

#[test]
fn hwloc_and_libvirt_agree_on_this_host() {
    let Some(uri) = util::libvirt_uri("not comparing with libvirt") else {
        return;
    };
    let hwloc = pinplan_json(&["topology", "--source", "host", "--format", "json"]);
    let libvirt = pinplan_json(&["topology", "--connect", &uri, "--format", "json"]);
    let (hwloc_cores, hwloc_pus) = shape(&hwloc);
    let (libvirt_cores, libvirt_pus) = shape(&libvirt);
    assert!(!hwloc_cores.is_empty(), "hwloc found no core");
    assert_eq!(
        hwloc_cores, libvirt_cores,
        "cores differ between hwloc and {uri}"
    );
    assert_eq!(
        hwloc_pus, libvirt_pus,
        "CPUs differ between hwloc and {uri}"
    );
    assert_eq!(
        hwloc["packages"].as_array().map(Vec::len),
        libvirt["packages"].as_array().map(Vec::len),
        "package count differs"
    );
    let node_ids = |t: &Value| -> Vec<String> {
        t["numa_nodes"]
            .as_array()
            .map(|n| {
                n.iter()
                    .map(|n| format!("{} {}", n["id"], n["cpus"]))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(node_ids(&hwloc), node_ids(&libvirt), "NUMA nodes differ");
}

/// A cgroup v1 cpuset child of this machine's hierarchy, removed when
/// dropped (once the processes run in it have exited).
struct CpusetChild(PathBuf);

impl CpusetChild {
    /// `/sys/fs/cgroup/cpuset/NAME` with `cpus`, and the root's memory
    /// nodes; `None` when there is no v1 cpuset hierarchy or it cannot be
    /// written (not root).
    fn new(name: &str, cpus: &str) -> Option<CpusetChild> {
        let root = Path::new("/sys/fs/cgroup/cpuset");
        let mems = std::fs::read_to_string(root.join("cpuset.mems")).ok()?;
        let dir = root.join(name);
        std::fs::create_dir(&dir).ok()?;
        let child = CpusetChild(dir);
        std::fs::write(child.0.join("cpuset.cpus"), cpus).ok()?;
        std::fs::write(child.0.join("cpuset.mems"), mems.trim()).ok()?;
        Some(child)
    }
}

impl Drop for CpusetChild {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir(&self.0) {
            eprintln!("cannot remove {}: {e}", self.0.display());
        }
    }
}

/// Runs `pinplan ARGS` (or `cmd` when it is not `pinplan`) through `how`, a
/// command that confines what it runs and then runs it.
fn confined(how: &[&str], cmd: &str, args: &[&str]) -> Output {
    let program = if cmd == "pinplan" {
        env!("CARGO_BIN_EXE_pinplan")
    } else {
        cmd
    };
    Command::new(how[0])
        .args(&how[1..])
        .arg(program)
        .args(args)
        .current_dir(util::repo())
        .output()
        .unwrap()
}

/// Must show (issue 27): after `pinplan isolate`, pinplan's own process may
/// use only the housekeeping CPUs. Confined that way — by its affinity
/// (`taskset -c 0`) and, on a cgroup v1 host, by a cpuset cgroup with CPU 0
/// as `isolate` leaves it — pinplan still reads every online CPU as usable
/// (the VMs may still use them) and accepts the plan it made unconfined:
/// `doctor --plan` and `isolate --plan --dry-run` do not take this host for
/// another.
#[test]
fn a_pinplan_confined_to_one_cpu_still_sees_the_whole_host() {
    // `isolate`'s live test confines the cgroups of the whole hierarchy:
    // not while ours exists.
    let _turn = util::live_guests_turn();
    let host = pinplan_json(&["topology", "--format", "json"]);
    let usable = |topology: &Value| -> Vec<u64> {
        topology["pus"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["usable"] == true)
            .map(|p| p["cpu"].as_u64().unwrap())
            .collect()
    };
    let online: Vec<u64> = host["pus"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["online"] == true)
        .map(|p| p["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(usable(&host), online, "unconfined: {host}");
    if online.len() < 2 || online[0] != 0 {
        eprintln!("confining to CPU 0 needs CPU 0 and another online: not tested here");
        return;
    }
    let dir = TempDir::new();
    let spec = dir.write(
        "spec.toml",
        "[host]\nreserved_cores = 1\n[[vm]]\nname = \"msc-confined\"\nvcpus = 1\n",
    );
    let out_dir = dir.path("out");
    util::pinplan_ok(&["plan", util::arg(&spec), "--out", util::arg(&out_dir)]);
    let plan = out_dir.join("plan.json");
    let doctor_args = ["doctor", "--plan", util::arg(&plan), "--format", "json"];
    let doctor_unconfined = util::pinplan(doctor_args).status.code();
    assert_ne!(doctor_unconfined, Some(2), "doctor --plan, unconfined");
    let state = dir.path("state");
    let isolate_args = [
        "isolate",
        "--plan",
        util::arg(&plan),
        "--dry-run",
        "--state",
        util::arg(&state),
    ];

    let name = format!("msc-confined-{}", std::process::id());
    let child = CpusetChild::new(&name, "0");
    if child.is_none() {
        eprintln!("no writable cgroup v1 cpuset hierarchy: confined by affinity only");
    }
    let procs = child
        .as_ref()
        .map(|c| c.0.join("cgroup.procs").display().to_string());
    let mut ways: Vec<(&str, Vec<&str>)> = vec![("taskset -c 0", vec!["taskset", "-c", "0"])];
    if let Some(procs) = &procs {
        // The shell joins the cgroup, then becomes the command.
        ways.push((
            "a cpuset cgroup with CPU 0",
            vec!["sh", "-c", "echo $$ > \"$0\" && exec \"$@\"", procs],
        ));
    }
    for (way, how) in &ways {
        // The confinement holds: the command run sees CPU 0 alone.
        let status = confined(how, "cat", &["/proc/self/status"]);
        let allowed = text(&status.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_owned());
        assert_eq!(
            allowed.as_deref(),
            Some("0"),
            "{way}: {}",
            text(&status.stderr)
        );

        let out = confined(how, "pinplan", &["topology", "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "{way}: {}", text(&out.stderr));
        let seen = util::stdout_json(&out);
        assert_eq!(usable(&seen), online, "{way}: {seen}");

        let out = confined(how, "pinplan", &doctor_args);
        assert_eq!(
            out.status.code(),
            doctor_unconfined,
            "{way}: doctor --plan: {}",
            text(&out.stderr)
        );
        let out = confined(how, "pinplan", &isolate_args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{way}: isolate --plan --dry-run: {}",
            text(&out.stderr)
        );
    }
}
