//! vCPU roles, `emulator = "with-housekeeping"`, real-time vCPUs and the
//! guest-side DPDK map (issue 18): the lab example re-planned with roles,
//! a real 2-node fixture with the emulator on the housekeeping core, the
//! real-time XML validated and started on real KVM, and the spec errors.

use crate::util::{self, pinplan, text, TempDir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The vCPUs of `vm` with role `role`, as guest ids.
fn with_role(vm: &Value, role: &str) -> Vec<u64> {
    vm["vcpus"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == role)
        .map(|p| p["vcpu"].as_u64().unwrap())
        .collect()
}

/// Must show: the lab example re-planned with roles. vm1 is 1 main + 1 rx +
/// 12 tx vCPUs (the table's 12 tx + 1 rx cores, plus one), vm2 1 + 1 + 2;
/// the guest file's EAL core list and pktgen map are those roles, checked
/// against the plan JSON here, not against the program's own text.
#[test]
fn the_lab_example_has_roles_and_a_matching_dpdk_map() {
    let dir = TempDir::new();
    let out_dir = dir.path("out");
    let out = pinplan(["plan", "examples/lab/b1.toml", "--out", util::arg(&out_dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("plan.json")).unwrap()).unwrap();
    let vm1 = &plan["vms"][0];
    assert_eq!(vm1["name"], "vm1");
    assert_eq!(with_role(vm1, "main"), [0]);
    assert_eq!(with_role(vm1, "rx"), [1]);
    assert_eq!(with_role(vm1, "tx"), (2..=13).collect::<Vec<u64>>());
    let vm2 = &plan["vms"][1];
    assert_eq!(
        (
            with_role(vm2, "main"),
            with_role(vm2, "rx"),
            with_role(vm2, "tx")
        ),
        (vec![0], vec![1], vec![2, 3])
    );
    let guest = std::fs::read_to_string(out_dir.join("vm1.guest.txt")).unwrap();
    // From the roles above: lcores 0-13, main 0, rx 1, tx 2-13.
    for line in [
        "roles: main 0, rx 1, tx 2-13",
        "guest kernel: isolcpus=managed_irq,domain,1-13 nohz_full=1-13 rcu_nocbs=1-13",
        "EAL: -l 0-13 --main-lcore 0",
        "testpmd: dpdk-testpmd -l 0-13 --main-lcore 0 -- --nb-cores=13",
        "pktgen: pktgen -l 0-13 --main-lcore 0 -- -m \"[1:2-13].0\"",
    ] {
        assert!(
            guest.lines().any(|l| l == line),
            "{line:?} not in:\n{guest}"
        );
    }
    // `xml --guest --format json` says the same.
    let out = pinplan([
        "xml",
        "--plan",
        util::arg(&out_dir.join("plan.json")),
        "--guest",
        "--vm",
        "vm2",
        "--format",
        "json",
    ]);
    let maps = util::stdout_json(&out);
    assert_eq!(maps[0]["eal"], "-l 0-3 --main-lcore 0");
    assert_eq!(maps[0]["pktgen"], "-m \"[1:2-3].0\"");
    assert_eq!(maps[0]["tx"], "2-3");
}

/// Must show: on a bigger real fixture (2 nodes of 6 cores × 2 threads)
/// with `emulator = "with-housekeeping"`, the emulator shares the main
/// vCPU's core and nothing else, and no rx/tx vCPU sits on a core with a
/// main vCPU, an emulator thread or another tenant.
#[test]
fn with_housekeeping_keeps_the_emulator_on_the_main_core_only() {
    let dir = TempDir::new();
    let host = util::fixture("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let spec = dir.write(
        "s.toml",
        format!(
            "[host]\nsource = \"{}\"\nreserved_cores = 1\n[defaults]\nthreads = \"require\"\n\
             emulator = \"with-housekeeping\"\nhousekeeping_vcpus = 1\n\
             [[vm]]\nname = \"a\"\nvcpus = 7\n[[vm]]\nname = \"b\"\nvcpus = 5\n\
             [[vm]]\nname = \"c\"\nvcpus = 3\nhousekeeping_vcpus = 2\n",
            host.display()
        ),
    );
    let plan = util::plan_json(0, &[util::arg(&spec)]);
    assert_eq!(plan["unplaced"], serde_json::json!([]), "{plan}");
    let topo = util::pinplan_json(&["topology", "--source", util::arg(&host), "--format", "json"]);
    // CPU -> core, from the topology.
    let mut core_of: BTreeMap<u64, u64> = BTreeMap::new();
    for core in topo["cores"].as_array().unwrap() {
        for cpu in core["cpus"].as_array().unwrap() {
            core_of.insert(cpu.as_u64().unwrap(), core["id"].as_u64().unwrap());
        }
    }
    let cores_of = |cpus: &BTreeSet<u32>| -> BTreeSet<u64> {
        cpus.iter().map(|c| core_of[&u64::from(*c)]).collect()
    };
    // Who is on each core: (tenant, what).
    let mut on_core: BTreeMap<u64, BTreeSet<(String, &str)>> = BTreeMap::new();
    for c in cores_of(&util::cpuset(
        plan["host"]["reserved_cpus"].as_str().unwrap(),
    )) {
        on_core
            .entry(c)
            .or_default()
            .insert(("host".into(), "host"));
    }
    for vm in plan["vms"].as_array().unwrap() {
        let name = vm["name"].as_str().unwrap().to_owned();
        for p in vm["vcpus"].as_array().unwrap() {
            let role = if p["role"] == "main" { "main" } else { "pmd" };
            assert!(p["role"] == "main" || p["role"] == "pmd", "{p}");
            on_core
                .entry(core_of[&p["cpu"].as_u64().unwrap()])
                .or_default()
                .insert((name.clone(), role));
        }
        let emu = util::cpuset(vm["emulator_cpus"].as_str().unwrap());
        let main_cpus: BTreeSet<u32> = vm["vcpus"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["role"] == "main")
            .map(|p| u32::try_from(p["cpu"].as_u64().unwrap()).unwrap())
            .collect();
        // The emulator: exactly the CPUs of the main vCPUs' cores.
        let main_cores = cores_of(&main_cpus);
        let of_main_cores: BTreeSet<u32> = core_of
            .iter()
            .filter(|(_, c)| main_cores.contains(c))
            .map(|(&cpu, _)| u32::try_from(cpu).unwrap())
            .collect();
        assert_eq!(emu, of_main_cores, "{name}'s emulator");
        for c in cores_of(&emu) {
            on_core
                .entry(c)
                .or_default()
                .insert((name.clone(), "emulator"));
        }
    }
    for (core, who) in &on_core {
        if who.iter().any(|(_, what)| *what == "pmd") {
            assert_eq!(
                who.len(),
                1,
                "core {core} holds a poll-mode vCPU and {who:?}"
            );
        }
        let tenants: BTreeSet<&String> = who.iter().map(|(t, _)| t).collect();
        assert_eq!(tenants.len(), 1, "core {core} is shared: {who:?}");
    }
    // c's two housekeeping vCPUs fill one core (2 threads): no padding.
    let c = &plan["vms"][2];
    assert_eq!(c["cores"].as_array().unwrap().len(), 2, "{c}");

    // `report` over the domains with these pins finds nothing: the emulator
    // on the housekeeping core is the layout, not an emulator-overlap.
    let plan_path = dir.write("plan.json", plan.to_string());
    let mut domains = Vec::new();
    for vm in plan["vms"].as_array().unwrap() {
        let name = vm["name"].as_str().unwrap();
        let vcpus = u32::try_from(vm["vcpus"].as_array().unwrap().len()).unwrap();
        let input = dir.write(
            &format!("{name}-in.xml"),
            util::guest_xml("kvm", name, vcpus, ""),
        );
        let out = util::pinplan([
            "xml",
            "--plan",
            util::arg(&plan_path),
            "--patch",
            util::arg(&input),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        domains.push(dir.write(&format!("{name}.xml"), &out.stdout));
    }
    let mut args = vec![
        "report",
        "--source",
        util::arg(&host),
        "--format",
        "json",
        "--domains",
    ];
    args.extend(domains.iter().map(|d| util::arg(d)));
    args.extend([
        "--host-cpus",
        plan["host"]["reserved_cpus"].as_str().unwrap(),
    ]);
    let out = util::pinplan(&args);
    let report = util::stdout_json(&out);
    assert_eq!(report["conflicts"], serde_json::json!([]), "{report}");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// Puts `kernel.sched_rt_runtime_us` back when dropped.
struct RtRuntime(String);

impl Drop for RtRuntime {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/kernel/sched_rt_runtime_us", &self.0);
    }
}

/// Must show: real-time XML (`<vcpusched … fifo>` for the poll-mode vCPU
/// only, `<memoryBacking><locked/>`) validates and `virsh define` takes it;
/// a real KVM guest started from it has SCHED_FIFO on that vCPU's thread
/// only (`chrt -p`). This machine's libvirtd lacks CAP_SYS_RESOURCE, so it
/// cannot raise the guest's locked-memory limit: the guest is started
/// without `<locked/>`. RT group scheduling refuses FIFO in libvirt's
/// cgroups unless throttling is off: the test sets
/// `kernel.sched_rt_runtime_us = -1` (what `doctor` recommends) and puts it
/// back.
#[test]
fn realtime_guest_runs_fifo_on_its_poll_mode_vcpu_only() {
    let Some(uri) = util::libvirt_uri("no real-time guest") else {
        return;
    };
    let _turn = util::live_guests_turn();
    let name = format!("pinplan-rt-{}", std::process::id());
    let _guests = util::Guests {
        uri: uri.clone(),
        names: vec![name.clone()],
    };
    let dir = TempDir::new();
    dir.write(
        "guest.xml",
        util::guest_xml(util::guest_type(&uri), &name, 2, ""),
    );
    let spec = dir.write(
        "rt.toml",
        format!(
            "[host]\nreserved_cores = 0\n[[vm]]\nname = \"{name}\"\nvcpus = 2\nthreads = \"isolate\"\n\
             emulator = \"with-housekeeping\"\nhousekeeping_vcpus = 1\nrealtime = true\n\
             domain_xml = \"guest.xml\"\n"
        ),
    );
    let out_dir = dir.path("out");
    let out = pinplan([
        "plan",
        util::arg(&spec),
        "--connect",
        &uri,
        "--out",
        util::arg(&out_dir),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let xml_path = out_dir.join(format!("{name}.xml"));
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    assert!(
        xml.contains("<vcpusched vcpus='1' scheduler='fifo' priority='1'/>"),
        "{xml}"
    );
    assert!(xml.contains("<locked/>"), "{xml}");
    util::validate_domain(&xml_path).unwrap_or_else(|e| panic!("{e}"));
    util::virsh(&uri, &["define", util::arg(&xml_path)]);
    util::virsh(&uri, &["undefine", &name]);
    let unlocked = dir.write(
        "unlocked.xml",
        xml.replace("    <locked/>\n", "")
            .replace("  <memoryBacking>\n  </memoryBacking>\n", ""),
    );
    util::validate_domain(&unlocked).unwrap_or_else(|e| panic!("{e}"));
    let before = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap();
    let _rt = RtRuntime(before);
    std::fs::write("/proc/sys/kernel/sched_rt_runtime_us", "-1").unwrap();
    util::virsh(&uri, &["define", util::arg(&unlocked)]);
    util::virsh(&uri, &["start", &name]);
    let pid = std::fs::read_to_string(format!("/run/libvirt/qemu/{name}.pid")).unwrap();
    let pid = pid.trim();
    let mut policies = BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let tid = entry.unwrap().file_name().to_string_lossy().into_owned();
        let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap();
        if let Some(vcpu) = comm
            .trim()
            .strip_prefix("CPU ")
            .and_then(|r| r.strip_suffix("/KVM"))
        {
            let out = std::process::Command::new("chrt")
                .args(["-p", &tid])
                .output()
                .unwrap();
            let policy = text(&out.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .rsplit(": ")
                .next()
                .unwrap_or("")
                .to_owned();
            policies.insert(vcpu.to_owned(), policy);
        }
    }
    assert_eq!(
        policies,
        BTreeMap::from([
            ("0".to_owned(), "SCHED_OTHER".to_owned()),
            ("1".to_owned(), "SCHED_FIFO".to_owned())
        ])
    );
}

/// The spec refuses what real-time and roles cannot do, naming the line.
#[test]
fn roles_and_realtime_spec_errors_name_the_fix() {
    let dir = TempDir::new();
    let cases = [
        (
            "vcpus = 4\nrealtime = true\nthreads = \"require\"\n",
            "a real-time vCPU must share its core with nothing, not even a sibling vCPU: set threads = \"isolate\"",
        ),
        (
            "vcpus = 4\nhousekeeping_vcpus = 1\nthreads = \"isolate\"\nrealtime_vcpus = \"0-2\"\n",
            "realtime_vcpus = \"0-2\" must name poll-mode vCPUs only (1-3): 0 are housekeeping vCPUs",
        ),
        (
            "vcpus = 2\nemulator = \"with-housekeeping\"\n",
            "emulator = \"with-housekeeping\" puts the emulator on the housekeeping vCPUs' cores, and it has none",
        ),
        (
            "vcpus = 2\nhousekeeping_vcpus = 2\n",
            "housekeeping_vcpus = 2 leaves none of its 2 vCPUs for poll-mode threads",
        ),
        (
            "vcpus = 2\nrealtime = true\nthreads = \"isolate\"\nemulator = \"isolate\"\n",
            "emulator = \"isolate\" would put the emulator beside a real-time vCPU",
        ),
    ];
    for (i, (keys, message)) in cases.iter().enumerate() {
        let spec = dir.write(
            &format!("s{i}.toml"),
            format!(
                "[host]\nsource = \"synthetic:package:1 core:8 pu:2\"\nreserved_cores = 1\n\
                 [[vm]]\nname = \"v\"\n{keys}"
            ),
        );
        let out = pinplan(["plan", util::arg(&spec)]);
        assert_eq!(out.status.code(), Some(2), "{keys}");
        let err = text(&out.stderr);
        assert!(err.contains(message), "{keys}: {err}");
        assert!(
            err.contains(&format!("s{i}.toml:")),
            "no file:line in {err}"
        );
    }
}

/// The lossless patch of a real-time plan: `<locked/>` added to the
/// domain's `<memoryBacking>` beside what it had (`<source type='memfd'/>`
/// kept), and an old `<vcpusched>` replaced by the plan's.
#[test]
fn realtime_patch_adds_locked_and_replaces_vcpusched() {
    let dir = TempDir::new();
    dir.write(
        "d.xml",
        "<domain type='kvm'>\n  <name>v</name>\n  <memory unit='MiB'>64</memory>\n  \
         <memoryBacking>\n    <source type='memfd'/>\n  </memoryBacking>\n  \
         <vcpu placement='static'>3</vcpu>\n  <cputune>\n    <vcpupin vcpu='0' cpuset='0'/>\n    \
         <vcpusched vcpus='0-2' scheduler='rr' priority='5'/>\n  </cputune>\n  <os>\n    \
         <type arch='x86_64' machine='pc'>hvm</type>\n  </os>\n</domain>\n",
    );
    let spec = dir.write(
        "s.toml",
        "[host]\nsource = \"synthetic:package:1 core:8 pu:2\"\nreserved_cores = 1\n\
         [[vm]]\nname = \"v\"\nvcpus = 3\nthreads = \"isolate\"\nhousekeeping_vcpus = 1\n\
         realtime = true\ndomain_xml = \"d.xml\"\n",
    );
    let out_dir = dir.path("out");
    let out = pinplan(["plan", util::arg(&spec), "--out", util::arg(&out_dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let xml = std::fs::read_to_string(out_dir.join("v.xml")).unwrap();
    assert!(
        xml.contains(
            "  <memoryBacking>\n    <source type='memfd'/>\n    <locked/>\n  </memoryBacking>\n"
        ),
        "{xml}"
    );
    assert!(!xml.contains("scheduler='rr'"), "{xml}");
    assert_eq!(xml.matches("<vcpusched ").count(), 1, "{xml}");
    assert!(
        xml.contains("<vcpusched vcpus='1-2' scheduler='fifo' priority='1'/>"),
        "{xml}"
    );
    util::validate_domain(&out_dir.join("v.xml")).unwrap_or_else(|e| panic!("{e}"));
}

/// Must show: `reserved_cores_per_node = 1` on a real 2-node fixture
/// reserves the lowest core of each node, and each VM's emulator is on its
/// own node's reserved CPUs (by the topology, read here independently).
#[test]
fn reserved_cores_per_node_keeps_each_emulator_on_its_node() {
    let dir = TempDir::new();
    let host = util::fixture("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let spec = dir.write(
        "s.toml",
        format!(
            "[host]\nsource = \"{}\"\nreserved_cores_per_node = 1\n[defaults]\nthreads = \"require\"\n\
             [[vm]]\nname = \"a\"\nvcpus = 10\n[[vm]]\nname = \"b\"\nvcpus = 10\n",
            host.display()
        ),
    );
    let plan = util::plan_json(0, &[util::arg(&spec)]);
    let topo = util::pinplan_json(&["topology", "--source", util::arg(&host), "--format", "json"]);
    // Per node: its lowest core's CPUs.
    let mut lowest: BTreeMap<u64, (u64, BTreeSet<u32>)> = BTreeMap::new();
    let mut node_of: BTreeMap<u32, u64> = BTreeMap::new();
    for core in topo["cores"].as_array().unwrap() {
        let node = core["numa_node"].as_u64().unwrap();
        let id = core["id"].as_u64().unwrap();
        let cpus: BTreeSet<u32> = core["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| u32::try_from(c.as_u64().unwrap()).unwrap())
            .collect();
        for &c in &cpus {
            node_of.insert(c, node);
        }
        let entry = lowest.entry(node).or_insert((id, cpus.clone()));
        if id < entry.0 {
            *entry = (id, cpus);
        }
    }
    assert_eq!(lowest.len(), 2);
    let reserved: BTreeSet<u32> = lowest
        .values()
        .flat_map(|(_, c)| c.iter().copied())
        .collect();
    assert_eq!(
        util::cpuset(plan["host"]["reserved_cpus"].as_str().unwrap()),
        reserved
    );
    let mut emulator_nodes = BTreeSet::new();
    for vm in plan["vms"].as_array().unwrap() {
        let node = vm["numa_nodes"][0].as_u64().unwrap();
        assert_eq!(
            util::cpuset(vm["emulator_cpus"].as_str().unwrap()),
            lowest[&node].1,
            "{}'s emulator",
            vm["name"]
        );
        emulator_nodes.insert(node);
    }
    assert_eq!(emulator_nodes.len(), 2, "one VM per node: {plan}");
    // A node left without cores for VMs is refused.
    let spec = dir.write(
        "t.toml",
        format!(
            "[host]\nsource = \"{}\"\nreserved_cores_per_node = 6\n[[vm]]\nname = \"a\"\nvcpus = 1\n",
            host.display()
        ),
    );
    let out = pinplan(["plan", util::arg(&spec)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .contains("reserved_cores_per_node = 6 leaves node 0 no core for VMs: it has 6"),
        "{}",
        text(&out.stderr)
    );
}
