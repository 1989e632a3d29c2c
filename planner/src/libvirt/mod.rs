//! libvirt domain XML: emit the pinning elements for a planned VM
//! ([`emit`]), patch them losslessly into an existing domain ([`patch`]), and
//! read a defined domain's XML through a libvirt connection ([`inactive_xml`]),
//! and apply a plan to live and defined domains ([`apply`]).

pub mod apply;
pub mod domain;
pub mod emit;
mod ffi;
pub mod patch;

use virt::connect::Connect;

/// `virDomainGetXMLDesc` flag: the persistent (next boot) definition.
const XML_INACTIVE: u32 = 1 << 1;

/// The defined (inactive) XML of domain `name` at `uri`, as
/// `virsh dumpxml --inactive` prints it.
pub fn inactive_xml(uri: &str, name: &str) -> Result<String, String> {
    virt::error::clear_error_callback();
    let conn = Connect::open_read_only(Some(uri))
        .map_err(|e| format!("cannot connect to {uri}: {}", e.message()))?;
    let domain = conn
        .lookup_domain_by_name(name)
        .map_err(|e| format!("{uri} has no domain {name:?}: {}", e.message()))?;
    domain
        .xml_desc(XML_INACTIVE)
        .map_err(|e| format!("cannot read the XML of {name} at {uri}: {}", e.message()))
}

/// Every domain at `uri`, running and defined, as `(name, XML)` sorted by
/// name: the live XML (live pins) for running domains, the persistent
/// definition for the others — what `pinplan report --connect` reads.
pub fn all_domain_xml(uri: &str) -> Result<Vec<(String, String)>, String> {
    virt::error::clear_error_callback();
    let conn = Connect::open_read_only(Some(uri))
        .map_err(|e| format!("cannot connect to {uri}: {}", e.message()))?;
    let domains = conn
        .list_all_domains(0)
        .map_err(|e| format!("cannot list the domains at {uri}: {}", e.message()))?;
    let mut out = Vec::new();
    for d in domains {
        let name = d
            .name()
            .map_err(|e| format!("cannot read a domain name at {uri}: {}", e.message()))?;
        let flags = if d.is_active().unwrap_or(false) {
            0
        } else {
            XML_INACTIVE
        };
        let xml = d
            .xml_desc(flags)
            .map_err(|e| format!("cannot read the XML of {name} at {uri}: {}", e.message()))?;
        out.push((name, xml));
    }
    out.sort();
    Ok(out)
}

/// Every domain at `uri` as a [`crate::tenant::Tenant`] on `host` (running
/// domains with their live pins, the others with their config), sorted by
/// name: what `report --connect` and `apply` see of a host.
pub fn domain_tenants(
    uri: &str,
    host: &crate::topology::HostTopology,
) -> Result<Vec<crate::tenant::Tenant>, String> {
    all_domain_xml(uri)?
        .iter()
        .map(|(name, xml)| {
            domain::tenant_from_domain(&format!("{uri} domain {name}"), xml, host)
                .map_err(|e| e.to_string())
        })
        .collect()
}
