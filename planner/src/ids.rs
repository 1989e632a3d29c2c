//! Distinct id types for the things a host is made of.
//!
//! A Linux CPU number, a physical core, a NUMA node and a package are all small
//! integers; keeping them in separate types means a NUMA id can never be passed
//! where a CPU id is expected. This module owns only the types, not their meaning
//! inside a topology (see [`crate::topology`]).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// A logical CPU as Linux numbers it (`/sys/devices/system/cpu/cpuN`,
    /// hwloc's PU `os_index`, libvirt's `<cpu id>`). Always below [`CpuId::LIMIT`].
    CpuId(u32)
);
id_type!(
    /// A physical core, numbered densely across the whole host in order of its
    /// lowest CPU. Not Linux's `core_id`, which repeats in every package.
    CoreId(u32)
);
id_type!(
    /// A NUMA node as the OS numbers it (`/sys/devices/system/node/nodeN`,
    /// libvirt's `<cell id>`). Ids can be sparse: 0, 1, 8, 250.
    NodeId(u32)
);
id_type!(
    /// A processor package (socket), numbered densely in order of its lowest CPU.
    PackageId(u32)
);
id_type!(
    /// A last-level (L3) cache domain, numbered densely in order of its lowest CPU.
    L3Id(u32)
);

impl CpuId {
    /// CPU ids are below this bound: libvirt's own cpumap limit, and far above any
    /// real host.
    pub const LIMIT: u32 = 65_536;
}
