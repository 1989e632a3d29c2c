//! The model family: four ways packet rates can scale with cores, each
//! fitted on a profile's rows in packets per second (`docs/demand-model.md`,
//! "The model family"). Which one answers for a profile is chosen by
//! leave-one-out in [`super::select`], not here.
//!
//! - **linear**: per-core rate × cores, capped at line rate ([`super::model`]:
//!   the best per-core rate the rows show or imply);
//! - **ceiling**: the same with a per-profile ceiling below line rate (a NIC,
//!   PCIe or memory limit): min(λn, C);
//! - **power**: sub-linear scaling without a knee, λ·n^b with 0 ≤ b ≤ 1;
//! - **contention**: the universal scalability law, λn / (1 + σ(n−1) +
//!   κn(n−1)) with σ, κ ≥ 0, capped at its peak so more cores never predict
//!   less;
//! - **similar**: the profile's own rate times the growth of the nearest
//!   other profile of the tables ([`super::peers`]): a shape borrowed, not
//!   fitted, so it is fitted by [`super::peers::Peers::fit`], not [`fit`].
//!
//! Every fit is deterministic (closed forms and fixed grids, no randomness)
//! and treats a row at line rate as a lower bound: it only costs when the
//! curve falls below it.

use super::model::{self, censored, gbps, pps};
use super::row::Row;
use serde::{Deserialize, Serialize};

/// A model family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Per-core rate × cores, capped at line rate.
    Linear,
    /// Linear up to a ceiling below line rate.
    Ceiling,
    /// Sub-linear: λ·n^b with 0 ≤ b ≤ 1.
    Power,
    /// The universal scalability law (contention and coherency).
    Usl,
    /// The growth of the nearest other profile of the tables, from the
    /// profile's own rate ([`super::peers`]).
    Similar,
}

impl Family {
    /// Every family, in the order they are printed.
    pub const ALL: [Family; 5] = [
        Family::Linear,
        Family::Ceiling,
        Family::Power,
        Family::Usl,
        Family::Similar,
    ];

    /// The order ties are broken in: fewest parameters fitted on the
    /// profile's own rows first (the similar profile's shape is borrowed,
    /// none fitted), then the simplest.
    pub const PREFERENCE: [Family; 5] = [
        Family::Similar,
        Family::Linear,
        Family::Ceiling,
        Family::Power,
        Family::Usl,
    ];

    /// Parameters fitted on the profile's own rows: none (a borrowed
    /// shape); λ; λ and C; λ, σ and κ.
    pub fn parameters(self) -> usize {
        match self {
            Family::Similar => 0,
            Family::Linear => 1,
            Family::Ceiling | Family::Power => 2,
            Family::Usl => 3,
        }
    }

    /// The name printed in answers.
    pub fn name(self) -> &'static str {
        match self {
            Family::Linear => "linear",
            Family::Ceiling => "ceiling",
            Family::Power => "power",
            Family::Usl => "contention (USL)",
            Family::Similar => "similar profile",
        }
    }

    /// The JSON key (`linear`, `ceiling`, `usl`, `similar`).
    pub fn key(self) -> &'static str {
        match self {
            Family::Linear => "linear",
            Family::Ceiling => "ceiling",
            Family::Power => "power",
            Family::Usl => "usl",
            Family::Similar => "similar",
        }
    }
}

/// A fitted curve: packets per second for a number of cores.
#[derive(Debug, Clone, PartialEq)]
pub enum Curve {
    /// `per_core_pps × n`.
    Linear {
        /// Packets per second per core.
        per_core_pps: f64,
    },
    /// `min(per_core_pps × n, ceiling_pps)`; the ceiling is infinite when
    /// the rows show none.
    Ceiling {
        /// Packets per second per core below the ceiling.
        per_core_pps: f64,
        /// The ceiling.
        ceiling_pps: f64,
    },
    /// `λ·n^b`: each doubling of the cores multiplies the rate by 2^b.
    Power {
        /// λ: the one-core rate.
        lambda: f64,
        /// b, between 0 (flat) and 1 (linear).
        exponent: f64,
    },
    /// `λn / (1 + σ(n−1) + κn(n−1))`, flat after its peak.
    Usl {
        /// λ: the one-core rate.
        lambda: f64,
        /// σ: contention.
        sigma: f64,
        /// κ: coherency (makes the curve fall after its peak).
        kappa: f64,
    },
    /// The profile's rates at the peer's core counts: its own rate at the
    /// nearest count both measured × the peer's growth from there, never
    /// falling; between counts a straight line, beyond the last held there
    /// (nothing was measured beyond), below the first proportional.
    Similar {
        /// The profile whose growth is borrowed.
        peer: String,
        /// Its rows at the packet size, `file:line`.
        peer_rows: Vec<String>,
        /// The tx core counts both measured.
        shared: Vec<u32>,
        /// RMS of the log ratios of the two profiles' rates at those counts.
        distance: f64,
        /// (tx cores, packets per second), at the peer's counts, ascending.
        points: Vec<(u32, f64)>,
    },
}

impl Curve {
    /// The family it belongs to.
    pub fn family(&self) -> Family {
        match self {
            Curve::Linear { .. } => Family::Linear,
            Curve::Ceiling { .. } => Family::Ceiling,
            Curve::Power { .. } => Family::Power,
            Curve::Usl { .. } => Family::Usl,
            Curve::Similar { .. } => Family::Similar,
        }
    }

    /// The core count where the USL peaks (`√((1−σ)/κ)`, at least 1);
    /// `None` for curves that never fall.
    pub fn peak_cores(&self) -> Option<f64> {
        match *self {
            Curve::Usl { sigma, kappa, .. } if kappa > 0.0 => {
                Some(((1.0 - sigma).max(0.0) / kappa).sqrt().max(1.0))
            }
            _ => None,
        }
    }

    /// Packets per second at `n` cores as the formula gives it (the USL
    /// falling after its peak): what the fit compares with the rows.
    fn raw_pps_at(&self, n: f64) -> f64 {
        match *self {
            Curve::Usl {
                lambda,
                sigma,
                kappa,
            } => lambda * usl_shape(n, sigma, kappa),
            _ => self.pps_at(n),
        }
    }

    /// Packets per second at `n` cores, the USL held at its peak beyond it
    /// (so the prediction never falls as cores are added), not capped at
    /// line rate.
    pub fn pps_at(&self, n: f64) -> f64 {
        match *self {
            Curve::Linear { per_core_pps } => per_core_pps * n,
            Curve::Ceiling {
                per_core_pps,
                ceiling_pps,
            } => (per_core_pps * n).min(ceiling_pps),
            Curve::Power { lambda, exponent } => lambda * n.powf(exponent),
            Curve::Usl {
                lambda,
                sigma,
                kappa,
            } => {
                let n = self.peak_cores().map_or(n, |p| n.min(p));
                lambda * usl_shape(n, sigma, kappa)
            }
            Curve::Similar { ref points, .. } => similar_pps_at(points, n),
        }
    }

    /// What `cores` reach at `packet_bytes`, capped at line rate.
    pub fn predict_gbps(&self, cores: u32, packet_bytes: u32, line_rate_gbps: f64) -> f64 {
        gbps(self.pps_at(f64::from(cores)), packet_bytes).min(line_rate_gbps)
    }

    /// The fewest cores (up to `limit`) whose uncapped prediction divided by
    /// `1 + margin` reaches `goal_pps`; `None` when none does. A margin of 0
    /// is the point estimate; a positive one the pessimistic end. A ratio
    /// within 10⁻⁹ of the goal counts as reaching it.
    pub fn cores_for(&self, goal_pps: f64, margin: f64, limit: u32) -> Option<u32> {
        let reaches =
            |n: u32| self.pps_at(f64::from(n)) / (1.0 + margin) >= goal_pps * (1.0 - 1e-9);
        if !reaches(limit) {
            return None;
        }
        // Non-decreasing in n: bisect.
        let (mut lo, mut hi) = (1u32, limit);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if reaches(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(lo)
    }

    /// `12.03 Mpps per core`, `12.5 Mpps per core up to 37.4 Mpps`,
    /// `λ 12.4 Mpps, σ 0.100, κ 0.0020 (peak at 22.4 cores)`.
    pub fn describe(&self) -> String {
        let mpps = |p: f64| format!("{:.2} Mpps", p / 1e6);
        match *self {
            Curve::Linear { per_core_pps } => format!("{} per core", mpps(per_core_pps)),
            Curve::Ceiling {
                per_core_pps,
                ceiling_pps,
            } if ceiling_pps.is_finite() => format!(
                "{} per core up to {}",
                mpps(per_core_pps),
                mpps(ceiling_pps)
            ),
            Curve::Ceiling { per_core_pps, .. } => {
                format!(
                    "{} per core, no ceiling below line rate",
                    mpps(per_core_pps)
                )
            }
            Curve::Power { lambda, exponent } => {
                format!("{} at one core × cores^{exponent:.3}", mpps(lambda))
            }
            Curve::Usl {
                lambda,
                sigma,
                kappa,
            } => {
                let peak = self
                    .peak_cores()
                    .map(|p| format!(" (peak at {p:.1} cores: held there beyond)"))
                    .unwrap_or_default();
                format!("λ {}, σ {sigma:.3}, κ {kappa:.4}{peak}", mpps(lambda))
            }
            Curve::Similar {
                ref peer,
                ref shared,
                distance,
                ref points,
                ..
            } => {
                let list = |v: Vec<String>| v.join(", ");
                let last = points.last().map_or(0, |p| p.0);
                format!(
                    "grows as {peer} did, the nearest profile at {} tx cores ({:.1} % apart): \
                     {} Mpps at {} tx cores, held beyond {last}",
                    list(shared.iter().map(u32::to_string).collect()),
                    (distance.exp() - 1.0) * 100.0,
                    list(points.iter().map(|p| format!("{:.2}", p.1 / 1e6)).collect()),
                    list(points.iter().map(|p| p.0.to_string()).collect()),
                )
            }
        }
    }
}

/// What `cores` reach at `packet_bytes` by `curve`, not capped at line rate.
pub fn gbps_at(curve: &Curve, cores: u32, packet_bytes: u32) -> f64 {
    gbps(curve.pps_at(f64::from(cores)), packet_bytes)
}

/// A similar profile's curve at `n` cores: proportional below the first
/// point, a straight line between points, held beyond the last.
fn similar_pps_at(points: &[(u32, f64)], n: f64) -> f64 {
    let Some(&(first_n, first)) = points.first() else {
        return 0.0;
    };
    if n <= f64::from(first_n) {
        return first * n / f64::from(first_n);
    }
    for w in points.windows(2) {
        let ((a, ra), (b, rb)) = (w[0], w[1]);
        let (a, b) = (f64::from(a), f64::from(b));
        if n <= b {
            return ra + (rb - ra) * (n - a) / (b - a);
        }
    }
    points.last().map_or(first, |p| p.1)
}

fn usl_shape(n: f64, sigma: f64, kappa: f64) -> f64 {
    n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// A row as the fits see it.
#[derive(Debug, Clone, Copy)]
struct Point {
    cores: f64,
    /// Packets per second measured (capped at line rate).
    pps: f64,
    /// Line rate in packets per second at the row's size.
    line_pps: f64,
    censored: bool,
}

fn points(rows: &[&Row], line_rate_gbps: f64) -> Vec<Point> {
    rows.iter()
        .map(|r| Point {
            cores: f64::from(r.tx_cores),
            pps: pps(r.gbps.min(line_rate_gbps), r.packet_bytes),
            line_pps: pps(line_rate_gbps, r.packet_bytes),
            censored: censored(r, line_rate_gbps),
        })
        .collect()
}

/// Squared log error of `curve` on the points; a censored point costs only
/// when the curve (capped at line rate) falls below it.
fn loss(curve: &Curve, points: &[Point]) -> f64 {
    points
        .iter()
        .map(|p| {
            let predicted = curve.raw_pps_at(p.cores).min(p.line_pps);
            let d = predicted.ln() - p.pps.ln();
            if p.censored {
                d.min(0.0).powi(2)
            } else {
                d * d
            }
        })
        .sum()
}

/// The rate factor that best fits `shape` (in log error): the geometric
/// mean of measured / shape over rows below line rate; when every row is at
/// line rate, the least that keeps all of them reached.
fn scale(points: &[&Point], shape: impl Fn(f64) -> f64) -> Option<f64> {
    let free: Vec<f64> = points
        .iter()
        .filter(|p| !p.censored)
        .map(|p| (p.pps / shape(p.cores)).ln())
        .collect();
    if free.is_empty() {
        points
            .iter()
            .map(|p| p.pps / shape(p.cores))
            .max_by(f64::total_cmp)
    } else {
        Some((free.iter().sum::<f64>() / free.len() as f64).exp())
    }
}

/// Fits `family` on `rows` (any packet sizes: the fit is in packets per
/// second); `None` when there is no row, and for [`Family::Similar`], which
/// borrows from other profiles ([`super::peers::Peers::fit`]).
pub fn fit(family: Family, rows: &[&Row], line_rate_gbps: f64) -> Option<Curve> {
    match family {
        Family::Similar => None,
        Family::Linear => model::fit(rows, line_rate_gbps).map(|m| Curve::Linear {
            per_core_pps: m.per_core_pps,
        }),
        Family::Ceiling => fit_ceiling(&points(rows, line_rate_gbps)),
        Family::Power => fit_power(&points(rows, line_rate_gbps)),
        Family::Usl => fit_usl(&points(rows, line_rate_gbps)),
    }
}

/// min(λn, C): flat from one core, then for each split of the core counts
/// into a rising part and a flat part, λ and C in closed form (geometric
/// means); the candidate with the least loss, the earlier on ties.
fn fit_ceiling(points: &[Point]) -> Option<Curve> {
    let mut counts: Vec<f64> = points.iter().map(|p| p.cores).collect();
    counts.sort_by(f64::total_cmp);
    counts.dedup();
    let mut best: Option<(f64, Curve)> = None;
    // Flat from one core on (the knee at 1), when rows below line rate at two
    // core counts or more can say so: equal rates for different core counts
    // say the limit is not the cores. Tried first, so
    // it wins a tie with a knee between the rows.
    let all: Vec<&Point> = points.iter().filter(|p| !p.censored).collect();
    let spread = all
        .iter()
        .any(|p| all.first().is_some_and(|q| q.cores != p.cores));
    if let Some(level) = scale(&all, |_| 1.0).filter(|_| spread) {
        let curve = Curve::Ceiling {
            per_core_pps: level,
            ceiling_pps: level,
        };
        best = Some((loss(&curve, points), curve));
    }
    for &knee in counts.iter().rev() {
        let rising: Vec<&Point> = points.iter().filter(|p| p.cores <= knee).collect();
        let flat: Vec<&Point> = points
            .iter()
            .filter(|p| p.cores > knee && !p.censored)
            .collect();
        let Some(per_core_pps) = scale(&rising, |n| n) else {
            continue;
        };
        let ceiling_pps = scale(&flat, |_| 1.0).unwrap_or(f64::INFINITY);
        let curve = Curve::Ceiling {
            per_core_pps,
            ceiling_pps,
        };
        let l = loss(&curve, points);
        if best.as_ref().is_none_or(|(b, _)| l < b - 1e-12) {
            best = Some((l, curve));
        }
    }
    best.map(|(_, c)| c)
}

/// λ·n^b: b from 1 down to 0 in steps of 0.005, λ in closed form; the
/// first of the least losses (the most linear).
fn fit_power(points: &[Point]) -> Option<Curve> {
    let all: Vec<&Point> = points.iter().collect();
    let mut best: Option<(f64, Curve)> = None;
    for step in (0..=200).rev() {
        let exponent = f64::from(step) / 200.0;
        let Some(lambda) = scale(&all, |n| n.powf(exponent)) else {
            continue;
        };
        let curve = Curve::Power { lambda, exponent };
        let l = loss(&curve, points);
        if best.as_ref().is_none_or(|(b, _)| l < b - 1e-12) {
            best = Some((l, curve));
        }
    }
    best.map(|(_, c)| c)
}

/// The σ or κ values of a grid: 0, then `from` × 1.25^k up to `to`.
fn grid(from: f64, to: f64) -> Vec<f64> {
    let mut values = vec![0.0];
    let mut v = from;
    while v <= to * (1.0 + 1e-12) {
        values.push(v);
        v *= 1.25;
    }
    values
}

/// A finer grid around `v`: × 1.25^(j/steps) for j in −steps..=steps (just 0
/// when `v` is 0).
fn refine(v: f64, steps: i32) -> Vec<f64> {
    if v == 0.0 {
        return vec![0.0];
    }
    (-steps..=steps)
        .map(|j| v * 1.25f64.powf(f64::from(j) / f64::from(steps)))
        .collect()
}

/// The USL: σ and κ on a fixed grid (σ up to 1, κ up to 1), refined twice
/// around the best; λ in closed form for each. The first of equal losses
/// wins (smaller σ, then smaller κ), so the same rows give the same curve.
fn fit_usl(points: &[Point]) -> Option<Curve> {
    let try_grid = |sigmas: &[f64], kappas: &[f64]| {
        let mut best: Option<(f64, Curve)> = None;
        for &sigma in sigmas {
            for &kappa in kappas {
                let all: Vec<&Point> = points.iter().collect();
                let Some(lambda) = scale(&all, |n| usl_shape(n, sigma, kappa)) else {
                    continue;
                };
                let curve = Curve::Usl {
                    lambda,
                    sigma,
                    kappa,
                };
                let l = loss(&curve, points);
                if best.as_ref().is_none_or(|(b, _)| l < b - 1e-12) {
                    best = Some((l, curve));
                }
            }
        }
        best
    };
    let mut best = try_grid(&grid(1e-4, 1.0), &grid(1e-5, 1.0))?;
    for steps in [8, 64] {
        let Curve::Usl { sigma, kappa, .. } = best.1 else {
            break;
        };
        let sigmas: Vec<f64> = refine(sigma, steps)
            .into_iter()
            .filter(|s| *s <= 1.0)
            .collect();
        if let Some(better) = try_grid(&sigmas, &refine(kappa, steps)) {
            if better.0 < best.0 - 1e-12 {
                best = better;
            }
        }
    }
    Some(best.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::Table;
    use proptest::prelude::*;
    use std::path::Path;

    /// A table of `(cores, gbps)` rows at 64 B, built through the parser so
    /// the rows are what `demand` reads.
    fn table(rows: &[(u32, f64)]) -> Table {
        let mut text = "profile,packet_bytes,tx_cores,rx_cores,gbps\n".to_owned();
        for (cores, g) in rows {
            text.push_str(&format!("p,64,{cores},1,{g}\n"));
        }
        Table::parse(Path::new("t.csv"), &text).unwrap_or_default()
    }

    fn fitted(family: Family, rows: &[(u32, f64)], line: f64) -> Option<Curve> {
        let t = table(rows);
        let refs: Vec<&Row> = t.rows.iter().collect();
        fit(family, &refs, line)
    }

    #[test]
    fn usl_recovers_the_curve_that_generated_the_rows() {
        // σ = 0.1, κ = 0, λ = 10 G: 10, 18.1818, 30.7692, 47.0588 G at
        // 1, 2, 4, 8 cores (n / (1 + 0.1 (n − 1)) by hand).
        let rows = [(1, 10.0), (2, 18.181818), (4, 30.769231), (8, 47.058824)];
        let curve = fitted(Family::Usl, &rows, 100.0);
        let Some(Curve::Usl {
            lambda,
            sigma,
            kappa,
        }) = curve
        else {
            panic!("{curve:?}");
        };
        assert!((sigma - 0.1).abs() < 0.001, "{sigma}");
        assert!(kappa < 1e-4, "{kappa}");
        assert!((gbps(lambda, 64) - 10.0).abs() < 0.1, "{lambda}");
        // 16 cores: 16 / 2.5 = 6.4 × 10 G = 64 G, within 1 %.
        let c = fitted(Family::Usl, &rows, 100.0).unwrap_or(Curve::Linear { per_core_pps: 0.0 });
        assert!((c.predict_gbps(16, 64, 100.0) - 64.0).abs() < 0.64);
    }

    #[test]
    fn usl_with_coherency_is_held_at_its_peak() {
        // σ = 0, κ = 0.01: peak at √(1/0.01) = 10 cores; by hand 1 → 10 G,
        // 5 → 50 / 1.2 = 41.667 G, 10 → 100 / 1.9 = 52.632 G, 20 → 200 / 4.8
        // = 41.667 G.
        let rows = [(1, 10.0), (5, 41.666667), (10, 52.631579), (20, 41.666667)];
        let c = fitted(Family::Usl, &rows, 400.0).unwrap_or(Curve::Linear { per_core_pps: 0.0 });
        let peak = c.peak_cores().unwrap_or(0.0);
        assert!((peak - 10.0).abs() < 0.1, "{c:?}");
        // Beyond the peak the prediction stays at the peak's 52.6 G.
        assert!((c.predict_gbps(20, 64, 400.0) - 52.63).abs() < 0.5, "{c:?}");
    }

    #[test]
    fn power_recovers_its_exponent() {
        // 10 G × n^0.5: 1 → 10, 4 → 20, 9 → 30 G; 16 cores: 40 G.
        let c = fitted(Family::Power, &[(1, 10.0), (4, 20.0), (9, 30.0)], 100.0);
        let Some(Curve::Power { lambda, exponent }) = c else {
            panic!("{c:?}");
        };
        assert!((exponent - 0.5).abs() < 1e-9, "{exponent}");
        assert!((gbps(lambda, 64) - 10.0).abs() < 1e-6);
        let c = fitted(Family::Power, &[(1, 10.0), (4, 20.0), (9, 30.0)], 100.0);
        assert!(c.is_some_and(|c| (c.predict_gbps(16, 64, 100.0) - 40.0).abs() < 1e-6));
    }

    #[test]
    fn ceiling_finds_the_flat_part() {
        // 1 → 12.4, 2 → 24.8, 4 → 30, 8 → 30 G: λ 12.4 G per core, C 30 G.
        let rows = [(1, 12.4), (2, 24.8), (4, 30.0), (8, 30.0)];
        let c = fitted(Family::Ceiling, &rows, 100.0);
        let Some(Curve::Ceiling {
            per_core_pps,
            ceiling_pps,
        }) = c
        else {
            panic!("{c:?}");
        };
        assert!((gbps(per_core_pps, 64) - 12.4).abs() < 1e-6);
        assert!((gbps(ceiling_pps, 64) - 30.0).abs() < 1e-6);
        // A curve with no bend has no ceiling.
        let c = fitted(Family::Ceiling, &[(1, 10.0), (2, 20.0), (4, 40.0)], 100.0);
        assert!(
            matches!(c, Some(Curve::Ceiling { ceiling_pps, .. }) if ceiling_pps.is_infinite()),
            "{c:?}"
        );
    }

    #[test]
    fn rows_at_line_rate_are_lower_bounds() {
        // 1 → 40 G, 2 → 80 G, 4 cores at the 100 G line rate: no ceiling
        // below line rate, 4 cores predicted at line rate.
        let c = fitted(Family::Ceiling, &[(1, 40.0), (2, 80.0), (4, 100.0)], 100.0);
        let Some(c) = c else { panic!() };
        assert!((c.predict_gbps(4, 64, 100.0) - 100.0).abs() < 1e-9, "{c:?}");
        assert!((c.predict_gbps(1, 64, 100.0) - 40.0).abs() < 1e-6, "{c:?}");
    }

    #[test]
    fn cores_for_a_goal() {
        // 10 G per core: 35 G needs 4; with a 25 % margin (35 × 1.25 =
        // 43.75 G) 5.
        let c = fitted(Family::Linear, &[(1, 10.0), (2, 20.0)], 100.0);
        let Some(c) = c else { panic!() };
        assert_eq!(c.cores_for(pps(35.0, 64), 0.0, 1000), Some(4));
        assert_eq!(c.cores_for(pps(35.0, 64), 0.25, 1000), Some(5));
        assert_eq!(c.cores_for(pps(40.0, 64), 0.0, 1000), Some(4));
        let flat = Curve::Ceiling {
            per_core_pps: pps(10.0, 64),
            ceiling_pps: pps(30.0, 64),
        };
        assert_eq!(flat.cores_for(pps(35.0, 64), 0.0, 1000), None);
    }

    proptest! {
        /// More cores never predict less, in every family (the USL held at
        /// its peak).
        #[test]
        fn predictions_never_fall_with_more_cores(
            rates in proptest::collection::vec(1u32..100, 2..6),
            family in 0usize..4,
        ) {
            let rows: Vec<(u32, f64)> = rates
                .iter()
                .enumerate()
                .map(|(i, g)| (1u32 << i, f64::from(*g)))
                .collect();
            let c = fitted(Family::ALL[family], &rows, 100.0);
            prop_assert!(c.is_some());
            let c = c.unwrap_or(Curve::Linear { per_core_pps: 0.0 });
            let mut last = 0.0;
            for n in 1..80 {
                let g = c.predict_gbps(n, 64, 100.0);
                prop_assert!(g + 1e-9 >= last, "{:?} at {}: {} < {}", c, n, g, last);
                last = g;
            }
        }

        /// Same rows, same curve, bit for bit.
        #[test]
        fn fits_are_deterministic(rates in proptest::collection::vec(1u32..100, 2..5)) {
            let rows: Vec<(u32, f64)> = rates
                .iter()
                .enumerate()
                .map(|(i, g)| (i as u32 + 1, f64::from(*g)))
                .collect();
            for family in Family::ALL {
                prop_assert_eq!(fitted(family, &rows, 100.0), fitted(family, &rows, 100.0));
            }
        }
    }
}
