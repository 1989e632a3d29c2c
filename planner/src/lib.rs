//! pinplan's library: everything that is not argument parsing. The modules
//! follow the pipeline, each stage reading only the ones above it
//! (`docs/architecture.md` has the picture):
//!
//! - [`ids`], [`cpuset`], [`cmdline`], [`text`], [`error`]: shared small
//!   pieces — typed ids, CPU lists in libvirt/Linux syntax, the kernel
//!   command line, text helpers, and the [`error::Diagnostic`] trait every
//!   error implements; `xmldoc` (crate-private) reads whole XML documents.
//! - [`topology`]: read a host (hwloc live, XML, synthetic; libvirt
//!   capabilities or a connection) into a [`HostTopology`]; its map and
//!   fingerprint.
//! - [`demand`]: vCPUs a VM needs, from measured throughput tables.
//! - [`spec`]: the plan request file, checked on its own and on the host.
//! - [`solve`]: the placement (exact integer program, greedy baseline) and
//!   the explanations of what did not fit.
//! - [`plan`]: the resulting [`plan::Plan`], its JSON and text.
//! - [`output`]: the files `plan --out` and `xml` write, atomically.
//! - [`tenant`]: who is pinned where now.
//! - [`state`]: where journals and locks are kept (one rule for every
//!   command); [`interrupt`]: stopping a change part-way, cleanly.
//! - [`libvirt`]: domain XML in and out (read, emit, lossless patch), reading
//!   domains through a connection, applying a plan.
//! - [`report`]: conflicts between tenants, what a plan would move; text,
//!   JSON and SVG.
//! - [`doctor`]: host checks from sysfs and procfs (IOMMU, VFIO, SR-IOV,
//!   PCIe, NIC locality, SMT, isolation, IRQs).
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
pub mod deadline;
pub mod demand;
pub mod doctor;
pub mod error;
pub mod fleet;
#[cfg(test)]
mod fuzz;
pub mod guest;
pub mod host;
pub mod ids;
pub mod interrupt;
pub mod isolate;
pub mod libvirt;
pub mod memory;
pub mod model;
pub mod output;
pub mod plan;
pub mod report;
pub mod solve;
pub mod spec;
pub mod state;
pub mod tenant;
pub mod text;
pub mod topology;
pub mod watch;
pub(crate) mod xmldoc;

pub use cpuset::{CpuSet, CpuSetError};
pub use ids::{CoreId, CpuId, L3Id, NodeId, PackageId};
pub use topology::HostTopology;
