//! The other profiles of the tables read, as curves to borrow a shape from
//! (`docs/demand-model.md`, "The similar profile").
//!
//! A profile measured at 1 and 2 cores says nothing of where it levels
//! off; a profile of the same tables that ran the same rates at 1 and 2
//! cores and was also measured at 4 usually does (the NIC, the traffic or
//! the code path that limits one limits the other). The `similar` family
//! predicts a profile's rate at n cores as its own rate at the nearest core
//! count it measured, m, times the growth the nearest other profile showed
//! from m to n.

use super::family::Curve;
use super::model::{censored, pps, LINE_RATE_SHARE};
use super::row::Row;
use std::collections::{BTreeMap, BTreeSet};

/// One profile's rates at one packet size, in packets per second per tx
/// core count (the lower of repeated measurements; a row at line rate
/// counts at line rate).
#[derive(Debug, Clone, PartialEq)]
struct Series {
    profile: String,
    rates: BTreeMap<u32, f64>,
    /// The counts whose rate is at line rate: a lower bound only.
    at_line: BTreeSet<u32>,
    /// Its rows, `file:line`.
    rows: Vec<String>,
}

/// Every profile's series, by packet size: what the `similar` family
/// borrows from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Peers {
    by_size: BTreeMap<u32, Vec<Series>>,
}

/// The rates of `rows` per tx core count, the lower of repeated ones.
fn rates<'r>(rows: impl Iterator<Item = &'r Row>, line_rate_gbps: f64) -> BTreeMap<u32, f64> {
    let mut rates: BTreeMap<u32, f64> = BTreeMap::new();
    for r in rows {
        let p = pps(r.gbps.min(line_rate_gbps), r.packet_bytes);
        rates
            .entry(r.tx_cores)
            .and_modify(|v| *v = v.min(p))
            .or_insert(p);
    }
    rates
}

/// RMS of the log ratios of two series over the counts both measured.
fn distance(own: &BTreeMap<u32, f64>, other: &BTreeMap<u32, f64>, shared: &[u32]) -> f64 {
    let sum: f64 = shared
        .iter()
        .map(|n| (own[n] / other[n]).ln().powi(2))
        .sum();
    (sum / shared.len() as f64).sqrt()
}

impl Peers {
    /// The series of every profile of `rows` (the tables read).
    pub fn of(rows: &[Row], line_rate_gbps: f64) -> Peers {
        let mut groups: BTreeMap<(u32, &str), Vec<&Row>> = BTreeMap::new();
        for r in rows {
            groups
                .entry((r.packet_bytes, r.profile.as_str()))
                .or_default()
                .push(r);
        }
        let mut by_size: BTreeMap<u32, Vec<Series>> = BTreeMap::new();
        for ((size, profile), group) in groups {
            let rates = rates(group.iter().copied(), line_rate_gbps);
            let line = pps(line_rate_gbps, size);
            by_size.entry(size).or_default().push(Series {
                profile: profile.to_owned(),
                rows: group.iter().map(|r| r.at()).collect(),
                at_line: rates
                    .iter()
                    .filter(|(_, p)| **p >= line * LINE_RATE_SHARE)
                    .map(|(n, _)| *n)
                    .collect(),
                rates,
            });
        }
        Peers { by_size }
    }

    /// The `similar` curve of `rows` (one profile's, one packet size's):
    /// borrowed from the nearest other profile at that size that measured
    /// a core count `rows` did, and `at` when given (the count a held-out
    /// check predicts). Nearest: the most counts in common, then the least
    /// RMS log ratio over them, then the name. Without `at` (an answer, not a
    /// check), a profile measured beyond the largest count `rows` measured
    /// comes first: only it says how the rate grows past them. `None`
    /// without such a profile.
    pub fn fit(&self, rows: &[&Row], line_rate_gbps: f64, at: Option<u32>) -> Option<Curve> {
        let first = rows.first()?;
        let size = first.packet_bytes;
        if rows
            .iter()
            .any(|r| r.packet_bytes != size || r.profile != first.profile)
        {
            return None;
        }
        let own = rates(rows.iter().copied(), line_rate_gbps);
        let largest = own.keys().next_back().copied().unwrap_or(0);
        // Rows below line rate anchor better than lower bounds.
        let free: Vec<u32> = rows
            .iter()
            .filter(|r| !censored(r, line_rate_gbps))
            .map(|r| r.tx_cores)
            .collect();
        let (peer, shared, dist) = self
            .by_size
            .get(&size)?
            .iter()
            .filter(|s| s.profile != first.profile)
            .filter(|s| at.is_none_or(|n| s.rates.contains_key(&n)))
            .filter_map(|s| {
                let shared: Vec<u32> = own
                    .keys()
                    .copied()
                    .filter(|n| s.rates.contains_key(n))
                    .collect();
                (!shared.is_empty()).then(|| {
                    let d = distance(&own, &s.rates, &shared);
                    (s, shared, d)
                })
            })
            .min_by(|a, b| {
                let beyond = |s: &Series| at.is_none() && s.rates.keys().any(|n| *n > largest);
                beyond(b.0)
                    .cmp(&beyond(a.0))
                    .then(b.1.len().cmp(&a.1.len()))
                    .then(a.2.total_cmp(&b.2))
                    .then(a.0.profile.cmp(&b.0.profile))
            })?;
        // Each of the peer's counts, from the nearest shared count (in
        // ratio; first where neither rate is only a lower bound, then
        // where the profile's is not, then the smaller count), then held
        // from falling.
        let both_free: Vec<u32> = shared
            .iter()
            .copied()
            .filter(|m| free.contains(m) && !peer.at_line.contains(m))
            .collect();
        let own_free: Vec<u32> = shared
            .iter()
            .copied()
            .filter(|m| free.contains(m))
            .collect();
        let anchor = |n: u32| -> u32 {
            // A count the profile measured below line rate anchors itself
            // (its own rate, unless an earlier point is higher: the curve
            // never falls).
            if own_free.contains(&n) {
                return n;
            }
            let pool = [&both_free, &own_free, &shared]
                .into_iter()
                .find(|p| !p.is_empty())
                .map_or_else(Vec::new, |p| p.clone());
            pool.into_iter()
                .min_by(|a, b| {
                    let da = (f64::from(*a) / f64::from(n)).ln().abs();
                    let db = (f64::from(*b) / f64::from(n)).ln().abs();
                    da.total_cmp(&db).then(a.cmp(b))
                })
                .unwrap_or(n)
        };
        let mut points = Vec::new();
        let mut top = 0.0f64;
        for (&n, &rate) in &peer.rates {
            let m = anchor(n);
            top = top.max(own[&m] * rate / peer.rates[&m]);
            points.push((n, top));
        }
        Some(Curve::Similar {
            peer: peer.profile.clone(),
            peer_rows: peer.rows.clone(),
            shared,
            distance: dist,
            points,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demand::Table;

    fn table(text: &str) -> Table {
        Table::of_lines(text)
    }

    fn rows_of<'t>(t: &'t Table, profile: &str) -> Vec<&'t Row> {
        t.rows.iter().filter(|r| r.profile == profile).collect()
    }

    #[test]
    fn the_nearest_profile_lends_its_growth() {
        // a: 3, 6 G at 1, 2 cores. b: 3.1, 6.1, 7.8 G (levels off at 4),
        // c: 1, 2, 4 G (far: ln 3 apart). Nearest is b; a at 4 cores = a's
        // 2-core rate × b's 4/2 growth = 6 × 7.8 / 6.1 = 7.672 G, by hand.
        let t = table(
            "a,64,1,1,3\na,64,2,1,6\nb,64,1,1,3.1\nb,64,2,1,6.1\nb,64,4,1,7.8\n\
             c,64,1,1,1\nc,64,2,1,2\nc,64,4,1,4\n",
        );
        let peers = Peers::of(&t.rows, 100.0);
        let curve = peers.fit(&rows_of(&t, "a"), 100.0, Some(4));
        let Some(c @ Curve::Similar { .. }) = curve else {
            panic!("no curve: {curve:?}");
        };
        let Curve::Similar { peer, shared, .. } = &c else {
            unreachable!()
        };
        assert_eq!((peer.as_str(), shared.as_slice()), ("b", &[1, 2][..]));
        assert!((c.predict_gbps(4, 64, 100.0) - 6.0 * 7.8 / 6.1).abs() < 1e-9);
        // 1 core from a's own 1-core rate: 3 × 3.1 / 3.1.
        assert!((c.predict_gbps(1, 64, 100.0) - 3.0).abs() < 1e-9);
        // 3 cores: halfway between 2 and 4; beyond 4 held.
        let at3 = (6.0 + 6.0 * 7.8 / 6.1) / 2.0;
        assert!((c.predict_gbps(3, 64, 100.0) - at3).abs() < 1e-9);
        assert!((c.predict_gbps(9, 64, 100.0) - 6.0 * 7.8 / 6.1).abs() < 1e-9);
    }

    #[test]
    fn demand_answers_by_the_similar_profile_and_says_whose_rows() {
        // a: 3, 6, 6.2 G at 1, 2, 3 cores; b: 3.1, 6.1, 6.3, 6.4 G at 1–4.
        // Held out, by b's growth from a's nearest other count: 1 core
        // 6 × 3.1/6.1 = 3.049 (+1.6 %), 2 cores 6.2 × 6.1/6.3 = 6.003
        // (+0.05 %), 3 cores 6 × 6.3/6.1 = 6.197 (−0.05 %); the linear,
        // ceiling and power fits on 1 and 2 cores say 9 G at 3 (+45 %), so
        // the similar profile answers. 6.25 G: 4 cores, a's 3-core rate ×
        // b's growth from 3 to 4 = 6.2 × 6.4/6.3 = 6.298 G.
        let t = table(
            "a,64,1,1,3\na,64,2,1,6\na,64,3,1,6.2\n\
             b,64,1,1,3.1\nb,64,2,1,6.1\nb,64,3,1,6.3\nb,64,4,1,6.4\n",
        );
        let options = crate::demand::DemandOptions {
            basis: Some(crate::demand::Basis::Model),
            ..crate::demand::DemandOptions::default()
        };
        let d = crate::demand::demand(&t, "a", 6.25, &options).unwrap();
        let model = d.model.clone().unwrap();
        assert_eq!(
            model.family,
            crate::demand::Family::Similar,
            "{}",
            d.to_text()
        );
        assert_eq!(d.tx_cores, 4, "{}", d.to_text());
        assert!((d.predicted_gbps - 6.3).abs() < 1e-9, "{}", d.to_text());
        // The rows it rests on: a's, then b's.
        assert_eq!(
            d.rows,
            ["t.csv:2", "t.csv:3", "t.csv:4", "t.csv:5", "t.csv:6", "t.csv:7", "t.csv:8"]
        );
        assert!(d.to_text().contains("grows as b did"), "{}", d.to_text());
        // 7 G is beyond what b's growth reaches (held at 6.298 G beyond 4
        // cores): the best of the other families answers, and says why.
        let d = crate::demand::demand(&t, "a", 7.0, &options).unwrap();
        let model = d.model.unwrap();
        assert_ne!(model.family, crate::demand::Family::Similar);
        assert!(
            model
                .instead
                .as_deref()
                .is_some_and(|w| w.contains("b was measured up to 4 tx cores")),
            "{model:?}"
        );
    }

    proptest::proptest! {
        /// A similar profile's curve never falls with more cores, and the
        /// same rows give the same curve.
        #[test]
        fn similar_curves_never_fall_and_are_deterministic(
            own in proptest::collection::vec(1u32..100, 1..4),
            peer in proptest::collection::vec(1u32..100, 1..6),
        ) {
            let mut text = String::new();
            for (i, g) in own.iter().enumerate() {
                text.push_str(&format!("a,64,{},1,{g}\n", 1u32 << i));
            }
            for (i, g) in peer.iter().enumerate() {
                text.push_str(&format!("b,64,{},1,{g}\n", i + 1));
            }
            let t = table(&text);
            let peers = Peers::of(&t.rows, 100.0);
            let c = peers.fit(&rows_of(&t, "a"), 100.0, None);
            proptest::prop_assert_eq!(&c, &peers.fit(&rows_of(&t, "a"), 100.0, None));
            let c = c.unwrap_or(Curve::Linear { per_core_pps: 0.0 });
            let mut last = 0.0;
            for n in 1..40 {
                let g = c.predict_gbps(n, 64, 100.0);
                proptest::prop_assert!(g + 1e-9 >= last, "{:?} at {}: {} < {}", c, n, g, last);
                last = g;
            }
        }
    }

    #[test]
    fn an_answer_borrows_from_a_profile_measured_beyond_its_own() {
        // t ran a's rates exactly but only at 1 and 2 cores; f, 10 % off,
        // also at 4. A check of a's 2-core row may use either; an answer
        // must grow past 2 cores, which only f can say: a's 2-core rate ×
        // f's growth from 2 to 4 cores, 6 × 6.6 / 5.5 = 7.2 G.
        let t = table(
            "a,64,1,1,3\na,64,2,1,6\nt,64,1,1,3\nt,64,2,1,6\n\
             f,64,1,1,3.3\nf,64,2,1,5.5\nf,64,4,1,6.6\n",
        );
        let peers = Peers::of(&t.rows, 100.0);
        let c = peers.fit(&rows_of(&t, "a"), 100.0, None);
        let Some(c @ Curve::Similar { .. }) = c else {
            panic!("no curve: {c:?}");
        };
        assert!(
            matches!(&c, Curve::Similar { peer, .. } if peer == "f"),
            "{c:?}"
        );
        assert!((c.predict_gbps(4, 64, 100.0) - 6.0 * 6.6 / 5.5).abs() < 1e-9);
        // The check of the 1-core row takes the nearest, t.
        let one: Vec<&Row> = rows_of(&t, "a")
            .into_iter()
            .filter(|r| r.tx_cores == 2)
            .collect();
        let c = peers.fit(&one, 100.0, Some(1));
        assert!(
            matches!(&c, Some(Curve::Similar { peer, .. }) if peer == "t"),
            "{c:?}"
        );
    }

    #[test]
    fn a_row_the_chosen_similar_profile_cannot_predict_is_the_fallbacks_residual() {
        // a: 10, 20, 30, 32 G at 1–4 cores; b: 10, 20, 30 at 1–3. Held out,
        // rows 1–3 are predicted exactly by b's growth and by the linear
        // model (10 G per core): a tie the similar profile wins. Row 4 has
        // no peer measured at 4 cores, so choosing on rows 1–3 picks the
        // similar profile, which cannot answer there; the linear model would
        // (the tie's next), and its error is the residual: 40 vs 32, +25 %,
        // not 0.
        let t = table(
            "a,64,1,1,10\na,64,2,1,20\na,64,3,1,30\na,64,4,1,32\n\
             b,64,1,1,10\nb,64,2,1,20\nb,64,3,1,30\n",
        );
        let peers = Peers::of(&t.rows, 100.0);
        let pm = crate::demand::select::ProfileModel::of(&rows_of(&t, "a"), 100.0, &peers);
        assert_eq!(pm.held.len(), 4);
        assert!(!pm.held[3]
            .errors
            .contains_key(&crate::demand::Family::Similar));
        let (family, error) = pm.residuals[3];
        assert_eq!(family, crate::demand::Family::Linear);
        assert!((error - 0.25).abs() < 1e-9, "{error}");
    }

    #[test]
    fn a_peer_at_line_rate_is_not_an_anchor() {
        // Line rate 10 G. a: 3, 6 G at 1, 2 cores; b: 3 G at 1, line rate
        // at 2 and 4 (so its growth from 2 to 4 is unknown: both are lower
        // bounds). a at 4 cores grows from 1 core, where b's rate is
        // measured: 3 × 10 / 3 = 10 G; from 2 cores it would be 6 × 10 / 10
        // = 6 G, below a's own 2-core rate's growth.
        let t = table("a,64,1,1,3\na,64,2,1,6\nb,64,1,1,3\nb,64,2,1,10\nb,64,4,1,10\n");
        let peers = Peers::of(&t.rows, 10.0);
        let c = peers.fit(&rows_of(&t, "a"), 10.0, Some(4));
        let c = c.unwrap_or(Curve::Linear { per_core_pps: 0.0 });
        assert!((c.predict_gbps(4, 64, 10.0) - 10.0).abs() < 1e-9, "{c:?}");
        // At 2 cores, where b ran at line rate, a keeps its own 6 G.
        assert!((c.predict_gbps(2, 64, 10.0) - 6.0).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn no_peer_measured_at_the_count_asked_gives_no_curve() {
        let t = table("a,64,1,1,3\na,64,2,1,6\nb,64,1,1,3\nb,64,2,1,6\nc,512,4,1,8\n");
        let peers = Peers::of(&t.rows, 100.0);
        assert_eq!(peers.fit(&rows_of(&t, "a"), 100.0, Some(4)), None);
        // Without a count asked, b lends its curve (up to 2 cores).
        assert!(peers.fit(&rows_of(&t, "a"), 100.0, None).is_some());
        // Another packet size is no peer.
        let t = table("a,64,1,1,3\nb,512,1,1,3\nb,512,4,1,8\n");
        let peers = Peers::of(&t.rows, 100.0);
        assert_eq!(peers.fit(&rows_of(&t, "a"), 100.0, None), None);
    }
}
