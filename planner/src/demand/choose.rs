//! Choosing a demand from a table: check the request, find the profile's
//! rows and packet size, gather what the rows and the packet-rate model say
//! ([`Evidence`]), then answer from the measured row that reaches the goal or
//! from the model. The types it returns are the parent module's.

use super::family::{self, Curve, Family};
use super::peers::Peers;
use super::select::{self, Choice, ProfileModel};
use super::table::{fmt_gbps, Row, Table};
use super::{
    compress_refs, model, Alternative, Basis, Demand, DemandError, DemandOptions, Interval,
    ModelChoice,
};
use std::collections::BTreeMap;

/// The most cores a model answer searches up to.
const CORE_SEARCH_LIMIT: u32 = 1 << 16;

/// The most common value (ties: the smallest); `default` when there is none.
fn most_common(values: impl Iterator<Item = u32>, default: u32) -> u32 {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|(va, ca), (vb, cb)| ca.cmp(cb).then(vb.cmp(va)))
        .map_or(default, |(v, _)| v)
}

/// The demand for `profile` at `target_gbps`. See the module docs and
/// `docs/demand-model.md`.
pub fn demand(
    table: &Table,
    profile: &str,
    target_gbps: f64,
    options: &DemandOptions,
) -> Result<Demand, DemandError> {
    check_request(target_gbps, options)?;
    let all = known_profile_rows(table, profile)?;
    let packet_bytes = packet_size(profile, &all, options.packet_bytes)?;
    let warnings = table.check(Some(profile), options.line_rate_gbps);
    let evidence = Evidence::gather(profile, packet_bytes, target_gbps, options, &all, table);
    let use_model = match options.basis {
        Some(Basis::Model) => true,
        Some(Basis::Measured) => false,
        None => evidence.measured.is_none(),
    };
    if use_model {
        evidence.model_demand(warnings)
    } else {
        evidence.measured_demand(warnings)
    }
}

/// Refuses a target, share, line rate or packet size that makes no sense.
fn check_request(target_gbps: f64, options: &DemandOptions) -> Result<(), DemandError> {
    if !(target_gbps.is_finite() && target_gbps > 0.0) {
        return Err(DemandError::BadOption(format!(
            "the target must be a rate above 0 Gb/s, not {target_gbps}"
        )));
    }
    if !(options.min_fraction > 0.0 && options.min_fraction <= 1.0) {
        return Err(DemandError::BadOption(format!(
            "--min-fraction must be above 0 and at most 1 (0.97 accepts 97 % of the target), not {}",
            options.min_fraction
        )));
    }
    if !(options.line_rate_gbps.is_finite() && options.line_rate_gbps > 0.0) {
        return Err(DemandError::BadOption(format!(
            "--line-rate must be a rate above 0 Gb/s, not {}",
            options.line_rate_gbps
        )));
    }
    if !(options.confidence > 0.0 && options.confidence < 1.0) {
        return Err(DemandError::BadOption(format!(
            "--confidence must be above 0 and below 1 (0.9 for 90 %), not {}",
            options.confidence
        )));
    }
    if options.packet_bytes == Some(0) {
        return Err(DemandError::BadOption(
            "--packet-bytes must be at least 1".to_owned(),
        ));
    }
    Ok(())
}

/// The profile's rows; an unknown profile names the closest one.
fn known_profile_rows<'t>(table: &'t Table, profile: &'t str) -> Result<Vec<&'t Row>, DemandError> {
    let all: Vec<&Row> = table.profile_rows(profile).collect();
    if all.is_empty() {
        let known: Vec<String> = table.profiles().into_iter().map(str::to_owned).collect();
        let suggestion =
            crate::text::closest(profile, known.iter().map(String::as_str)).map(str::to_owned);
        let mut tables: Vec<String> = table
            .rows
            .iter()
            .map(|r| r.file.display().to_string())
            .collect();
        tables.dedup();
        if tables.is_empty() {
            tables.push("the table".to_owned());
        }
        return Err(DemandError::UnknownProfile {
            name: profile.to_owned(),
            tables,
            suggestion,
            known,
        });
    }
    Ok(all)
}

/// The packet size asked for, else the profile's only measured one.
fn packet_size(profile: &str, all: &[&Row], asked: Option<u32>) -> Result<u32, DemandError> {
    if let Some(bytes) = asked {
        return Ok(bytes);
    }
    let mut sizes: Vec<u32> = all.iter().map(|r| r.packet_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    match sizes.as_slice() {
        [only] => Ok(*only),
        _ => Err(DemandError::PacketSizeNeeded {
            profile: profile.to_owned(),
            sizes: sizes
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Same configuration (tx and rx cores, as Table::check's duplicate
/// warning) measured twice: trust the lower rate. Rows of `packet_bytes`,
/// one per configuration.
fn lowest_per_config<'t>(all: &[&'t Row], packet_bytes: u32) -> Vec<&'t Row> {
    let mut by_config: BTreeMap<(u32, u32), &Row> = BTreeMap::new();
    for r in all.iter().filter(|r| r.packet_bytes == packet_bytes) {
        let slot = by_config.entry((r.tx_cores, r.rx_cores)).or_insert(r);
        if r.gbps < slot.gbps {
            *slot = r;
        }
    }
    by_config.into_values().collect()
}

/// What the table says about one request: the measured row that reaches the
/// goal, if any, and the packet-rate model's answer. [`demand`] then gives
/// one of the two.
struct Evidence<'a, 't> {
    profile: &'a str,
    packet_bytes: u32,
    target_gbps: f64,
    options: &'a DemandOptions,
    /// The target times the accepted share.
    goal: f64,
    /// The profile's rows at `packet_bytes`, the lower rate per configuration.
    same_size: Vec<&'t Row>,
    /// The cheapest of `same_size` that reaches `goal`.
    measured: Option<&'t Row>,
    /// `the table tops out at …`, for refusals.
    tops_out: String,
    /// The model's answer for `goal`.
    model: Option<ModelAnswer<'t>>,
    /// The rx cores and extra guest vCPUs the model's answer adds.
    rx_cores: u32,
    extra: u32,
    /// The most tx cores the model's rows measured.
    largest_measured: u32,
}

impl<'a, 't> Evidence<'a, 't> {
    fn gather(
        profile: &'a str,
        packet_bytes: u32,
        target_gbps: f64,
        options: &'a DemandOptions,
        all: &[&'t Row],
        table: &Table,
    ) -> Self {
        let goal = target_gbps * options.min_fraction;
        let same_size = lowest_per_config(all, packet_bytes);

        let measured = same_size
            .iter()
            .copied()
            .filter(|r| r.gbps + 1e-9 >= goal)
            .min_by_key(|r| (r.vcpus, r.tx_cores, r.line));
        // At the packet size asked for when it was measured: 24.2 G at 64 B,
        // not the 24.8 G of 1518 B rows.
        let pool: &[&Row] = if same_size.is_empty() {
            all
        } else {
            &same_size
        };
        let top = pool
            .iter()
            .copied()
            .max_by(|a, b| a.gbps.total_cmp(&b.gbps).then(b.tx_cores.cmp(&a.tx_cores)));
        let tops_out = top.map_or_else(String::new, |t| {
            format!(
                "the table tops out at {} G ({} {})",
                fmt_gbps(t.gbps),
                t.profile,
                t.describe()
            )
        });

        // The model: rows of this packet size when there are any, else all of the profile's.
        let model_rows: Vec<&Row> = if same_size.is_empty() {
            all.to_vec()
        } else {
            same_size.clone()
        };
        let rx_cores = most_common(model_rows.iter().map(|r| r.rx_cores), 1);
        let extra = most_common(
            model_rows.iter().map(|r| r.vcpus - r.tx_cores - r.rx_cores),
            1,
        );
        let model = ModelAnswer::find(
            &model_rows,
            all,
            &same_size,
            goal,
            packet_bytes,
            options,
            table,
        );
        let largest_measured = model_rows.iter().map(|r| r.tx_cores).max().unwrap_or(1);
        Evidence {
            profile,
            packet_bytes,
            target_gbps,
            options,
            goal,
            same_size,
            measured,
            tops_out,
            model,
            rx_cores,
            extra,
            largest_measured,
        }
    }

    /// The measured row's answer, with a hint when the model thinks fewer
    /// tx cores would do.
    fn measured_demand(self, warnings: Vec<String>) -> Result<Demand, DemandError> {
        let Evidence {
            profile,
            packet_bytes,
            goal,
            rx_cores,
            extra,
            ..
        } = self;
        let Some(row) = self.measured else {
            return Err(DemandError::Unreachable(format!(
                "no measured row of {profile} at {packet_bytes} B reaches {} G; {}. \
                 Drop --basis measured to use the packet-rate model, or lower the target",
                fmt_gbps(goal),
                self.tops_out
            )));
        };
        let mut hints = Vec::new();
        if let Some(answer) = &self.model {
            let tx = answer.tx.unwrap_or(u32::MAX);
            if tx < row.tx_cores {
                let fitted = if answer.curve.family() == Family::Linear {
                    format!(
                        "{} Mpps per tx core, from {}",
                        fmt_mpps(answer.linear.per_core_pps),
                        answer.linear.best.describe()
                    )
                } else {
                    format!(
                        "{} model: {}",
                        answer.curve.family().name(),
                        answer.curve.describe()
                    )
                };
                hints.push(format!(
                    "the packet-rate model predicts {tx} tx cores ({} vCPUs) would reach {} G \
                     ({fitted}); measure {profile} at {packet_bytes} B with \
                     {tx} tx + {rx_cores} rx cores to confirm, or use --basis model",
                    tx + rx_cores + extra,
                    fmt_gbps(goal),
                ));
            }
        }
        Ok(Demand {
            profile: profile.to_owned(),
            packet_bytes,
            target_gbps: self.target_gbps,
            min_fraction: self.options.min_fraction,
            vcpus: row.vcpus,
            tx_cores: row.tx_cores,
            rx_cores: row.rx_cores,
            predicted_gbps: row.gbps,
            basis: Basis::Measured,
            warnings,
            hints,
            rows: vec![row.at()],
            model: None,
            interval: None,
        })
    }

    /// The model's answer; refused beyond line rate or 1.5× the measured
    /// cores unless extrapolation is allowed.
    fn model_demand(self, mut warnings: Vec<String>) -> Result<Demand, DemandError> {
        let Evidence {
            profile,
            packet_bytes,
            target_gbps,
            options,
            rx_cores,
            extra,
            ..
        } = self;
        let line_rate = options.line_rate_gbps;
        let Some(answer) = &self.model else {
            return Err(DemandError::Unreachable(format!(
                "{profile} has no row to fit the model on"
            )));
        };
        let Some(tx) = answer.tx else {
            return Err(DemandError::Unreachable(format!(
                "cannot give a demand for {profile} at {} G ({packet_bytes} B): the {} model \
                 ({}) levels off at {} G, below it, however many cores; {}",
                fmt_gbps(self.goal),
                answer.curve.family().name(),
                answer.curve.describe(),
                fmt_gbps(
                    answer
                        .curve
                        .predict_gbps(CORE_SEARCH_LIMIT, packet_bytes, line_rate)
                ),
                self.tops_out
            )));
        };
        let beyond_line = target_gbps > line_rate * (1.0 + 1e-9);
        let too_many = f64::from(tx) > 1.5 * f64::from(self.largest_measured);
        if (beyond_line || too_many) && !options.allow_extrapolation {
            return Err(self.refuse_extrapolation(tx, beyond_line, too_many));
        }
        let mut predicted = family::gbps_at(&answer.curve, tx, packet_bytes);
        if !beyond_line {
            predicted = predicted.min(line_rate);
        }
        let same_size_measured = !self.same_size.is_empty();
        warnings.push(answer.note(profile, packet_bytes, same_size_measured, tx, rx_cores));
        warnings.extend(answer.interval_note(profile, packet_bytes, options.confidence));
        if options.allow_extrapolation && (beyond_line || too_many) {
            warnings.push(format!(
                "extrapolated beyond what was measured ({}): treat {} vCPUs as a guess",
                if beyond_line {
                    "above line rate"
                } else {
                    "more than 1.5 × the measured cores"
                },
                tx + rx_cores + extra
            ));
        }
        Ok(Demand {
            profile: profile.to_owned(),
            packet_bytes,
            target_gbps,
            min_fraction: options.min_fraction,
            vcpus: tx + rx_cores + extra,
            tx_cores: tx,
            rx_cores,
            predicted_gbps: (predicted * 10.0).round() / 10.0,
            basis: Basis::Model,
            warnings,
            hints: Vec::new(),
            rows: answer.rows(),
            model: Some(answer.choice()),
            interval: answer.interval(tx, packet_bytes, options),
        })
    }

    /// Why a model answer beyond line rate or 1.5× the measured cores is
    /// refused.
    fn refuse_extrapolation(&self, tx: u32, beyond_line: bool, too_many: bool) -> DemandError {
        let options = self.options;
        let mut why = Vec::new();
        if beyond_line {
            why.push(format!(
                "{} G is beyond the {} G line rate ({})",
                fmt_gbps(self.target_gbps),
                fmt_gbps(options.line_rate_gbps),
                if options.in_spec {
                    "[host] line_rate_gbps"
                } else {
                    "--line-rate"
                }
            ));
        }
        if too_many {
            why.push(format!(
                "the model would need {tx} tx cores, more than 1.5 × the {} measured",
                self.largest_measured
            ));
        }
        DemandError::Unreachable(format!(
            "cannot give a demand for {} at {} G ({} B): {}; {}. \
             Lower the target, measure more cores, or {} to get the model's guess",
            self.profile,
            fmt_gbps(self.target_gbps),
            self.packet_bytes,
            why.join(", and "),
            self.tops_out,
            if options.in_spec {
                "set allow_extrapolation = true for the VM (or in [defaults])"
            } else {
                "pass --allow-extrapolation"
            }
        ))
    }
}

/// Where a model answer's residuals come from.
#[derive(Debug, Clone, PartialEq)]
struct Residuals {
    errors: std::sync::Arc<Vec<f64>>,
    /// `profile` or `tables`.
    from: &'static str,
}

/// The model's answer for a goal: the family chosen for the profile, its
/// curve, the tx cores (at the interval's conservative end when there is
/// one), and what the interval rests on.
struct ModelAnswer<'t> {
    /// The linear model on the same rows: its best row names where the rate
    /// came from, and its rows are the ones the answer rests on.
    linear: model::RateModel<'t>,
    /// The family that answers and the scores it was chosen by.
    choice: Choice,
    /// Why it is not the family leave-one-out chose, when it is not.
    instead: Option<String>,
    /// The chosen family's curve on the model's rows.
    curve: Curve,
    /// Tx cores of the point estimate; `None` when the curve levels off
    /// below the goal.
    point: Option<u32>,
    /// Tx cores at the optimistic and conservative ends of the interval
    /// (the point estimate's without one); `None` where no count reaches.
    low: Option<u32>,
    high: Option<u32>,
    /// The answer's tx cores: the conservative end, else the point.
    tx: Option<u32>,
    /// The error range at the requested level, and its residuals.
    bounds: Option<((f64, f64), Residuals)>,
    /// How many residuals there were when too few for an interval.
    too_few: (usize, usize),
    /// Tx cores measured at the packet size, for naming what to measure.
    measured_counts: Vec<u32>,
}

impl<'t> ModelAnswer<'t> {
    /// Fits and chooses on `all` (the profile's rows), answers for `goal`
    /// Gb/s on `model_rows`, and keeps counts that `same_size` rows
    /// contradict out.
    fn find(
        model_rows: &[&'t Row],
        all: &[&'t Row],
        same_size: &[&'t Row],
        goal: f64,
        packet_bytes: u32,
        options: &DemandOptions,
        table: &Table,
    ) -> Option<ModelAnswer<'t>> {
        let line_rate = options.line_rate_gbps;
        let linear = model::fit(model_rows, line_rate)?;
        let peers = Peers::of(&table.rows, line_rate);
        let evidence = ProfileModel::of(all, line_rate, &peers);
        let goal_pps = model::pps(goal, packet_bytes);
        let (choice, curve, instead) =
            Self::curve(&evidence, &peers, model_rows, line_rate, goal_pps)?;
        let point = if choice.family == Family::Linear {
            // As before the model family: the exact same arithmetic.
            Some(linear.tx_cores_for(goal, packet_bytes))
        } else {
            curve.cores_for(goal_pps, 0.0, CORE_SEARCH_LIMIT)
        };
        // An answer that fell back is as sure as choosing without the
        // similar profile.
        let own = if instead.is_some() {
            evidence.errors_without(Family::Similar)
        } else {
            evidence.errors()
        };
        let (residuals, too_few) = if own.len() >= select::OWN_RESIDUALS {
            (
                Some(Residuals {
                    errors: std::sync::Arc::new(own),
                    from: "profile",
                }),
                (0, 0),
            )
        } else {
            let pooled = table.pooled_residuals(line_rate);
            if pooled.len() >= select::MIN_RESIDUALS {
                (
                    Some(Residuals {
                        errors: pooled,
                        from: "tables",
                    }),
                    (0, 0),
                )
            } else {
                (None, (own.len(), pooled.len()))
            }
        };
        let bounds = residuals
            .and_then(|r| select::error_bounds(&r.errors, options.confidence).map(|b| (b, r)));
        // The ends: a measured rate is the prediction / (1 + error).
        let end =
            |margin: f64| point.and_then(|_| curve.cores_for(goal_pps, margin, CORE_SEARCH_LIMIT));
        let (low, high) = match &bounds {
            Some(((lo, hi), _)) => (end(*lo), end(*hi)),
            None => (point, point),
        };
        // Every end is raised past counts the measurements contradict.
        let respect = |n: u32| model::respect_measurements(n, same_size, goal);
        let low = low.zip(point).map(|(l, p)| respect(l.min(p)));
        let high = high.zip(point).map(|(h, p)| respect(h.max(p)));
        let point = point.map(respect);
        // The vCPUs follow the conservative end when it is reached at all.
        let tx = high.or(point);
        Some(ModelAnswer {
            linear,
            choice,
            instead,
            curve,
            point,
            low,
            high,
            tx,
            bounds,
            too_few,
            measured_counts: same_size.iter().map(|r| r.tx_cores).collect(),
        })
    }

    /// The family that answers and its curve on `model_rows`: the one
    /// leave-one-out chose, unless that is the similar profile and its
    /// lender (which sets how far it reaches) was not measured at core counts
    /// that reach the goal, or at this packet size at all; then the best of
    /// the others, and why.
    fn curve(
        evidence: &ProfileModel<'t>,
        peers: &Peers,
        model_rows: &[&'t Row],
        line_rate: f64,
        goal_pps: f64,
    ) -> Option<(Choice, Curve, Option<String>)> {
        let chosen = &evidence.choice;
        if chosen.family != Family::Similar {
            let curve = family::fit(chosen.family, model_rows, line_rate)?;
            return Some((chosen.clone(), curve, None));
        }
        let borrowed = peers.fit(model_rows, line_rate, None);
        let why = match &borrowed {
            Some(c) if c.cores_for(goal_pps, 0.0, CORE_SEARCH_LIMIT).is_some() => {
                return Some((chosen.clone(), c.clone(), None));
            }
            Some(Curve::Similar { peer, points, .. }) => format!(
                "the similar profile {peer} was measured up to {} tx cores, which do not reach \
                 the goal by its growth, so the best of the other families answers",
                points.last().map_or(0, |p| p.0)
            ),
            _ if model_rows
                .windows(2)
                .any(|w| w[0].packet_bytes != w[1].packet_bytes) =>
            {
                "the profile was not measured at this packet size, and another profile lends \
                 a curve only at a size measured, so the best of the other families answers"
                    .to_owned()
            }
            _ => "no other profile lends a curve at this packet size, so the best of the other \
                  families answers"
                .to_owned(),
        };
        let choice = evidence.choice_without(Family::Similar);
        let curve = family::fit(choice.family, model_rows, line_rate)?;
        Some((choice, curve, Some(why)))
    }

    /// The warning that says the demand is the model's (see [`model_note`]).
    fn note(
        &self,
        profile: &str,
        packet_bytes: u32,
        same_size_measured: bool,
        tx: u32,
        rx_cores: u32,
    ) -> String {
        if self.curve.family() == Family::Linear {
            return model_note(
                &self.linear,
                profile,
                packet_bytes,
                same_size_measured,
                tx,
                rx_cores,
            );
        }
        let sizes_note = if same_size_measured {
            String::new()
        } else {
            format!(
                "no {packet_bytes} B row was measured, so the curve of other sizes (in packets \
                 per second) is assumed to hold; "
            )
        };
        let lent = match &self.curve {
            Curve::Similar {
                peer, peer_rows, ..
            } => {
                format!(" and {peer}'s rows {}", compress_refs(peer_rows))
            }
            _ => String::new(),
        };
        format!(
            "basis model: {sizes_note}{} model, {}, fitted on rows {}{lent}; measure {profile} at \
             {packet_bytes} B with {tx} tx + {rx_cores} rx cores to confirm",
            self.curve.family().name(),
            self.curve.describe(),
            row_list(&self.linear.rows)
        )
    }

    /// A warning when the answer has no interval (too few residuals, with
    /// the measurements that would give some) or its conservative end is
    /// out of reach.
    fn interval_note(&self, profile: &str, packet_bytes: u32, confidence: f64) -> Option<String> {
        let point = self.point?;
        let level = fmt_percent(confidence);
        if self.bounds.is_none() {
            let (own, pooled) = self.too_few;
            let mut counts: Vec<u32> = Vec::new();
            for n in [
                point.saturating_sub(1),
                point + 1,
                point + 2,
                point.saturating_sub(2),
            ] {
                if n >= 1
                    && !self.measured_counts.contains(&n)
                    && !counts.contains(&n)
                    && counts.len() < 2
                {
                    counts.push(n);
                }
            }
            counts.sort_unstable();
            let counts: Vec<String> = counts.iter().map(u32::to_string).collect();
            return Some(format!(
                "no interval at {level} %: only {own} of {profile}'s rows ({pooled} in the \
                 tables) could be predicted from the others, {} needed; measure {profile} at \
                 {packet_bytes} B with {} tx cores to settle it",
                select::MIN_RESIDUALS,
                counts.join(" and ")
            ));
        }
        if self.high.is_none() {
            return Some(format!(
                "at the conservative end of the {level} % interval no core count reaches the \
                 goal (the {} model levels off): the answer is the model's point estimate, \
                 {point} tx cores",
                self.curve.family().name()
            ));
        }
        None
    }

    /// The rows the answer rests on: the profile's, then those of the
    /// similar profile it grows as.
    fn rows(&self) -> Vec<String> {
        let mut rows: Vec<String> = self.linear.rows.iter().map(|r| r.at()).collect();
        if let Curve::Similar { peer_rows, .. } = &self.curve {
            rows.extend(peer_rows.iter().cloned());
        }
        rows
    }

    /// The family, its curve and the scores it was chosen by.
    fn choice(&self) -> ModelChoice {
        let c = &self.choice;
        let own = c.scores.iter().find(|s| s.family == c.family);
        ModelChoice {
            family: c.family,
            curve: self.curve.describe(),
            loo_mean_error: own.and_then(|s| s.loo_mean_error),
            checked: c.checked,
            alternatives: c
                .scores
                .iter()
                .filter(|s| s.family != c.family)
                .map(|s| Alternative {
                    family: s.family,
                    loo_mean_error: s.loo_mean_error,
                    eligible: s.eligible,
                })
                .collect(),
            instead: self.instead.clone(),
        }
    }

    /// The interval of an answer of `tx` cores, when there are residuals
    /// enough.
    fn interval(&self, tx: u32, packet_bytes: u32, options: &DemandOptions) -> Option<Interval> {
        let ((lo, hi), residuals) = self.bounds.as_ref()?;
        let point = self.point?;
        let line = options.line_rate_gbps;
        let predicted = family::gbps_at(&self.curve, tx, packet_bytes).min(line);
        Some(Interval {
            confidence: options.confidence,
            point_tx_cores: point,
            tx_cores_low: self.low.unwrap_or(point),
            tx_cores_high: self.high.map(|_| tx),
            gbps_low: (predicted / (1.0 + hi)).min(line),
            gbps_high: (predicted / (1.0 + lo)).min(line),
            residuals: residuals.errors.len(),
            residuals_from: residuals.from.to_owned(),
        })
    }
}

/// The warning that says a demand is the model's: which rate it took from
/// which row, fitted on which rows, and the measurement that would confirm it.
fn model_note(
    m: &model::RateModel<'_>,
    profile: &str,
    packet_bytes: u32,
    same_size_measured: bool,
    tx: u32,
    rx_cores: u32,
) -> String {
    let sizes_note = if same_size_measured {
        String::new()
    } else {
        format!(
            "no {packet_bytes} B row was measured, so the per-core packet rate of other sizes is \
             assumed to hold; "
        )
    };
    format!(
        "basis model: {sizes_note}best per-core rate {} Mpps{} from {}, fitted on rows {}; \
         measure {profile} at {packet_bytes} B with {tx} tx + {rx_cores} rx cores to confirm",
        fmt_mpps(m.per_core_pps),
        if m.best_censored {
            " (at least: that row ran at line rate)"
        } else {
            ""
        },
        m.best.describe(),
        row_list(&m.rows)
    )
}

/// `a.csv:5,6,7 b.csv:2`: row references, grouped by file, for messages.
fn row_list(rows: &[&Row]) -> String {
    compress_refs(&rows.iter().map(|r| r.at()).collect::<Vec<_>>())
}

/// `90`, `95`, `97.5`: a level in percent.
pub(crate) fn fmt_percent(share: f64) -> String {
    fmt_gbps(share * 100.0)
}

fn fmt_mpps(pps: f64) -> String {
    format!("{:.2}", pps / 1e6)
}
