//! Checking the packet-rate model on a table (`pinplan demand
//! --leave-one-out`): predict each row not at line rate from the others.

use super::{model, Row, Table};
use serde::Serialize;

/// One leave-one-out check of the model (see `docs/demand-model.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LooCheck {
    /// `file:line` of the row left out.
    pub row: String,
    /// Its profile.
    pub profile: String,
    /// Its packet size.
    pub packet_bytes: u32,
    /// Its tx cores.
    pub tx_cores: u32,
    /// What it measured.
    pub measured_gbps: f64,
    /// What the model fitted on the other rows predicts for it.
    pub predicted_gbps: f64,
    /// (predicted − measured) / measured.
    pub relative_error: f64,
}

/// For every row not at line rate, fits the model on the other rows of its
/// profile (same packet size when any remain) and predicts the row.
pub fn leave_one_out(table: &Table, line_rate_gbps: f64) -> LooChecks {
    let mut checks = Vec::new();
    for (i, row) in table.rows.iter().enumerate() {
        if model::censored(row, line_rate_gbps) {
            continue;
        }
        let others: Vec<&Row> = table
            .rows
            .iter()
            .enumerate()
            .filter(|(j, r)| *j != i && r.profile == row.profile)
            .map(|(_, r)| r)
            .collect();
        let same: Vec<&Row> = others
            .iter()
            .copied()
            .filter(|r| r.packet_bytes == row.packet_bytes)
            .collect();
        let fit_rows = if same.is_empty() { others } else { same };
        let Some(m) = model::fit(&fit_rows, line_rate_gbps) else {
            continue;
        };
        let predicted = m.predict_gbps(row.tx_cores, row.packet_bytes, line_rate_gbps, false);
        checks.push(LooCheck {
            row: row.at(),
            profile: row.profile.clone(),
            packet_bytes: row.packet_bytes,
            tx_cores: row.tx_cores,
            measured_gbps: row.gbps,
            predicted_gbps: predicted,
            relative_error: (predicted - row.gbps) / row.gbps,
        });
    }
    LooChecks(checks)
}

/// Every check of [`leave_one_out`], in table order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct LooChecks(pub Vec<LooCheck>);

impl LooChecks {
    /// One tab-separated line per check, with a header.
    pub fn to_text(&self) -> String {
        let mut text = String::from("row\tprofile\tbytes\ttx\tmeasured G\tpredicted G\terror\n");
        for c in &self.0 {
            text.push_str(&format!(
                "{}\t{}\t{}\t{}\t{:.1}\t{:.1}\t{:+.1} %\n",
                c.row,
                c.profile,
                c.packet_bytes,
                c.tx_cores,
                c.measured_gbps,
                c.predicted_gbps,
                c.relative_error * 100.0
            ));
        }
        text
    }

    /// The JSON array.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(&self.0).unwrap_or_default();
        text.push('\n');
        text
    }
}
