//! vCPU demand from measured throughput tables.
//!
//! Users know "64-byte packets, 12 tx + 1 rx cores → 97 Gb/s", not "how many
//! cores". [`demand`] turns a [`Table`] of such measurements, a profile and a
//! target rate into a [`Demand`]: how many vCPUs, why (a measured row or the
//! packet-rate [`model`]), and how sure it is (warnings and hints). Placement
//! is not this module's business.
//!
//! ```
//! use pinplan::demand::{demand, DemandOptions, Table};
//! let table = Table::parse(
//!     std::path::Path::new("lab.csv"),
//!     "profile,packet_bytes,tx_cores,rx_cores,gbps\nvm-64b,64,12,1,97\nvm-64b,64,14,1,100\n",
//! )?;
//! let options = DemandOptions { min_fraction: 0.97, ..DemandOptions::default() };
//! let d = demand(&table, "vm-64b", 100.0, &options)?;
//! assert_eq!((d.vcpus, d.tx_cores), (14, 12));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod choose;
mod header;
mod loo;
pub mod model;
mod row;
pub mod table;

pub use choose::demand;
pub use loo::{leave_one_out, LooCheck, LooChecks};
pub use table::{Direction, Row, Table, TableError};

use serde::{Deserialize, Serialize};
use table::fmt_gbps;

/// Where a demand comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// A measured row reaches the target.
    Measured,
    /// The packet-rate model predicts it.
    Model,
}

/// How to choose.
#[derive(Debug, Clone, PartialEq)]
pub struct DemandOptions {
    /// Share of the target that is good enough (0 < f ≤ 1; default 1).
    pub min_fraction: f64,
    /// Packet size; default: the profile's only measured size.
    pub packet_bytes: Option<u32>,
    /// The port's line rate in Gb/s (default 100).
    pub line_rate_gbps: f64,
    /// Force a basis; `None`: measured when a row reaches the target, else the model.
    pub basis: Option<Basis>,
    /// Give the model's answer even beyond line rate or 1.5× the largest
    /// measured core count.
    pub allow_extrapolation: bool,
    /// The demand is for a VM of a plan spec: refusals name the spec's keys
    /// (`line_rate_gbps`, `allow_extrapolation`), not `demand`'s flags.
    pub in_spec: bool,
}

impl Default for DemandOptions {
    fn default() -> Self {
        DemandOptions {
            min_fraction: 1.0,
            packet_bytes: None,
            line_rate_gbps: 100.0,
            basis: None,
            allow_extrapolation: false,
            in_spec: false,
        }
    }
}

/// A VM's vCPU demand and how it was found. Serializes to the JSON contract
/// of `pinplan demand --format json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Demand {
    /// The profile.
    pub profile: String,
    /// Packet size it is for.
    pub packet_bytes: u32,
    /// Target rate asked for.
    pub target_gbps: f64,
    /// Share of the target accepted.
    pub min_fraction: f64,
    /// vCPUs the guest needs: tx + rx + the guest's own housekeeping vCPU(s).
    pub vcpus: u32,
    /// Transmit cores.
    pub tx_cores: u32,
    /// Receive cores.
    pub rx_cores: u32,
    /// What that configuration reaches (measured, or the model's prediction).
    pub predicted_gbps: f64,
    /// Measured or model.
    pub basis: Basis,
    /// Things to doubt (table problems, model assumptions), with `file:line`.
    pub warnings: Vec<String>,
    /// Things that could save cores.
    pub hints: Vec<String>,
    /// `file:line` of the rows the answer rests on.
    pub rows: Vec<String>,
}

/// Why no demand was given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DemandError {
    /// No such profile in the table.
    #[error("no profile {name:?} in {}{}", tables.join(", "), suggestion.as_ref().map(|s| format!(": did you mean {s:?}?")).unwrap_or_default())]
    UnknownProfile {
        /// What was asked for.
        name: String,
        /// The table files read.
        tables: Vec<String>,
        /// The closest existing name.
        suggestion: Option<String>,
        /// Every profile in the table.
        known: Vec<String>,
    },
    /// The profile was measured at several packet sizes.
    #[error("{profile} was measured at {sizes} B: say which with --packet-bytes")]
    PacketSizeNeeded {
        /// The profile.
        profile: String,
        /// The sizes, e.g. `64, 512`.
        sizes: String,
    },
    /// A nonsensical option.
    #[error("{0}")]
    BadOption(String),
    /// The target cannot be shown to be reachable (exit 1).
    #[error("{0}")]
    Unreachable(String),
}

impl DemandError {
    /// Whether this is "the answer is no" (exit 1) rather than bad input (exit 2).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, DemandError::Unreachable(_))
    }
}

impl crate::error::Diagnostic for DemandError {
    fn hint(&self) -> Option<String> {
        match self {
            DemandError::UnknownProfile { known, .. } => {
                Some(format!("profiles in the table: {}", known.join(", ")))
            }
            _ => None,
        }
    }

    fn exit(&self) -> crate::error::Exit {
        if self.is_unreachable() {
            crate::error::Exit::No
        } else {
            crate::error::Exit::Error
        }
    }
}

/// Groups `file:line` references by file: `a.csv:5,6,7 b.csv:2`.
fn compress_refs(refs: &[String]) -> String {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for r in refs {
        let (file, line) = r.rsplit_once(':').unwrap_or((r.as_str(), ""));
        match groups.last_mut() {
            Some((f, lines)) if f == file => lines.push(line.to_owned()),
            _ => groups.push((file.to_owned(), vec![line.to_owned()])),
        }
    }
    groups
        .into_iter()
        .map(|(f, lines)| format!("{f}:{}", lines.join(",")))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Demand {
    /// The text printed by `pinplan demand`.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{}: {} vCPUs = {} tx + {} rx + {} for the guest, for {} G at {} B",
            self.profile,
            self.vcpus,
            self.tx_cores,
            self.rx_cores,
            self.vcpus - self.tx_cores - self.rx_cores,
            fmt_gbps(self.target_gbps),
            self.packet_bytes
        );
        if self.min_fraction < 1.0 {
            out.push_str(&format!(
                " (at least {} G accepted)",
                fmt_gbps(self.target_gbps * self.min_fraction)
            ));
        }
        out.push('\n');
        let (basis, rows) = match self.basis {
            Basis::Measured => ("measured", "row"),
            Basis::Model => ("model", "fitted on"),
        };
        out.push_str(&format!(
            "  basis: {basis}, {} G expected ({rows} {})\n",
            fmt_gbps(self.predicted_gbps),
            compress_refs(&self.rows)
        ));
        for w in &self.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        for h in &self.hints {
            out.push_str(&format!("hint: {h}\n"));
        }
        out
    }

    /// The JSON contract (`--format json`).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The lab's table as shipped (the lab notes' 64 B and 512 B measurements).
    const LAB: &str = include_str!("../../../examples/lab/b1-tx-cores.csv");

    fn lab() -> Result<Table, TableError> {
        Table::parse(Path::new("lab.csv"), LAB)
    }

    fn with(f: impl FnOnce(&mut DemandOptions)) -> DemandOptions {
        let mut o = DemandOptions::default();
        f(&mut o);
        o
    }

    #[test]
    fn lab_selections_from_the_issue() -> Result<(), Box<dyn std::error::Error>> {
        let t = lab()?;
        let d = demand(&t, "vm-64b", 100.0, &with(|o| o.min_fraction = 0.97))?;
        assert_eq!(
            (d.vcpus, d.tx_cores, d.rx_cores, d.basis),
            (14, 12, 1, Basis::Measured)
        );
        assert_eq!(d.predicted_gbps, 97.0);
        assert!(d.hints.is_empty(), "{:?}", d.hints);

        let d = demand(&t, "vm-64b", 100.0, &DemandOptions::default())?;
        assert_eq!((d.vcpus, d.tx_cores, d.basis), (16, 14, Basis::Measured));
        // 13 tx cores measured 98 G: the model must not claim 13 would do.
        assert!(d.hints.is_empty(), "{:?}", d.hints);

        let d = demand(&t, "vm-512b", 100.0, &DemandOptions::default())?;
        assert_eq!((d.vcpus, d.tx_cores, d.basis), (4, 2, Basis::Measured));
        assert!(
            d.warnings.iter().any(|w| w.contains("not monotonic")),
            "{:?}",
            d.warnings
        );

        // 50 G = 74.4 Mpps; best per-core rate 12.03 Mpps (tx 12 → 97 G): 7 tx cores.
        let d = demand(&t, "vm-64b", 50.0, &DemandOptions::default())?;
        assert_eq!((d.vcpus, d.tx_cores, d.basis), (13, 11, Basis::Measured));
        assert_eq!(d.hints.len(), 1);
        assert!(
            d.hints[0].contains("predicts 7 tx cores (9 vCPUs)"),
            "{:?}",
            d.hints
        );
        let d = demand(&t, "vm-64b", 50.0, &with(|o| o.basis = Some(Basis::Model)))?;
        assert_eq!(
            (d.vcpus, d.tx_cores, d.rx_cores, d.basis),
            (9, 7, 1, Basis::Model)
        );

        // 256 B was not measured: 45.29 Mpps / 12.03 → 4 tx cores, by the model.
        let d = demand(&t, "vm-64b", 100.0, &with(|o| o.packet_bytes = Some(256)))?;
        assert_eq!((d.tx_cores, d.vcpus, d.basis), (4, 6, Basis::Model));
        assert_eq!(d.predicted_gbps, 100.0);
        assert!(
            d.warnings
                .iter()
                .any(|w| w.contains("no 256 B row was measured")),
            "{:?}",
            d.warnings
        );

        let err = demand(&t, "vm-64b", 1000.0, &DemandOptions::default()).err();
        assert!(
            err.as_ref().is_some_and(DemandError::is_unreachable),
            "{err:?}"
        );
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("the table tops out at 100 G"), "{message}");
        assert!(message.contains("beyond the 100 G line rate"), "{message}");
        Ok(())
    }

    #[test]
    fn extrapolation_only_when_allowed() -> Result<(), Box<dyn std::error::Error>> {
        let t = lab()?;
        let d = demand(&t, "vm-64b", 200.0, &with(|o| o.allow_extrapolation = true))?;
        assert_eq!(d.basis, Basis::Model);
        // 200 G at 64 B = 297.6 Mpps / 12.03 Mpps per core → 25 tx cores.
        assert_eq!(d.tx_cores, 25);
        assert!(d.warnings.iter().any(|w| w.contains("extrapolated")));
        let err = demand(
            &t,
            "vm-64b",
            100.0,
            &with(|o| o.basis = Some(Basis::Measured)),
        );
        assert!(err.is_ok());
        Ok(())
    }

    #[test]
    fn bad_requests() -> Result<(), Box<dyn std::error::Error>> {
        let t = lab()?;
        let err = demand(&t, "vm-64", 100.0, &DemandOptions::default()).err();
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("no profile \"vm-64\" in lab.csv: did you mean \"vm-64b\"?")
        );
        let err = demand(&t, "vm-64b", 100.0, &with(|o| o.min_fraction = 1.5)).err();
        assert!(matches!(err, Some(DemandError::BadOption(_))));
        let err = demand(&t, "vm-64b", -1.0, &DemandOptions::default()).err();
        assert!(matches!(err, Some(DemandError::BadOption(_))));
        let two = Table::parse(
            Path::new("t.csv"),
            "profile,packet_bytes,tx_cores,rx_cores,gbps\np,64,1,1,10\np,512,1,1,40\n",
        )?;
        let err = demand(&two, "p", 10.0, &DemandOptions::default()).err();
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("p was measured at 64, 512 B: say which with --packet-bytes")
        );
        Ok(())
    }

    #[test]
    fn leave_one_out_on_the_lab_table_stays_within_five_percent() -> Result<(), TableError> {
        let checks = leave_one_out(&lab()?, 100.0).0;
        // Rows not at line rate: 88, 97, 98 (64 B) and 98 (512 B).
        let rows: Vec<&str> = checks.iter().map(|c| c.row.as_str()).collect();
        assert_eq!(rows, ["lab.csv:5", "lab.csv:6", "lab.csv:7", "lab.csv:10"]);
        for c in &checks {
            assert!(c.relative_error.abs() <= 0.05, "{c:?}");
        }
        // Hand-computed: 97 G × 11/12 = 88.92 G (+1.0 %); 88 G × 12/11 = 96.0 G (−1.0 %).
        assert!(
            (checks[0].predicted_gbps - 88.9167).abs() < 0.001,
            "{:?}",
            checks[0]
        );
        assert!(
            (checks[1].predicted_gbps - 96.0).abs() < 0.001,
            "{:?}",
            checks[1]
        );
        Ok(())
    }

    #[test]
    fn json_contract_fields() -> Result<(), Box<dyn std::error::Error>> {
        let d = demand(&lab()?, "vm-64b", 100.0, &with(|o| o.min_fraction = 0.97))?;
        let v: serde_json::Value = serde_json::from_str(&d.to_json())?;
        assert_eq!(v["profile"], "vm-64b");
        assert_eq!(v["packet_bytes"], 64);
        assert_eq!(v["target_gbps"], 100.0);
        assert_eq!(v["min_fraction"], 0.97);
        assert_eq!(v["vcpus"], 14);
        assert_eq!(v["tx_cores"], 12);
        assert_eq!(v["rx_cores"], 1);
        assert_eq!(v["predicted_gbps"], 97.0);
        assert_eq!(v["basis"], "measured");
        assert!(v["warnings"].as_array().is_some_and(Vec::is_empty));
        assert!(v["hints"].as_array().is_some_and(Vec::is_empty));
        Ok(())
    }
}
