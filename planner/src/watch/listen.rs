//! The watcher's ears: a read-write connection to the host with its domain
//! events registered ([`crate::libvirt::events`]), each notice handed to a
//! sink. Dropping a [`Listening`] deregisters the events, then closes the
//! connection.

use crate::error::LibvirtError;
use crate::libvirt::events::{Events, Notice};

/// A connection and its events: heard until dropped.
pub struct Listening {
    // Declared first: dropped before the connection it registered on.
    _events: Events,
    _conn: virt::connect::Connect,
}

/// Opens `uri` and registers for its domains' events and its close; each
/// [`Notice`] goes to `sink` on libvirt's event thread (hand it on, do not
/// block).
pub fn listen(
    uri: &str,
    sink: impl Fn(Notice) + Send + Sync + 'static,
) -> Result<Listening, LibvirtError> {
    let conn = crate::libvirt::connection::open_watched(uri)?;
    let events = Events::register(uri, &conn, sink)?;
    Ok(Listening {
        _events: events,
        _conn: conn,
    })
}
