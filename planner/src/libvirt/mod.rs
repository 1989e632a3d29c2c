//! libvirt domains: read a domain's XML into a [`crate::tenant::Tenant`]
//! ([`domain`]), emit the pinning elements for a planned VM ([`emit`]), patch
//! them losslessly into an existing domain ([`patch`]), read domains through
//! a connection (this module), and apply a plan to live and defined domains
//! ([`apply`]). Every libvirt failure is a [`LibvirtError`] naming the URI
//! and what was asked.

pub mod apply;
pub mod domain;
pub mod emit;
mod ffi;
pub mod patch;
pub mod resident;
pub mod tenants;

pub use crate::error::{LibvirtAction, LibvirtError};
use virt::connect::Connect;
use virt_sys::VIR_DOMAIN_XML_INACTIVE;

/// Opens `uri` read-only, with libvirt's own printing to stderr off (we
/// report its errors ourselves).
pub(crate) fn open_read_only(uri: &str) -> Result<Connect, LibvirtError> {
    virt::error::clear_error_callback();
    Connect::open_read_only(Some(uri))
        .map_err(|e| LibvirtError::new(uri, LibvirtAction::Connect, &e))
}

/// The defined (inactive) XML of domain `name` at `uri`, as
/// `virsh dumpxml --inactive` prints it.
pub fn inactive_xml(uri: &str, name: &str) -> Result<String, LibvirtError> {
    let conn = open_read_only(uri)?;
    let domain = conn
        .lookup_domain_by_name(name)
        .map_err(|e| LibvirtError::new(uri, LibvirtAction::LookUp(name.to_owned()), &e))?;
    domain
        .xml_desc(VIR_DOMAIN_XML_INACTIVE)
        .map_err(|e| LibvirtError::new(uri, LibvirtAction::DomainXml(name.to_owned()), &e))
}

/// Every domain at `uri`, running and defined, as `(name, XML, running)`
/// sorted by name: the live XML (live pins) for running domains, the
/// persistent definition for the others — what `pinplan report --connect`
/// reads.
pub fn all_domain_xml(uri: &str) -> Result<Vec<(String, String, bool)>, LibvirtError> {
    let conn = open_read_only(uri)?;
    let domains = conn
        .list_all_domains(0)
        .map_err(|e| LibvirtError::new(uri, LibvirtAction::ListDomains, &e))?;
    let mut out = Vec::new();
    for d in domains {
        let name = d
            .name()
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::DomainName, &e))?;
        let running = d.is_active().unwrap_or(false);
        let flags = if running { 0 } else { VIR_DOMAIN_XML_INACTIVE };
        let xml = d
            .xml_desc(flags)
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::DomainXml(name.clone()), &e))?;
        out.push((name, xml, running));
    }
    out.sort();
    Ok(out)
}

/// The XML of every PCI node device at `uri` (`virsh nodedev-dumpxml`), as
/// `doctor`'s facts read it; a driver without node devices gives none.
pub fn pci_node_devices(uri: &str) -> Result<Vec<String>, LibvirtError> {
    let conn = open_read_only(uri)?;
    let devices = conn
        .list_all_node_devices(virt_sys::VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)
        .map_err(|e| LibvirtError::new(uri, LibvirtAction::ListNodeDevices, &e))?;
    Ok(devices.iter().filter_map(|d| d.xml_desc(0).ok()).collect())
}

/// Each running domain's live and inactive (persistent) XML, by name.
pub fn running_domain_xml(uri: &str) -> Result<Vec<(String, String, String)>, LibvirtError> {
    let conn = open_read_only(uri)?;
    let domains = conn
        .list_all_domains(0)
        .map_err(|e| LibvirtError::new(uri, LibvirtAction::ListDomains, &e))?;
    let mut out = Vec::new();
    for d in domains.iter().filter(|d| d.is_active().unwrap_or(false)) {
        let name = d
            .name()
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::DomainName, &e))?;
        // A transient domain has no persistent definition: nothing pending.
        if !d.is_persistent().unwrap_or(false) {
            continue;
        }
        let xml = |flags| {
            d.xml_desc(flags)
                .map_err(|e| LibvirtError::new(uri, LibvirtAction::DomainXml(name.clone()), &e))
        };
        out.push((name.clone(), xml(0)?, xml(VIR_DOMAIN_XML_INACTIVE)?));
    }
    out.sort();
    Ok(out)
}

/// Whether a libvirt URI names this machine (no host part), so that its
/// kernel command line is ours to read: `qemu:///system` and
/// `qemu+unix:///system` do, `qemu+ssh://h/system` and `test:///default` not.
pub fn is_local_uri(uri: &str) -> bool {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return false;
    };
    let transport_local = !scheme.contains('+') || scheme.ends_with("+unix");
    transport_local && rest.starts_with('/') && !scheme.starts_with("test")
}

/// Whether `uri` is this machine's system libvirtd (`qemu:///system`,
/// `qemu+unix:///system`), whose guests' QEMU pids are in `/run/libvirt`.
pub fn is_local_system_uri(uri: &str) -> bool {
    is_local_uri(uri)
        && uri
            .split_once("://")
            .is_some_and(|(_, rest)| rest.split('?').next() == Some("/system"))
}

#[cfg(test)]
mod tests {
    use super::{is_local_system_uri, is_local_uri};

    #[test]
    fn only_uris_without_a_host_are_local() {
        assert!(is_local_uri("qemu:///system"));
        assert!(is_local_uri("qemu+unix:///system"));
        assert!(!is_local_uri("qemu+ssh://root@b1/system"));
        assert!(!is_local_uri("qemu+tls://b1/system"));
        assert!(!is_local_uri("test:///default"));
        assert!(!is_local_uri("not a uri"));
        assert!(is_local_system_uri("qemu:///system"));
        assert!(is_local_system_uri("qemu+unix:///system?socket=/run/x"));
        assert!(!is_local_system_uri("qemu:///session"));
        assert!(!is_local_system_uri("qemu+ssh://b1/system"));
    }
}
