//! Throughput tables: CSV files of measurements, one row per measurement
//! (`profile,packet_bytes,tx_cores,rx_cores,gbps[,vcpus][,note]`), and the
//! checks on a table itself (non-monotonic rows, rows above line rate,
//! duplicates that disagree). Choosing a demand from a table is in
//! [`super::demand`]; the packet-rate model in [`super::model`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The file it came from.
    pub file: PathBuf,
    /// 1-based line in that file.
    pub line: usize,
    /// Which VM configuration was measured (`vm-64b`).
    pub profile: String,
    /// Packet size in bytes, without preamble and inter-frame gap.
    pub packet_bytes: u32,
    /// Transmit cores (poll-mode threads) in the guest.
    pub tx_cores: u32,
    /// Receive cores in the guest.
    pub rx_cores: u32,
    /// Measured rate in Gb/s on the wire (what the traffic generator reports
    /// against the port's line rate).
    pub gbps: f64,
    /// The guest's vCPU count; `tx_cores + rx_cores + 1` when the table does not say.
    pub vcpus: u32,
    /// Free text.
    pub note: Option<String>,
}

impl Row {
    /// `file:line`, for messages.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }

    /// `tx 12 / rx 1 → 97 G (line 5)`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "tx {} / rx {} → {} G ({} B, {})",
            self.tx_cores,
            self.rx_cores,
            fmt_gbps(self.gbps),
            self.packet_bytes,
            self.at()
        )
    }
}

/// Formats a rate without useless decimals (`97`, `97.5`).
pub(crate) fn fmt_gbps(gbps: f64) -> String {
    let rounded = (gbps * 100.0).round() / 100.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.0}")
    } else {
        format!("{rounded}")
    }
}

/// All measurements from one or more files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Rows in file order.
    pub rows: Vec<Row>,
}

/// Why a table could not be read. Every variant names the file and line.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TableError {
    /// The file could not be read.
    #[error("cannot read {file}")]
    Io {
        /// The file.
        file: PathBuf,
        /// What the OS said.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The file is not text.
    #[error("cannot read {file}: not UTF-8 text: a throughput table is a CSV text file")]
    NotText {
        /// The file.
        file: PathBuf,
    },
    /// A problem at a line.
    #[error("{file}:{line}: {problem}")]
    At {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// No measurement at all.
    #[error("{file}: the table has no measurement rows (only a header, comments or blank lines)")]
    Empty {
        /// The file.
        file: PathBuf,
    },
}

impl crate::error::Diagnostic for TableError {
    fn hint(&self) -> Option<String> {
        match self {
            TableError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Some(crate::text::MISSING_FILE_HINT.to_owned())
            }
            TableError::Io { .. } => None,
            TableError::NotText { .. } | TableError::At { .. } | TableError::Empty { .. } => Some(
                "see `pinplan help formats` (Throughput tables) for the columns and an example"
                    .to_owned(),
            ),
        }
    }
}

const REQUIRED: [&str; 5] = ["profile", "packet_bytes", "tx_cores", "rx_cores", "gbps"];

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

/// A table's header line: its column names and where each known one is.
struct Header {
    /// Every column, lowercased, in file order.
    names: Vec<String>,
    /// Position of each [`REQUIRED`] column.
    index: BTreeMap<&'static str, usize>,
    vcpus: Option<usize>,
    note: Option<usize>,
}

impl Header {
    /// Reads the header at `line`; every [`REQUIRED`] column must be there.
    fn parse(file: &Path, line: usize, text: &str) -> Result<Header, TableError> {
        let names: Vec<String> = split_csv(text)
            .map_err(|e| error_at(file, line, e.to_string()))?
            .into_iter()
            .map(|n| n.to_ascii_lowercase())
            .collect();
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|r| !names.iter().any(|n| n == r))
            .collect();
        if !missing.is_empty() {
            if let Some(problem) = separator_problem(file, text) {
                return Err(error_at(file, line, problem));
            }
            let looks_like_data = names.iter().any(|n| n.parse::<f64>().is_ok());
            let problem = if looks_like_data || names.len() < 3 {
                format!(
                    "this is not a throughput table: the first line must be a header naming the \
                     columns profile,packet_bytes,tx_cores,rx_cores,gbps (optional: vcpus,note); \
                     it lacks {}",
                    missing.join(", ")
                )
            } else {
                format!(
                    "the header lacks column{} {}: it must name profile,packet_bytes,tx_cores,\
                     rx_cores,gbps (optional: vcpus,note)",
                    if missing.len() == 1 { "" } else { "s" },
                    missing.join(", ")
                )
            };
            return Err(error_at(file, line, problem));
        }
        let column = |name: &str| names.iter().position(|n| n == name);
        let index = REQUIRED
            .iter()
            .filter_map(|&n| column(n).map(|i| (n, i)))
            .collect();
        let vcpus = column("vcpus");
        let note = column("note");
        Ok(Header {
            names,
            index,
            vcpus,
            note,
        })
    }

    /// Reads the measurement at `line` under this header.
    fn row(&self, file: &Path, line: usize, text: &str) -> Result<Row, TableError> {
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
        let get = |name: &str| {
            self.index
                .get(name)
                .and_then(|&i| fields.get(i))
                .map(String::as_str)
                .unwrap_or("")
        };
        let count = |name: &str, min: u32| -> Result<u32, TableError> {
            let value = get(name);
            let n: i64 = value
                .parse()
                .map_err(|_| at(format!("{name} {value:?} is not a whole number")))?;
            if n < i64::from(min) {
                let need = if min == 0 { "0 or more" } else { "at least 1" };
                return Err(at(format!("{name} is {n}: it must be {need}")));
            }
            u32::try_from(n).map_err(|_| at(format!("{name} {n} is too large")))
        };
        let profile = get("profile").to_owned();
        if profile.is_empty() {
            return Err(at(
                "the profile is empty: name the VM configuration measured".to_owned(),
            ));
        }
        let packet_bytes = count("packet_bytes", 1)?;
        let tx_cores = count("tx_cores", 1)?;
        let rx_cores = count("rx_cores", 0)?;
        let gbps_text = get("gbps");
        let gbps = parse_gbps(gbps_text).ok_or_else(|| {
            at(format!(
                "gbps {gbps_text:?} is not a number (write 88, 88G or 97.5)"
            ))
        })?;
        if gbps <= 0.0 {
            return Err(at(format!(
                "gbps is {gbps_text}: a measured rate must be above 0"
            )));
        }
        let vcpus = match self
            .vcpus
            .and_then(|i| fields.get(i))
            .filter(|v| !v.is_empty())
        {
            None => tx_cores + rx_cores + 1,
            Some(v) => {
                let n: u32 = v
                    .parse()
                    .map_err(|_| at(format!("vcpus {v:?} is not a whole number")))?;
                if n < tx_cores + rx_cores {
                    return Err(at(format!(
                        "vcpus {n} is fewer than tx_cores + rx_cores = {}",
                        tx_cores + rx_cores
                    )));
                }
                n
            }
        };
        let note = self
            .note
            .and_then(|i| fields.get(i))
            .filter(|n| !n.is_empty())
            .cloned();
        Ok(Row {
            file: file.to_owned(),
            line,
            profile,
            packet_bytes,
            tx_cores,
            rx_cores,
            gbps,
            vcpus,
            note,
        })
    }
}

impl Table {
    /// Reads and parses one file.
    pub fn load(path: &Path) -> Result<Table, TableError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                TableError::NotText {
                    file: path.to_owned(),
                }
            } else {
                TableError::Io {
                    file: path.to_owned(),
                    source: Arc::new(e),
                }
            }
        })?;
        Table::parse(path, &text)
    }

    /// Reads several files into one table (rows keep their own file and line).
    pub fn load_all(paths: &[PathBuf]) -> Result<Table, TableError> {
        let mut table = Table::default();
        for path in paths {
            table.rows.extend(Table::load(path)?.rows);
        }
        Ok(table)
    }

    /// Parses CSV text; `file` names it in errors.
    pub fn parse(file: &Path, text: &str) -> Result<Table, TableError> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim_start_matches('\u{feff}')))
            .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));

        let Some((header_line, header)) = lines.next() else {
            return Err(TableError::Empty {
                file: file.to_owned(),
            });
        };
        let header = Header::parse(file, header_line, header)?;
        let rows = lines
            .map(|(line, text)| header.row(file, line, text))
            .collect::<Result<Vec<Row>, TableError>>()?;
        if rows.is_empty() {
            return Err(TableError::Empty {
                file: file.to_owned(),
            });
        }
        Ok(Table { rows })
    }

    /// Profile names, sorted, each once.
    pub fn profiles(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.rows.iter().map(|r| r.profile.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Rows of one profile.
    pub fn profile_rows<'a>(&'a self, profile: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows.iter().filter(move |r| r.profile == profile)
    }

    /// Warnings about the measurements of one profile (or all, with `None`):
    /// non-monotonic rows, rows above `line_rate_gbps`, duplicates that disagree.
    pub fn check(&self, profile: Option<&str>, line_rate_gbps: f64) -> Vec<String> {
        let rows: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| profile.is_none_or(|p| r.profile == p))
            .collect();
        let mut warnings = Vec::new();
        for r in &rows {
            if r.gbps > line_rate_gbps * (1.0 + 1e-9) {
                warnings.push(format!(
                    "{}: {} {} B at {} G is above the {} G line rate: check the measurement \
                     or pass --line-rate",
                    r.at(),
                    r.profile,
                    r.packet_bytes,
                    fmt_gbps(r.gbps),
                    fmt_gbps(line_rate_gbps)
                ));
            }
        }
        // Same configuration measured twice with different results.
        let mut seen: BTreeMap<(&str, u32, u32, u32), &Row> = BTreeMap::new();
        for r in &rows {
            let key = (r.profile.as_str(), r.packet_bytes, r.tx_cores, r.rx_cores);
            match seen.get(&key) {
                Some(first) if (first.gbps - r.gbps).abs() > 1e-9 || first.vcpus != r.vcpus => {
                    warnings.push(format!(
                        "{}: {} {} B tx {} / rx {} measured again with {} G ({} vCPUs); {} says \
                         {} G ({} vCPUs): the selection uses the lower rate",
                        r.at(),
                        r.profile,
                        r.packet_bytes,
                        r.tx_cores,
                        r.rx_cores,
                        fmt_gbps(r.gbps),
                        r.vcpus,
                        first.at(),
                        fmt_gbps(first.gbps),
                        first.vcpus
                    ));
                }
                Some(_) => {}
                None => {
                    seen.insert(key, r);
                }
            }
        }
        // More tx cores should not give less.
        let mut series: BTreeMap<(&str, u32, u32), Vec<&Row>> = BTreeMap::new();
        for r in &rows {
            series
                .entry((r.profile.as_str(), r.packet_bytes, r.rx_cores))
                .or_default()
                .push(r);
        }
        for ((profile, bytes, _), mut rs) in series {
            rs.sort_by_key(|r| (r.tx_cores, r.line));
            for (i, r) in rs.iter().enumerate() {
                let better_with_fewer = rs[..i]
                    .iter()
                    .filter(|f| f.tx_cores < r.tx_cores && f.gbps > r.gbps + 1e-9)
                    .max_by(|a, b| a.gbps.total_cmp(&b.gbps));
                if let Some(f) = better_with_fewer {
                    warnings.push(format!(
                        "{}: {profile} {bytes} B is not monotonic: {} tx cores give {} G but {} \
                         tx cores gave {} G ({}); measurement noise? repeat both",
                        r.at(),
                        r.tx_cores,
                        fmt_gbps(r.gbps),
                        f.tx_cores,
                        fmt_gbps(f.gbps),
                        f.at()
                    ));
                }
            }
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Table, String> {
        Table::parse(Path::new("t.csv"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_rows_with_defaults_comments_and_quotes() -> Result<(), String> {
        let table = parse(
            "# lab, 2023\nprofile,packet_bytes,tx_cores,rx_cores,gbps,note\n\n\
             vm-64b,64,11,1,88G,\"first, cold\"\nvm-64b, 64 ,12,1, 97.5 ,\n",
        )?;
        assert_eq!(table.rows.len(), 2);
        let r = &table.rows[0];
        assert_eq!(
            (r.line, r.tx_cores, r.rx_cores, r.vcpus, r.gbps),
            (4, 11, 1, 13, 88.0)
        );
        assert_eq!(r.note.as_deref(), Some("first, cold"));
        assert_eq!(table.rows[1].gbps, 97.5);
        assert_eq!(table.rows[1].note, None);
        let with_vcpus =
            parse("profile,packet_bytes,tx_cores,rx_cores,gbps,vcpus\np,64,2,1,10,8\n")?;
        assert_eq!(with_vcpus.rows[0].vcpus, 8);
        Ok(())
    }

    #[test]
    fn rejects_bad_tables_with_file_and_line() {
        let head = "profile,packet_bytes,tx_cores,rx_cores,gbps\n";
        for (text, expected) in [
            ("", "t.csv: the table has no measurement rows (only a header, comments or blank lines)".to_owned()),
            (head, "t.csv: the table has no measurement rows (only a header, comments or blank lines)".to_owned()),
            (
                "profile,packet_bytes,tx_cores,gbps\np,64,1,10\n",
                "t.csv:1: the header lacks column rx_cores: it must name profile,packet_bytes,tx_cores,rx_cores,gbps (optional: vcpus,note)".to_owned(),
            ),
            (
                "vm,64,11,1,88\n",
                "t.csv:1: this is not a throughput table: the first line must be a header naming the columns profile,packet_bytes,tx_cores,rx_cores,gbps (optional: vcpus,note); it lacks profile, packet_bytes, tx_cores, rx_cores, gbps".to_owned(),
            ),
            (&format!("{head}p,64,x,1,10\n"), "t.csv:2: tx_cores \"x\" is not a whole number".to_owned()),
            (&format!("{head}p,64,0,1,10\n"), "t.csv:2: tx_cores is 0: it must be at least 1".to_owned()),
            (&format!("{head}p,64,2,-1,10\n"), "t.csv:2: rx_cores is -1: it must be 0 or more".to_owned()),
            (&format!("{head}p,64,2,1,fast\n"), "t.csv:2: gbps \"fast\" is not a number (write 88, 88G or 97.5)".to_owned()),
            (&format!("{head}p,64,2,1,0\n"), "t.csv:2: gbps is 0: a measured rate must be above 0".to_owned()),
            (&format!("{head}\n# c\np,64,2,1\n"), "t.csv:4: 4 fields, but the header has 5 columns (profile,packet_bytes,tx_cores,rx_cores,gbps)".to_owned()),
            (
                "profile;packet_bytes;tx_cores;rx_cores;gbps\np;64;1;0;10\n",
                "t.csv:1: the header is separated by ';': pinplan reads comma-separated tables with decimal points (save it as CSV with commas, or: sed 's/,/./g; s/;/,/g' < t.csv)".to_owned(),
            ),
            (
                "# lab\nprofile\tpacket_bytes\ttx_cores\trx_cores\tgbps\n",
                "t.csv:2: the header is separated by tabs: pinplan reads comma-separated tables with decimal points (save it as CSV with commas, or: tr '\\t' ',' < t.csv)".to_owned(),
            ),
            (
                "profile;packet_bytes;tx_cores;rx_cores,gbps\n",
                "t.csv:1: the header is separated by ';': pinplan reads comma-separated tables with decimal points (save it as CSV with commas, or: sed 's/,/./g; s/;/,/g' < t.csv)".to_owned(),
            ),
            (
                "profile,packet_bytes,tx_cores,gbps;x\n",
                "t.csv:1: the header lacks columns rx_cores, gbps: it must name profile,packet_bytes,tx_cores,rx_cores,gbps (optional: vcpus,note)".to_owned(),
            ),
            (&format!("{head}p,64,2,1,\"10\n"), "t.csv:2: a quoted field is not closed: add the closing \"".to_owned()),
        ] {
            assert_eq!(parse(text), Err(expected), "{text:?}");
        }
    }

    #[test]
    fn checks_flag_non_monotonic_duplicates_and_above_line_rate() -> Result<(), String> {
        let table = parse(
            "profile,packet_bytes,tx_cores,rx_cores,gbps\n\
             vm-512b,512,2,1,100\nvm-512b,512,3,1,98\nvm-512b,512,4,1,100\n\
             vm-x,64,2,1,40\nvm-x,64,2,1,44\nvm-x,64,3,1,101\n",
        )?;
        let warnings = table.check(Some("vm-512b"), 100.0);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("t.csv:3: vm-512b 512 B is not monotonic: 3 tx cores give 98 G but 2 tx cores gave 100 G"), "{warnings:?}");
        let warnings = table.check(Some("vm-x"), 100.0);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].starts_with("t.csv:7: vm-x 64 B at 101 G is above the 100 G line rate"),
            "{warnings:?}"
        );
        assert!(
            warnings[1].starts_with("t.csv:6: vm-x 64 B tx 2 / rx 1 measured again with 44 G"),
            "{warnings:?}"
        );
        assert!(table.check(Some("vm-x"), 200.0).len() == 1);
        Ok(())
    }
}
