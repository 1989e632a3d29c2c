//! pinplan's integration tests, one module per area, in one test binary:
//! the helpers in `util` are written once and CI links a single executable.
//! Most modules run the real binary (`CARGO_BIN_EXE_pinplan`) on files under
//! `tests/fixtures/`; `plan_fixtures` and `spec_parse` call the library.
//! Snapshots (outputs and error messages, `insta`) are in `tests/snapshots/`;
//! after a deliberate change, `INSTA_UPDATE=always cargo test …` (or `cargo
//! insta review`) rewrites them, and `git diff tests/snapshots` is the review.
//! scripts/test.sh sets `INSTA_UPDATE=no`: there a missing or changed
//! snapshot fails.

// clippy.toml allows unwrap/expect in #[test] functions; the helpers they call
// (here and in util) are test code too, where a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

mod apply_edges;
mod apply_live;
mod cli_shell;
mod demand_cli;
mod doctor_cli;
mod domain_corpus;
mod fleet_cli;
mod guest_cpu_cli;
mod isolate_cli;
mod journal_cli;
mod layering;
mod libvirt_reads;
mod memory_cli;
mod nics_cli;
mod plan_cli;
mod plan_fixtures;
mod plan_live;
mod report_cli;
mod report_svg;
mod roles_cli;
mod solver_crash;
mod spec_parse;
mod tag_live;
mod topology_cli;
mod topology_errors;
mod topology_fixtures;
mod topology_live;
mod trial_edges;
mod watch_cli;
mod workflow_cli;
mod xml_patch;
