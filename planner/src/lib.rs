//! pinplan's library: everything that is not argument parsing.
//!
//! It reads a host's CPU topology from hwloc (live, XML, synthetic) or libvirt
//! (capabilities XML or a live connection) into a [`HostTopology`], and works
//! with CPU lists in libvirt/Linux syntax through [`CpuSet`].
//!
//! ```
//! use pinplan::topology::{self, Source};
//! let host = topology::load(&Source::Synthetic("package:1 core:4 pu:2(indexes=2*4:1*2)".into()))?;
//! assert_eq!(host.cores.len(), 4);
//! assert_eq!(host.cores[1].cpus.to_string(), "1,5");
//! # Ok::<(), pinplan::topology::TopologyError>(())
//! ```

pub mod cmdline;
pub mod cpuset;
pub mod demand;
pub mod doctor;
pub mod ids;
pub mod libvirt;
pub mod plan;
pub mod report;
pub mod solve;
pub mod spec;
pub mod tenant;
pub mod text;
pub mod topology;
pub(crate) mod xmldoc;

pub use cpuset::{CpuSet, CpuSetError};
pub use ids::{CoreId, CpuId, L3Id, NodeId, PackageId};
pub use topology::HostTopology;
