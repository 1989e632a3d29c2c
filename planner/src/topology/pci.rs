//! PCI devices in a topology: address, class, OS names, NUMA locality, PCIe link.
//! Which devices a source reports, and how, is the readers' business.

use crate::cpuset::CpuSet;
use crate::ids::NodeId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A PCI function address, printed `DDDD:BB:DD.F` as sysfs and libvirt do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    /// PCI domain (segment); can exceed 16 bits on some hypervisors.
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) number.
    pub device: u8,
    /// Function number.
    pub function: u8,
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl PciAddress {
    /// From libvirt's `domain`, `bus`, `slot` and `function` numbers (node
    /// device capabilities, a domain's `<address type='pci'>`), as `field`
    /// reads them; `None` when one is missing or out of range.
    pub(crate) fn from_libvirt(field: impl Fn(&str) -> Option<u64>) -> Option<PciAddress> {
        Some(PciAddress {
            domain: u32::try_from(field("domain")?).ok()?,
            bus: u8::try_from(field("bus")?).ok()?,
            device: u8::try_from(field("slot")?).ok().filter(|d| *d <= 0x1f)?,
            function: u8::try_from(field("function")?).ok().filter(|f| *f <= 7)?,
        })
    }
}

/// A libvirt XML number: `0x`-prefixed hex, else decimal.
pub(crate) fn parse_int(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// Why a PCI address did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a PCI address: write it as DDDD:BB:DD.F, e.g. 0000:65:00.0")]
pub struct PciAddressError(pub String);

impl FromStr for PciAddress {
    type Err = PciAddressError;

    /// Accepts `0000:65:00.0` and the short `65:00.0` (domain 0).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || PciAddressError(text.to_owned());
        let trimmed = text.trim();
        let (rest, function) = trimmed.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, s] => (*d, *b, *s),
            [b, s] => ("0", *b, *s),
            _ => return Err(bad()),
        };
        let hex = |s: &str, max_len: usize| {
            if s.is_empty() || s.len() > max_len {
                return Err(bad());
            }
            u32::from_str_radix(s, 16).map_err(|_| bad())
        };
        let small = |v: u32, max: u32| u8::try_from(v).ok().filter(|v| u32::from(*v) <= max);
        Ok(PciAddress {
            domain: hex(domain, 8)?,
            bus: small(hex(bus, 2)?, 0xff).ok_or_else(bad)?,
            device: small(hex(device, 2)?, 0x1f).ok_or_else(bad)?,
            function: small(hex(function, 1)?, 7).ok_or_else(bad)?,
        })
    }
}

impl Serialize for PciAddress {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PciAddress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A PCIe link's state, as far as the source tells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    /// Current speed per lane in GT/s (2.5, 5, 8, 16, 32).
    pub speed_gts: Option<f64>,
    /// Current number of lanes.
    pub width: Option<u32>,
    /// Capability (maximum) speed per lane in GT/s.
    pub max_speed_gts: Option<f64>,
    /// Capability (maximum) number of lanes.
    pub max_width: Option<u32>,
    /// Usable bandwidth in GB/s as hwloc computes it (after line encoding).
    pub gbytes_per_s: Option<f64>,
}

/// A PCI device the topology source knows about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PciDevice {
    /// Bus address.
    pub address: PciAddress,
    /// PCI class and subclass, e.g. `0x0200` (Ethernet).
    pub class_id: PciClass,
    /// Readable class name, e.g. `Ethernet controller`.
    pub class: String,
    /// Vendor id, e.g. `0x15b3`.
    pub vendor_id: Option<String>,
    /// Device id, e.g. `0x101d`.
    pub device_id: Option<String>,
    /// Vendor name, when the source has it.
    pub vendor: Option<String>,
    /// Device name, when the source has it.
    pub device: Option<String>,
    /// OS device names: network interfaces (`ens1f0`), RDMA devices, disks.
    pub names: Vec<String>,
    /// The NUMA node the device is attached to; `None` when unknown (sysfs
    /// `numa_node` of -1, or locality spanning several nodes).
    pub numa_node: Option<NodeId>,
    /// CPUs local to the device, when known.
    pub local_cpus: Option<CpuSet>,
    /// PCIe link, when known.
    pub link: Option<PcieLink>,
}

impl PciDevice {
    /// Whether hwloc would keep this device with its "important" I/O filter:
    /// storage, network, display, processors and accelerators, Fibre Channel,
    /// InfiniBand — not bridges, USB, audio and the like.
    pub fn is_important(&self) -> bool {
        let class = self.class_id.0;
        matches!(class >> 8, 0x00..=0x03 | 0x0b | 0x12) || matches!(class, 0x0c04 | 0x0c06)
    }

    /// Whether this is a network controller (PCI class 0x02).
    pub fn is_network(&self) -> bool {
        self.class_id.0 >> 8 == 0x02
    }
}

/// A PCI class and subclass (`0x0200`, Ethernet), written and read in that
/// form in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciClass(pub u16);

impl std::fmt::Display for PciClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(&format!("0x{:04x}", self.0))
    }
}

impl Serialize for PciClass {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PciClass {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.strip_prefix("0x")
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
            .map(PciClass)
            .ok_or_else(|| {
                serde::de::Error::custom(format!("{text:?} is not a PCI class like 0x0200"))
            })
    }
}

/// The PCI-SIG name of a class/subclass (the part of `lspci` before the colon).
pub(crate) fn class_name(class_id: u16) -> String {
    let name = match class_id {
        0x0100 => "SCSI storage controller",
        0x0101 => "IDE interface",
        0x0104 => "RAID bus controller",
        0x0106 => "SATA controller",
        0x0107 => "Serial Attached SCSI controller",
        0x0108 => "Non-Volatile memory controller",
        0x0200 => "Ethernet controller",
        0x0207 => "Infiniband controller",
        0x0208 => "Fabric controller",
        0x0280 => "Network controller",
        0x0300 => "VGA compatible controller",
        0x0302 => "3D controller",
        0x0380 => "Display controller",
        0x0403 => "Audio device",
        0x0600 => "Host bridge",
        0x0604 => "PCI bridge",
        0x0880 => "System peripheral",
        0x0b40 => "Co-processor",
        0x0c03 => "USB controller",
        0x0c04 => "Fibre Channel",
        0x0c05 => "SMBus",
        0x1200 => "Processing accelerators",
        _ => match class_id >> 8 {
            0x01 => "Mass storage controller",
            0x02 => "Network controller",
            0x03 => "Display controller",
            0x04 => "Multimedia controller",
            0x05 => "Memory controller",
            0x06 => "Bridge",
            0x0c => "Serial bus controller",
            0x12 => "Processing accelerators",
            _ => "Unclassified device",
        },
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_and_print() {
        for (text, printed) in [
            ("0000:65:00.0", "0000:65:00.0"),
            ("65:00.1", "0000:65:00.1"),
            ("10000:01:1f.7", "10000:01:1f.7"),
            (" 0000:AF:00.0 ", "0000:af:00.0"),
        ] {
            let parsed: Result<PciAddress, _> = text.parse();
            assert_eq!(
                parsed.map(|a| a.to_string()),
                Ok(printed.to_owned()),
                "{text}"
            );
        }
        for bad in [
            "",
            "65:00",
            "0000:65:00.8",
            "0000:65:20.0",
            "zz:00.0",
            "0:0:0:0.0",
        ] {
            assert!(
                bad.parse::<PciAddress>().is_err(),
                "{bad:?} should not parse"
            );
        }
    }

    #[test]
    fn classes_read_and_write_as_four_hex_digits() {
        let class: PciClass = serde_json::from_str("\"0x0200\"").unwrap_or(PciClass(0));
        assert_eq!(class, PciClass(0x0200));
        assert_eq!(
            serde_json::to_string(&PciClass(0x0c04)).ok().as_deref(),
            Some("\"0x0c04\"")
        );
        assert!(serde_json::from_str::<PciClass>("\"0200\"").is_err());
        assert!(serde_json::from_str::<PciClass>("\"0x1ffff\"").is_err());
    }

    #[test]
    fn class_names() {
        assert_eq!(class_name(0x0200), "Ethernet controller");
        assert_eq!(class_name(0x0290), "Network controller");
        assert_eq!(class_name(0xff00), "Unclassified device");
    }
}

/// Reads a sysfs PCIe speed in any spelling the kernel has used (`8 GT/s`,
/// `8.0 GT/s PCIe`, `16.0 GT/s PCIe`, `2.5 GT/s`); `None` for `Unknown` and the like.
pub fn parse_link_speed(text: &str) -> Option<f64> {
    let number = text.split_whitespace().next()?;
    let rest = text.trim_start().get(number.len()..)?.trim_start();
    if !rest.starts_with("GT/s") {
        return None;
    }
    number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// Reads what sysfs says about one PCI function's locality and link; used for
/// the live host, where hwloc's view loses the "unknown" (-1) NUMA node.
pub(crate) fn read_sysfs(sys_devices: &std::path::Path, device: &mut PciDevice) {
    let dir = sys_devices.join(device.address.to_string());
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    if let Some(node) = read("numa_node") {
        device.numa_node = node
            .trim()
            .parse::<i64>()
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .map(NodeId);
    }
    if let Some(list) = read("local_cpulist") {
        device.local_cpus = list.trim().parse().ok();
    }
    if let Some(read) = read_sysfs_link(&dir) {
        let link = device.link.get_or_insert(PcieLink {
            speed_gts: None,
            width: None,
            max_speed_gts: None,
            max_width: None,
            gbytes_per_s: None,
        });
        link.speed_gts = read.speed_gts.or(link.speed_gts);
        link.width = read.width.or(link.width);
        link.max_speed_gts = read.max_speed_gts.or(link.max_speed_gts);
        link.max_width = read.max_width.or(link.max_width);
    }
}

/// Reads the `current_link_*` and `max_link_*` attributes of one PCI
/// function's sysfs directory; `None` when none of them says anything
/// (absent, `Unknown`, width 0). `gbytes_per_s` is left unknown.
pub(crate) fn read_sysfs_link(dir: &std::path::Path) -> Option<PcieLink> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let lanes = |name: &str| {
        read(name)
            .and_then(|s| s.trim().parse::<u32>().ok())
            .filter(|w| *w > 0)
    };
    let link = PcieLink {
        speed_gts: read("current_link_speed").and_then(|s| parse_link_speed(&s)),
        width: lanes("current_link_width"),
        max_speed_gts: read("max_link_speed").and_then(|s| parse_link_speed(&s)),
        max_width: lanes("max_link_width"),
        gbytes_per_s: None,
    };
    let known = link.speed_gts.is_some()
        || link.width.is_some()
        || link.max_speed_gts.is_some()
        || link.max_width.is_some();
    known.then_some(link)
}

/// The data rate a PCIe link carries after line encoding, in Gb/s:
/// GT/s per lane × lanes × 128b/130b above 5 GT/s (PCIe 3.0 and later), or
/// × 8b/10b at 5 GT/s and below (PCIe 1.x and 2.0). Packet (TLP) overhead
/// comes on top, so real payload throughput is lower still.
///
/// ```
/// use pinplan::topology::link_gbps;
/// // 8 GT/s x16: 8 × 16 × 128/130 = 126.03 Gb/s; 2.5 GT/s x1: 2.5 × 0.8 = 2 Gb/s.
/// assert!((link_gbps(8.0, 16) - 126.03).abs() < 0.01);
/// assert_eq!(link_gbps(2.5, 1), 2.0);
/// ```
pub fn link_gbps(speed_gts: f64, width: u32) -> f64 {
    let encoding = if speed_gts > 5.0 {
        128.0 / 130.0
    } else {
        8.0 / 10.0
    };
    speed_gts * f64::from(width) * encoding
}

#[cfg(test)]
mod speed_tests {
    use super::parse_link_speed;

    #[test]
    fn link_speed_spellings() {
        for (text, expected) in [
            ("8 GT/s", Some(8.0)),
            ("8.0 GT/s PCIe\n", Some(8.0)),
            ("16.0 GT/s PCIe", Some(16.0)),
            ("2.5 GT/s", Some(2.5)),
            ("Unknown", None),
            ("", None),
            ("8 Gb/s", None),
        ] {
            assert_eq!(parse_link_speed(text), expected, "{text:?}");
        }
    }

    #[test]
    fn link_bandwidth_after_encoding() {
        // Worked by hand: GT/s × lanes × 8/10 up to 5 GT/s, × 128/130 above.
        for (speed, width, gbps) in [
            (2.5, 1, 2.0),
            (5.0, 8, 32.0),
            (8.0, 8, 63.015_384),
            (8.0, 16, 126.030_769),
            (16.0, 8, 126.030_769),
            (16.0, 16, 252.061_538),
            (32.0, 16, 504.123_077),
        ] {
            let got = super::link_gbps(speed, width);
            assert!((got - gbps).abs() < 1e-5, "{speed} GT/s x{width}: {got}");
        }
    }
}
