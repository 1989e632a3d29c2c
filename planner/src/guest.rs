//! Inside the VM: the guest-side settings that match a planned VM's pinning
//! — its vCPUs' roles, the guest kernel arguments that keep the guest off
//! its poll-mode vCPUs, DPDK's EAL core list, and for VMs sized from a table
//! the testpmd and pktgen-dpdk lcore maps. All in guest vCPU ids: the guest
//! sees vCPUs, not host CPUs. `pinplan xml --guest` prints it and `plan
//! --out DIR` writes `DIR/NAME.guest.txt`.

use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use crate::plan::{Role, VmPlan};
use serde::Serialize;

/// One VM's guest-side map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestMap {
    /// The VM.
    pub vm: String,
    /// Its vCPUs (guest ids).
    pub vcpus: CpuSet,
    /// Housekeeping vCPUs (DPDK's main lcore first).
    pub main: CpuSet,
    /// Receiving poll-mode vCPUs (table-sized VMs).
    pub rx: CpuSet,
    /// Sending poll-mode vCPUs (table-sized VMs).
    pub tx: CpuSet,
    /// Every poll-mode vCPU.
    pub pmd: CpuSet,
    /// Whether the roles come from the plan (else vCPU 0 is taken as the
    /// main lcore, as DPDK does by default).
    pub roles_planned: bool,
    /// Its real-time (FIFO) vCPUs.
    pub realtime: CpuSet,
    /// For the guest's kernel command line.
    pub kernel_args: Option<String>,
    /// DPDK EAL arguments: `-l LIST --main-lcore N`.
    pub eal: String,
    /// testpmd's: `--nb-cores=N` (one forwarding core per poll-mode vCPU).
    pub testpmd: Option<String>,
    /// pktgen-dpdk's `-m "[rx:tx].0"` (port 0), for table-sized VMs.
    pub pktgen: Option<String>,
}

fn set_of(vm: &VmPlan, want: impl Fn(Option<Role>) -> bool) -> CpuSet {
    vm.vcpus
        .iter()
        .filter(|p| want(p.role))
        .map(|p| CpuId(p.vcpu))
        .collect()
}

impl GuestMap {
    /// The map of a planned VM.
    pub fn of(vm: &VmPlan) -> GuestMap {
        let vcpus: CpuSet = vm.vcpus.iter().map(|p| CpuId(p.vcpu)).collect();
        let roles_planned = vm.vcpus.iter().any(|p| p.role.is_some());
        let (main, rx, tx, pmd) = if roles_planned {
            (
                set_of(vm, |r| r == Some(Role::Main)),
                set_of(vm, |r| r == Some(Role::Rx)),
                set_of(vm, |r| r == Some(Role::Tx)),
                set_of(vm, |r| matches!(r, Some(Role::Rx | Role::Tx | Role::Pmd))),
            )
        } else {
            let first: CpuSet = vcpus.first().into_iter().collect();
            let rest = vcpus.difference(&first);
            (first, CpuSet::new(), CpuSet::new(), rest)
        };
        let main_lcore = main.first().or(vcpus.first()).map_or(0, |c| c.0);
        let eal = format!("-l {vcpus} --main-lcore {main_lcore}");
        // With no housekeeping vCPU (a table row with vcpus = tx + rx), the
        // main lcore is one of the poll-mode vCPUs: it neither forwards nor
        // is isolated, so the guest's kernel keeps a CPU of its own.
        let shared = if main.is_empty() {
            CpuSet::from_iter([CpuId(main_lcore)])
        } else {
            CpuSet::new()
        };
        let forwarding = pmd.difference(&shared);
        let kernel_args = (!forwarding.is_empty()).then(|| {
            format!(
                "isolcpus=managed_irq,domain,{forwarding} nohz_full={forwarding} \
                 rcu_nocbs={forwarding}"
            )
        });
        let testpmd = (!forwarding.is_empty()).then(|| format!("--nb-cores={}", forwarding.len()));
        let (rx_lcores, tx_lcores) = (rx.difference(&shared), tx.difference(&shared));
        let pktgen = (!rx_lcores.is_empty() && !tx_lcores.is_empty())
            .then(|| format!("-m \"[{rx_lcores}:{tx_lcores}].0\""));
        GuestMap {
            vm: vm.name.clone(),
            vcpus,
            main,
            rx,
            tx,
            pmd,
            roles_planned,
            realtime: vm.realtime_vcpus.clone().unwrap_or_default(),
            kernel_args,
            eal,
            testpmd,
            pktgen,
        }
    }

    /// The text form (`NAME.guest.txt`).
    pub fn to_text(&self) -> String {
        let list = |s: &CpuSet| {
            if s.is_empty() {
                "none".to_owned()
            } else {
                s.to_string()
            }
        };
        let mut roles = vec![format!("main {}", list(&self.main))];
        if !self.rx.is_empty() || !self.tx.is_empty() {
            roles.push(format!("rx {}", list(&self.rx)));
            roles.push(format!("tx {}", list(&self.tx)));
        } else {
            roles.push(format!("poll-mode {}", list(&self.pmd)));
        }
        let mut out = format!(
            "# {}: the guest side of its pinning, in guest vCPU ids ({} vCPUs)\n",
            self.vm,
            self.vcpus.len()
        );
        out.push_str(&format!(
            "roles: {}{}\n",
            roles.join(", "),
            if self.roles_planned {
                ""
            } else {
                " (no roles in the plan: vCPU 0 taken as DPDK's main lcore)"
            }
        ));
        if self.main.is_empty() && !self.pmd.is_empty() {
            out.push_str(&format!(
                "no housekeeping vCPU: vCPU {} is DPDK's main lcore and the guest kernel's CPU, so \
                 it is neither isolated nor a forwarding core: one forwarding core fewer than \
                 the table row's tx + rx\n",
                self.vcpus.first().map_or(0, |c| c.0)
            ));
        }
        if !self.realtime.is_empty() {
            out.push_str(&format!("real-time (FIFO) vCPUs: {}\n", self.realtime));
        }
        if let Some(args) = &self.kernel_args {
            out.push_str(&format!("guest kernel: {args}\n"));
        }
        out.push_str(&format!("EAL: {}\n", self.eal));
        if let Some(t) = &self.testpmd {
            out.push_str(&format!("testpmd: dpdk-testpmd {} -- {t}\n", self.eal));
        }
        if let Some(p) = &self.pktgen {
            out.push_str(&format!("pktgen: pktgen {} -- {p}\n", self.eal));
        }
        out
    }
}
