//! A host's node devices through a libvirt connection: the XML of its PCI
//! functions and network interfaces, for the topology and for doctor.

use crate::error::{LibvirtAction, LibvirtError};
use virt::connect::Connect;

/// A host's node devices as `virsh nodedev-dumpxml` prints them: its PCI
/// functions and its network interfaces (whose `<parent>` is the PCI
/// function, and whose `<link speed>` is the port's).
#[derive(Debug, Clone, Default)]
pub struct NodeDevices {
    /// PCI devices' XML.
    pub pci: Vec<String>,
    /// Network interfaces' XML.
    pub net: Vec<String>,
}

/// A host's node devices through an open connection to `uri`: an error when the
/// PCI devices cannot be listed; network interfaces only add names and
/// speeds, so none when they cannot be. A device gone between the listing
/// and its XML is left out.
pub fn node_devices_of(uri: &str, conn: &Connect) -> Result<NodeDevices, LibvirtError> {
    let xml_of = |flag| {
        conn.list_all_node_devices(flag)
            .map(|devices| devices.iter().filter_map(|d| d.xml_desc(0).ok()).collect())
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::ListNodeDevices, &e))
    };
    Ok(NodeDevices {
        pci: xml_of(virt_sys::VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)?,
        net: xml_of(virt_sys::VIR_CONNECT_LIST_NODE_DEVICES_CAP_NET).unwrap_or_default(),
    })
}
