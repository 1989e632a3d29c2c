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
    pub fn nics_on(&self, vm: &FleetVm, host: &FleetHost) -> Result<Vec<PciAddress>, NoSuchNic> {
        let mut nics = vm.nics.clone();
        for name in &vm.nic_names {
            match host.nic_names.get(name) {
                Some(&a) => nics.push(a),
                None => {
                    return Err(NoSuchNic {
                        host: host.name.clone(),
                        name: name.clone(),
                    })
                }
            }
        }
        Ok(nics)
    }
}

/// A VM names a NIC by a name its host does not give (`nic_names`): the VM
/// cannot go there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{host} has no NIC named {name:?} (its nic_names): add it there, or keep the VM off it with hosts = [...]")]
pub struct NoSuchNic {
    /// The host.
    pub host: String,
    /// The NIC name.
    pub name: String,
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
    /// A fleet spec: every `[[host]]` read as a single-host spec with every
    /// VM, then the VMs' fleet keys (`host`/`hosts`, `movable`, NICs).
    pub(super) fn parse_fleet(
        path: &Path,
        raw: &SpecFile,
        hosts: &[Spanned<HostSection>],
        lines: &Lines,
    ) -> Result<FleetSpec, SpecError> {
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
        let host_nics = hosts
            .iter()
            .map(|entry| nic_names(path, entry.get_ref(), lines))
            .collect::<Result<Vec<_>, _>>()?;
        let all_names: BTreeSet<String> =
            host_nics.iter().flat_map(|m| m.keys().cloned()).collect();
        let mut reader = HostReader {
            path,
            base: path.parent().unwrap_or_else(|| Path::new(".")),
            raw,
            lines,
            uses_names: raw.vm.iter().any(|vm| {
                nic_strings(vm.get_ref())
                    .iter()
                    .any(|n| all_names.contains(*n))
            }),
            all_names: &all_names,
            last_used: None,
            resolved: None,
            names: BTreeSet::new(),
        };
        let mut fleet_hosts: Vec<FleetHost> = Vec::new();
        for (entry, nics) in hosts.iter().zip(host_nics) {
            let host = reader.read(entry, nics, fleet_hosts.last())?;
            fleet_hosts.push(host);
        }
        let vms = read_vms(path, raw, lines, &fleet_hosts, &reader.names, &all_names)?;
        Ok(FleetSpec {
            file: path.to_owned(),
            hosts: fleet_hosts,
            vms,
        })
    }
}

/// A `[[host]]`'s `nic_names`, each a word for a PCI address.
fn nic_names(
    path: &Path,
    section: &HostSection,
    lines: &Lines,
) -> Result<BTreeMap<String, PciAddress>, SpecError> {
    let mut map = BTreeMap::new();
    for (name, address) in section.nic_names.iter().flat_map(|m| m.get_ref()) {
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
    Ok(map)
}

/// Reads the `[[host]]`s one after another: each a single-host spec with
/// every VM as that host resolves its NIC names.
struct HostReader<'a> {
    path: &'a Path,
    base: &'a Path,
    raw: &'a SpecFile,
    lines: &'a Lines<'a>,
    /// Whether any VM names a NIC by one of the hosts' NIC names.
    uses_names: bool,
    all_names: &'a BTreeSet<String>,
    /// How the host before resolved the NIC names the VMs use.
    last_used: Option<BTreeMap<String, Option<PciAddress>>>,
    /// The VMs as the last host that resolved names otherwise resolved them.
    resolved: Option<SpecFile>,
    /// The host names so far.
    names: BTreeSet<String>,
}

impl HostReader<'_> {
    /// One `[[host]]`, with its NIC names `nics`; `previous` is the host
    /// read before it (whose VMs it shares when it resolves names alike).
    fn read(
        &mut self,
        entry: &Spanned<HostSection>,
        nics: BTreeMap<String, PciAddress>,
        previous: Option<&FleetHost>,
    ) -> Result<FleetHost, SpecError> {
        let line = self.lines.of(entry);
        let section = entry.get_ref();
        let name = self.host_name(section, line)?;
        let source = self.source(section, line, &name)?;
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
        let used = self
            .uses_names
            .then(|| names_used(self.raw, &nics, self.all_names));
        if used.is_some() && used != self.last_used {
            self.resolved = Some(resolve_names(self.raw, &nics, self.all_names));
        }
        let reuse = previous.map(|h| &h.spec).filter(|_| used == self.last_used);
        let mut spec = Spec::from_host(
            self.path,
            &single,
            self.base,
            self.resolved.as_ref().unwrap_or(self.raw),
            self.lines,
            reuse,
        )
        .map_err(|e| e.for_host(&name))?;
        self.last_used = used;
        spec.source = Some(source.clone());
        Ok(FleetHost {
            name,
            line,
            source,
            connect: section.connect.as_ref().map(|c| c.get_ref().clone()),
            doctor_root: section
                .doctor_root
                .as_ref()
                .map(|r| self.base.join(r.get_ref())),
            nic_names: nics,
            spec,
        })
    }

    /// The host's name: given, usable as a directory name, and new.
    fn host_name(&mut self, section: &HostSection, line: usize) -> Result<String, SpecError> {
        let path = self.path;
        let Some(name) = &section.name else {
            return Err(Spec::at(
                path,
                line,
                "host.name",
                "each [[host]] needs a name",
            ));
        };
        let name = name.get_ref().trim().to_owned();
        if let Some(reason) = super::parse::bad_vm_name(&name) {
            return Err(Spec::at(
                path,
                line,
                "host.name",
                &format!(
                    "host name {name:?} {reason}: it names the host's directory in plan --out DIR"
                ),
            ));
        }
        if name.is_empty() || !self.names.insert(name.clone()) {
            return Err(Spec::at(
                path,
                line,
                "host.name",
                &format!("host name {name:?} is empty or given twice"),
            ));
        }
        Ok(name)
    }

    /// Where the host's topology comes from: `source` when given, else
    /// through `connect` (the running domains come through `connect`).
    fn source(&self, section: &HostSection, line: usize, name: &str) -> Result<Source, SpecError> {
        let file = |s: &Spanned<String>| match s.get_ref().strip_prefix("synthetic:") {
            Some(d) => Source::Synthetic(d.to_owned()),
            None => Source::File(self.base.join(s.get_ref())),
        };
        match (&section.connect, &section.source) {
            (_, Some(s)) => Ok(file(s)),
            (Some(uri), None) => Ok(Source::Libvirt(uri.get_ref().clone())),
            (None, None) => Err(Spec::at(
                self.path,
                line,
                "host.connect",
                &format!("host {name}: give connect = \"URI\" (read through libvirt), source = \"FILE\" (a captured topology), or both (the topology from the file, the running domains through the URI)"),
            )),
        }
    }
}

/// The `[[vm]]`s' fleet keys: the hosts each may use (`host`/`hosts`, each
/// a `[[host]]` of `names`), `movable`, its NICs by address and by name.
fn read_vms(
    path: &Path,
    raw: &SpecFile,
    lines: &Lines,
    hosts: &[FleetHost],
    names: &BTreeSet<String>,
    all_names: &BTreeSet<String>,
) -> Result<Vec<FleetVm>, SpecError> {
    // Whether each VM is real-time, looked up by name once (20,000 VMs
    // scanned for every VM made the parse quadratic).
    let realtime: BTreeMap<&str, bool> = hosts[0]
        .spec
        .vms
        .iter()
        .map(|v| (v.name.as_str(), v.realtime || v.realtime_vcpus.is_some()))
        .collect();
    let mut vms = Vec::with_capacity(raw.vm.len());
    for vm in &raw.vm {
        let section = vm.get_ref();
        let name = section.name.get_ref().trim().to_owned();
        let nics = nic_strings(section);
        vms.push(FleetVm {
            realtime: realtime.get(name.as_str()).copied().unwrap_or(false),
            hosts: vm_hosts(path, lines, section, &name, names)?,
            name,
            line: lines.of(vm),
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
    Ok(vms)
}

/// The hosts VM `name` may use (`host` or `hosts`, not both), each one of
/// the `[[host]]`s `names`; `None` when it names none.
fn vm_hosts(
    path: &Path,
    lines: &Lines,
    section: &VmSection,
    name: &str,
    names: &BTreeSet<String>,
) -> Result<Option<BTreeSet<String>>, SpecError> {
    let (list, at) = match (&section.host, &section.hosts) {
        (Some(_), Some(list)) => {
            return Err(Spec::at(
                path,
                lines.of(list),
                "vm.hosts",
                &format!("{name}: give host = \"NAME\" or hosts = [...], not both"),
            ));
        }
        (Some(h), None) => (vec![h.get_ref().clone()], lines.of(h)),
        (None, Some(list)) => (list.get_ref().clone(), lines.of(list)),
        (None, None) => return Ok(None),
    };
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
    Ok(Some(set))
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
            .to_string()
            .contains("c has no NIC named \"uplink\""));
    }
}
