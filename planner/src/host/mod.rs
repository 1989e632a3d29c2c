//! The ground floor for host I/O: everything that reads or writes the host
//! itself, below every stage that decides what the values mean. The capped
//! reader of a sys/proc tree under a root ([`fs`]), with the interrupt lines
//! ([`irq`]), huge page pools ([`hugepages`]), threads ([`task`],
//! [`threads`]) and cgroups ([`cgroup`]) read from it; atomic writes of a
//! file ([`mod@write`]) and of a set of files as one directory ([`dir`]); the
//! one envelope of every journal, written and read back ([`journal`]); the
//! lock ([`lock`]); and a libvirt host's node devices ([`nodedev`]).
//!
//! It imports nothing of pinplan but the foundations (`ids`, `cpuset`,
//! `error`, `text`): doctor, isolate, report and topology all stand on it.

pub mod cgroup;
pub mod dir;
pub mod fs;
pub mod hugepages;
pub mod irq;
pub mod journal;
pub mod lock;
pub mod nodedev;
pub mod task;
pub mod threads;
pub mod write;
