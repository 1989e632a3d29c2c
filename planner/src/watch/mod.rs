//! `pinplan watch`: planning with the host as it changes. On libvirt's
//! domain events it pins a domain as it is defined or started, gives its
//! cores back when it stops, answers the admission hook over a local socket
//! (`admission`), and writes the hook (`hook`) and the systemd unit (`unit`)
//! that run it.

pub mod admission;
pub mod hook;
pub mod unit;
