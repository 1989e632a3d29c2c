//! (being written by a helper: these two types are its interface)

use serde::{Deserialize, Serialize};

/// What the hook asks.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Ask {
    /// The protocol's version.
    pub version: u32,
    /// The domain.
    pub domain: String,
    /// The XML libvirt is about to start.
    pub xml: String,
}

/// The watcher's answer.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Answer {
    /// Whether it may start.
    pub allow: bool,
    /// Why not.
    pub reason: Option<String>,
    /// The smallest fix.
    pub fix: Option<String>,
}
