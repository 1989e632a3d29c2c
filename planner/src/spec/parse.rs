//! Checking a spec file on its own, before any host is known: TOML syntax and
//! keys, the host's reservation and tables, each VM's sizing and policies
//! with the defaults applied, and the fixed tenants. Every error names the
//! file, the line and the key.

use super::schema::NicLocality;
use super::schema::{
    FixedSection, HostField, HostSection, IgnoreSection, Policies, SpecFile, VmSection,
};
use super::{Spec, SpecError, VmSpec};
use crate::cpuset::CpuSet;
use crate::demand::Table;
use crate::model::{EmulatorPolicy, NumaPolicy, ThreadPolicy};
use crate::text::closest;
use crate::topology::PciAddress;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use toml::Spanned;

/// The spec text, for turning byte offsets into line numbers: the offsets
/// where lines start, found once (a fleet spec of 20,000 VMs asks for a line
/// number many times per VM).
pub(super) struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
    /// Added to every line number: a domain's request is read as text of
    /// its own, numbered after the spec's lines so that a line says which
    /// it came from ([`Spec::error`]).
    offset: usize,
}

impl<'a> Lines<'a> {
    pub(super) fn new(text: &'a str) -> Lines<'a> {
        let starts = std::iter::once(0)
            .chain(
                text.bytes()
                    .enumerate()
                    .filter(|&(_, b)| b == b'\n')
                    .map(|(i, _)| i + 1),
            )
            .collect();
        Lines {
            text,
            starts,
            offset: 0,
        }
    }

    /// The lines of `text`, numbered from `offset + 1`.
    pub(super) fn after(text: &'a str, offset: usize) -> Lines<'a> {
        Lines {
            offset,
            ..Lines::new(text)
        }
    }

    /// How many lines the text has.
    pub(super) fn count(&self) -> usize {
        self.starts.len()
    }

    fn at(&self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        // The number of line starts at or before the offset.
        self.starts.partition_point(|&s| s <= offset).max(1) + self.offset
    }

    pub(super) fn of<T>(&self, value: &Spanned<T>) -> usize {
        self.at(value.span().start)
    }
}

/// The TOML document, or an error at its line with a "did you mean" for an
/// unknown key or value.
pub(super) fn read_toml(path: &Path, text: &str, lines: &Lines) -> Result<SpecFile, SpecError> {
    toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| lines.at(s.start));
        let message = e.message().trim().to_owned();
        // serde: "unknown field `threds`, expected one of `threads`, ..."
        let hint = message
            .strip_prefix("unknown field `")
            .or_else(|| message.strip_prefix("unknown variant `"))
            .and_then(|rest| rest.split('`').next())
            .and_then(|unknown| {
                let expected: Vec<&str> = message.split('`').skip(3).step_by(2).collect();
                let pool: Vec<&str> = if expected.is_empty() {
                    super::schema::keys()
                } else {
                    expected
                };
                closest(unknown, pool).map(|k| format!("did you mean `{k}`?"))
            });
        SpecError {
            file: path.to_owned(),
            line,
            key: None,
            message,
            hint,
            cause: None,
        }
    })
}

/// The longest VM name: `NAME.fragment.xml` must fit a file name (255 bytes).
pub const NAME_MAX_BYTES: usize = 242;

/// Why `name` cannot be a VM's name, if it cannot: it becomes a libvirt
/// domain name and a file name in the output directory, so it must not be
/// able to leave that directory or break a line.
pub fn bad_vm_name(name: &str) -> Option<String> {
    if name.contains('/') {
        Some("contains '/'".to_owned())
    } else if let Some(c) = name.chars().find(|c| c.is_control()) {
        Some(format!("contains the control character {c:?}"))
    } else if name.starts_with('.') {
        Some("starts with '.'".to_owned())
    } else if name.len() > NAME_MAX_BYTES {
        Some(format!("is {} bytes long", name.len()))
    } else {
        None
    }
}

impl Spec {
    /// Parses and checks spec text; `path` names it and anchors relative paths.
    /// A fleet spec (`[[host]]` tables) is refused: [`Spec::parse_any`] reads both.
    pub fn parse(path: &Path, text: &str) -> Result<Spec, SpecError> {
        match Spec::parse_any(path, text)? {
            super::AnySpec::One(spec) => Ok(spec),
            super::AnySpec::Fleet(fleet) => {
                let line = fleet.hosts.first().map_or(1, |h| h.line);
                let mut e = Spec::at(
                    path,
                    line,
                    "host",
                    "this is a fleet spec ([[host]] tables), and this takes one host",
                );
                e.hint = Some(
                    "plan the fleet with `pinplan plan SPEC --out DIR`, then use DIR/HOST/plan.json".to_owned(),
                );
                Err(e)
            }
        }
    }

    /// Parses and checks spec text of either kind: one `[host]`, or a fleet
    /// of `[[host]]` tables.
    pub fn parse_any(path: &Path, text: &str) -> Result<super::AnySpec, SpecError> {
        let lines = Lines::new(text);
        let raw = read_toml(path, text, &lines)?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        match &raw.host {
            HostField::Many(hosts) => {
                Spec::parse_fleet(path, &raw, hosts, &lines).map(super::AnySpec::Fleet)
            }
            HostField::One(host) => {
                let fleet_only = [
                    host.name
                        .as_ref()
                        .map(|v| (lines.of(v), "host.name", "name")),
                    host.doctor_root
                        .as_ref()
                        .map(|v| (lines.of(v), "host.doctor_root", "doctor_root")),
                    host.nic_names
                        .as_ref()
                        .map(|v| (lines.of(v), "host.nic_names", "nic_names")),
                ];
                if let Some((line, key, name)) = fleet_only.into_iter().flatten().next() {
                    let mut e = Spec::at(
                        path,
                        line,
                        key,
                        &format!("[host] {name} is for fleet specs"),
                    );
                    e.hint = Some("a fleet spec has [[host]] tables (see docs/formats.md, fleet specs); for one host use source = \"FILE\" or plan --connect URI".to_owned());
                    return Err(e);
                }
                for vm in &raw.vm {
                    let v = vm.get_ref();
                    let fleet_key = [
                        v.host.as_ref().map(|x| (lines.of(x), "host")),
                        v.hosts.as_ref().map(|x| (lines.of(x), "hosts")),
                    ];
                    if let Some((line, key)) = fleet_key.into_iter().flatten().next() {
                        let mut e = Spec::at(
                            path,
                            line,
                            &format!("vm.{key}"),
                            &format!(
                                "{}: {key} is for fleet specs ([[host]] tables)",
                                v.name.get_ref()
                            ),
                        );
                        e.hint =
                            Some("with one [host] every VM goes to it: drop the key".to_owned());
                        return Err(e);
                    }
                }
                Spec::from_host(path, host, base, &raw, &lines, None).map(super::AnySpec::One)
            }
        }
    }

    /// A spec error at `line` of `path`.
    pub(super) fn at(path: &Path, line: usize, key: &str, message: &str) -> SpecError {
        SpecError {
            file: path.to_owned(),
            line,
            key: Some(key.to_owned()),
            message: message.to_owned(),
            hint: None,
            cause: None,
        }
    }

    /// The spec of one host (`host`) with every VM and fixed tenant of `raw`.
    pub(super) fn from_host(
        path: &Path,
        host: &HostSection,
        base: &Path,
        raw: &SpecFile,
        lines: &Lines,
        reuse: Option<&Spec>,
    ) -> Result<Spec, SpecError> {
        let mut spec = Spec {
            file: path.to_owned(),
            source: host.source.as_ref().map(|s| {
                let s = s.get_ref();
                match s.strip_prefix("synthetic:") {
                    Some(description) => crate::topology::Source::Synthetic(description.to_owned()),
                    None => crate::topology::Source::File(base.join(s)),
                }
            }),
            reserved_cores: None,
            reserved_per_node: None,
            reserved_cpus: None,
            table: Table::default(),
            line_rate_gbps: 100.0,
            reserved_memory: None,
            vms: Arc::new(Vec::new()),
            fixed: Vec::new(),
            ignore: Vec::new(),
            connect: None,
            defaults: Arc::new(raw.defaults.clone()),
            default_fraction: 1.0,
            line_count: lines.count(),
            domain_lines: Vec::new(),
            tables_read: Vec::new(),
        };
        spec.read_host(host, base, lines)?;
        // Another host of a fleet with the same tables read the same VMs.
        if let Some(done) = reuse.filter(|r| r.table.rows == spec.table.rows) {
            spec.vms = Arc::clone(&done.vms);
            spec.fixed.clone_from(&done.fixed);
            spec.ignore.clone_from(&done.ignore);
            return Ok(spec);
        }
        let default_fraction = match &raw.defaults.min_fraction {
            Some(f) => spec.fraction(f, "defaults.min_fraction", lines)?,
            None => 1.0,
        };
        spec.default_fraction = default_fraction;
        let mut names: BTreeSet<String> = BTreeSet::new();
        let mut vms = Vec::with_capacity(raw.vm.len());
        for vm in &raw.vm {
            let vm = spec.read_vm(vm, &raw.defaults, default_fraction, base, &names, lines)?;
            names.insert(vm.name.clone());
            vms.push(vm);
        }
        spec.vms = Arc::new(vms);
        for f in &raw.fixed {
            spec.read_fixed(f.get_ref(), &names, lines)?;
        }
        for i in &raw.ignore {
            spec.read_ignore(i.get_ref(), &names, lines)?;
        }
        Ok(spec)
    }

    /// `[host]`: the reservation (cores or CPUs, not both), the line rate and
    /// the throughput tables.
    fn read_host(
        &mut self,
        host: &HostSection,
        base: &Path,
        lines: &Lines,
    ) -> Result<(), SpecError> {
        if let (Some(_), Some(cpus)) = (&host.reserved_cores, &host.reserved_cpus) {
            return Err(self.error(
                lines.of(cpus),
                "host.reserved_cpus",
                "give either reserved_cores or reserved_cpus, not both".to_owned(),
            ));
        }
        if let (Some(per_node), true) = (
            &host.reserved_cores_per_node,
            host.reserved_cores.is_some() || host.reserved_cpus.is_some(),
        ) {
            return Err(self.error(
                lines.of(per_node),
                "host.reserved_cores_per_node",
                "give one of reserved_cores, reserved_cores_per_node or reserved_cpus".to_owned(),
            ));
        }
        if let Some(uri) = &host.connect {
            let text = uri.get_ref().trim();
            if text.is_empty() {
                return Err(self.error(
                    lines.of(uri),
                    "host.connect",
                    "connect is a libvirt URI, e.g. \"qemu:///system\"".to_owned(),
                ));
            }
            self.connect = Some(text.to_owned());
        }
        self.reserved_cores = host
            .reserved_cores
            .as_ref()
            .map(|c| (*c.get_ref(), lines.of(c)));
        self.reserved_per_node = host
            .reserved_cores_per_node
            .as_ref()
            .map(|c| (*c.get_ref(), lines.of(c)));
        if let Some(cpus) = &host.reserved_cpus {
            let line = lines.of(cpus);
            let set: CpuSet = cpus.get_ref().parse().map_err(|e| {
                self.error(line, "host.reserved_cpus", format!("reserved_cpus: {e}"))
            })?;
            self.reserved_cpus = Some((set, line));
        }
        if let Some(size) = &host.reserved_memory {
            // 0 is a reserve (none), unlike a VM's memory.
            self.reserved_memory = Some(self.size(size, "host.reserved_memory", true, lines)?);
        }
        if let Some(rate) = &host.line_rate_gbps {
            if !(rate.get_ref().is_finite() && *rate.get_ref() > 0.0) {
                return Err(self.error(
                    lines.of(rate),
                    "host.line_rate_gbps",
                    "line_rate_gbps must be above 0".to_owned(),
                ));
            }
            self.line_rate_gbps = *rate.get_ref();
        }
        for t in &host.tables {
            let table = Table::load(&base.join(t.get_ref())).map_err(|e| {
                let mut error =
                    self.error(lines.of(t), "host.tables", format!("table {}", t.get_ref()));
                error.cause = Some(std::sync::Arc::new(e));
                error
            })?;
            self.table.rows.extend(table.rows);
        }
        Ok(())
    }

    /// The VM's NICs: `nics`, or the one `nic` (not both), each with its
    /// affinity (its own, else the VM's `nic_affinity`, else `[defaults]`,
    /// else `preferred`); no address twice.
    fn nics(
        &self,
        name: &str,
        vm: &VmSection,
        defaults: &Policies,
        lines: &Lines,
    ) -> Result<Vec<(PciAddress, NicLocality, usize)>, SpecError> {
        let affinity = vm
            .nic_affinity
            .or(defaults.nic_affinity)
            .unwrap_or(NicLocality::Preferred);
        let parse = |addr: &Spanned<String>, key: &str| {
            let line = lines.of(addr);
            addr.get_ref()
                .parse::<PciAddress>()
                .map(|a| (a, line))
                .map_err(|e| self.error(line, key, format!("{name}: {e}")))
        };
        let nics = match (&vm.nic, &vm.nics) {
            (Some(nic), Some(list)) => {
                let mut e = self.error(
                    lines.of(list),
                    "vm.nics",
                    format!("{name}: gives both nic and nics"),
                );
                e.hint = Some(format!(
                    "nic = \"{}\" is shorthand for nics = [{{ addr = \"{}\" }}]: keep one of them",
                    nic.get_ref(),
                    nic.get_ref()
                ));
                return Err(e);
            }
            (Some(nic), None) => {
                let (address, line) = parse(nic, "vm.nic")?;
                vec![(address, affinity, line)]
            }
            (None, Some(list)) => {
                let mut nics = Vec::new();
                for entry in list.get_ref() {
                    let (address, line) = parse(&entry.addr, "vm.nics.addr")?;
                    if nics.iter().any(|&(a, _, _)| a == address) {
                        return Err(self.error(
                            line,
                            "vm.nics.addr",
                            format!("{name}: NIC {address} is listed twice in nics"),
                        ));
                    }
                    nics.push((address, entry.affinity.unwrap_or(affinity), line));
                }
                nics
            }
            (None, None) => Vec::new(),
        };
        Ok(nics)
    }

    /// A `min_fraction`: above 0 and at most 1.
    fn fraction(&self, f: &Spanned<f64>, key: &str, lines: &Lines) -> Result<f64, SpecError> {
        let v = *f.get_ref();
        if v > 0.0 && v <= 1.0 {
            Ok(v)
        } else {
            Err(self.error(
                lines.of(f),
                key,
                format!("min_fraction is {v}: it must be above 0 and at most 1"),
            ))
        }
    }

    /// A memory size key: `"16GiB"` or a number of MiB.
    fn size(
        &self,
        size: &Spanned<super::schema::Size>,
        key: &str,
        zero_ok: bool,
        lines: &Lines,
    ) -> Result<u64, SpecError> {
        let parsed = match size.get_ref() {
            super::schema::Size::Text(t) if zero_ok => crate::memory::parse_amount(t),
            super::schema::Size::Text(t) => crate::memory::parse_size(t),
            super::schema::Size::MiB(n) => crate::memory::mib(*n, zero_ok),
        };
        parsed.map_err(|e| self.error(lines.of(size), key, e.to_string()))
    }

    /// One `[[vm]]` with the defaults applied.
    pub(super) fn read_vm(
        &self,
        vm: &Spanned<VmSection>,
        defaults: &Policies,
        default_fraction: f64,
        base: &Path,
        names: &BTreeSet<String>,
        lines: &Lines,
    ) -> Result<VmSpec, SpecError> {
        let line = lines.of(vm);
        let vm = vm.get_ref();
        let name = self.vm_name(&vm.name, names, lines)?;
        let (sizing, sizing_line) = self.sizing(&name, vm, line, lines)?;
        let nics = self.nics(&name, vm, defaults, lines)?;
        let min_fraction = match &vm.min_fraction {
            Some(f) => self.fraction(f, "vm.min_fraction", lines)?,
            None => default_fraction,
        };
        let confidence = match vm.confidence.as_ref().or(defaults.confidence.as_ref()) {
            Some(c) if *c.get_ref() > 0.0 && *c.get_ref() < 1.0 => *c.get_ref(),
            Some(c) => {
                let key = if vm.confidence.is_some() {
                    "vm.confidence"
                } else {
                    "defaults.confidence"
                };
                return Err(self.error(
                    lines.of(c),
                    key,
                    format!(
                        "confidence is {}: it must be above 0 and below 1 (0.9 for a 90 % interval)",
                        c.get_ref()
                    ),
                ));
            }
            None => 0.9,
        };
        let realtime_vcpus = match &vm.realtime_vcpus {
            Some(list) => Some(self.realtime_vcpus(&name, list, lines)?),
            None => None,
        };
        Ok(VmSpec {
            name,
            line,
            sizing,
            sizing_line,
            nics,
            threads: vm
                .threads
                .or(defaults.threads)
                .unwrap_or(ThreadPolicy::Prefer),
            emulator: vm
                .emulator
                .or(defaults.emulator)
                .unwrap_or(EmulatorPolicy::Host),
            numa: vm.numa.or(defaults.numa).unwrap_or(NumaPolicy::Strict),
            min_fraction,
            confidence,
            iothreads: vm.iothreads.or(defaults.iothreads).unwrap_or(0),
            priority: vm.priority.or(defaults.priority).unwrap_or(0),
            packet_bytes: vm.packet_bytes.or(defaults.packet_bytes),
            domain_xml: vm.domain_xml.as_ref().map(|d| base.join(d.get_ref())),
            set_vcpus: vm.set_vcpus.or(defaults.set_vcpus).unwrap_or(false),
            allow_extrapolation: vm
                .allow_extrapolation
                .or(defaults.allow_extrapolation)
                .unwrap_or(false),
            memory: match vm.memory.as_ref().or(defaults.memory.as_ref()) {
                Some(size) => Some(self.size(size, "vm.memory", false, lines)?),
                None => None,
            },
            page_kib: match vm.hugepages.as_ref().or(defaults.hugepages.as_ref()) {
                Some(page) => Some(
                    crate::memory::parse_page(page.get_ref())
                        .map_err(|e| self.error(lines.of(page), "vm.hugepages", e.to_string()))?,
                ),
                None => None,
            },
            housekeeping_vcpus: vm
                .housekeeping_vcpus
                .as_ref()
                .or(defaults.housekeeping_vcpus.as_ref())
                .map(|n| (*n.get_ref(), lines.of(n))),
            realtime: vm.realtime.or(defaults.realtime).unwrap_or(false),
            realtime_vcpus,
            cache_aware: vm.cache_aware.or(defaults.cache_aware).unwrap_or(false),
            cache_passthrough: vm
                .cache_passthrough
                .or(defaults.cache_passthrough)
                .unwrap_or(false),
            movable: vm
                .movable
                .as_ref()
                .or(defaults.movable.as_ref())
                .is_some_and(|m| *m.get_ref()),
        })
    }

    /// A VM's name, trimmed: not empty, usable as a domain and file name,
    /// not one of the VMs read before (`names`).
    fn vm_name(
        &self,
        name: &Spanned<String>,
        names: &BTreeSet<String>,
        lines: &Lines,
    ) -> Result<String, SpecError> {
        let name_line = lines.of(name);
        let name = name.get_ref().trim().to_owned();
        if name.is_empty() {
            return Err(self.error(name_line, "vm.name", "a VM needs a name".to_owned()));
        }
        if let Some(reason) = bad_vm_name(&name) {
            let mut e = self.error(name_line, "vm.name", format!("VM name {name:?} {reason}"));
            e.hint = Some(format!(
                "a VM name is a libvirt domain name and the name of its files in --out DIR: \
                 no '/', no control characters, not starting with '.', at most {NAME_MAX_BYTES} bytes"
            ));
            return Err(e);
        }
        if names.contains(&name) {
            return Err(self.error(name_line, "vm.name", format!("two VMs are named {name:?}")));
        }
        Ok(name)
    }

    /// `realtime_vcpus`: a list of the guest's vCPUs, with its line.
    fn realtime_vcpus(
        &self,
        name: &str,
        list: &Spanned<String>,
        lines: &Lines,
    ) -> Result<(CpuSet, usize), SpecError> {
        let set = list.get_ref().parse::<CpuSet>().map_err(|e| {
            self.error(
                lines.of(list),
                "vm.realtime_vcpus",
                format!("{name}: realtime_vcpus is a list of guest vCPUs: {e}"),
            )
        })?;
        Ok((set, lines.of(list)))
    }

    /// One `[[fixed]]`: its CPUs parse, overlap no other fixed tenant, and its
    /// name is nobody else's.
    fn read_fixed(
        &mut self,
        f: &FixedSection,
        vm_names: &BTreeSet<String>,
        lines: &Lines,
    ) -> Result<(), SpecError> {
        let line = lines.of(&f.cpus);
        let name = f.name.get_ref().trim().to_owned();
        let cpus: CpuSet = f
            .cpus
            .get_ref()
            .parse()
            .map_err(|e| self.error(line, "fixed.cpus", format!("fixed {name}: {e}")))?;
        if let Some((other, theirs, _)) = self.fixed.iter().find(|(_, c, _)| c.intersects(&cpus)) {
            return Err(self.error(
                line,
                "fixed.cpus",
                format!(
                    "fixed {name} and fixed {other} both claim CPUs {}",
                    theirs.intersection(&cpus)
                ),
            ));
        }
        if vm_names.contains(&name) || self.fixed.iter().any(|(n, _, _)| *n == name) {
            return Err(self.error(
                lines.of(&f.name),
                "fixed.name",
                format!("the name {name:?} is used twice"),
            ));
        }
        self.fixed.push((name, cpus, line));
        Ok(())
    }

    /// One `[[ignore]]`: a domain name that no `[[vm]]`, `[[fixed]]` or
    /// other `[[ignore]]` gives.
    fn read_ignore(
        &mut self,
        i: &IgnoreSection,
        vm_names: &BTreeSet<String>,
        lines: &Lines,
    ) -> Result<(), SpecError> {
        let line = lines.of(&i.name);
        let name = i.name.get_ref().trim().to_owned();
        if name.is_empty() {
            return Err(self.error(
                line,
                "ignore.name",
                "[[ignore]] needs the name of a domain".to_owned(),
            ));
        }
        let clash = if vm_names.contains(&name) {
            Some(format!(
                "{name:?} is a [[vm]] the plan places: it cannot be ignored too"
            ))
        } else if self.fixed.iter().any(|(n, _, _)| *n == name) {
            Some(format!(
                "{name:?} is a [[fixed]] tenant: it cannot be ignored too"
            ))
        } else if self.ignore.iter().any(|(n, _)| *n == name) {
            Some(format!("{name:?} is ignored twice"))
        } else {
            None
        };
        if let Some(message) = clash {
            let mut e = self.error(line, "ignore.name", message);
            e.hint = Some(format!("name {name:?} once"));
            return Err(e);
        }
        self.ignore.push((name, line));
        Ok(())
    }
}
