//! libvirt domains: read a domain's XML into a [`crate::tenant::Tenant`]
//! ([`domain`]), emit the pinning elements for a planned VM ([`emit`]), patch
//! them losslessly into an existing domain ([`patch`]), read domains through
//! a connection (this module), and apply a plan to live and defined domains
//! ([`apply`]). Every libvirt failure is a [`LibvirtError`] naming the URI
//! and what was asked.

pub mod apply;
pub mod connection;
pub mod domain;
pub mod emit;
pub mod events;
mod ffi;
pub mod metadata;
pub mod patch;
pub mod resident;
pub mod tenants;

pub use crate::error::{LibvirtAction, LibvirtError};
pub(crate) use crate::host::nodedev::node_devices_of;
pub use crate::host::nodedev::NodeDevices;
use virt::connect::Connect;
use virt::domain::Domain;
use virt_sys::VIR_DOMAIN_XML_INACTIVE;

/// Opens `uri` read-only ([`connection::open`]).
pub(crate) fn open_read_only(uri: &str) -> Result<Connect, LibvirtError> {
    connection::open(uri, true)
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
    all_listed_xml(uri, list_domains(uri, &conn)?)
}

/// Every domain at `uri` (through `conn`), running and defined.
fn list_domains(uri: &str, conn: &Connect) -> Result<Vec<Domain>, LibvirtError> {
    conn.list_all_domains(0)
        .map_err(|e| LibvirtError::new(uri, LibvirtAction::ListDomains, &e))
}

/// [`all_domain_xml`] of the `domains` listed; a domain gone since the
/// listing is left out.
fn all_listed_xml(
    uri: &str,
    domains: Vec<Domain>,
) -> Result<Vec<(String, String, bool)>, LibvirtError> {
    let mut out = Vec::new();
    for d in domains {
        let name = d
            .name()
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::DomainName, &e))?;
        let running = d.is_active().unwrap_or(false);
        let flags = if running { 0 } else { VIR_DOMAIN_XML_INACTIVE };
        match d.xml_desc(flags) {
            Ok(xml) => out.push((name, xml, running)),
            Err(e) if vanished(&e) => continue,
            Err(e) => return Err(LibvirtError::new(uri, LibvirtAction::DomainXml(name), &e)),
        }
    }
    out.sort();
    Ok(out)
}

/// Whether a call on a listed domain failed because the domain is gone:
/// undefined (or a transient one stopped) between the listing and the call.
/// Such a domain is no longer on the host, so a reading leaves it out rather
/// than failing the host.
fn vanished(e: &virt::error::Error) -> bool {
    e.code().unwrap_or(virt::error::ErrorNumber::InternalError)
        == virt::error::ErrorNumber::NoDomain
}

/// The node devices at `uri`; a driver without node devices gives none.
pub fn node_devices(uri: &str) -> Result<NodeDevices, LibvirtError> {
    node_devices_of(uri, &open_read_only(uri)?)
}

/// Each running domain's live and inactive (persistent) XML, by name.
pub fn running_domain_xml(uri: &str) -> Result<Vec<(String, String, String)>, LibvirtError> {
    let conn = open_read_only(uri)?;
    running_listed_xml(uri, list_domains(uri, &conn)?)
}

/// [`running_domain_xml`] of the `domains` listed; a domain gone since the
/// listing is left out.
fn running_listed_xml(
    uri: &str,
    domains: Vec<Domain>,
) -> Result<Vec<(String, String, String)>, LibvirtError> {
    let mut out = Vec::new();
    for d in domains.iter().filter(|d| d.is_active().unwrap_or(false)) {
        let name = d
            .name()
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::DomainName, &e))?;
        // A transient domain has no persistent definition: nothing pending.
        if !d.is_persistent().unwrap_or(false) {
            continue;
        }
        match (d.xml_desc(0), d.xml_desc(VIR_DOMAIN_XML_INACTIVE)) {
            (Ok(live), Ok(config)) => out.push((name, live, config)),
            (Err(e), _) | (_, Err(e)) if vanished(&e) => continue,
            (Err(e), _) | (_, Err(e)) => {
                return Err(LibvirtError::new(uri, LibvirtAction::DomainXml(name), &e))
            }
        }
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
    use super::{
        all_listed_xml, is_local_system_uri, is_local_uri, list_domains, running_listed_xml,
    };
    use virt::domain::Domain;

    /// A domain listed and then undefined (as another tool may do while
    /// pinplan reads a host) is left out of the reading, which goes on with
    /// the rest: libvirt's test driver, whose domain `test` runs.
    #[test]
    fn a_domain_gone_since_the_listing_is_left_out() {
        let uri = "test:///default";
        let conn = super::connection::open(uri, false).expect("the test driver opens");
        let gone_xml = |name: &str| {
            format!(
                "<domain type='test'><name>{name}</name><memory>65536</memory>\
                 <vcpu>1</vcpu><os><type>hvm</type></os></domain>"
            )
        };
        let stopped = conn
            .define_domain_xml(&gone_xml("pp-gone-stopped"))
            .unwrap();
        let running = conn
            .define_domain_xml(&gone_xml("pp-gone-running"))
            .unwrap();
        running.create().unwrap();
        let listed = list_domains(uri, &conn).unwrap();
        let names = |l: &[Domain]| l.iter().map(|d| d.name().unwrap()).collect::<Vec<_>>();
        assert_eq!(names(&listed).len(), 3, "{:?}", names(&listed));
        let listed_again = list_domains(uri, &conn).unwrap();
        stopped.undefine().unwrap();
        running.destroy().unwrap();
        running.undefine().unwrap();
        let all = all_listed_xml(uri, listed).unwrap();
        let all_names: Vec<&str> = all.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(all_names, ["test"]);
        assert!(all[0].2, "test runs");
        let running = running_listed_xml(uri, listed_again).unwrap();
        let running_names: Vec<&str> = running.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(running_names, ["test"]);
    }

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
