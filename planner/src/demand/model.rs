//! The packet-rate model: how many tx cores a rate needs when no measurement
//! says so directly. Documented in `docs/demand-model.md`.
//!
//! On the wire a packet of S bytes takes S + 20 bytes (preamble and
//! inter-frame gap), so a rate of G Gb/s is G·10⁹ / (8·(S+20)) packets/s. Each
//! row gives a per-tx-core packet rate; a row at line rate only gives a lower
//! bound of it (the NIC, not the cores, was the limit: it is *censored*). The
//! model takes the best per-core rate the rows show or imply and assumes tx
//! cores add up linearly, capped at line rate.

use super::row::Row;

/// Share of line rate at or above which a row is taken as NIC-limited.
pub const LINE_RATE_SHARE: f64 = 0.995;

/// Packets per second of `gbps` on the wire for packets of `packet_bytes`.
pub fn pps(gbps: f64, packet_bytes: u32) -> f64 {
    gbps * 1e9 / (8.0 * (f64::from(packet_bytes) + 20.0))
}

/// Gb/s on the wire of `pps` packets of `packet_bytes`.
pub fn gbps(pps: f64, packet_bytes: u32) -> f64 {
    pps * 8.0 * (f64::from(packet_bytes) + 20.0) / 1e9
}

/// Whether a row ran at line rate (so it shows only a lower bound).
pub fn censored(row: &Row, line_rate_gbps: f64) -> bool {
    row.gbps >= line_rate_gbps * LINE_RATE_SHARE
}

/// A fitted model: packets per second one tx core moves.
#[derive(Debug, Clone, PartialEq)]
pub struct RateModel<'t> {
    /// Per-tx-core packet rate.
    pub per_core_pps: f64,
    /// The row that gives it.
    pub best: &'t Row,
    /// Whether that row only bounds the rate from below.
    pub best_censored: bool,
    /// Every row the fit looked at.
    pub rows: Vec<&'t Row>,
}

/// Fits the model on `rows`; `None` when there is none.
pub fn fit<'t>(rows: &[&'t Row], line_rate_gbps: f64) -> Option<RateModel<'t>> {
    let rate = |r: &Row| pps(r.gbps.min(line_rate_gbps), r.packet_bytes) / f64::from(r.tx_cores);
    let best = rows
        .iter()
        .copied()
        .max_by(|a, b| rate(a).total_cmp(&rate(b)).then(b.line.cmp(&a.line)))?;
    Some(RateModel {
        per_core_pps: rate(best),
        best,
        best_censored: censored(best, line_rate_gbps),
        rows: rows.to_vec(),
    })
}

impl RateModel<'_> {
    /// Tx cores needed for `target_gbps` with packets of `packet_bytes`
    /// (rounded up; a ratio within 10⁻⁹ of a whole number counts as it).
    pub fn tx_cores_for(&self, target_gbps: f64, packet_bytes: u32) -> u32 {
        let exact = pps(target_gbps, packet_bytes) / self.per_core_pps;
        let cores = (exact - 1e-9).ceil().max(1.0);
        // A demand of more than u32::MAX cores is refused long before this.
        if cores >= f64::from(u32::MAX) {
            u32::MAX
        } else {
            cores as u32
        }
    }

    /// What `tx_cores` would reach, capped at line rate unless `uncapped`.
    pub fn predict_gbps(
        &self,
        tx_cores: u32,
        packet_bytes: u32,
        line_rate_gbps: f64,
        uncapped: bool,
    ) -> f64 {
        let g = gbps(self.per_core_pps * f64::from(tx_cores), packet_bytes);
        if uncapped {
            g
        } else {
            g.min(line_rate_gbps)
        }
    }
}

/// Raises a predicted tx core count past counts that measurements contradict:
/// `n` is contradicted when a row with n or more tx cores fell short of the
/// target and no row between n and that one reached it (tables can be
/// non-monotonic: 2 tx → 100 G, 3 → 98 G, 4 → 100 G). `rows` are rows of the
/// packet size in question.
pub fn respect_measurements(mut n: u32, rows: &[&Row], goal_gbps: f64) -> u32 {
    let reaches = |r: &Row| r.gbps + 1e-9 >= goal_gbps;
    loop {
        let contradicted = rows.iter().any(|short| {
            !reaches(short)
                && short.tx_cores >= n
                && !rows
                    .iter()
                    .any(|ok| reaches(ok) && ok.tx_cores >= n && ok.tx_cores <= short.tx_cores)
        });
        if !contradicted {
            return n;
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn row(line: usize, bytes: u32, tx: u32, gbps: f64) -> Row {
        Row {
            file: PathBuf::from("t.csv"),
            line,
            profile: "p".into(),
            packet_bytes: bytes,
            tx_cores: tx,
            rx_cores: 1,
            gbps,
            vcpus: tx + 2,
            threads_per_core: None,
            direction: crate::demand::Direction::One,
            source: None,
            note: None,
        }
    }

    #[test]
    fn wire_rate_arithmetic() {
        // 100 GbE at 64 B: 148.81 Mpps, the textbook figure.
        assert!((pps(100.0, 64) - 148_809_523.8).abs() < 1.0);
        assert!((gbps(pps(42.0, 512), 512) - 42.0).abs() < 1e-9);
    }

    #[test]
    fn best_rate_counts_censored_rows_as_lower_bounds() -> Result<(), String> {
        let rows = [
            row(2, 512, 2, 100.0),
            row(3, 512, 3, 98.0),
            row(4, 512, 4, 100.0),
        ];
        let refs: Vec<&Row> = rows.iter().collect();
        let model = fit(&refs, 100.0).ok_or("no fit")?;
        // 2 cores moved at least line rate: 23.496 Mpps / 2.
        assert_eq!(model.best.line, 2);
        assert!(model.best_censored);
        assert!((model.per_core_pps - pps(100.0, 512) / 2.0).abs() < 1e-6);
        assert_eq!(model.tx_cores_for(100.0, 512), 2);
        Ok(())
    }

    #[test]
    fn measurements_overrule_the_model() {
        let rows = [
            row(2, 64, 11, 88.0),
            row(3, 64, 12, 97.0),
            row(4, 64, 13, 98.0),
            row(5, 64, 14, 100.0),
        ];
        let refs: Vec<&Row> = rows.iter().collect();
        // 13 tx cores were measured at 98 G: 13 cannot reach 100 G.
        assert_eq!(respect_measurements(13, &refs, 100.0), 14);
        // 10 cannot reach 90 G when 11 measured 88 G.
        assert_eq!(respect_measurements(10, &refs, 90.0), 12);
        assert_eq!(respect_measurements(7, &refs, 50.0), 7);
        let noisy = [
            row(2, 512, 2, 100.0),
            row(3, 512, 3, 98.0),
            row(4, 512, 4, 100.0),
        ];
        let refs: Vec<&Row> = noisy.iter().collect();
        assert_eq!(respect_measurements(2, &refs, 100.0), 2);
    }
}
