//! Fleet specs: `[[host]]` tables instead of the one `[host]`, each with a
//! `name`, where its topology comes from (`connect` or `source`), and every
//! `[host]` key for that host; `[[vm]]`s may say `host`/`hosts` and
//! `movable`. Each host becomes a single-host [`Spec`] with every VM, read
//! against that host's tables, so that the single-host checks and sizing
//! hold per host unchanged.

use super::parse::Lines;
use super::schema::{HostSection, SpecFile};
use super::{Spec, SpecError};
use crate::topology::{PciAddress, Source};
use std::collections::BTreeSet;
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
    /// Its NICs (passed through: a host must have them in a viable IOMMU
    /// group).
    pub nics: Vec<PciAddress>,
    /// It runs real-time vCPUs (a host must allow SCHED_FIFO).
    pub realtime: bool,
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
        let mut names = BTreeSet::new();
        for entry in hosts {
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
                ..section.clone()
            };
            single.source = None;
            let reuse = fleet.hosts.last().map(|h: &FleetHost| &h.spec);
            let mut spec = Spec::from_host(path, &single, base, raw, lines, reuse)
                .map_err(|e| e.for_host(&name))?;
            spec.source = Some(source.clone());
            fleet.hosts.push(FleetHost {
                name,
                line,
                source,
                connect,
                doctor_root: section.doctor_root.as_ref().map(|r| base.join(r.get_ref())),
                spec,
            });
        }
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
            let one = &fleet.hosts[0].spec;
            let checked = one.vms.iter().find(|v| v.name == name);
            fleet.vms.push(FleetVm {
                name,
                line,
                hosts,
                movable: section.movable.as_ref().is_some_and(|m| *m.get_ref()),
                nics: checked
                    .map(|v| v.nics.iter().map(|&(a, _, _)| a).collect())
                    .unwrap_or_default(),
                realtime: checked.is_some_and(|v| v.realtime || v.realtime_vcpus.is_some()),
            });
        }
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
