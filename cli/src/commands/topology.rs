//! `pinplan topology`: read a host's topology and print it.

use super::Format;
use crate::error::{print, Failure};
use pinplan::topology;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct TopologyArgs {
    /// Where to read the topology: `host` (live, through hwloc), a file (hwloc XML
    /// from `lstopo --of xml`, `virsh capabilities`, or this command's own
    /// `--format json`), or `synthetic:DESC`.
    #[arg(
        long,
        value_name = "SRC",
        default_value = "host",
        conflicts_with = "connect"
    )]
    source: String,
    /// Read the topology through libvirt instead (`qemu:///system`,
    /// `qemu+ssh://host/system`, `test:///default`).
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

pub fn run(args: &TopologyArgs) -> Result<ExitCode, Failure> {
    let host = topology::load(&super::source(args.connect.as_ref(), &args.source))?;
    super::verbose_host(&host);
    print(&match args.format {
        Format::Text => host.to_text(),
        Format::Json => host.to_json(),
    })?;
    Ok(ExitCode::SUCCESS)
}
