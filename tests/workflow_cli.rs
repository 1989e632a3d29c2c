//! Issue 15: the workflow as a user lives it — every step checks that the
//! plan belongs to this host, says what it did, and fits the shell. One test
//! (or more) per numbered item of the issue.

use crate::util::{self, arg, pinplan, text, TempDir};
use std::path::PathBuf;

const LAB: &str = "examples/lab/b1.toml";
const LAB_HOST: &str = "examples/lab/b1-host.xml";
/// Another real host: 2 × Xeon E5-2650L v4, 56 CPUs, 2 nodes.
const BROADWELL: &str = "tests/fixtures/hwloc-xml/x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml";

/// The lab's plan (b1: 20 CPUs, one node), written to `dir/lab/plan.json`.
fn lab_plan(dir: &TempDir) -> PathBuf {
    let out = dir.path("lab");
    let done = pinplan(["plan", LAB, "--out", arg(&out)]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done.stderr));
    out.join("plan.json")
}

/// Item 3: `report --plan` refuses a plan made for another host: by its
/// fingerprint (exit 2, both hosts named; `--force` overrides), and always
/// when the plan uses CPUs the host does not have.
#[test]
fn report_refuses_another_hosts_plan() {
    let dir = TempDir::new();
    let plan = lab_plan(&dir);
    let vm1 = "examples/lab/vm1.xml";
    // Its own host: fine (exit 0 or 1 is the report's verdict, not a refusal).
    let own = pinplan([
        "report",
        "--domains",
        vm1,
        "--source",
        LAB_HOST,
        "--plan",
        arg(&plan),
    ]);
    assert_ne!(own.status.code(), Some(2), "{}", text(&own.stderr));

    let other = pinplan([
        "report",
        "--domains",
        vm1,
        "--source",
        BROADWELL,
        "--plan",
        arg(&plan),
    ]);
    assert_eq!(other.status.code(), Some(2), "{}", text(&other.stdout));
    let stderr = text(&other.stderr);
    assert!(
        stderr.contains("this plan was made for examples/lab/b1-host.xml (fingerprint fnv1a64:")
            && stderr.contains(&format!("this host is {BROADWELL} (fingerprint fnv1a64:"))
            && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(text(&other.stdout).is_empty(), "a refusal printed a report");

    // --force: the Broadwell host has CPUs 0-19 and node 0, so it reports.
    let forced = pinplan([
        "report",
        "--domains",
        vm1,
        "--source",
        BROADWELL,
        "--plan",
        arg(&plan),
        "--force",
    ]);
    assert_ne!(forced.status.code(), Some(2), "{}", text(&forced.stderr));
    // A host without the planned CPUs is refused even with --force.
    let small = "synthetic:core:4 pu:2(indexes=2*4:1*2)";
    let missing = pinplan([
        "report",
        "--domains",
        vm1,
        "--source",
        small,
        "--plan",
        arg(&plan),
        "--force",
    ]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing.stdout));
    let stderr = text(&missing.stderr);
    // b1's plan uses CPUs 0-19 (by hand: the lab pins every core but none
    // is left idle); the synthetic host has 0-7.
    assert!(
        stderr.contains("uses CPUs 8-19, which this host (synthetic:core:4 pu:2(indexes=2*4:1*2)) does not have"),
        "{stderr}"
    );
}

/// Item 3: `doctor --plan` refuses a plan that uses CPUs or NUMA nodes the
/// root's sysfs does not list, before any NIC check.
#[test]
fn doctor_refuses_a_plan_for_cpus_the_root_lacks() {
    let dir = TempDir::new();
    let plan = lab_plan(&dir);
    let root = dir.path("root");
    for (rel, text) in [
        ("sys/devices/system/cpu/present", "0-3\n"),
        ("sys/devices/system/cpu/online", "0-3\n"),
        ("sys/devices/system/node/node0/cpulist", "0-3\n"),
        ("proc/cmdline", "quiet\n"),
    ] {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let out = pinplan(["doctor", "--root", arg(&root), "--plan", arg(&plan)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "uses CPUs 4-19, which this host ({}) does not have",
            root.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("is not a PCI device"), "{stderr}");
}

/// Item 3: `xml --connect` refuses another host's plan before it reads the
/// domain (it used to write XML that `virsh start` then refused).
#[test]
fn xml_connect_refuses_another_hosts_plan() {
    let Some(uri) = util::libvirt_uri("no live libvirt") else {
        return;
    };
    let dir = TempDir::new();
    let plan = lab_plan(&dir);
    let out = pinplan([
        "xml",
        "--plan",
        arg(&plan),
        "--vm",
        "vm1",
        "--connect",
        &uri,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("this plan was made for examples/lab/b1-host.xml")
            && stderr.contains(&format!("this host is {uri}")),
        "{stderr}"
    );
    assert!(text(&out.stdout).is_empty());
}

/// A domain XML named `name` in `dir` with its vCPUs pinned one each to `pins`.
fn pinned_domain(dir: &TempDir, name: &str, pins: &[u32]) -> PathBuf {
    let mut cputune = String::new();
    for (i, cpu) in pins.iter().enumerate() {
        cputune.push_str(&format!("    <vcpupin vcpu='{i}' cpuset='{cpu}'/>\n"));
    }
    dir.write(
        &format!("{name}.xml"),
        format!(
            "<domain type='kvm'>\n  <name>{name}</name>\n  <vcpu placement='static'>{}</vcpu>\n  \
             <cputune>\n{cputune}  </cputune>\n</domain>\n",
            pins.len()
        ),
    )
}

/// Item 4: `report --plan` exits 1 when the plan would add an error conflict
/// (it exited 0: nothing conflicts now), and 0 when the plan leaves none.
#[test]
fn report_plan_exit_status_gates_the_change() {
    let dir = TempDir::new();
    let plan = lab_plan(&dir);
    let plan_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let vm1_cpu = plan_json["vms"][0]["vcpus"][0]["cpu"].as_u64().unwrap() as u32;
    // A domain outside the plan, alone now, on a CPU the plan gives vm1.
    let other = pinned_domain(&dir, "other", &[vm1_cpu]);
    let run = |domain: &PathBuf| {
        pinplan([
            "report",
            "--domains",
            arg(domain),
            "--source",
            LAB_HOST,
            "--plan",
            arg(&plan),
            "--format",
            "json",
        ])
    };
    let out = run(&other);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report = util::stdout_json(&out);
    let errors_now = report["conflicts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["severity"] == "error")
        .count();
    assert_eq!(errors_now, 0, "{report}");
    let introduced = report["plan"]["introduced"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        introduced
            .iter()
            .any(|c| c["severity"] == "error" && c["tenants"].to_string().contains("other")),
        "{report}"
    );
    // The same domain on a CPU the plan leaves free (none: b1 is full, so
    // put it on the host's reserved CPU 0 — a host overlap, a warning only).
    let quiet = pinned_domain(&dir, "quiet", &[0]);
    let out = run(&quiet);
    let report = util::stdout_json(&out);
    let errors_after = report["plan"]["remaining"]
        .as_array()
        .into_iter()
        .chain(report["plan"]["introduced"].as_array())
        .flatten()
        .filter(|c| c["severity"] == "error")
        .count();
    assert_eq!(
        out.status.code(),
        Some(if errors_after == 0 { 0 } else { 1 }),
        "{report}"
    );
}

/// An overloaded spec on the lab host: `a` (4 cores) fits, `big` (40 vCPUs)
/// does not. Returns the plan's path.
fn partial_plan(dir: &TempDir, vms: &str) -> PathBuf {
    let spec = dir.write(
        "partial.toml",
        format!(
            "[host]\nsource = {:?}\nreserved_cores = 1\n{vms}",
            util::repo().join(LAB_HOST)
        ),
    );
    let out = dir.path("partial");
    let done = pinplan(["plan", arg(&spec), "--out", arg(&out)]);
    assert_eq!(done.status.code(), Some(1), "{}", text(&done.stderr));
    out.join("plan.json")
}

/// Item 5: a plan that places no VM says "nothing to apply" (exit 1) before
/// connecting; `xml` says the plan places no VM (it said "several VMs"), and
/// notes the VMs a plan leaves out.
#[test]
fn plans_that_leave_vms_unplaced_say_so() {
    let dir = TempDir::new();
    let none = partial_plan(&dir, "[[vm]]\nname = \"big\"\nvcpus = 40\n");
    // The URI is never reached: the refusal comes first.
    let out = pinplan([
        "apply",
        arg(&none),
        "--connect",
        "qemu+ssh://nowhere.invalid/system",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("nothing to apply: the plan")
            && text(&out.stderr).contains("places no VM (not placed: big)"),
        "{}",
        text(&out.stderr)
    );
    let out = pinplan(["xml", "--plan", arg(&none)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("the plan places no VM (not placed: big)"),
        "{}",
        text(&out.stderr)
    );

    let some = partial_plan(
        &dir,
        "[[vm]]\nname = \"a\"\nvcpus = 8\n[[vm]]\nname = \"big\"\nvcpus = 40\n",
    );
    let out = pinplan(["xml", "--plan", arg(&some)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("the plan does not place big"),
        "{}",
        text(&out.stderr)
    );
}

/// Item 10: the default thread policy is `prefer`, so a default spec plans on
/// a host without SMT and for a 1-vCPU VM (with `require` both failed).
#[test]
fn default_thread_policy_plans_on_hosts_without_smt() {
    let dir = TempDir::new();
    let spec = dir.write(
        "nosmt.toml",
        "[host]\nsource = \"synthetic:package:1 core:4 pu:1\"\nreserved_cores = 1\n\
         [[vm]]\nname = \"one\"\nvcpus = 1\n[[vm]]\nname = \"two\"\nvcpus = 2\n",
    );
    let out = pinplan(["plan", arg(&spec), "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan = util::stdout_json(&out);
    assert_eq!(plan["vms"][0]["threads"], "prefer", "{plan}");
    assert_eq!(plan["unplaced"].as_array().map(Vec::len), Some(0), "{plan}");
    // `require` stays available, and still refuses one-thread cores.
    let strict = dir.write(
        "strict.toml",
        "[host]\nsource = \"synthetic:package:1 core:4 pu:1\"\nreserved_cores = 1\n\
         [defaults]\nthreads = \"require\"\n[[vm]]\nname = \"one\"\nvcpus = 1\n",
    );
    let out = pinplan(["plan", arg(&strict), "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

/// Item 8: `report` says when it knows no CPUs as the host's (so host
/// overlap is not checked), in text and JSON; and which CPUs it counts when
/// it knows them.
#[test]
fn report_says_which_cpus_are_the_hosts() {
    let dir = TempDir::new();
    let vm = pinned_domain(&dir, "vm", &[1]);
    let unknown = "host CPUs: unknown (no isolcpus=, no --host-cpus): host overlap not checked";
    let out = pinplan(["report", "--domains", arg(&vm), "--source", LAB_HOST]);
    assert!(text(&out.stdout).contains(unknown), "{}", text(&out.stdout));
    let out = pinplan([
        "report",
        "--domains",
        arg(&vm),
        "--source",
        LAB_HOST,
        "--format",
        "json",
    ]);
    let report = util::stdout_json(&out);
    assert_eq!(report["host_cpus"], serde_json::Value::Null, "{report}");
    assert_eq!(report["notes"][0], unknown, "{report}");
    let out = pinplan([
        "report",
        "--domains",
        arg(&vm),
        "--source",
        LAB_HOST,
        "--host-cpus",
        "0,10",
    ]);
    assert!(
        text(&out.stdout).contains("\nhost CPUs: 0,10\n"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        !text(&out.stdout).contains("unknown"),
        "{}",
        text(&out.stdout)
    );
    // The live host, when its kernel has no isolcpus= (this machine's case).
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    if !cmdline.contains("isolcpus=") {
        let live = pinplan(["report", "--domains", arg(&pinned_domain(&dir, "v0", &[0]))]);
        assert!(
            text(&live.stdout).contains(unknown),
            "{}",
            text(&live.stdout)
        );
    }
}

/// Item 9: a domain with vCPU 0 pinned and vCPU 1 not is one `floating`
/// finding for that vCPU plus the real conflicts of its pinned vCPU — not
/// cpu-shared/core-shared/host-overlap errors against everyone. Issue 27:
/// that one finding is an error, as the vCPU may run on the cores the
/// others and the host hold, and names them.
#[test]
fn partial_pins_are_one_floating_finding() {
    let dir = TempDir::new();
    let partial = dir.write(
        "partial.xml",
        "<domain type='kvm'>\n  <name>partial</name>\n  <vcpu placement='static'>2</vcpu>\n  \
         <cputune>\n    <vcpupin vcpu='0' cpuset='1'/>\n    <emulatorpin cpuset='0'/>\n  \
         </cputune>\n</domain>\n",
    );
    // Others: one on CPU 5, one on CPU 1 (a real cpu-shared with vCPU 0).
    let five = pinned_domain(&dir, "five", &[5]);
    let one = pinned_domain(&dir, "one", &[1]);
    let out = pinplan([
        "report",
        "--domains",
        arg(&partial),
        arg(&five),
        arg(&one),
        "--source",
        LAB_HOST,
        "--host-cpus",
        "0,10",
        "--format",
        "json",
    ]);
    let report = util::stdout_json(&out);
    let conflicts = report["conflicts"].as_array().cloned().unwrap_or_default();
    let involving = |kind: &str| {
        conflicts
            .iter()
            .filter(|c| c["kind"] == kind && c["tenants"].to_string().contains("partial"))
            .count()
    };
    // One finding about partial (five's and one's emulators, not pinned,
    // float over it and are theirs).
    let about_partial: Vec<_> = conflicts
        .iter()
        .filter(|c| c["kind"] == "floating" && c["tenants"][0] == "partial")
        .collect();
    assert_eq!(about_partial.len(), 1, "{report}");
    let floating = about_partial[0];
    // b1's core c is CPUs c and c+10.
    assert_eq!(floating["severity"], "error", "{report}");
    assert_eq!(
        floating["message"],
        "partial's vCPU 1 is not pinned: it can run on CPUs 0-1,5,10-11,15, the cores of \
         five (cpus 5), one (cpus 1) and the host (cpus 0,10); pin it (pinplan plan --connect, \
         then apply)"
    );
    assert_eq!(
        floating["tenants"],
        serde_json::json!(["partial", "five", "one", "host"])
    );
    // The real conflict of its pinned vCPU 0 with `one` stays; no other
    // error with `five` (vCPU 1 floating over CPU 5 made cpu-shared and
    // core-shared).
    assert_eq!(involving("cpu-shared"), 1, "{report}");
    let five_errors = conflicts
        .iter()
        .filter(|c| c["severity"] == "error" && c["kind"] != "floating")
        .filter(|c| {
            let t = c["tenants"].to_string();
            t.contains("five") && t.contains("partial")
        })
        .count();
    assert_eq!(five_errors, 0, "{report}");
    assert_eq!(involving("host-overlap"), 0, "{report}");
}

/// Item 13: hints that point the right way: `--source hots` suggests
/// `host`; a cpuset `0-` gets a fix as `3-1` does.
#[test]
fn hints_point_the_right_way() {
    let out = pinplan(["topology", "--source", "hots"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("did you mean `--source host`?"),
        "{}",
        text(&out.stderr)
    );
    let out = pinplan([
        "report",
        "--domains",
        "examples/lab/vm1.xml",
        "--source",
        LAB_HOST,
        "--host-cpus",
        "0-",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("range \"0-\" in \"0-\" has no end: write both ends, e.g. 0-3"),
        "{}",
        text(&out.stderr)
    );
}

/// A table with one profile measured at 64 B (tops out at 24.2 G) and at
/// 1518 B (24.8 G).
const TWO_SIZES: &str = "profile,packet_bytes,tx_cores,rx_cores,gbps,vcpus\n\
    p,64,1,1,12.1G,3\np,64,2,1,24.2G,4\np,1518,1,1,24.8G,3\n";

/// Item 12: demand refusals point the right way — the top of the table at
/// the packet size asked for, and inside a spec the spec's keys
/// (`line_rate_gbps`, the new `allow_extrapolation`), not `demand`'s flags.
#[test]
fn demand_messages_point_the_right_way() {
    let dir = TempDir::new();
    let table = dir.write("t.csv", TWO_SIZES);
    let out = pinplan([
        "demand",
        "--table",
        arg(&table),
        "--profile",
        "p",
        "--target",
        "100",
        "--packet-bytes",
        "64",
        "--basis",
        "measured",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the table tops out at 24.2 G (p "),
        "{stderr}"
    );
    assert!(!stderr.contains("24.8 G"), "{stderr}");

    // In a spec: 200 G is beyond the 100 G line rate.
    let spec = |extra: &str| {
        format!(
            "[host]\nsource = \"synthetic:package:1 core:16 pu:2\"\nreserved_cores = 1\ntables = [\"t.csv\"]\n\
             [[vm]]\nname = \"vm1\"\nprofile = \"p\"\ntarget_gbps = 200\npacket_bytes = 64\n{extra}"
        )
    };
    let refused = dir.write("refused.toml", spec(""));
    let out = pinplan(["plan", arg(&refused)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("line rate ([host] line_rate_gbps)")
            && stderr.contains("set allow_extrapolation = true for the VM"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("--line-rate") && !stderr.contains("--allow-extrapolation"),
        "{stderr}"
    );
    // The key does what the hint says.
    let allowed = dir.write("allowed.toml", spec("allow_extrapolation = true\n"));
    let out = pinplan(["plan", arg(&allowed), "--format", "json"]);
    assert_ne!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// Shell conventions: `demand --leave-one-out` prints an aligned table and a
/// summary like the other commands (it printed tab-separated lines only).
/// Errors by hand (docs/demand-model.md): +1.04, -1.03, +2.04, +2.04 %;
/// mean 1.54 %, worst the first +2.04 % (row 7).
#[test]
fn leave_one_out_prints_a_table_and_a_summary() {
    let out = pinplan([
        "demand",
        "--table",
        "examples/lab/b1-tx-cores.csv",
        "--leave-one-out",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(!stdout.contains('\t'), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    // The linear model's table and summary, then the model families' block
    // (issue 32): a heading, five families (the similar profile with no
    // row: the lab's two profiles were measured at different sizes), the
    // chosen one, the intervals.
    assert_eq!(lines.len(), 14, "{stdout}");
    assert!(lines[6].starts_with("by model family"), "{stdout}");
    assert!(lines[7].trim_start().starts_with("linear"), "{stdout}");
    // Columns line up: "error" ends where every row's error ends.
    let end = lines[0].len();
    assert!(lines[1..5].iter().all(|l| l.len() == end), "{stdout}");
    assert_eq!(
        lines[5],
        "4 rows predicted from the others: mean |error| 1.5 %, worst +2.0 % \
         (examples/lab/b1-tx-cores.csv:7)"
    );
}

/// Shell conventions: the plan table's columns stay in line with long VM
/// names and CPU lists (they pushed every later column out of line).
#[test]
fn plan_table_columns_fit_long_names() {
    let dir = TempDir::new();
    let spec = dir.write(
        "long.toml",
        "[host]\nsource = \"synthetic:package:2 numa:1 core:16 pu:2(indexes=2*32:1*2)\"\n\
         reserved_cores = 1\n[defaults]\nthreads = \"isolate\"\n\
         [[vm]]\nname = \"a-rather-long-vm-name-for-testing\"\nvcpus = 12\n\
         [[vm]]\nname = \"b\"\nvcpus = 3\n",
    );
    let out = pinplan(["plan", arg(&spec)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let table: Vec<&str> = stdout.lines().skip(2).take(3).collect();
    // Every column starts at the same offset in the header and both rows.
    let starts = |line: &str, word: &str| line.find(word).unwrap_or(usize::MAX);
    let threads = starts(table[0], "threads");
    assert!(
        table[1..].iter().all(|l| starts(l, "isolate") == threads),
        "{stdout}"
    );
    let nodes = starts(table[0], "nodes");
    assert_eq!(table[1].as_bytes().get(nodes), Some(&b'0'), "{stdout}");
    assert_eq!(table[2].as_bytes().get(nodes), Some(&b'0'), "{stdout}");
}
