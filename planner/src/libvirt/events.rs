//! libvirt's domain events (being written).
