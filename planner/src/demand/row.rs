//! One measurement of a throughput table ([`Row`]), and why a table could
//! not be read ([`TableError`]): what the CSV reading (`header.rs`), the
//! table (`table.rs`) and the packet-rate model (`model.rs`) share.

use std::path::PathBuf;
use std::sync::Arc;

/// One measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The file it came from.
    pub file: PathBuf,
    /// 1-based line in that file.
    pub line: usize,
    /// Which VM configuration was measured (`vm-64b`).
    pub profile: String,
    /// Packet size in bytes, without preamble and inter-frame gap.
    pub packet_bytes: u32,
    /// Transmit cores (poll-mode threads) in the guest.
    pub tx_cores: u32,
    /// Receive cores in the guest.
    pub rx_cores: u32,
    /// Measured rate in Gb/s on the wire (what the traffic generator reports
    /// against the port's line rate).
    pub gbps: f64,
    /// The guest's vCPU count; `tx_cores + rx_cores + 1` when the table does not say.
    pub vcpus: u32,
    /// Forwarding threads per physical core when measured: 1 (one per core)
    /// or 2 (both SMT siblings of each core); `None` when the table does not
    /// say.
    pub threads_per_core: Option<u32>,
    /// What the table's rate was of: one direction, or the sum of both
    /// (`gbps` is then half of it, the rate of one direction).
    pub direction: Direction,
    /// Where the measurement comes from (a report, a file@commit).
    pub source: Option<String>,
    /// Free text.
    pub note: Option<String>,
}

/// What a table's rate was of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Direction {
    /// One direction (what a port's line rate is of).
    #[default]
    One,
    /// The sum of both directions (a bidirectional test's aggregate).
    Both,
}

impl Direction {
    /// How many directions the table's rate adds up.
    pub fn ways(self) -> f64 {
        match self {
            Direction::One => 1.0,
            Direction::Both => 2.0,
        }
    }
}

impl Row {
    /// `file:line`, for messages.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }

    /// `tx 12 / rx 1 → 97 G (line 5)`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "tx {} / rx {} → {} G ({} B, {})",
            self.tx_cores,
            self.rx_cores,
            fmt_gbps(self.gbps),
            self.packet_bytes,
            self.at()
        )
    }
}

/// Formats a rate without useless decimals (`97`, `97.5`).
pub(crate) fn fmt_gbps(gbps: f64) -> String {
    let rounded = (gbps * 100.0).round() / 100.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.0}")
    } else {
        format!("{rounded}")
    }
}

/// Why a table could not be read. Every variant names the file and line.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TableError {
    /// The file could not be read.
    #[error("cannot read {file}")]
    Io {
        /// The file.
        file: PathBuf,
        /// What the OS said.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The file is not text.
    #[error("cannot read {file}: not UTF-8 text: a throughput table is a CSV text file")]
    NotText {
        /// The file.
        file: PathBuf,
    },
    /// A problem at a line.
    #[error("{file}:{line}: {problem}")]
    At {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// No measurement at all.
    #[error("{file}: the table has no measurement rows (only a header, comments or blank lines)")]
    Empty {
        /// The file.
        file: PathBuf,
    },
}

impl crate::error::Diagnostic for TableError {
    fn hint(&self) -> Option<String> {
        match self {
            TableError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Some(crate::text::MISSING_FILE_HINT.to_owned())
            }
            TableError::Io { .. } => None,
            TableError::NotText { .. } | TableError::At { .. } | TableError::Empty { .. } => Some(
                "see `pinplan help formats` (Throughput tables) for the columns and an example"
                    .to_owned(),
            ),
        }
    }
}
