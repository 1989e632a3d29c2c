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

impl LooCheck {
    /// `row` predicted by `model`.
    fn of(row: &Row, model: &model::RateModel, line_rate_gbps: f64) -> LooCheck {
        let predicted = model.predict_gbps(row.tx_cores, row.packet_bytes, line_rate_gbps, false);
        LooCheck {
            row: row.at(),
            profile: row.profile.clone(),
            packet_bytes: row.packet_bytes,
            tx_cores: row.tx_cores,
            measured_gbps: row.gbps,
            predicted_gbps: predicted,
            relative_error: (predicted - row.gbps) / row.gbps,
        }
    }
}

/// For every row not at line rate, fits the model on the other rows of its
/// profile (same packet size when any remain) and predicts the row.
///
/// Linear in the rows: the model fitted on a group is its best row
/// ([`model::fit`]), so a group less one row is fitted by its best row, or
/// by its second best when the row left out is the best.
pub fn leave_one_out(table: &Table, line_rate_gbps: f64) -> LooChecks {
    use std::collections::BTreeMap;
    let mut by_profile: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut by_size: BTreeMap<(&str, u32), Vec<usize>> = BTreeMap::new();
    for (i, row) in table.rows.iter().enumerate() {
        by_profile.entry(&row.profile).or_default().push(i);
        by_size
            .entry((&row.profile, row.packet_bytes))
            .or_default()
            .push(i);
    }
    let top = |group: &Vec<usize>| Top::of(&table.rows, group, line_rate_gbps);
    let profile_top: BTreeMap<&str, Top> = by_profile.iter().map(|(k, g)| (*k, top(g))).collect();
    let size_top: BTreeMap<(&str, u32), (usize, Top)> = by_size
        .iter()
        .map(|(k, g)| (*k, (g.len(), top(g))))
        .collect();
    let mut checks = Vec::new();
    for (i, row) in table.rows.iter().enumerate() {
        if model::censored(row, line_rate_gbps) {
            continue;
        }
        let (same_len, same) = &size_top[&(row.profile.as_str(), row.packet_bytes)];
        // The same packet size when another row has it, else the whole profile.
        let best = if *same_len > 1 {
            same.without(i)
        } else {
            profile_top[row.profile.as_str()].without(i)
        };
        let Some(best) = best else {
            continue;
        };
        let Some(m) = model::fit(&[&table.rows[best]], line_rate_gbps) else {
            continue;
        };
        checks.push(LooCheck::of(row, &m, line_rate_gbps));
    }
    LooChecks(checks)
}

/// A group's best row by [`model::fit`]'s order, and its best without that
/// row.
struct Top {
    best: Option<usize>,
    second: Option<usize>,
}

impl Top {
    fn of(rows: &[Row], group: &[usize], line_rate_gbps: f64) -> Top {
        let rate = |i: usize| {
            let r = &rows[i];
            model::pps(r.gbps.min(line_rate_gbps), r.packet_bytes) / f64::from(r.tx_cores)
        };
        // As model::fit's max_by: the highest rate, then the lowest line; of
        // equals, the last.
        let pick = |skip: Option<usize>| {
            group
                .iter()
                .copied()
                .filter(|&i| Some(i) != skip)
                .max_by(|&a, &b| {
                    rate(a)
                        .total_cmp(&rate(b))
                        .then(rows[b].line.cmp(&rows[a].line))
                })
        };
        let best = pick(None);
        Top {
            best,
            second: best.and_then(|b| pick(Some(b))),
        }
    }

    /// The best row of the group less row `i`.
    fn without(&self, i: usize) -> Option<usize> {
        if self.best == Some(i) {
            self.second
        } else {
            self.best
        }
    }
}

/// Every check of [`leave_one_out`], in table order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct LooChecks(pub Vec<LooCheck>);

impl LooChecks {
    /// A table with aligned columns, one line per check, then a summary:
    /// how many rows, the mean and the worst error.
    pub fn to_text(&self) -> String {
        let header = [
            "row",
            "profile",
            "bytes",
            "tx",
            "measured G",
            "predicted G",
            "error",
        ];
        let rows: Vec<[String; 7]> = self
            .0
            .iter()
            .map(|c| {
                [
                    c.row.clone(),
                    c.profile.clone(),
                    c.packet_bytes.to_string(),
                    c.tx_cores.to_string(),
                    format!("{:.1}", c.measured_gbps),
                    format!("{:.1}", c.predicted_gbps),
                    format!("{:+.1} %", c.relative_error * 100.0),
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        // Text columns left-aligned, numbers right-aligned.
        let line = |cells: [&str; 7]| {
            let mut out = String::new();
            for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
                if i > 0 {
                    out.push_str("  ");
                }
                if i < 2 {
                    out.push_str(&format!("{cell:<w$}"));
                } else {
                    out.push_str(&format!("{cell:>w$}"));
                }
            }
            out.trim_end().to_owned() + "\n"
        };
        let mut text = line(header);
        for row in &rows {
            text.push_str(&line(std::array::from_fn(|i| row[i].as_str())));
        }
        text.push_str(&self.summary());
        text
    }

    /// `4 rows predicted from the others: mean |error| 1.5 %, worst +2.0 %
    /// (FILE:7)`.
    pub fn summary(&self) -> String {
        // The first of the largest errors, in table order.
        let worst = self.0.iter().fold(None::<&LooCheck>, |best, c| match best {
            Some(b) if b.relative_error.abs() >= c.relative_error.abs() => Some(b),
            _ => Some(c),
        });
        let Some(worst) = worst else {
            return "no row to check: every profile needs a second row below line rate\n"
                .to_owned();
        };
        let n = self.0.len();
        let mean = self.0.iter().map(|c| c.relative_error.abs()).sum::<f64>() / n as f64;
        format!(
            "{} predicted from the others: mean |error| {:.1} %, worst {:+.1} % ({})\n",
            crate::text::plural(n, "row", "rows"),
            mean * 100.0,
            worst.relative_error * 100.0,
            worst.row
        )
    }

    /// The JSON array.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(&self.0).unwrap_or_default();
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The quadratic definition: fit on the other rows of the profile (same
    /// packet size when any remain), for each row not at line rate.
    fn by_definition(table: &Table, line_rate_gbps: f64) -> Vec<LooCheck> {
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
            checks.push(LooCheck::of(row, &m, line_rate_gbps));
        }
        checks
    }

    proptest! {
        /// Issue 14, defect 10: leave-one-out was quadratic; the linear
        /// version gives exactly what the definition gives.
        #[test]
        fn leave_one_out_is_linear_and_the_same(
            rows in prop::collection::vec((0..3usize, prop::sample::select(vec![64u32, 512, 1500]), 1..6u32, 1..120u32), 0..40),
        ) {
            let table = Table {
                rows: rows
                    .iter()
                    .enumerate()
                    .map(|(line, &(p, bytes, tx, gbps))| Row {
                        file: "t.csv".into(),
                        line: 1 + line / 2, // repeated lines: the tie-break matters
                        profile: format!("p{p}"),
                        packet_bytes: bytes,
                        tx_cores: tx,
                        rx_cores: 1,
                        gbps: f64::from(gbps),
                        vcpus: tx + 2,
                        threads_per_core: None,
                        direction: crate::demand::Direction::One,
                        source: None,
                        note: None,
                    })
                    .collect(),
            };
            prop_assert_eq!(leave_one_out(&table, 100.0).0, by_definition(&table, 100.0));
        }
    }
}
