//! The typed contract between the stages, at the bottom of the library:
//! what every stage may name without importing another stage. It starts
//! with the placement policies ([`policy`]), each with its rules as
//! methods, and why a VM was left out ([`Binding`]); the request and the
//! plan are to follow (issue 29). Imports nothing of pinplan's.

pub mod policy;

pub use policy::{Binding, EmulatorPolicy, NicAffinity, NumaPolicy, ThreadPolicy};
