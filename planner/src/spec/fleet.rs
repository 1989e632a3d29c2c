//! Fleet specs: `[[host]]` tables instead of the one `[host]`, each with a
//! `name`, where its topology comes from (`connect` or `source`), and every
//! `[host]` key for that host; `[[vm]]`s may say `host`/`hosts` and
//! `movable`. Each host becomes a single-host [`Spec`] with every VM, read
//! against that host's tables, so that the single-host checks and sizing
//! hold per host unchanged.

use super::parse::Lines;
use super::schema::{HostSection, SpecFile, VmSection};
use super::{Spec, SpecError};
use crate::topology::{PciAddress, Source};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// A parsed and checked fleet spec.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSpec {
    /// The file.
    pub file: PathBuf,
    /// The hosts, in spec order.
    pub hosts: Vec<FleetHost>,
    /// The VMs, in spec order.
    pub vms: Vec<FleetVm>,
}

/// One `[[host]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetHost {
    /// Its name: the directory of its plan in `plan --out DIR`.
    pub name: String,
    /// The line of its `[[host]]`.
    pub line: usize,
    /// Where its topology comes from: `source`, else its connection.
    pub source: Source,
    /// Its libvirt URI (`connect`), through which its running domains are
    /// read.
    pub connect: Option<String>,
    /// A filesystem root for `doctor`'s facts (a captured tree, or `/`).
    pub doctor_root: Option<PathBuf>,
    /// Its names for its NICs (`nic_names`), which VMs may give as `nic`.
    pub nic_names: BTreeMap<String, PciAddress>,
    /// The host as a single-host spec: its `[host]` keys and every VM.
    pub spec: Spec,
}

/// One `[[vm]]` as the fleet sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetVm {
    /// Its name.
    pub name: String,
    /// The line of its `[[vm]]`.
    pub line: usize,
    /// The hosts it may go to (`host` or `hosts`); `None`: any.
    pub hosts: Option<BTreeSet<String>>,
    /// A running VM may move to another host.
    pub movable: bool,
    /// Its NICs given by address (passed through: a host must have them in
    /// a viable IOMMU group).
    pub nics: Vec<PciAddress>,
    /// Its NICs given by name: each host's `nic_names` says which address
    /// that is there; a host without the name cannot take the VM.
    pub nic_names: Vec<String>,
    /// It runs real-time vCPUs (a host must allow SCHED_FIFO).
    pub realtime: bool,
}

impl FleetSpec {
    /// `vm`'s NICs on `host`: its addresses, and its NIC names as that host
    /// resolves them; `Err` says which name the host lacks.
    pub fn nics_on(&self, vm: &FleetVm, host: &FleetHost) -> Result<Vec<PciAddress>, String> {
        let mut nics = vm.nics.clone();
        for name in &vm.nic_names {
            match host.nic_names.get(name) {
                Some(&a) => nics.push(a),
                None => {
                    return Err(format!(
                        "{} has no NIC named {name:?} (its nic_names): add it there, or keep the VM off it with hosts = [...]",
                        host.name
                    ))
                }
            }
        }
        Ok(nics)
    }
}

/// Every NIC string of a `[[vm]]`: `nic`, and each `nics[].addr`.
fn nic_strings(vm: &VmSection) -> Vec<&str> {
    vm.nic
        .iter()
        .map(|n| n.get_ref().as_str())
        .chain(
            vm.nics
                .iter()
                .flat_map(|l| l.get_ref().iter().map(|e| e.addr.get_ref().as_str())),
        )
        .collect()
}

/// What each NIC name `raw`'s VMs give becomes on a host with `names`
/// (`None`: the host has no such name): hosts that agree on it read the VMs
/// alike.
fn names_used(
    raw: &SpecFile,
    names: &BTreeMap<String, PciAddress>,
    all: &BTreeSet<String>,
) -> BTreeMap<String, Option<PciAddress>> {
    raw.vm
        .iter()
        .flat_map(|vm| nic_strings(vm.get_ref()))
        .filter(|n| all.contains(*n))
        .map(|n| (n.to_owned(), names.get(n).copied()))
        .collect()
}

/// `raw` as a host with `names` sees it: each NIC name its VMs give replaced
/// by the host's address for it, or dropped when the host has none (the VM
/// is refused there).
fn resolve_names(
    raw: &SpecFile,
    names: &BTreeMap<String, PciAddress>,
    all: &BTreeSet<String>,
) -> SpecFile {
    let mut out = raw.clone();
    let resolve = |text: &str| -> Option<Option<String>> {
        all.contains(text)
            .then(|| names.get(text).map(ToString::to_string))
    };
    for vm in &mut out.vm {
        let v = vm.get_mut();
        if let Some(nic) = &v.nic {
            match resolve(nic.get_ref()) {
                Some(Some(address)) => v.nic = Some(Spanned::new(nic.span(), address)),
                Some(None) => v.nic = None,
                None => {}
            }
        }
        if let Some(list) = &mut v.nics {
            let span = list.span();
            let mut kept = Vec::new();
            for mut entry in list.get_ref().clone() {
                match resolve(entry.addr.get_ref()) {
                    Some(Some(address)) => {
                        entry.addr = Spanned::new(entry.addr.span(), address);
                        kept.push(entry);
                    }
                    Some(None) => {}
                    None => kept.push(entry),
                }
            }
            v.nics = (!kept.is_empty()).then(|| Spanned::new(span, kept));
        }
    }
    out
}

/// A spec file of either kind.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // one per command run
pub enum AnySpec {
    /// `[host]`: one host.
    One(Spec),
    /// `[[host]]`: a fleet.
    Fleet(FleetSpec),
}

impl AnySpec {
    /// Reads and checks a spec file of either kind.
    pub fn load(path: &Path) -> Result<AnySpec, SpecError> {
        let text = super::read_spec_text(path)?;
        Spec::parse_any(path, &text)
    }
}

impl Spec {
    /// The fleet of `raw`, whose `host` is `[[host]]` tables.
    pub(super) fn parse_fleet(
        path: &Path,
        raw: &SpecFile,
        hosts: &[Spanned<HostSection>],
        lines: &Lines,
    ) -> Result<FleetSpec, SpecError> {
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        let mut fleet = FleetSpec {
            file: path.to_owned(),
            hosts: Vec::new(),
            vms: Vec::new(),
        };
        if hosts.is_empty() {
            return Err(Spec::at(
                path,
                1,
                "host",
                "a fleet spec needs at least one [[host]]",
            ));
        }
        // Every host's NIC names, checked, before any host is read: a VM's
        // `nic` may be one of them.
        let mut host_nics: Vec<BTreeMap<String, PciAddress>> = Vec::new();
        for entry in hosts {
            let mut map = BTreeMap::new();
            for (name, address) in entry.get_ref().nic_names.iter().flat_map(|m| m.get_ref()) {
                let at = lines.of(address);
                if name.parse::<PciAddress>().is_ok() || name.trim().is_empty() {
                    return Err(Spec::at(
                        path,
                        at,
                        "host.nic_names",
                        &format!("NIC name {name:?} is empty or reads as a PCI address: give a word, e.g. uplink = \"{}\"", address.get_ref()),
                    ));
                }
                let parsed: PciAddress = address.get_ref().parse().map_err(|e| {
                    Spec::at(
                        path,
                        at,
                        "host.nic_names",
                        &format!("nic_names.{name}: {e}"),
                    )
                })?;
                map.insert(name.clone(), parsed);
            }
            host_nics.push(map);
        }
        let all_names: BTreeSet<String> =
            host_nics.iter().flat_map(|m| m.keys().cloned()).collect();
        let uses_names = raw.vm.iter().any(|vm| {
            nic_strings(vm.get_ref())
                .iter()
                .any(|n| all_names.contains(*n))
        });
        let mut last_used: Option<BTreeMap<String, Option<PciAddress>>> = None;
        let mut resolved: Option<SpecFile> = None;
        let mut names = BTreeSet::new();
        for (h, entry) in hosts.iter().enumerate() {
            let line = lines.of(entry);
            let section = entry.get_ref();
            let name = match &section.name {
                Some(n) => n.get_ref().trim().to_owned(),
                None => {
                    return Err(Spec::at(
                        path,
                        line,
                        "host.name",
                        "each [[host]] needs a name",
                    ));
                }
            };
            if let Some(reason) = super::parse::bad_vm_name(&name) {
                return Err(Spec::at(
                    path,
                    line,
                    "host.name",
                    &format!("host name {name:?} {reason}: it names the host's directory in plan --out DIR"),
                ));
            }
            if name.is_empty() || !names.insert(name.clone()) {
                return Err(Spec::at(
                    path,
                    line,
                    "host.name",
                    &format!("host name {name:?} is empty or given twice"),
                ));
            }
            let file = |s: &Spanned<String>| match s.get_ref().strip_prefix("synthetic:") {
                Some(d) => Source::Synthetic(d.to_owned()),
                None => Source::File(base.join(s.get_ref())),
            };
            // The topology from `source` when given, else through `connect`;
            // the running domains through `connect`.
            let source = match (&section.connect, &section.source) {
                (_, Some(s)) => file(s),
                (Some(uri), None) => Source::Libvirt(uri.get_ref().clone()),
                (None, None) => {
                    return Err(Spec::at(
                        path,
                        line,
                        "host.connect",
                        &format!("host {name}: give connect = \"URI\" (read through libvirt), source = \"FILE\" (a captured topology), or both (the topology from the file, the running domains through the URI)"),
                    ));
                }
            };
            let connect = section.connect.as_ref().map(|c| c.get_ref().clone());
            let mut single = HostSection {
                name: None,
                connect: None,
                doctor_root: None,
                nic_names: None,
                ..section.clone()
            };
            single.source = None;
            // With NIC names, the VMs as this host resolves them; hosts that
            // resolve them alike share the VMs read.
            // (The VMs are resolved again only for a host that resolves the
            // names otherwise than the host before.)
            let used = uses_names.then(|| names_used(raw, &host_nics[h], &all_names));
            if used.is_some() && used != last_used {
                resolved = Some(resolve_names(raw, &host_nics[h], &all_names));
            }
            let reuse = fleet
                .hosts
                .last()
                .map(|h: &FleetHost| &h.spec)
                .filter(|_| used == last_used);
            let mut spec = Spec::from_host(
                path,
                &single,
                base,
                resolved.as_ref().unwrap_or(raw),
                lines,
                reuse,
            )
            .map_err(|e| e.for_host(&name))?;
            last_used = used;
            spec.source = Some(source.clone());
            fleet.hosts.push(FleetHost {
                name,
                line,
                source,
                connect,
                doctor_root: section.doctor_root.as_ref().map(|r| base.join(r.get_ref())),
                nic_names: host_nics[h].clone(),
                spec,
            });
        }
        // Whether each VM is real-time, looked up by name once (20,000 VMs
        // scanned for every VM made the parse quadratic).
        let realtime: BTreeMap<&str, bool> = fleet.hosts[0]
            .spec
            .vms
            .iter()
            .map(|v| (v.name.as_str(), v.realtime || v.realtime_vcpus.is_some()))
            .collect();
        let mut vms = Vec::with_capacity(raw.vm.len());
        for vm in &raw.vm {
            let line = lines.of(vm);
            let section = vm.get_ref();
            let name = section.name.get_ref().trim().to_owned();
            let hosts = match (&section.host, &section.hosts) {
                (Some(_), Some(list)) => {
                    return Err(Spec::at(
                        path,
                        lines.of(list),
                        "vm.hosts",
                        &format!("{name}: give host = \"NAME\" or hosts = [...], not both"),
                    ));
                }
                (Some(h), None) => Some((vec![h.get_ref().clone()], lines.of(h))),
                (None, Some(list)) => Some((list.get_ref().clone(), lines.of(list))),
                (None, None) => None,
            };
            let hosts = match hosts {
                None => None,
                Some((list, at)) => {
                    let mut set = BTreeSet::new();
                    for h in list {
                        if !names.contains(&h) {
                            let mut e = Spec::at(
                                path,
                                at,
                                "vm.hosts",
                                &format!("{name}: no [[host]] is named {h:?}"),
                            );
                            e.hint = Some(format!(
                                "hosts: {}",
                                names.iter().cloned().collect::<Vec<_>>().join(", ")
                            ));
                            return Err(e);
                        }
                        set.insert(h);
                    }
                    Some(set)
                }
            };
            let nics = nic_strings(section);
            vms.push(FleetVm {
                realtime: realtime.get(name.as_str()).copied().unwrap_or(false),
                name,
                line,
                hosts,
                movable: section
                    .movable
                    .as_ref()
                    .or(raw.defaults.movable.as_ref())
                    .is_some_and(|m| *m.get_ref()),
                nics: nics.iter().filter_map(|n| n.parse().ok()).collect(),
                nic_names: nics
                    .iter()
                    .filter(|n| all_names.contains(**n))
                    .map(|n| (*n).to_owned())
                    .collect(),
            });
        }
        fleet.vms = vms;
        Ok(fleet)
    }
}

impl SpecError {
    /// The error, saying which `[[host]]` it is about.
    fn for_host(mut self, host: &str) -> SpecError {
        self.message = format!("host {host}: {}", self.message);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Each host's VMs carry that host's address for a NIC name; hosts that
    /// resolve alike share their VMs, hosts that do not never do.
    #[test]
    fn nic_names_resolve_per_host_and_are_not_shared_across_hosts() {
        let host = |name: &str, names: &str| {
            format!(
                "[[host]]\nname = \"{name}\"\nsource = \"synthetic:package:1 core:4 pu:1\"\n{names}\n"
            )
        };
        let text = format!(
            "{}{}{}{}[[vm]]\nname = \"v\"\nvcpus = 1\nnic = \"uplink\"\nnic_affinity = \"ignore\"\n\
             [[vm]]\nname = \"w\"\nvcpus = 1\nnics = [{{ addr = \"uplink\" }}, {{ addr = \"0000:02:00.0\" }}]\nnic_affinity = \"ignore\"\n",
            host("a", "nic_names = { uplink = \"0000:01:00.0\" }"),
            host("a2", "nic_names = { uplink = \"0000:01:00.0\" }"),
            host("b", "nic_names = { uplink = \"0000:65:00.0\" }"),
            host("c", ""),
        );
        let Ok(AnySpec::Fleet(fleet)) = Spec::parse_any(Path::new("f.toml"), &text) else {
            panic!("not a fleet");
        };
        let addr = |t: &str| t.parse::<PciAddress>().unwrap();
        let nics_of = |h: usize, vm: usize| -> Vec<PciAddress> {
            fleet.hosts[h].spec.vms[vm]
                .nics
                .iter()
                .map(|n| n.0)
                .collect()
        };
        assert_eq!(nics_of(0, 0), vec![addr("0000:01:00.0")]);
        assert_eq!(nics_of(2, 0), vec![addr("0000:65:00.0")]);
        assert!(nics_of(3, 0).is_empty());
        assert_eq!(
            nics_of(2, 1),
            vec![addr("0000:65:00.0"), addr("0000:02:00.0")]
        );
        assert_eq!(nics_of(3, 1), vec![addr("0000:02:00.0")]);
        assert!(Arc::ptr_eq(
            &fleet.hosts[0].spec.vms,
            &fleet.hosts[1].spec.vms
        ));
        assert!(!Arc::ptr_eq(
            &fleet.hosts[1].spec.vms,
            &fleet.hosts[2].spec.vms
        ));
        let w = &fleet.vms[1];
        assert_eq!(
            (w.nics.clone(), w.nic_names.clone()),
            (vec![addr("0000:02:00.0")], vec!["uplink".to_owned()])
        );
        assert_eq!(
            fleet.nics_on(w, &fleet.hosts[2]),
            Ok(vec![addr("0000:02:00.0"), addr("0000:65:00.0")])
        );
        assert!(fleet
            .nics_on(w, &fleet.hosts[3])
            .unwrap_err()
            .contains("c has no NIC named \"uplink\""));
    }
}
