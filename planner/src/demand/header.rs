//! A throughput table's header and rows as CSV: which columns give a row's
//! cores (`tx_cores`,`rx_cores`, or `cores` with `threads_per_core`) and its
//! rate (`gbps`, or `mpps`), and how a published table's columns become a
//! [`Row`]: forwarding threads as tx cores, packets per second as Gb/s on the
//! wire, a two-way aggregate (`direction = both`) as the rate of one
//! direction, the rate every target and line rate in pinplan is of.

use super::model;
use super::row::{Direction, Row, TableError};
use std::path::Path;

/// The columns every table names.
const ALWAYS: [&str; 2] = ["profile", "packet_bytes"];

/// The header's columns, for messages.
pub(super) const COLUMNS: &str = "profile,packet_bytes,tx_cores,rx_cores,gbps (or cores instead \
     of tx_cores,rx_cores and mpps instead of gbps; optional: vcpus,threads_per_core,direction,\
     source,note)";

/// Splits one CSV line into fields: commas separate, double quotes enclose
/// fields that hold commas (`""` is a quote inside them), spaces around
/// fields are trimmed.
fn split_csv(line: &str) -> Result<Vec<String>, UnclosedQuote> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.trim().is_empty() => {
                field.clear();
                quoted = true;
                was_quoted = true;
            }
            (false, ',') => {
                fields.push(if was_quoted {
                    field.clone()
                } else {
                    field.trim().to_owned()
                });
                field.clear();
                was_quoted = false;
            }
            (false, c) => field.push(c),
        }
    }
    if quoted {
        return Err(UnclosedQuote);
    }
    fields.push(if was_quoted {
        field
    } else {
        field.trim().to_owned()
    });
    Ok(fields)
}

/// A CSV line whose quoted field does not end.
#[derive(Debug, thiserror::Error)]
#[error("a quoted field is not closed: add the closing \"")]
struct UnclosedQuote;

fn parse_gbps(text: &str) -> Option<f64> {
    let t = text.trim();
    let t = t
        .strip_suffix('G')
        .or_else(|| t.strip_suffix('g'))
        .unwrap_or(t)
        .trim_end();
    t.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Why a header that lacks columns does: it is separated by `;` or tabs,
/// not commas (a spreadsheet's export in a locale whose decimal mark is a
/// comma, or a copy from a terminal), with the way to convert it.
fn separator_problem(file: &Path, header: &str) -> Option<String> {
    let commas = header.matches(',').count();
    // A ';' table comes from a locale whose decimal mark is a comma: its
    // commas become points first, then its separators commas.
    let (_, name, convert) = [
        (';', "';'", "sed 's/,/./g; s/;/,/g'"),
        ('\t', "tabs", "tr '\\t' ','"),
    ]
    .into_iter()
    .map(|(sep, name, convert)| (header.matches(sep).count(), name, convert))
    .filter(|(count, _, _)| *count > commas)
    .max_by_key(|(count, _, _)| *count)?;
    Some(format!(
        "the header is separated by {name}: pinplan reads comma-separated tables with decimal \
         points (save it as CSV with commas, or: {convert} < {})",
        file.display()
    ))
}

/// A [`TableError::At`] for `file`.
fn error_at(file: &Path, line: usize, problem: String) -> TableError {
    TableError::At {
        file: file.to_owned(),
        line,
        problem,
    }
}

/// Where a row's forwarding cores are.
enum Cores {
    /// `tx_cores` and `rx_cores`.
    TxRx { tx: usize, rx: usize },
    /// `cores`: forwarding cores, each running `threads_per_core` threads.
    Total(usize),
}

/// Where a row's rate is.
enum Rate {
    /// Gb/s on the wire.
    Gbps(usize),
    /// Millions of packets per second.
    Mpps(usize),
}

/// A table's header line: its column names and where each known one is.
pub(super) struct Header {
    /// Every column, lowercased, in file order.
    names: Vec<String>,
    profile: usize,
    packet_bytes: usize,
    cores: Cores,
    rate: Rate,
    vcpus: Option<usize>,
    threads_per_core: Option<usize>,
    direction: Option<usize>,
    source: Option<usize>,
    note: Option<usize>,
}

/// What a header lacks or has twice, in words; `None` when it is whole.
fn layout_problem(names: &[String]) -> Option<(Vec<&'static str>, Option<String>)> {
    let has = |n: &str| names.iter().any(|c| c == n);
    let mut missing: Vec<&'static str> = ALWAYS.iter().copied().filter(|n| !has(n)).collect();
    let mut both = None;
    match (has("cores"), has("tx_cores"), has("rx_cores")) {
        (true, false, false) | (false, true, true) => {}
        (true, _, _) => {
            both = Some("cores and tx_cores/rx_cores: give one or the other".to_owned())
        }
        (false, tx, rx) => {
            if !tx {
                missing.push("tx_cores");
            }
            if !rx {
                missing.push("rx_cores");
            }
        }
    }
    match (has("gbps"), has("mpps")) {
        (true, true) => both = Some("gbps and mpps: give one rate per row".to_owned()),
        (false, false) => missing.push("gbps"),
        _ => {}
    }
    (!missing.is_empty() || both.is_some()).then_some((missing, both))
}

impl Header {
    /// Reads the header at `line`.
    pub(super) fn parse(file: &Path, line: usize, text: &str) -> Result<Header, TableError> {
        let names: Vec<String> = split_csv(text)
            .map_err(|e| error_at(file, line, e.to_string()))?
            .into_iter()
            .map(|n| n.to_ascii_lowercase())
            .collect();
        if let Some((missing, both)) = layout_problem(&names) {
            if let Some(problem) = separator_problem(file, text) {
                return Err(error_at(file, line, problem));
            }
            if let Some(both) = both {
                return Err(error_at(file, line, format!("the header names {both}")));
            }
            let looks_like_data = names.iter().any(|n| n.parse::<f64>().is_ok());
            let problem = if looks_like_data || names.len() < 3 {
                format!(
                    "this is not a throughput table: the first line must be a header naming the \
                     columns {COLUMNS}; it lacks {}",
                    missing.join(", ")
                )
            } else {
                format!(
                    "the header lacks column{} {}: it must name {COLUMNS}",
                    if missing.len() == 1 { "" } else { "s" },
                    missing.join(", ")
                )
            };
            return Err(error_at(file, line, problem));
        }
        let column = |name: &str| names.iter().position(|n| n == name);
        // layout_problem found each of these.
        let at = |name: &str| column(name).unwrap_or(0);
        let cores = match column("cores") {
            Some(i) => Cores::Total(i),
            None => Cores::TxRx {
                tx: at("tx_cores"),
                rx: at("rx_cores"),
            },
        };
        let rate = match column("mpps") {
            Some(i) => Rate::Mpps(i),
            None => Rate::Gbps(at("gbps")),
        };
        Ok(Header {
            profile: at("profile"),
            packet_bytes: at("packet_bytes"),
            cores,
            rate,
            vcpus: column("vcpus"),
            threads_per_core: column("threads_per_core"),
            direction: column("direction"),
            source: column("source"),
            note: column("note"),
            names,
        })
    }

    /// Reads the measurement at `line` under this header.
    pub(super) fn row(&self, file: &Path, line: usize, text: &str) -> Result<Row, TableError> {
        let at = |problem: String| error_at(file, line, problem);
        let fields = split_csv(text).map_err(|e| at(e.to_string()))?;
        if fields.len() != self.names.len() {
            return Err(at(format!(
                "{} fields, but the header has {} columns ({})",
                fields.len(),
                self.names.len(),
                self.names.join(",")
            )));
        }
        let field = |i: usize| fields.get(i).map_or("", String::as_str);
        let optional = |i: Option<usize>| i.map(field).filter(|v| !v.is_empty());
        let count = |i: usize, min: u32| -> Result<u32, TableError> {
            let (name, value) = (&self.names[i], field(i));
            let n: i64 = value
                .parse()
                .map_err(|_| at(format!("{name} {value:?} is not a whole number")))?;
            if n < i64::from(min) {
                let need = if min == 0 { "0 or more" } else { "at least 1" };
                return Err(at(format!("{name} is {n}: it must be {need}")));
            }
            u32::try_from(n).map_err(|_| at(format!("{name} {n} is too large")))
        };
        let profile = field(self.profile).to_owned();
        if profile.is_empty() {
            return Err(at(
                "the profile is empty: name the VM configuration measured".to_owned(),
            ));
        }
        let packet_bytes = count(self.packet_bytes, 1)?;
        let threads_per_core = match optional(self.threads_per_core) {
            None => None,
            Some("1") => Some(1),
            Some("2") => Some(2),
            Some(v) => {
                return Err(at(format!(
                    "threads_per_core {v:?}: write 1 (one forwarding thread per core) or 2 (both \
                     SMT siblings of each core)"
                )))
            }
        };
        let (tx_cores, rx_cores) = match self.cores {
            Cores::TxRx { tx, rx } => (count(tx, 1)?, count(rx, 0)?),
            // Each forwarding thread is a vCPU: cores × threads per core.
            Cores::Total(i) => (
                count(i, 1)?.saturating_mul(threads_per_core.unwrap_or(1)),
                0,
            ),
        };
        let direction = match optional(self.direction)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("one") => Direction::One,
            Some("both") => Direction::Both,
            Some(other) => {
                return Err(at(format!(
                    "direction {other:?}: write one (the rate of one direction) or both (the sum \
                     of both directions)"
                )))
            }
        };
        let gbps = self.rate(&fields, packet_bytes, &at)? / direction.ways();
        let vcpus = match optional(self.vcpus) {
            None => tx_cores.saturating_add(rx_cores).saturating_add(1),
            Some(v) => {
                let n: u32 = v
                    .parse()
                    .map_err(|_| at(format!("vcpus {v:?} is not a whole number")))?;
                if n < tx_cores + rx_cores {
                    return Err(at(format!(
                        "vcpus {n} is fewer than the {} forwarding threads of the row",
                        tx_cores + rx_cores
                    )));
                }
                n
            }
        };
        Ok(Row {
            file: file.to_owned(),
            line,
            profile,
            packet_bytes,
            tx_cores,
            rx_cores,
            gbps,
            vcpus,
            threads_per_core,
            direction,
            source: optional(self.source).map(str::to_owned),
            note: optional(self.note).map(str::to_owned),
        })
    }

    /// The row's rate in Gb/s on the wire as the table gives it (both
    /// directions' sum when `direction = both`).
    fn rate(
        &self,
        fields: &[String],
        packet_bytes: u32,
        at: &dyn Fn(String) -> TableError,
    ) -> Result<f64, TableError> {
        let (i, mpps) = match self.rate {
            Rate::Gbps(i) => (i, false),
            Rate::Mpps(i) => (i, true),
        };
        let text = fields.get(i).map_or("", String::as_str);
        let value = if mpps {
            text.trim().parse::<f64>().ok().filter(|v| v.is_finite())
        } else {
            parse_gbps(text)
        };
        let name = if mpps { "mpps" } else { "gbps" };
        let example = if mpps {
            "14.88 or 0.8"
        } else {
            "88, 88G or 97.5"
        };
        let value = value
            .ok_or_else(|| at(format!("{name} {text:?} is not a number (write {example})")))?;
        if value <= 0.0 {
            return Err(at(format!(
                "{name} is {text}: a measured rate must be above 0"
            )));
        }
        Ok(if mpps {
            model::gbps(value * 1e6, packet_bytes)
        } else {
            value
        })
    }
}
