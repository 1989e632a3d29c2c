//! The typed contract between the stages, at the bottom of the library:
//! what every stage may name without importing another stage. It starts
//! with the placement policies ([`policy`]), each with its rules as
//! methods, why a VM was left out ([`Binding`]), and the plan's sentences
//! that name VMs and its warnings ([`message`]), and the objectives a host
//! and a fleet optimise ([`Tier`]). Imports nothing of pinplan's.

pub mod message;
pub mod plan;
pub mod policy;
pub mod request;
pub mod tier;

pub use message::{Message, Warning, WarningKind};
pub use policy::{Binding, EmulatorPolicy, NicAffinity, NumaPolicy, ThreadPolicy};
pub use tier::Tier;
