//! NIC checks: SR-IOV VFs where the plan needs them (`sriov-vfs`), the PCIe
//! link against its capability and the port (`pcie-link`), and the NIC's
//! NUMA node (`nic-numa`).

use super::{gbps_from_mbps, Check, CheckId, Host, Status};
use crate::topology::link_gbps;

/// `sriov-vfs`: `sriov_numvfs` of `sriov_totalvfs` on each PF. A PF named by
/// plan VMs is expected to carry one VF per such VM: pinplan plans SR-IOV
/// VMs, which reach their port through a VF of the NIC their spec names.
pub(super) fn sriov_vfs(host: &Host<'_>) -> Vec<Check> {
    let id = CheckId::SriovVfs;
    host.per_nic(id, |nic, f, subject| {
        let needed = nic.vms.len();
        let who = nic.vms.join(", ");
        if let Some(pf) = f.physfn {
            return Check::new(
                id,
                Status::Pass,
                subject,
                format!("a VF of {pf}: VFs are enabled on its PF"),
            );
        }
        let total = f.sriov_totalvfs.filter(|t| *t > 0);
        let Some(total) = total else {
            return without_vfs(subject, needed, &who);
        };
        let Some(enabled) = f.sriov_numvfs else {
            return Check::new(id, Status::Skip, subject, "sriov_numvfs is unreadable");
        };
        let path = format!("/sys/bus/pci/devices/{}/sriov_numvfs", nic.address);
        if needed == 0 {
            let why = if host.plan.is_some() {
                "no plan VM names this PF"
            } else {
                "no plan given to say how many are needed"
            };
            return Check::new(
                id,
                Status::Pass,
                subject,
                format!("{enabled} of {total} VFs enabled; {why}"),
            );
        }
        let count = u32::try_from(needed).unwrap_or(u32::MAX);
        if count > total {
            return Check::new(
                id,
                Status::Fail,
                subject,
                format!("the plan gives this PF to {needed} VMs ({who}), but it supports only {total} VFs"),
            )
            .hint("give some of the VMs another NIC in the plan spec");
        }
        if enabled < count {
            // The kernel refuses to change a non-zero VF count directly.
            let command = if enabled == 0 {
                format!("echo {count} > {path}")
            } else {
                format!("echo 0 > {path}; echo {count} > {path}")
            };
            return Check::new(
                id,
                Status::Warn,
                subject,
                format!("{enabled} of {total} VFs enabled, but the plan gives this PF's port to {who}: {count} VF(s) needed"),
            )
            .hint(format!("{command} (as root; add it to a boot-time unit to keep it)"));
        }
        Check::new(
            id,
            Status::Pass,
            subject,
            format!("{enabled} of {total} VFs enabled; the plan needs {count} ({who})"),
        )
    })
}

/// `sriov-vfs` on a NIC without SR-IOV VFs, given to `needed` plan VMs
/// (`who`): a warning when more than one would share it.
fn without_vfs(subject: String, needed: usize, who: &str) -> Check {
    let id = CheckId::SriovVfs;
    if needed >= 2 {
        return Check::new(
            id,
            Status::Warn,
            subject,
            format!("the plan gives this NIC to {who}, but it has no SR-IOV VFs (no sriov_totalvfs): only one VM can have it by passthrough"),
        )
        .hint("give each VM a NIC of its own, or use an SR-IOV capable NIC and enable its VFs");
    }
    Check::new(
        id,
        Status::Skip,
        subject,
        "not SR-IOV capable (no sriov_totalvfs)",
    )
}

/// `GT/s` without needless decimals (`8`, `2.5`, `16`).
fn gts(speed: f64) -> String {
    format!("{speed}")
}

/// `pcie-link`: the current link against its capability (`max_link_*`), and
/// the usable bandwidth against the port's speed.
pub(super) fn pcie_link(host: &Host<'_>) -> Vec<Check> {
    let id = CheckId::PcieLink;
    host.per_nic(id, |_, f, subject| {
        let Some(link) = &f.link else {
            return Check::new(
                id,
                Status::Skip,
                subject,
                "no PCIe link attributes (a virtual device, or link speed Unknown)",
            );
        };
        let (Some(speed), Some(width), Some(max_speed), Some(max_width)) =
            (link.speed_gts, link.width, link.max_speed_gts, link.max_width)
        else {
            let show = |s: Option<f64>, w: Option<u32>| {
                format!(
                    "{} x{}",
                    s.map_or_else(|| "? GT/s".to_owned(), |s| format!("{} GT/s", gts(s))),
                    w.map_or_else(|| "?".to_owned(), |w| w.to_string())
                )
            };
            return Check::new(
                id,
                Status::Skip,
                subject,
                format!(
                    "incomplete link attributes: current {}, capability {}",
                    show(link.speed_gts, link.width),
                    show(link.max_speed_gts, link.max_width)
                ),
            );
        };
        let usable = link_gbps(speed, width);
        let capable = link_gbps(max_speed, max_width);
        let port = host.port_speed(f);
        let port_text = match &port {
            Some((name, mbps)) => format!("port {name} at {} Gb/s", gbps_from_mbps(*mbps)),
            None if f.interfaces.is_empty() => "no network interface to read the port speed from".to_owned(),
            None => format!("port {} speed unknown (link down?)", f.interfaces.join(",")),
        };
        let port_gbps = port.as_ref().map(|(_, mbps)| *mbps as f64 / 1000.0);
        let short = port_gbps.is_some_and(|p| usable < p);
        let below = speed < max_speed || width < max_width;
        let state = format!(
            "link at {} GT/s x{width} of {} GT/s x{max_width}: usable {usable:.1} of {capable:.1} Gb/s (GT/s x lanes x {}); {port_text}",
            gts(speed),
            gts(max_speed),
            if speed > 5.0 { "128b/130b" } else { "8b/10b" },
        );
        if below {
            let verdict = if short {
                " — below the port's line rate"
            } else if port_gbps.is_some() {
                " — still above the port's line rate, with less headroom"
            } else {
                ""
            };
            return Check::new(id, Status::Fail, subject, format!("{state}{verdict}")).hint(
                "the link trained below its capability: reseat the card or move it to a slot wired for the card's full width and speed (compare LnkCap and LnkSta in `lspci -vv`), and check the firmware's slot speed/bifurcation setting",
            );
        }
        if short {
            return Check::new(
                id,
                Status::Warn,
                subject,
                format!("{state} — the link is at full capability but cannot carry the port's line rate"),
            )
            .hint("use a card (or slot) with more lanes or a faster PCIe generation for this port speed");
        }
        Check::new(id, Status::Pass, subject, state)
    })
}

/// `nic-numa`: the NIC's NUMA node is known (not -1), and the plan's VMs
/// using it run on that node.
pub(super) fn numa(host: &Host<'_>) -> Vec<Check> {
    let id = CheckId::NicNuma;
    let nodes = host.numa_nodes();
    host.per_nic(id, |nic, f, subject| {
        let Some(node) = f.numa_node else {
            return Check::new(id, Status::Skip, subject, "no numa_node attribute");
        };
        if node < 0 {
            if nodes.is_some_and(|n| n <= 1) {
                return Check::new(
                    id,
                    Status::Pass,
                    subject,
                    format!("NUMA node unknown ({node}), but the host has a single NUMA node: locality does not matter"),
                );
            }
            let count = nodes.map_or_else(String::new, |n| format!(" on this {n}-node host"));
            return Check::new(
                id,
                Status::Warn,
                subject,
                format!("NUMA node unknown ({node}){count}: the firmware does not say which node the slot hangs off, so planning cannot honour NIC affinity"),
            )
            .hint("find the slot's socket in the board manual (or `lstopo`), and ask the vendor for a firmware update that reports the slot's locality (ACPI _PXM); until then set nic_affinity = \"ignore\" or pin by hand");
        }
        let away: Vec<String> = host
            .plan
            .map(|plan| {
                plan.vms
                    .iter()
                    .filter(|vm| nic.vms.contains(&vm.name))
                    .filter(|vm| !vm.numa_nodes.is_empty() && vm.numa_nodes.iter().all(|n| i64::from(n.0) != node))
                    .map(|vm| {
                        let on: Vec<String> = vm.numa_nodes.iter().map(ToString::to_string).collect();
                        format!("{} runs on node {}", vm.name, on.join(","))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !away.is_empty() {
            return Check::new(
                id,
                Status::Warn,
                subject,
                format!("NUMA node {node}, but {}: every packet crosses the socket interconnect", away.join("; ")),
            )
            .hint("plan again with nic_affinity = \"required\" for these VMs");
        }
        Check::new(id, Status::Pass, subject, format!("NUMA node {node}"))
    })
}

#[cfg(test)]
mod tests {
    use super::super::testroot::{find, plan, TestRoot, Vm};
    use super::super::{CheckId, Status};

    const PF: &str = "0000:65:00.0";

    #[test]
    fn vfs_the_plan_needs_but_the_pf_lacks_warn_with_the_command() {
        let root = TestRoot::new("sriov");
        root.device(PF, "0x020000")
            .attr("sriov_totalvfs", "8")
            .attr("sriov_numvfs", "0");
        root.device("0000:65:00.1", "0x020000")
            .attr("sriov_totalvfs", "8")
            .attr("sriov_numvfs", "1");
        root.device("0000:66:00.0", "0x020000");
        root.device("0000:65:00.2", "0x020000")
            .physfn("0000:65:00.1");

        // Without a plan: the counts, nothing expected.
        let report = root.run(None, &[]);
        let c = find(&report, CheckId::SriovVfs, PF);
        assert_eq!(
            (c.status, c.message.as_str()),
            (
                Status::Pass,
                "0 of 8 VFs enabled; no plan given to say how many are needed"
            )
        );
        assert_eq!(
            find(&report, CheckId::SriovVfs, "0000:66:00.0").status,
            Status::Skip
        );
        // Discovery leaves VFs out.
        assert!(report.checks.iter().all(|c| c.subject != "0000:65:00.2"));

        // One VM on a PF with no VF: enable one.
        let one = plan("0", &[Vm::on_nic("vm1", "1-2", PF)]);
        let c = root.check(Some(one), CheckId::SriovVfs, PF);
        assert_eq!(c.status, Status::Warn);
        assert_eq!(
            c.message,
            "0 of 8 VFs enabled, but the plan gives this PF's port to vm1: 1 VF(s) needed"
        );
        assert!(c
            .hint
            .unwrap_or_default()
            .starts_with("echo 1 > /sys/bus/pci/devices/0000:65:00.0/sriov_numvfs"));

        // Two VMs sharing a PF with one VF: reset, then two.
        let two = plan(
            "0",
            &[
                Vm::on_nic("vm1", "1-2", "0000:65:00.1"),
                Vm::on_nic("vm2", "3-4", "0000:65:00.1"),
            ],
        );
        let c = root.check(Some(two), CheckId::SriovVfs, "0000:65:00.1");
        assert_eq!(c.status, Status::Warn);
        assert!(c.hint.unwrap_or_default().starts_with(
            "echo 0 > /sys/bus/pci/devices/0000:65:00.1/sriov_numvfs; echo 2 > /sys/bus/pci/devices/0000:65:00.1/sriov_numvfs"
        ));

        // Enough VFs; a VF named directly; more VMs than VFs; a shared non-SR-IOV NIC.
        let fine = plan(
            "0",
            &[
                Vm::on_nic("vm1", "1-2", "0000:65:00.1"),
                Vm::on_nic("vm2", "3-4", "0000:65:00.2"),
            ],
        );
        let report = root.run(Some(fine), &[]);
        assert_eq!(
            find(&report, CheckId::SriovVfs, "0000:65:00.1").status,
            Status::Pass
        );
        let vf = find(&report, CheckId::SriovVfs, "0000:65:00.2");
        assert_eq!(
            (vf.status, vf.message.as_str()),
            (
                Status::Pass,
                "a VF of 0000:65:00.1: VFs are enabled on its PF"
            )
        );
        let many: Vec<Vm> = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
            .iter()
            .map(|n| Vm::on_nic(n, "", PF))
            .collect();
        assert_eq!(
            root.check(Some(plan("0", &many)), CheckId::SriovVfs, PF)
                .status,
            Status::Fail
        );
        let shared = plan(
            "0",
            &[
                Vm::on_nic("vm1", "1", "0000:66:00.0"),
                Vm::on_nic("vm2", "2", "0000:66:00.0"),
            ],
        );
        assert_eq!(
            root.check(Some(shared), CheckId::SriovVfs, "0000:66:00.0")
                .status,
            Status::Warn
        );
    }

    #[test]
    fn an_x8_link_on_an_x16_card_fails_with_the_usable_bandwidth() {
        let root = TestRoot::new("pcie-x8");
        root.device(PF, "0x020000")
            .link("8.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 16)
            .net("ens1f0", 100_000);
        let c = root.check(None, CheckId::PcieLink, PF);
        assert_eq!(c.status, Status::Fail);
        // 8 GT/s x 8 lanes x 128/130 = 63.0 Gb/s usable; x16 would give 126.0.
        assert_eq!(
            c.message,
            "link at 8 GT/s x8 of 8 GT/s x16: usable 63.0 of 126.0 Gb/s (GT/s x lanes x 128b/130b); port ens1f0 at 100 Gb/s — below the port's line rate"
        );
        assert!(c.hint.unwrap_or_default().contains("LnkSta"));
    }

    #[test]
    fn link_spellings_speeds_and_widths() {
        let root = TestRoot::new("pcie-spellings");
        // Full capability, old spelling: 8 GT/s x16 = 126.0 Gb/s for a 100 G port.
        root.device("0000:01:00.0", "0x020000")
            .link("8 GT/s", 16, "8 GT/s", 16)
            .net("eth1", 100_000);
        // Gen4 spelling, at capability: 16 GT/s x8 = 126.0 Gb/s.
        root.device("0000:02:00.0", "0x020000")
            .link("16.0 GT/s PCIe", 8, "16.0 GT/s PCIe", 8);
        // Trained down to Gen1: 2.5 GT/s x1 x 8/10 = 2.0 Gb/s, still above a 1 G port.
        root.device("0000:03:00.0", "0x020000")
            .link("2.5 GT/s", 1, "8 GT/s", 1)
            .net("eth3", 1000);
        // Full capability but too narrow for the port: 8 GT/s x8 = 63.0 < 100.
        root.device("0000:04:00.0", "0x020000")
            .link("8 GT/s", 8, "8 GT/s", 8)
            .net("eth4", 100_000);
        // Unknown speed, and no link files at all.
        root.device("0000:05:00.0", "0x020000")
            .link("Unknown", 8, "Unknown", 8);
        root.device("0000:06:00.0", "0x020000");
        let report = root.run(None, &[]);
        for (address, status, needle) in [
            (
                "0000:01:00.0",
                Status::Pass,
                "usable 126.0 of 126.0 Gb/s (GT/s x lanes x 128b/130b); port eth1 at 100 Gb/s",
            ),
            (
                "0000:02:00.0",
                Status::Pass,
                "link at 16 GT/s x8 of 16 GT/s x8: usable 126.0",
            ),
            (
                "0000:03:00.0",
                Status::Fail,
                "usable 2.0 of 7.9 Gb/s (GT/s x lanes x 8b/10b); port eth3 at 1 Gb/s — still above",
            ),
            (
                "0000:04:00.0",
                Status::Warn,
                "cannot carry the port's line rate",
            ),
            (
                "0000:05:00.0",
                Status::Skip,
                "incomplete link attributes: current ? GT/s x8",
            ),
            ("0000:06:00.0", Status::Skip, "no PCIe link attributes"),
        ] {
            let c = find(&report, CheckId::PcieLink, address);
            assert_eq!(c.status, status, "{address}: {}", c.message);
            assert!(c.message.contains(needle), "{address}: {}", c.message);
        }
    }

    #[test]
    fn unknown_numa_node_warns_on_a_multi_node_host() {
        let root = TestRoot::new("nic-numa");
        root.dir("sys/devices/system/node/node0")
            .dir("sys/devices/system/node/node1");
        root.device("0000:01:00.0", "0x020000")
            .attr("numa_node", "-1");
        root.device("0000:02:00.0", "0x020000")
            .attr("numa_node", "1");
        root.device("0000:03:00.0", "0x020000");
        let report = root.run(None, &[]);
        let c = find(&report, CheckId::NicNuma, "0000:01:00.0");
        assert_eq!(c.status, Status::Warn);
        assert!(
            c.message
                .contains("NUMA node unknown (-1) on this 2-node host")
                && c.message.contains("cannot honour NIC affinity"),
            "{}",
            c.message
        );
        let c = find(&report, CheckId::NicNuma, "0000:02:00.0");
        assert_eq!(
            (c.status, c.message.as_str()),
            (Status::Pass, "NUMA node 1")
        );
        assert_eq!(
            find(&report, CheckId::NicNuma, "0000:03:00.0").status,
            Status::Skip
        );

        // A VM planned on node 0 for the NIC on node 1.
        let mut away = plan("0", &[Vm::on_nic("vm1", "2-3", "0000:02:00.0")]);
        away.vms[0].numa_nodes = vec![crate::ids::NodeId(0)];
        let c = root.check(Some(away), CheckId::NicNuma, "0000:02:00.0");
        assert_eq!(c.status, Status::Warn);
        assert!(c.message.contains("vm1 runs on node 0"), "{}", c.message);

        // A VM with two NICs (`nics`): both are checked, each against the
        // nodes the VM runs on; it runs on node 1 only, so the NIC on node 0
        // is remote and the one on node 1 is not.
        root.device("0000:04:00.0", "0x020000")
            .attr("numa_node", "0");
        let mut two = plan("0", &[Vm::on_nic("vm2", "2-3", "0000:04:00.0")]);
        two.vms[0].nics = vec![
            "0000:04:00.0".parse().unwrap_or_else(|e| panic!("{e}")),
            "0000:02:00.0".parse().unwrap_or_else(|e| panic!("{e}")),
        ];
        two.vms[0].numa_nodes = vec![crate::ids::NodeId(1)];
        let report = root.run(Some(two.clone()), &[]);
        let c = find(&report, CheckId::NicNuma, "0000:04:00.0");
        assert_eq!(c.status, Status::Warn, "{}", c.message);
        assert!(c.message.contains("vm2 runs on node 1"), "{}", c.message);
        assert_eq!(
            find(&report, CheckId::NicNuma, "0000:02:00.0").status,
            Status::Pass
        );
        // Only the plan's NICs are checked: 0000:01:00.0 is not among them.
        assert!(report.checks.iter().all(|c| c.subject != "0000:01:00.0"));
        // A second NIC the host lacks is named as the plan's.
        two.vms[0]
            .nics
            .push("0000:09:00.0".parse().unwrap_or_else(|e| panic!("{e}")));
        let err = root.try_run(Some(two)).err().unwrap_or_default();
        assert!(
            err.contains("0000:09:00.0") && err.contains("the plan's VM vm2"),
            "{err}"
        );

        // One node: -1 is harmless.
        let single = TestRoot::new("nic-numa-single");
        single.dir("sys/devices/system/node/node0");
        single
            .device("0000:01:00.0", "0x020000")
            .attr("numa_node", "-1");
        assert_eq!(
            single.check(None, CheckId::NicNuma, "0000:01:00.0").status,
            Status::Pass
        );
    }
}
