//! IOMMU checks: groups exist (`iommu-enabled`), each NIC's DMA domain type
//! (`iommu-dma-mode`), and whether VFIO can take a device's whole IOMMU
//! group (`vfio-group-viable`).

use super::sysfs::{PciFunction, PciTree as _};
use super::vfio::{group_members, is_vfio, passthrough};
use super::{shown, Check, CheckId, Host, Status};
use crate::host::fs::Fs;
use crate::topology::PciAddress;
use std::collections::BTreeMap;

/// The measured cost of strict IOMMU DMA mode, cited by `iommu-dma-mode`.
pub(super) const STRICT_DMA_COST: &str = "a kernel whose IOMMU DMA mode went from lazy to strict cut PCI network throughput by up to 72 % (uperf TCP_RR: 233,465 vs 835,123 transactions/s)";

/// `iommu-enabled`: `/sys/kernel/iommu_groups` has groups.
pub(super) fn enabled(host: &Host<'_>) -> Check {
    let id = CheckId::IommuEnabled;
    if !host.has_sys() {
        return Check::new(
            id,
            Status::Skip,
            "host",
            "no sys/ under the root: cannot see /sys/kernel/iommu_groups",
        );
    }
    let groups = host.iommu_groups();
    if let Some(groups) = groups.as_ref().filter(|g| !g.is_empty()) {
        return Check::new(
            id,
            Status::Pass,
            "host",
            format!(
                "{} in {}",
                crate::text::plural(groups.len(), "IOMMU group", "IOMMU groups"),
                host.groups_place()
            ),
        );
    }
    let vendor = host.cpu_vendor();
    // /proc/cpuinfo says GenuineIntel or AuthenticAMD, libvirt Intel or AMD.
    let param = match vendor.as_deref() {
        Some(v) if v.contains("Intel") => Some(("intel_iommu=on", "VT-d")),
        Some(v) if v.contains("AMD") || v.contains("Hygon") => {
            Some(("amd_iommu=on", "the IOMMU (AMD-Vi)"))
        }
        _ => None,
    };
    let off: Vec<String> = host
        .cmdline
        .as_ref()
        .map(|c| shown(c, &["intel_iommu", "amd_iommu", "iommu"]))
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.ends_with("=off"))
        .collect();
    let mut message = format!(
        "no IOMMU groups ({} {}): the IOMMU is off, so VFIO cannot pass SR-IOV VFs through to VMs",
        host.groups_place(),
        match (&host.view, groups.is_some()) {
            (super::View::Libvirt { .. }, _) => "name none",
            (super::View::Tree(_), true) => "is empty",
            (super::View::Tree(_), false) => "is absent",
        }
    );
    if !off.is_empty() {
        message.push_str(&format!("; the kernel command line has {}", off.join(" ")));
    }
    let mut hint = match (param, vendor.as_deref()) {
        (Some((param, feature)), Some(vendor)) => format!(
            "enable {feature} in the firmware setup and add {param} to the kernel command line (the CPU is {vendor} in {}), then reboot",
            match host.view {
                super::View::Tree(_) => "/proc/cpuinfo",
                super::View::Libvirt { .. } => "libvirt's capabilities",
            }
        ),
        _ => "enable the IOMMU in the firmware setup and add intel_iommu=on (Intel CPUs) or amd_iommu=on (AMD CPUs) to the kernel command line, then reboot".to_owned(),
    };
    if !off.is_empty() {
        hint.push_str(&format!("; remove {}", off.join(" ")));
    }
    Check::new(id, Status::Warn, "host", message).hint(hint)
}

/// `iommu-dma-mode`: each NIC's IOMMU group type; strict `DMA` warns.
pub(super) fn dma_mode(host: &Host<'_>, fs: &Fs) -> Vec<Check> {
    let id = CheckId::IommuDmaMode;
    let nics = match host.nic_functions(id) {
        Ok(nics) => nics,
        Err(skip) => return vec![skip],
    };
    let cmdline = iommu_params(host);
    let strict_given = host
        .cmdline
        .as_ref()
        .and_then(|c| c.get("iommu.strict"))
        .is_some_and(|v| v == "1");
    // With the IOMMU off host-wide, say so once rather than once per NIC.
    let host_has_groups = fs.iommu_groups().is_some_and(|g| !g.is_empty());
    if !host_has_groups && nics.iter().all(|(_, f)| f.iommu_group.is_none()) {
        return vec![Check::new(
            id,
            Status::Skip,
            "nics",
            format!("no IOMMU groups: the IOMMU is off (see iommu-enabled); {cmdline}"),
        )];
    }
    nics.into_iter()
        .map(|(nic, function)| {
            let subject = nic.address.to_string();
            let Some(group) = function.iommu_group else {
                return Check::new(
                    id,
                    Status::Skip,
                    subject,
                    format!("no IOMMU group (the IOMMU is off: see iommu-enabled); {cmdline}"),
                );
            };
            let kind = fs.iommu_group_type(group, nic.address);
            group_type(subject, group, kind.as_deref(), strict_given, &cmdline)
        })
        .collect()
}

/// The kernel command line's IOMMU parameters, as the checks' messages end.
fn iommu_params(host: &Host<'_>) -> String {
    let params = host.cmdline.as_ref().map(|c| {
        shown(
            c,
            &[
                "iommu.strict",
                "iommu.passthrough",
                "iommu",
                "intel_iommu",
                "amd_iommu",
            ],
        )
    });
    match &params {
        None => "kernel command line unknown (no /proc/cmdline)".to_owned(),
        Some(params) if params.is_empty() => {
            "no iommu.strict= or iommu= on the kernel command line".to_owned()
        }
        Some(params) => format!("kernel command line: {}", params.join(" ")),
    }
}

/// `iommu-dma-mode` for the NIC `subject` in IOMMU group `group` of type
/// `kind` (`None`: no type file): strict `DMA` warns, with how to leave it.
fn group_type(
    subject: String,
    group: u32,
    kind: Option<&str>,
    strict_given: bool,
    cmdline: &str,
) -> Check {
    let id = CheckId::IommuDmaMode;
    match kind {
        None => Check::new(
            id,
            Status::Skip,
            subject,
            format!("IOMMU group {group} has no type file (older kernels do not report it); {cmdline}"),
        ),
        Some("DMA") => {
            let mut hint = "boot with iommu.strict=0 (lazy: the type becomes DMA-FQ) or iommu=pt (identity: host devices bypass translation, passed-through devices stay isolated)".to_owned();
            if strict_given {
                hint.push_str(", and remove iommu.strict=1");
            }
            Check::new(
                id,
                Status::Warn,
                subject,
                format!(
                    "IOMMU group {group} is type DMA (strict: every DMA unmap waits for an IOTLB flush); {STRICT_DMA_COST}; {cmdline}"
                ),
            )
            .hint(hint)
        }
        Some("DMA-FQ") => Check::new(
            id,
            Status::Pass,
            subject,
            format!("IOMMU group {group} is type DMA-FQ (lazy: IOTLB flushes are batched); {cmdline}"),
        ),
        Some("identity") => Check::new(
            id,
            Status::Pass,
            subject,
            format!("IOMMU group {group} is type identity (passthrough: host DMA is not translated); {cmdline}"),
        ),
        Some(other) => Check::new(
            id,
            Status::Skip,
            subject,
            format!("IOMMU group {group} is type {other}, not a DMA domain the host driver uses; {cmdline}"),
        ),
    }
}

/// `vfio-group-viable`: for every device bound to vfio-pci, and every SR-IOV
/// VF named with `--nic` or by the plan (a VF is there to be passed
/// through), every other endpoint of its IOMMU group must be on vfio-pci or
/// pci-stub, or have no driver; bridges do not count.
pub(super) fn group_viable(host: &Host<'_>) -> Vec<Check> {
    let id = CheckId::VfioGroupViable;
    let mut candidates: BTreeMap<PciAddress, &PciFunction> = host
        .functions
        .values()
        .filter(|f| f.driver.as_deref().is_some_and(is_vfio))
        .map(|f| (f.address, f))
        .collect();
    for nic in host.nics.iter().filter(|n| n.named) {
        if let Some(f) = host.function(nic.address).filter(|f| f.physfn.is_some()) {
            candidates.insert(f.address, f);
        }
    }
    let pfs = named_pfs(host);
    if candidates.is_empty() && !pfs.is_empty() {
        return pfs;
    }
    if candidates.is_empty() {
        return vec![Check::new(
            id,
            Status::Skip,
            "vfio",
            "no device is bound to vfio-pci, and no SR-IOV VF was named with --nic or in the plan",
        )];
    }
    candidates
        .into_values()
        .map(|device| device_group(host, device))
        .chain(pfs)
        .collect()
}

/// A named SR-IOV PF with VFs enabled is there for one of its VFs to be
/// passed through: one viable VF is enough (the fleet plan's rule).
fn named_pfs(host: &Host<'_>) -> Vec<Check> {
    let members = |group: u32| host.group_members(group);
    host.nics
        .iter()
        .filter(|n| n.named)
        .filter(|n| host.functions.values().any(|f| f.physfn == Some(n.address)))
        .map(|n| {
            let subject = n.address.to_string();
            match passthrough(&host.functions, &members, n.address) {
                Ok(()) => Check::new(
                    CheckId::VfioGroupViable,
                    Status::Pass,
                    subject,
                    "one of its VFs sits in an IOMMU group VFIO can take whole",
                ),
                Err(why) => Check::new(CheckId::VfioGroupViable, Status::Fail, subject, why.to_string()).hint(
                    "bind the other endpoints of a VF's group to vfio-pci, or move the card to a slot whose root port has ACS (each VF then gets a group of its own)",
                ),
            }
        })
        .collect()
}

/// Whether VFIO can take `device`'s whole IOMMU group.
fn device_group(host: &Host<'_>, device: &PciFunction) -> Check {
    let id = CheckId::VfioGroupViable;
    let subject = device.address.to_string();
    let Some(group) = device.iommu_group else {
        return Check::new(
            id,
            Status::Skip,
            subject,
            "no IOMMU group (the IOMMU is off: see iommu-enabled)",
        );
    };
    let itself = match device.driver.as_deref() {
        Some(d) if is_vfio(d) => String::new(),
        Some(d) => format!(
            " ({} itself is bound to {d}; libvirt's managed='yes' hands it to vfio-pci when the VM starts)",
            device.address
        ),
        None => format!(" ({} itself has no driver)", device.address),
    };
    let (fine, offending) =
        group_members(&host.group_members(group), &host.functions, device.address);
    if offending.is_empty() {
        let message = if fine == 0 {
            format!("IOMMU group {group} holds no other endpoint{itself}")
        } else {
            format!(
                "IOMMU group {group}: the {fine} other endpoint(s) are on vfio-pci or pci-stub or have no driver (bridges do not count){itself}"
            )
        };
        return Check::new(id, Status::Pass, subject, message);
    }
    let bound: Vec<String> = offending
        .iter()
        .map(|(a, d)| format!("{a} is bound to {d}"))
        .collect();
    let commands: Vec<String> = offending
        .iter()
        .map(|(a, _)| {
            format!(
                "echo vfio-pci > /sys/bus/pci/devices/{a}/driver_override; echo {a} > /sys/bus/pci/devices/{a}/driver/unbind; echo {a} > /sys/bus/pci/drivers_probe"
            )
        })
        .collect();
    Check::new(
        id,
        Status::Fail,
        subject,
        format!(
            "vfio error: {}: group {group} is not viable: {}; QEMU refuses to start the VM: \"Please ensure all devices within the iommu_group are bound to their vfio bus driver.\"{itself}",
            device.address,
            bound.join(", ")
        ),
    )
    .hint(format!(
        "bind them to vfio-pci too ({}), or move the card to a slot whose root port has ACS, so that it gets an IOMMU group of its own",
        commands.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::super::testroot::{find, plan, TestRoot, Vm};
    use super::super::{CheckId, Status};

    const NIC: &str = "0000:65:00.0";

    #[test]
    fn groups_present_pass_and_absent_warn_with_the_vendors_parameter() {
        let root = TestRoot::new("iommu-on");
        root.device(NIC, "0x020000").group(7, "DMA-FQ");
        root.device("0000:00:1f.0", "0x060100").group(3, "DMA-FQ");
        let c = root.check(None, CheckId::IommuEnabled, "host");
        assert_eq!(
            (c.status, c.message.as_str()),
            (Status::Pass, "2 IOMMU groups in /sys/kernel/iommu_groups")
        );
        let one = TestRoot::new("iommu-one-group");
        one.device(NIC, "0x020000").group(7, "DMA-FQ");
        let c = one.check(None, CheckId::IommuEnabled, "host");
        assert_eq!(c.message, "1 IOMMU group in /sys/kernel/iommu_groups");

        for (vendor, wanted, unwanted) in [
            ("GenuineIntel", "intel_iommu=on", "amd_iommu"),
            ("AuthenticAMD", "amd_iommu=on", "intel_iommu"),
            ("HygonGenuine", "amd_iommu=on", "intel_iommu"),
        ] {
            let root = TestRoot::new(&format!("iommu-off-{vendor}"));
            root.device(NIC, "0x020000");
            root.file(
                "proc/cpuinfo",
                &format!("processor\t: 0\nvendor_id\t: {vendor}\n"),
            );
            let c = root.check(None, CheckId::IommuEnabled, "host");
            assert_eq!(c.status, Status::Warn, "{vendor}");
            assert!(c.message.contains("is absent"), "{}", c.message);
            let hint = c.hint.unwrap_or_default();
            assert!(
                hint.contains(wanted) && !hint.contains(unwanted),
                "{vendor}: {hint}"
            );
        }

        // No vendor (ARM, or no cpuinfo): both parameters; an explicit off is named.
        let root = TestRoot::new("iommu-off-unknown");
        root.dir("sys/kernel/iommu_groups");
        root.file("proc/cmdline", "ro intel_iommu=off quiet\n");
        let c = root.check(None, CheckId::IommuEnabled, "host");
        assert_eq!(c.status, Status::Warn);
        assert!(
            c.message.contains("is empty") && c.message.contains("intel_iommu=off"),
            "{}",
            c.message
        );
        let hint = c.hint.unwrap_or_default();
        assert!(
            hint.contains("intel_iommu=on")
                && hint.contains("amd_iommu=on")
                && hint.contains("remove intel_iommu=off"),
            "{hint}"
        );
    }

    #[test]
    fn strict_dma_warns_with_the_measured_cost_lazy_and_identity_pass() {
        let root = TestRoot::new("dma-mode");
        root.file("proc/cmdline", "ro iommu.strict=1 quiet\n");
        root.device(NIC, "0x020000").group(12, "DMA");
        root.device("0000:65:00.1", "0x020000").group(13, "DMA-FQ");
        root.device("0000:66:00.0", "0x020000")
            .group(14, "identity");
        root.device("0000:67:00.0", "0x020000");
        let report = root.run(None, &[]);

        let strict = find(&report, CheckId::IommuDmaMode, NIC);
        assert_eq!(strict.status, Status::Warn);
        for needle in [
            "group 12 is type DMA",
            "72 %",
            "233,465 vs 835,123",
            "kernel command line: iommu.strict=1",
        ] {
            assert!(
                strict.message.contains(needle),
                "{needle}: {}",
                strict.message
            );
        }
        let hint = strict.hint.clone().unwrap_or_default();
        assert!(
            hint.contains("iommu.strict=0")
                && hint.contains("iommu=pt")
                && hint.contains("remove iommu.strict=1"),
            "{hint}"
        );

        for (address, kind) in [("0000:65:00.1", "DMA-FQ"), ("0000:66:00.0", "identity")] {
            let c = find(&report, CheckId::IommuDmaMode, address);
            assert_eq!(c.status, Status::Pass, "{}", c.message);
            assert!(
                c.message.contains(&format!("is type {kind}")),
                "{}",
                c.message
            );
        }
        let none = find(&report, CheckId::IommuDmaMode, "0000:67:00.0");
        assert_eq!(none.status, Status::Skip);
        assert!(
            none.message.starts_with("no IOMMU group"),
            "{}",
            none.message
        );
    }

    /// A root whose IOMMU group 1 (lazy DMA) holds these functions:
    /// (address, class, driver).
    fn group_1(name: &str, members: &[(&str, &str, Option<&str>)]) -> TestRoot {
        let root = TestRoot::new(name);
        for (address, class, driver) in members {
            let device = root.device(address, class);
            match driver {
                Some(driver) => device.driver(driver),
                None => device,
            }
            .group(1, "DMA-FQ");
        }
        root
    }

    #[test]
    fn a_second_device_on_another_driver_makes_the_group_not_viable() {
        // The lab's failure: 01:00.1 on vfio-pci, 01:00.0 still on its NIC driver.
        let root = group_1(
            "vfio-not-viable",
            &[
                ("0000:01:00.1", "0x020000", Some("vfio-pci")),
                ("0000:01:00.0", "0x020000", Some("mlx5_core")),
                ("0000:00:01.0", "0x060400", Some("pcieport")),
            ],
        );
        let c = root.check(None, CheckId::VfioGroupViable, "0000:01:00.1");
        assert_eq!(c.status, Status::Fail);
        assert!(c.message.contains("vfio error: 0000:01:00.1: group 1 is not viable: 0000:01:00.0 is bound to mlx5_core"), "{}", c.message);
        assert!(
            !c.message.contains("0000:00:01.0"),
            "bridges do not count: {}",
            c.message
        );
        let hint = c.hint.unwrap_or_default();
        assert!(
            hint.contains("echo vfio-pci > /sys/bus/pci/devices/0000:01:00.0/driver_override")
                && hint.contains("ACS"),
            "{hint}"
        );
    }

    #[test]
    fn stub_unbound_and_bridges_keep_the_group_viable() {
        let root = group_1(
            "vfio-viable",
            &[
                ("0000:01:00.1", "0x020000", Some("vfio-pci")),
                ("0000:01:00.0", "0x020000", Some("pci-stub")),
                ("0000:01:00.2", "0x020000", None),
                ("0000:01:00.3", "0x020000", Some("mlx5_vfio_pci")),
                ("0000:00:01.0", "0x060400", Some("pcieport")),
            ],
        );
        let report = root.run(None, &[]);
        let c = find(&report, CheckId::VfioGroupViable, "0000:01:00.1");
        assert_eq!(c.status, Status::Pass, "{}", c.message);
        assert!(
            c.message.contains("the 3 other endpoint(s)"),
            "{}",
            c.message
        );
        // The vendor variant driver is checked too.
        assert_eq!(
            find(&report, CheckId::VfioGroupViable, "0000:01:00.3").status,
            Status::Pass
        );
    }

    #[test]
    fn named_vfs_are_checked_and_nothing_to_check_skips() {
        let root = TestRoot::new("vfio-named-vf");
        root.device("0000:65:00.0", "0x020000")
            .driver("mlx5_core")
            .attr("sriov_totalvfs", "4")
            .attr("sriov_numvfs", "2")
            .group(5, "DMA");
        root.device("0000:65:00.2", "0x020000")
            .driver("mlx5_core")
            .physfn("0000:65:00.0")
            .group(9, "DMA");
        let c = root.check(None, CheckId::VfioGroupViable, "vfio");
        assert_eq!(c.status, Status::Skip);

        let vf_plan = plan("0", &[Vm::on_nic("vm1", "1-2", "0000:65:00.2")]);
        let c = root.check(Some(vf_plan), CheckId::VfioGroupViable, "0000:65:00.2");
        assert_eq!(c.status, Status::Pass, "{}", c.message);
        assert!(
            c.message
                .contains("holds no other endpoint (0000:65:00.2 itself is bound to mlx5_core"),
            "{}",
            c.message
        );
    }
}
