//! Test helpers: small sysfs/procfs trees laid out as the kernel does
//! (devices under `sys/devices/pci0000:00`, relative symbolic links from
//! `sys/bus/pci/devices`, `driver`, `iommu_group`, `physfn`), and plans.

use super::{run, Check, CheckId, DoctorOptions, Report};
use crate::cpuset::CpuSet;
use crate::plan::{GuestTopology, Objective, Plan, PlanHost, Status, VcpuPin, VmPlan};
use std::path::{Path, PathBuf};

/// A temporary root, removed on drop.
pub(crate) struct TestRoot {
    pub path: PathBuf,
}

impl TestRoot {
    pub fn new(name: &str) -> TestRoot {
        let path =
            std::env::temp_dir().join(format!("pinplan-doctor-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(path.join("sys")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(path.join("proc")).unwrap_or_else(|e| panic!("{e}"));
        TestRoot { path }
    }

    /// Writes `ROOT/rel` (creating directories).
    pub fn file(&self, rel: &str, text: &str) -> &Self {
        write(&self.path.join(rel), text);
        self
    }

    /// Makes the directory `ROOT/rel`.
    pub fn dir(&self, rel: &str) -> &Self {
        std::fs::create_dir_all(self.path.join(rel)).unwrap_or_else(|e| panic!("{e}"));
        self
    }

    /// Makes `ROOT/rel` a symbolic link to `target`.
    pub fn link(&self, rel: &str, target: &str) -> &Self {
        link(&self.path.join(rel), target);
        self
    }

    /// A PCI function with its class; add attributes through the builder.
    pub fn device(&self, address: &str, class: &str) -> Device<'_> {
        let rel = format!("sys/devices/pci0000:00/{address}");
        self.file(&format!("{rel}/class"), &format!("{class}\n"));
        self.link(
            &format!("sys/bus/pci/devices/{address}"),
            &format!("../../../devices/pci0000:00/{address}"),
        );
        Device {
            root: self,
            address: address.to_owned(),
            rel,
        }
    }

    /// Runs the doctor with `plan` (no `--nic`) and takes its finding for
    /// `id` about `subject`.
    pub fn check(&self, plan: Option<Plan>, id: CheckId, subject: &str) -> Check {
        find(&self.run(plan, &[]), id, subject).clone()
    }

    pub fn run(&self, plan: Option<Plan>, nics: &[&str]) -> Report {
        run(&DoctorOptions {
            root: self.path.clone(),
            plan,
            plan_path: None,
            force: false,
            nics: nics
                .iter()
                .map(|n| n.parse().unwrap_or_else(|e| panic!("{e}")))
                .collect(),
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`TestRoot::run`] with `plan` and no `--nic`, its refusal as text.
    pub fn try_run(&self, plan: Option<Plan>) -> Result<Report, String> {
        run(&DoctorOptions {
            root: self.path.clone(),
            plan,
            plan_path: None,
            force: false,
            nics: Vec::new(),
        })
        .map_err(|e| e.to_string())
    }
}

impl Drop for TestRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Adds attributes to one PCI function of a [`TestRoot`].
pub(crate) struct Device<'a> {
    root: &'a TestRoot,
    address: String,
    rel: String,
}

impl Device<'_> {
    pub fn attr(self, name: &str, value: &str) -> Self {
        self.root
            .file(&format!("{}/{name}", self.rel), &format!("{value}\n"));
        self
    }

    pub fn driver(self, name: &str) -> Self {
        std::fs::create_dir_all(self.root.path.join(format!("sys/bus/pci/drivers/{name}")))
            .unwrap_or_else(|e| panic!("{e}"));
        self.root.link(
            &format!("{}/driver", self.rel),
            &format!("../../../bus/pci/drivers/{name}"),
        );
        self
    }

    /// Puts the function in IOMMU group `group` (of domain type `kind`).
    pub fn group(self, group: u32, kind: &str) -> Self {
        let dir = format!("sys/kernel/iommu_groups/{group}");
        self.root.file(&format!("{dir}/type"), &format!("{kind}\n"));
        self.root.link(
            &format!("{dir}/devices/{}", self.address),
            &format!("../../../../devices/pci0000:00/{}", self.address),
        );
        self.root.link(
            &format!("{}/iommu_group", self.rel),
            &format!("../../../kernel/iommu_groups/{group}"),
        );
        self
    }

    pub fn physfn(self, pf: &str) -> Self {
        self.root
            .link(&format!("{}/physfn", self.rel), &format!("../{pf}"));
        self
    }

    /// A network interface with its speed in Mb/s.
    pub fn net(self, name: &str, mbps: i64) -> Self {
        self.root.file(
            &format!("{}/net/{name}/speed", self.rel),
            &format!("{mbps}\n"),
        );
        self.root.link(
            &format!("sys/class/net/{name}"),
            &format!("../../devices/pci0000:00/{}/net/{name}", self.address),
        );
        self
    }

    /// `current_link_*` and `max_link_*`.
    pub fn link(self, speed: &str, width: u32, max_speed: &str, max_width: u32) -> Self {
        self.attr("current_link_speed", speed)
            .attr("current_link_width", &width.to_string())
            .attr("max_link_speed", max_speed)
            .attr("max_link_width", &max_width.to_string())
    }
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn link(path: &Path, target: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    let _ = std::fs::remove_file(path);
    std::os::unix::fs::symlink(target, path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// One VM of a test plan.
pub(crate) struct Vm<'a> {
    pub name: &'a str,
    pub cpus: &'a str,
    /// `isolate`, `require` or `prefer`.
    pub threads: &'a str,
    /// The guest's threads per core.
    pub guest_threads: u32,
    pub nic: Option<&'a str>,
    /// Its emulator's CPUs; `None`: the host's reserved ones.
    pub emulator: Option<&'a str>,
}

impl<'a> Vm<'a> {
    /// A VM without a NIC.
    pub fn new(name: &'a str, cpus: &'a str, threads: &'a str, guest_threads: u32) -> Vm<'a> {
        Vm {
            name,
            cpus,
            threads,
            guest_threads,
            nic: None,
            emulator: None,
        }
    }

    /// A VM with one thread per core (`isolate`) on `nic`.
    pub fn on_nic(name: &'a str, cpus: &'a str, nic: &'a str) -> Vm<'a> {
        Vm {
            nic: Some(nic),
            ..Vm::new(name, cpus, "isolate", 1)
        }
    }
}

/// A plan with the host's `reserved` CPUs and these VMs (one vCPU per CPU),
/// for the doctor's tests and the report's.
pub(crate) fn plan(reserved: &str, vms: &[Vm<'_>]) -> Plan {
    let set = |text: &str| -> CpuSet {
        if text.is_empty() {
            CpuSet::new()
        } else {
            text.parse().unwrap_or_else(|e| panic!("{e}"))
        }
    };
    Plan {
        status: Status::Optimal,
        proven: true,
        solver: crate::plan::SolverKind::Ilp,
        backend: None,
        summary: None,
        solve_seconds: None,
        host: PlanHost {
            source: "test".to_owned(),
            reserved_cpus: set(reserved),
            fingerprint: String::new(),
        },
        vms: vms
            .iter()
            .map(|vm| {
                let cpus = set(vm.cpus);
                let vcpus: Vec<VcpuPin> = cpus
                    .iter()
                    .enumerate()
                    .map(|(i, cpu)| VcpuPin {
                        vcpu: u32::try_from(i).unwrap_or(0),
                        cpu,
                        role: None,
                    })
                    .collect();
                let n = u32::try_from(vcpus.len()).unwrap_or(0);
                VmPlan {
                    name: vm.name.to_owned(),
                    vcpus,
                    cores: Vec::new(),
                    cpus,
                    emulator_cpus: set(vm.emulator.unwrap_or(reserved)),
                    iothreads: Vec::new(),
                    numa_nodes: Vec::new(),
                    guest_cells: Vec::new(),
                    guest_topology: GuestTopology::new(
                        n / vm.guest_threads.max(1),
                        vm.guest_threads,
                    ),
                    threads: serde_json::from_str(&format!("{:?}", vm.threads))
                        .unwrap_or_else(|e| panic!("{e}")),
                    demand: None,
                    nic: vm.nic.map(|n| n.parse().unwrap_or_else(|e| panic!("{e}"))),
                    nics: Vec::new(),
                    memory: None,
                    realtime_vcpus: None,
                    kept: false,
                }
            })
            .collect(),
        fixed: Vec::new(),
        moves: Vec::new(),
        unplaced: Vec::new(),
        hugepages: Vec::new(),
        hugepages_boot_args: Vec::new(),
        explanations: Vec::new(),
        warnings: Vec::new(),
        objective: Objective::default(),
    }
}

/// The report's finding for `id` about `subject`.
pub(crate) fn find<'r>(report: &'r Report, id: CheckId, subject: &str) -> &'r Check {
    report
        .checks
        .iter()
        .find(|c| c.id == id && c.subject == subject)
        .unwrap_or_else(|| {
            panic!(
                "no {} check for {subject}:\n{}",
                id.as_str(),
                report.to_text()
            )
        })
}
