//! Which model family answers for a profile, and how far to trust it
//! (`docs/demand-model.md`, "Choosing the model" and "Intervals").
//!
//! Every row not at line rate is predicted by each family fitted on the
//! profile's other rows (same packet size when any remain), as
//! `--leave-one-out` does for the linear model. The family with the least
//! mean |relative error| over those held-out rows answers, among the
//! families the profile has enough core counts for (k parameters need k + 1
//! distinct core counts at one packet size; the similar profile, which
//! fits none, whenever another profile lends it a curve); a family within
//! one percentage point of the best is preferred in [`Family::PREFERENCE`]'s
//! order. The fit itself never chooses.
//!
//! The held-out errors of the chosen family are also what the answer's
//! interval comes from: their empirical quantiles.

use super::family::{self, Family};
use super::model::censored;
use super::peers::Peers;
use super::row::Row;
use std::collections::{BTreeMap, BTreeSet};

/// A simpler family within this much mean |error| of the best is preferred.
pub const TIE: f64 = 0.01;

/// Fewer held-out errors than this give no interval.
pub const MIN_RESIDUALS: usize = 5;

/// A profile's own held-out errors give its interval when it has at least
/// this many; with fewer, the 5 % and 95 % quantiles are little more than
/// its extremes and cover too little, so every profile's errors are pooled.
pub const OWN_RESIDUALS: usize = 20;

/// One row predicted from the others of its profile by every family.
#[derive(Debug, Clone, PartialEq)]
pub struct Held<'t> {
    /// The row left out.
    pub row: &'t Row,
    /// (predicted − measured) / measured, per family (the similar profile's
    /// only when another profile measured the row's core count).
    pub errors: BTreeMap<Family, f64>,
}

/// The rows a model predicting `packet_bytes` is fitted on: those of that
/// size among `rows`, else all of them (a size never measured).
pub fn fit_rows(rows: Vec<&Row>, packet_bytes: u32) -> Vec<&Row> {
    let same: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.packet_bytes == packet_bytes)
        .collect();
    if same.is_empty() {
        rows
    } else {
        same
    }
}

/// For each of `rows` (one profile's) not at line rate that has another row
/// to fit on: every family's error predicting it from the others (the
/// similar profile's from `peers`, the tables' other profiles).
pub fn held_out<'t>(rows: &[&'t Row], line_rate_gbps: f64, peers: &Peers) -> Vec<Held<'t>> {
    let mut held = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if censored(row, line_rate_gbps) {
            continue;
        }
        let others: Vec<&Row> = rows
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, r)| *r)
            .collect();
        let fit_rows = fit_rows(others, row.packet_bytes);
        let mut errors = BTreeMap::new();
        let similar = || {
            let same: Vec<&Row> = fit_rows
                .iter()
                .copied()
                .filter(|r| r.packet_bytes == row.packet_bytes)
                .collect();
            peers.fit(&same, line_rate_gbps, Some(row.tx_cores))
        };
        for f in Family::ALL {
            let curve = if f == Family::Similar {
                similar()
            } else {
                family::fit(f, &fit_rows, line_rate_gbps)
            };
            if let Some(curve) = curve {
                let predicted = curve.predict_gbps(row.tx_cores, row.packet_bytes, line_rate_gbps);
                errors.insert(f, (predicted - row.gbps) / row.gbps);
            }
        }
        if OWN.iter().all(|f| errors.contains_key(f)) {
            held.push(Held { row, errors });
        }
    }
    held
}

/// The families fitted on the profile's own rows alone: every held-out row
/// has their errors.
const OWN: [Family; 4] = [Family::Linear, Family::Ceiling, Family::Power, Family::Usl];

/// Whether the profile has enough core counts for `family`: k parameters
/// need k + 1 distinct tx core counts at one packet size (the linear model
/// is always a candidate: it is the default; the similar profile fits no
/// parameter, and is scored only on rows another profile lends it a curve
/// for).
pub fn eligible(rows: &[&Row], family: Family) -> bool {
    if matches!(family, Family::Linear | Family::Similar) {
        return true;
    }
    let mut counts: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for r in rows {
        counts.entry(r.packet_bytes).or_default().insert(r.tx_cores);
    }
    counts.values().map(BTreeSet::len).max().unwrap_or(0) > family.parameters()
}

/// One family's leave-one-out score on a profile.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Score {
    /// The family.
    pub family: Family,
    /// Mean |relative error| of its held-out predictions; `None` without any.
    pub loo_mean_error: Option<f64>,
    /// Whether the profile has enough core counts for it.
    pub eligible: bool,
}

/// The chosen family and every family's score, for one profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The family that answers.
    pub family: Family,
    /// Every family's score, simplest first.
    pub scores: Vec<Score>,
    /// How many held-out rows the scores are over.
    pub checked: usize,
}

/// Chooses among the eligible families by mean |error| over `held` less the
/// row at `skip` (for nested checks); the linear model when there is nothing
/// to compare on. A family is scored only when it predicted every one of
/// those rows (the similar profile may lack a lender for some).
pub fn choose(held: &[Held], skip: Option<usize>, eligible: &[bool; 5]) -> Choice {
    let kept: Vec<&Held> = held
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != skip)
        .map(|(_, h)| h)
        .collect();
    let scores: Vec<Score> = Family::ALL
        .iter()
        .zip(eligible)
        .map(|(&f, &ok)| Score {
            family: f,
            loo_mean_error: if kept.iter().all(|h| h.errors.contains_key(&f)) {
                mean_abs(kept.iter().filter_map(|h| h.errors.get(&f).copied()))
            } else {
                None
            },
            eligible: ok,
        })
        .collect();
    let best = scores
        .iter()
        .filter(|s| s.eligible)
        .filter_map(|s| s.loo_mean_error)
        .min_by(f64::total_cmp);
    let family = best
        .and_then(|b| {
            Family::PREFERENCE.into_iter().find(|f| {
                scores.iter().any(|s| {
                    s.family == *f && s.eligible && s.loo_mean_error.is_some_and(|e| e <= b + TIE)
                })
            })
        })
        .unwrap_or(Family::Linear);
    Choice {
        family,
        scores,
        checked: kept.len(),
    }
}

fn mean_abs(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v.abs(), n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// A profile's leave-one-out evidence: the held-out rows, the family chosen
/// on all of them, and for each row the family chosen without it and that
/// family's error on it (the row's *residual*: honest, since the row played
/// no part in choosing or fitting what predicted it).
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileModel<'t> {
    /// The held-out rows.
    pub held: Vec<Held<'t>>,
    /// The choice on all held-out rows: the family that answers.
    pub choice: Choice,
    /// Per held-out row: the family chosen without it, and its error.
    pub residuals: Vec<(Family, f64)>,
    /// Which families the profile has core counts enough for.
    pub eligible: [bool; 5],
}

impl<'t> ProfileModel<'t> {
    /// The evidence for one profile's rows (`peers`: the tables' profiles,
    /// for the similar profile).
    pub fn of(rows: &[&'t Row], line_rate_gbps: f64, peers: &Peers) -> ProfileModel<'t> {
        let held = held_out(rows, line_rate_gbps, peers);
        let ok = Family::ALL.map(|f| eligible(rows, f));
        let choice = choose(&held, None, &ok);
        let residuals = nested(&held, &ok);
        ProfileModel {
            held,
            choice,
            residuals,
            eligible: ok,
        }
    }

    /// The choice among the families other than `family` (what answers
    /// when `family` cannot: the similar profile's lender measured too few
    /// cores for the goal).
    pub fn choice_without(&self, family: Family) -> Choice {
        let mut choice = choose(&self.held, None, &set_aside(self.eligible, family));
        // Set aside, not for want of core counts.
        for (s, ok) in choice.scores.iter_mut().zip(self.eligible) {
            if s.family == family {
                s.eligible = ok;
            }
        }
        choice
    }

    /// The residuals of choosing among the families other than `family`:
    /// what an answer that fell back to them is as sure as.
    pub fn errors_without(&self, family: Family) -> Vec<f64> {
        nested(&self.held, &set_aside(self.eligible, family))
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    /// The residuals alone.
    pub fn errors(&self) -> Vec<f64> {
        self.residuals.iter().map(|(_, e)| *e).collect()
    }
}

/// Per held-out row: the family chosen on the others, and its error on the
/// row. When that family could not predict the row (the similar profile
/// without a peer measured at its core count), the answer would fall back
/// to the others, so the residual is theirs.
fn nested(held: &[Held], ok: &[bool; 5]) -> Vec<(Family, f64)> {
    (0..held.len())
        .map(|i| {
            let f = choose(held, Some(i), ok).family;
            if let Some(e) = held[i].errors.get(&f) {
                return (f, *e);
            }
            let g = choose(held, Some(i), &set_aside(*ok, f)).family;
            // The own-row families predict every held-out row.
            (g, held[i].errors.get(&g).copied().unwrap_or(0.0))
        })
        .collect()
}

/// Eligibility `ok` (in [`Family::ALL`]'s order) with `family` set aside.
fn set_aside(mut ok: [bool; 5], family: Family) -> [bool; 5] {
    for (flag, f) in ok.iter_mut().zip(Family::ALL) {
        if f == family {
            *flag = false;
        }
    }
    ok
}

/// The held-out evidence of every profile of `rows`, by profile name.
pub fn by_profile<'t>(rows: &'t [Row], line_rate_gbps: f64) -> BTreeMap<&'t str, ProfileModel<'t>> {
    let peers = Peers::of(rows, line_rate_gbps);
    let mut groups: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        groups.entry(r.profile.as_str()).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(p, g)| (p, ProfileModel::of(&g, line_rate_gbps, &peers)))
        .collect()
}

/// The `p`-quantile of sorted values, interpolating between order
/// statistics (the "type 7" of R and NumPy's default).
pub fn quantile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let h = last as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(last);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// The central `confidence` range of relative errors `residuals`: the
/// (1 − c)/2 and (1 + c)/2 quantiles; `None` with fewer than
/// [`MIN_RESIDUALS`].
pub fn error_bounds(residuals: &[f64], confidence: f64) -> Option<(f64, f64)> {
    if residuals.len() < MIN_RESIDUALS {
        return None;
    }
    let mut sorted = residuals.to_vec();
    sorted.sort_by(f64::total_cmp);
    let lo = quantile(&sorted, (1.0 - confidence) / 2.0)?;
    let hi = quantile(&sorted, (1.0 + confidence) / 2.0)?;
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::Table;

    fn table(text: &str) -> Table {
        Table::of_lines(text)
    }

    fn chosen(t: &Table, line: f64) -> Family {
        let rows: Vec<&Row> = t.rows.iter().collect();
        ProfileModel::of(&rows, line, &Peers::default())
            .choice
            .family
    }

    #[test]
    fn quantiles_of_a_hand_made_residual_set() {
        // Ten errors −0.09, −0.07, …, +0.09 (step 0.02). Type 7, 90 %:
        // h = 9 × 0.05 = 0.45 → −0.09 + 0.45 × 0.02 = −0.081; h = 9 × 0.95
        // = 8.55 → 0.07 + 0.55 × 0.02 = 0.081.
        let r: Vec<f64> = (0..10).map(|i| -0.09 + 0.02 * f64::from(i)).collect();
        let (lo, hi) = error_bounds(&r, 0.9).unwrap_or((0.0, 0.0));
        assert!((lo + 0.081).abs() < 1e-12, "{lo}");
        assert!((hi - 0.081).abs() < 1e-12, "{hi}");
        // 50 %: h = 2.25 → −0.045; h = 6.75 → 0.045.
        let (lo, hi) = error_bounds(&r, 0.5).unwrap_or((0.0, 0.0));
        assert!((lo + 0.045).abs() < 1e-12 && (hi - 0.045).abs() < 1e-12);
        assert_eq!(error_bounds(&r[..4], 0.9), None);
    }

    #[test]
    fn a_linear_table_keeps_the_linear_model() {
        // 10 G per core exactly: every family predicts every row; the
        // simplest wins the tie.
        let t = table("p,64,1,1,10\np,64,2,1,20\np,64,3,1,30\np,64,4,1,40\np,64,5,1,50\n");
        assert_eq!(chosen(&t, 100.0), Family::Linear);
    }

    #[test]
    fn a_flat_table_takes_the_ceiling() {
        // 12 G per core up to 30 G (a NIC limit): held out, the linear model
        // predicts 4 cores at 48 G (+60 %); the ceiling fits every row
        // exactly from the others (knee at 2 cores, 30 G); the USL (eligible:
        // 5 core counts) cannot bend that sharply.
        let t = table("p,64,1,1,12\np,64,2,1,24\np,64,4,1,30\np,64,8,1,30\np,64,16,1,30\n");
        assert_eq!(chosen(&t, 100.0), Family::Ceiling);
    }

    #[test]
    fn a_curve_that_falls_takes_the_usl() {
        // λ = 10 G, σ = 0.05, κ = 0.02 by hand: n / (1 + 0.05 (n−1) + 0.02
        // n (n−1)): 1 → 10, 2 → 18.018, 3 → 22.901, 4 → 25.316, 6 → 26.316,
        // 8 → 25.478 G.
        let t = table(
            "p,64,1,1,10\np,64,2,1,18.018018\np,64,3,1,22.900763\np,64,4,1,25.316456\n\
             p,64,6,1,26.315789\np,64,8,1,25.477707\n",
        );
        assert_eq!(chosen(&t, 100.0), Family::Usl);
    }

    #[test]
    fn a_square_root_curve_takes_the_power_family() {
        // 10 G × √n at 1, 2, 4, 8, 16 cores: 10, 14.142, 20, 28.284, 40 G.
        // Held out, the power family predicts every row exactly; the linear
        // model (the best per-core rate) overshoots, the ceiling cannot bend
        // gradually.
        let t = table(
            "p,64,1,1,10\np,64,2,1,14.142136\np,64,4,1,20\np,64,8,1,28.284271\np,64,16,1,40\n",
        );
        assert_eq!(chosen(&t, 100.0), Family::Power);
    }

    #[test]
    fn too_few_core_counts_keep_the_simple_model() {
        // Two core counts: only the linear model is a candidate.
        let t = table("p,64,1,1,10\np,64,2,1,15\n");
        let rows: Vec<&Row> = t.rows.iter().collect();
        assert!(eligible(&rows, Family::Linear));
        assert!(!eligible(&rows, Family::Ceiling));
        assert!(!eligible(&rows, Family::Power));
        assert!(!eligible(&rows, Family::Usl));
        assert_eq!(chosen(&t, 100.0), Family::Linear);
    }
}
