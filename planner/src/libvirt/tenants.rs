//! Who is on a host now, as `report` and `apply --dry-run` see it: the host's
//! own CPUs (given, the plan's reservation, or what `isolcpus=` leaves) and
//! every domain, from XML files or through a libvirt connection.

use super::domain::{memory_differences, tenant_from_domain, DomainError};
use crate::cmdline::{CmdlineError, KernelCmdline};
use crate::cpuset::CpuSet;
use crate::error::{Diagnostic, LibvirtError};
use crate::plan::Plan;
use crate::tenant::{host_cpus_from_cmdline, host_tenant, Tenant};
use crate::topology::HostTopology;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

impl Diagnostic for DomainError {
    fn hint(&self) -> Option<String> {
        // Not a libvirtd problem: the XML was read, and one element of it is
        // not what pinplan can use.
        Some(
            "the line counts in the domain XML as `virsh dumpxml NAME` prints it: fix that element \
             (virsh edit NAME), or if libvirt wrote it so, report the XML to pinplan"
                .to_owned(),
        )
    }
}

/// Where the domains come from.
#[derive(Debug, Clone, Copy)]
pub enum Domains<'a> {
    /// Domain XML files (`virsh dumpxml`), each domain once.
    Files(&'a [PathBuf]),
    /// Every domain at a libvirt URI: running ones with their live pins,
    /// the others with their config.
    Connect(&'a str),
}

/// Why the tenants could not be gathered.
#[derive(Debug, thiserror::Error)]
pub enum TenantsError {
    /// A domain file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A domain's XML is not what libvirt writes.
    #[error(transparent)]
    Domain(#[from] DomainError),
    /// Two files hold the same domain.
    #[error("{}: domain {name:?} is already given by {first}", path.display())]
    Repeated {
        /// The second file.
        path: PathBuf,
        /// The domain.
        name: String,
        /// The first file that gave it.
        first: String,
    },
    /// libvirt refused.
    #[error(transparent)]
    Libvirt(#[from] LibvirtError),
    /// `/proc/cmdline` could not be read.
    #[error("cannot read /proc/cmdline")]
    Cmdline(#[source] std::io::Error),
    /// The host's CPUs as given name CPUs the host does not have.
    #[error("--host-cpus names CPUs {missing} that {host} does not have (its CPUs: {known})")]
    UnknownCpus {
        /// The CPUs it lacks.
        missing: CpuSet,
        /// The topology source.
        host: String,
        /// The CPUs it has.
        known: CpuSet,
    },
    /// `isolcpus=` is not a CPU list.
    #[error("/proc/cmdline: {0}")]
    Isolcpus(#[source] CmdlineError),
}

impl Diagnostic for TenantsError {
    fn hint(&self) -> Option<String> {
        match self {
            TenantsError::Domain(e) => e.hint(),
            TenantsError::Libvirt(e) => e.hint(),
            TenantsError::Repeated { .. } => Some("give each domain once".to_owned()),
            TenantsError::Isolcpus(_) => {
                Some("give the host's CPUs with --host-cpus CPUSET".to_owned())
            }
            TenantsError::UnknownCpus { .. } => {
                Some("give the host's own CPUs on this topology".to_owned())
            }
            TenantsError::Read { .. } | TenantsError::Cmdline(_) => None,
        }
    }
}

/// The host's own CPUs for a report: `given`, else the plan's reserved CPUs,
/// else on this machine (`live`) every usable CPU `isolcpus=` leaves; `None`
/// when nothing says.
pub fn host_cpus(
    host: &HostTopology,
    given: Option<&CpuSet>,
    plan: Option<&Plan>,
    live: bool,
) -> Result<Option<CpuSet>, TenantsError> {
    if let Some(set) = given {
        let known: CpuSet = host.pus.iter().map(|p| p.cpu).collect();
        let missing = set.difference(&known);
        if !missing.is_empty() {
            return Err(TenantsError::UnknownCpus {
                missing,
                host: host.source.clone(),
                known,
            });
        }
        return Ok(Some(set.clone()));
    }
    if let Some(plan) = plan.filter(|p| !p.host.reserved_cpus.is_empty()) {
        return Ok(Some(plan.host.reserved_cpus.clone()));
    }
    if !live {
        return Ok(None);
    }
    let cmdline = KernelCmdline::read(Path::new("/")).map_err(TenantsError::Cmdline)?;
    host_cpus_from_cmdline(&cmdline, host).map_err(TenantsError::Isolcpus)
}

/// The host (when its CPUs are known and not empty) and every domain, as
/// tenants on `host`, the host first.
pub fn tenants(
    host: &HostTopology,
    host_cpus: Option<&CpuSet>,
    domains: Domains<'_>,
) -> Result<Vec<Tenant>, TenantsError> {
    let mut tenants = Vec::new();
    if let Some(set) = host_cpus.filter(|s| !s.is_empty()) {
        tenants.push(host_tenant(set));
    }
    match domains {
        Domains::Connect(uri) => tenants.extend(domain_tenants(uri, host)?),
        Domains::Files(paths) => tenants.extend(file_tenants(paths, host)?),
    }
    Ok(tenants)
}

/// Every domain at `uri` as a tenant on `host` (running domains with their
/// live pins, the others with their config), sorted by name: what
/// `report --connect` and `apply` see of a host. On this machine's system
/// libvirtd a running guest's memory per node is read too
/// ([`super::resident`]).
pub fn domain_tenants(uri: &str, host: &HostTopology) -> Result<Vec<Tenant>, TenantsError> {
    tenants_of(uri, host, &super::all_domain_xml(uri)?)
}

/// [`domain_tenants`] of domains read already (`(name, XML, running)`, as
/// [`super::all_domain_xml`] gives them), so that a caller that reads them
/// for more than their tenants reads them once.
pub fn tenants_of(
    uri: &str,
    host: &HostTopology,
    domains: &[(String, String, bool)],
) -> Result<Vec<Tenant>, TenantsError> {
    let local = super::is_local_system_uri(uri);
    let mut out = Vec::new();
    for (name, xml, running) in domains {
        let (name, running) = (name.as_str(), *running);
        let mut tenant = tenant_from_domain(&format!("{uri} domain {name}"), xml, host)?;
        if !running {
            tenant.state = crate::tenant::TenantState::ShutOff;
        }
        if running && local {
            tenant.memory_resident = super::resident::resident(Path::new("/"), name);
        }
        out.push(tenant);
    }
    Ok(out)
}

/// Running domains whose persistent config pins their threads, or places
/// their memory, otherwise than they run now: the config takes effect at
/// the next start. One line per domain and kind, e.g. `vm1: config pins
/// differ from the live ones (vCPU 0: live 1, config 3): they take effect at
/// its next start`, `vm1: config memory placement differs from the live one
/// (numatune: live none, config strict 0): …`.
pub fn pending_pins(uri: &str, host: &HostTopology) -> Result<Vec<String>, TenantsError> {
    let mut out = Vec::new();
    for (name, live_xml, config_xml) in super::running_domain_xml(uri)? {
        let origin = format!("{uri} domain {name}");
        let live = tenant_from_domain(&origin, &live_xml, host)?;
        let config = tenant_from_domain(&format!("{origin} (config)"), &config_xml, host)?;
        let mut differences = Vec::new();
        for (l, c) in live.vcpus.iter().zip(&config.vcpus) {
            if l.cpus != c.cpus {
                differences.push(format!(
                    "vCPU {}: live {}, config {}",
                    l.vcpu, l.cpus, c.cpus
                ));
            }
        }
        if live.emulator_cpus != config.emulator_cpus {
            differences.push(format!(
                "emulator: live {}, config {}",
                live.emulator_cpus, config.emulator_cpus
            ));
        }
        if live.vcpus.len() != config.vcpus.len() {
            differences.push(format!(
                "{} vCPUs live, {} in the config",
                live.vcpus.len(),
                config.vcpus.len()
            ));
        }
        if !differences.is_empty() {
            let shown: Vec<String> = differences.iter().take(4).cloned().collect();
            let more = differences.len().saturating_sub(shown.len());
            out.push(format!(
                "{name}: config pins differ from the live ones ({}{}): they take effect at its \
                 next start",
                shown.join("; "),
                if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        let memory = memory_differences(&origin, &live_xml, &config_xml)?;
        if !memory.is_empty() {
            out.push(format!(
                "{name}: config memory placement differs from the live one ({}): memory does \
                 not move under a running guest, it takes effect at its next start",
                memory.join("; ")
            ));
        }
    }
    Ok(out)
}

/// Domain XML files as tenants, in the order given; a domain given twice is
/// an error.
fn file_tenants(paths: &[PathBuf], host: &HostTopology) -> Result<Vec<Tenant>, TenantsError> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for path in paths {
        let source_name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TenantsError::Read {
            path: path.clone(),
            source,
        })?;
        let tenant = tenant_from_domain(&source_name, &text, host)?;
        if let Some(first) = seen.insert(tenant.name.clone(), source_name) {
            return Err(TenantsError::Repeated {
                path: path.clone(),
                name: tenant.name,
                first,
            });
        }
        out.push(tenant);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{self, Source};

    /// A domain read through `--connect` whose XML pinplan cannot use is an
    /// XML problem at a line, not a libvirtd problem (it used to be told to
    /// "check that libvirtd is running").
    #[test]
    fn a_malformed_domain_from_libvirt_is_not_blamed_on_libvirtd() {
        let host = topology::load(&Source::Synthetic("package:1 core:2 pu:2".into()))
            .unwrap_or_else(|e| panic!("{e}"));
        let xml = "<domain>\n<name>vm1</name>\n<vcpu>two</vcpu>\n</domain>";
        let error = tenant_from_domain("qemu:///system domain vm1", xml, &host)
            .map_err(TenantsError::from)
            .err()
            .unwrap_or_else(|| panic!("a <vcpu> that is not a count must be refused"));
        assert_eq!(
            error.to_string(),
            "qemu:///system domain vm1:3: <vcpu> holds \"two\", not a count"
        );
        let hint = error.hint().unwrap_or_default();
        assert!(!hint.contains("libvirtd"), "{hint}");
        assert!(hint.contains("virsh dumpxml"), "{hint}");
        assert_eq!(error.exit(), crate::error::Exit::Error);
    }
}
