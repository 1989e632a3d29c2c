//! Choosing a demand from a table: check the request, find the profile's
//! rows and packet size, gather what the rows and the packet-rate model say
//! ([`Evidence`]), then answer from the measured row that reaches the goal or
//! from the model. The types it returns are the parent module's.

use super::table::{fmt_gbps, Row, Table};
use super::{compress_refs, model, Basis, Demand, DemandError, DemandOptions};
use std::collections::BTreeMap;

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
    let evidence = Evidence::gather(profile, packet_bytes, target_gbps, options, &all);
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
    /// The model's tx cores for `goal`, and the model.
    model: Option<(u32, model::RateModel<'t>)>,
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
    ) -> Self {
        let line_rate = options.line_rate_gbps;
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
        let fitted = model::fit(&model_rows, line_rate);
        let rx_cores = most_common(model_rows.iter().map(|r| r.rx_cores), 1);
        let extra = most_common(
            model_rows.iter().map(|r| r.vcpus - r.tx_cores - r.rx_cores),
            1,
        );
        let model = fitted.map(|m| {
            let raw = m.tx_cores_for(goal, packet_bytes);
            let tx = model::respect_measurements(raw, &same_size, goal);
            (tx, m)
        });
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
        if let Some((tx, m)) = &self.model {
            if *tx < row.tx_cores {
                hints.push(format!(
                    "the packet-rate model predicts {tx} tx cores ({} vCPUs) would reach {} G \
                     ({} Mpps per tx core, from {}); measure {profile} at {packet_bytes} B with \
                     {tx} tx + {rx_cores} rx cores to confirm, or use --basis model",
                    tx + rx_cores + extra,
                    fmt_gbps(goal),
                    fmt_mpps(m.per_core_pps),
                    m.best.describe()
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
            largest_measured,
            ..
        } = self;
        let line_rate = options.line_rate_gbps;
        let Some((tx, m)) = &self.model else {
            return Err(DemandError::Unreachable(format!(
                "{profile} has no row to fit the model on"
            )));
        };
        let tx = *tx;
        let beyond_line = target_gbps > line_rate * (1.0 + 1e-9);
        let too_many = f64::from(tx) > 1.5 * f64::from(largest_measured);
        if (beyond_line || too_many) && !options.allow_extrapolation {
            let mut why = Vec::new();
            if beyond_line {
                why.push(format!(
                    "{} G is beyond the {} G line rate ({})",
                    fmt_gbps(target_gbps),
                    fmt_gbps(line_rate),
                    if options.in_spec {
                        "[host] line_rate_gbps"
                    } else {
                        "--line-rate"
                    }
                ));
            }
            if too_many {
                why.push(format!(
                    "the model would need {tx} tx cores, more than 1.5 × the {largest_measured} \
                     measured"
                ));
            }
            return Err(DemandError::Unreachable(format!(
                "cannot give a demand for {profile} at {} G ({packet_bytes} B): {}; {}. \
                 Lower the target, measure more cores, or {} to get the model's guess",
                fmt_gbps(target_gbps),
                why.join(", and "),
                self.tops_out,
                if options.in_spec {
                    "set allow_extrapolation = true for the VM (or in [defaults])"
                } else {
                    "pass --allow-extrapolation"
                }
            )));
        }
        let predicted = m.predict_gbps(tx, packet_bytes, line_rate, beyond_line);
        let used: Vec<String> = m.rows.iter().map(|r| r.at()).collect();
        let same_size_measured = !self.same_size.is_empty();
        warnings.push(model_note(
            m,
            profile,
            packet_bytes,
            same_size_measured,
            tx,
            rx_cores,
        ));
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
            rows: used,
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

fn fmt_mpps(pps: f64) -> String {
    format!("{:.2}", pps / 1e6)
}
