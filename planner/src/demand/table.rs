//! Throughput tables: CSV files of measurements, one row per measurement
//! (`profile,packet_bytes,tx_cores,rx_cores,gbps[,vcpus][,note]`, or a
//! published table's columns: `header.rs`; each a [`Row`] of `row.rs`), and
//! the checks on a table itself (non-monotonic rows, rows above line rate,
//! duplicates that disagree). Choosing a demand from a table is in
//! [`super::demand`]; the packet-rate model in [`super::model`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) use super::row::fmt_gbps;
pub use super::row::{Direction, Row, TableError};

/// All measurements from one or more files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Rows in file order.
    pub rows: Vec<Row>,
    /// Every profile's held-out errors, pooled, by line rate: what a model
    /// answer falls back to, the same for every VM a spec sizes from the
    /// table, so worked out once ([`Table::pooled_residuals`]).
    pooled: PooledResiduals,
}

/// [`Table::pooled_residuals`]' results so far, by line rate (its bits).
/// Derived from the rows: clones start empty, and it plays no part in
/// equality.
#[derive(Default)]
struct PooledResiduals(std::sync::Mutex<BTreeMap<u64, Arc<Vec<f64>>>>);

impl Clone for PooledResiduals {
    fn clone(&self) -> Self {
        PooledResiduals::default()
    }
}

impl PartialEq for PooledResiduals {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for PooledResiduals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PooledResiduals")
    }
}

/// A row's `threads_per_core` in a message (rows that say it).
fn words(threads_per_core: Option<u32>) -> String {
    threads_per_core.map_or_else(String::new, |t| t.to_string())
}

impl Table {
    /// A test table of `profile,packet_bytes,tx_cores,rx_cores,gbps` lines
    /// (file `t.csv`); empty when they do not parse.
    #[cfg(test)]
    pub(crate) fn of_lines(text: &str) -> Table {
        Table::parse(
            Path::new("t.csv"),
            &format!("profile,packet_bytes,tx_cores,rx_cores,gbps\n{text}"),
        )
        .unwrap_or_default()
    }

    /// A table of `rows`.
    pub fn new(rows: Vec<Row>) -> Table {
        Table {
            rows,
            pooled: PooledResiduals::default(),
        }
    }

    /// Every profile's held-out errors at `line_rate_gbps`, pooled
    /// ([`super::select::by_profile`]); computed on the first call for a
    /// line rate, then kept.
    pub(crate) fn pooled_residuals(&self, line_rate_gbps: f64) -> Arc<Vec<f64>> {
        let mut cache = self
            .pooled
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(cache.entry(line_rate_gbps.to_bits()).or_insert_with(|| {
            Arc::new(
                super::select::by_profile(&self.rows, line_rate_gbps)
                    .values()
                    .flat_map(super::select::ProfileModel::errors)
                    .collect(),
            )
        }))
    }

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
        table.one_threading_per_profile()?;
        Ok(table)
    }

    /// Refuses a profile measured both with one thread per core and on SMT
    /// siblings: its rows are two configurations, whose per-thread rates the
    /// model must not mix.
    fn one_threading_per_profile(&self) -> Result<(), TableError> {
        let mut first: BTreeMap<&str, &Row> = BTreeMap::new();
        for row in self.rows.iter().filter(|r| r.threads_per_core.is_some()) {
            let seen = *first.entry(row.profile.as_str()).or_insert(row);
            if seen.threads_per_core != row.threads_per_core {
                return Err(TableError::At {
                    file: row.file.clone(),
                    line: row.line,
                    problem: format!(
                        "profile {} was measured with threads_per_core {} ({}) and {} here: the \
                         rates per thread differ; give the rows of each a profile of their own \
                         (e.g. {}-smt)",
                        row.profile,
                        words(seen.threads_per_core),
                        seen.at(),
                        words(row.threads_per_core),
                        row.profile
                    ),
                });
            }
        }
        Ok(())
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
        let header = super::header::Header::parse(file, header_line, header)?;
        let rows = lines
            .map(|(line, text)| header.row(file, line, text))
            .collect::<Result<Vec<Row>, TableError>>()?;
        if rows.is_empty() {
            return Err(TableError::Empty {
                file: file.to_owned(),
            });
        }
        let table = Table::new(rows);
        table.one_threading_per_profile()?;
        Ok(table)
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
                "t.csv:1: the header lacks column rx_cores: it must name profile,packet_bytes,tx_cores,rx_cores,gbps (or cores instead of tx_cores,rx_cores and mpps instead of gbps; optional: vcpus,threads_per_core,direction,source,note)".to_owned(),
            ),
            (
                "vm,64,11,1,88\n",
                "t.csv:1: this is not a throughput table: the first line must be a header naming the columns profile,packet_bytes,tx_cores,rx_cores,gbps (or cores instead of tx_cores,rx_cores and mpps instead of gbps; optional: vcpus,threads_per_core,direction,source,note); it lacks profile, packet_bytes, tx_cores, rx_cores, gbps".to_owned(),
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
                "t.csv:1: the header lacks columns rx_cores, gbps: it must name profile,packet_bytes,tx_cores,rx_cores,gbps (or cores instead of tx_cores,rx_cores and mpps instead of gbps; optional: vcpus,threads_per_core,direction,source,note)".to_owned(),
            ),
            (&format!("{head}p,64,2,1,\"10\n"), "t.csv:2: a quoted field is not closed: add the closing \"".to_owned()),
        ] {
            assert_eq!(parse(text), Err(expected), "{text:?}");
        }
    }

    /// The pooled held-out errors are worked out once per line rate and
    /// kept (a spec sizing many VMs from one table asks for them per VM),
    /// the same as computed afresh; a clone starts without them.
    #[test]
    fn pooled_residuals_are_kept_per_line_rate() -> Result<(), String> {
        let table = parse(
            "profile,packet_bytes,tx_cores,rx_cores,gbps\n\
             a,64,1,0,5\na,64,2,0,10\na,64,3,0,14\nb,64,1,0,4\nb,64,2,0,8\nb,64,4,0,13\n",
        )?;
        let first = table.pooled_residuals(100.0);
        assert!(Arc::ptr_eq(&first, &table.pooled_residuals(100.0)));
        let fresh: Vec<f64> = super::super::select::by_profile(&table.rows, 100.0)
            .values()
            .flat_map(super::super::select::ProfileModel::errors)
            .collect();
        assert_eq!(*first, fresh);
        assert!(!first.is_empty());
        let other = table.pooled_residuals(10.0);
        assert!(!Arc::ptr_eq(&first, &other));
        let copy = table.clone();
        assert_eq!(copy, table);
        assert!(!Arc::ptr_eq(&first, &copy.pooled_residuals(100.0)));
        Ok(())
    }

    /// A published table's columns (issue 32): forwarding cores and threads
    /// per core, packets per second, a two-way aggregate, a source. Worked by
    /// hand: a 64 B packet is 84 B on the wire, so 29.76 Mpps both ways is
    /// 29.76 × 84 × 8 / 1000 = 19.99872 Gb/s, 9.99936 one way; 1 core of 2
    /// SMT threads is 2 forwarding threads (tx cores).
    #[test]
    fn reads_published_columns() -> Result<(), String> {
        let table = parse(
            "profile,packet_bytes,cores,threads_per_core,mpps,direction,source\n\
             whole,64,2,1,29.76,both,csit@abc\n\
             smt,64,1,2,10,one,\n\
             big,1518,4,1,1.625486,Both,r\n\
             plain,64,3,,10,,\n",
        )?;
        let got: Vec<(u32, u32, u32, Option<u32>, Direction)> = table
            .rows
            .iter()
            .map(|r| {
                (
                    r.tx_cores,
                    r.rx_cores,
                    r.vcpus,
                    r.threads_per_core,
                    r.direction,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (2, 0, 3, Some(1), Direction::Both),
                (2, 0, 3, Some(2), Direction::One),
                (4, 0, 5, Some(1), Direction::Both),
                (3, 0, 4, None, Direction::One),
            ]
        );
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // 10 × 84 × 8 / 1000 = 6.72; 1.625486 × 1538 × 8 / 1000 / 2 = 9.99998947…
        for (row, want) in table.rows.iter().zip([9.99936, 6.72, 9.999_989_47, 6.72]) {
            assert!((row.gbps - want).abs() < 1e-6, "{} vs {want}", row.gbps);
        }
        assert!(close(table.rows[1].gbps, 6.72));
        assert_eq!(table.rows[0].source.as_deref(), Some("csit@abc"));
        assert_eq!(table.rows[1].source, None);
        let head = "profile,packet_bytes,cores,threads_per_core,mpps,direction\n";
        for (text, expected) in [
            (format!("{head}p,64,1,3,10,one\n"), "t.csv:2: threads_per_core \"3\": write 1 (one forwarding thread per core) or 2 (both SMT siblings of each core)"),
            (format!("{head}p,64,1,1,10,up\n"), "t.csv:2: direction \"up\": write one (the rate of one direction) or both (the sum of both directions)"),
            (format!("{head}p,64,1,1,x,one\n"), "t.csv:2: mpps \"x\" is not a number (write 14.88 or 0.8)"),
            (format!("{head}p,64,0,1,10,one\n"), "t.csv:2: cores is 0: it must be at least 1"),
            ("profile,packet_bytes,cores,tx_cores,gbps\np,64,1,1,10\n".to_owned(), "t.csv:1: the header names cores and tx_cores/rx_cores: give one or the other"),
            ("profile,packet_bytes,cores,gbps,mpps\np,64,1,1,10\n".to_owned(), "t.csv:1: the header names gbps and mpps: give one rate per row"),
            (format!("{head}p,64,1,1,10,one\np,64,1,2,12,one\n"), "t.csv:3: profile p was measured with threads_per_core 1 (t.csv:2) and 2 here: the rates per thread differ; give the rows of each a profile of their own (e.g. p-smt)"),
        ] {
            assert_eq!(parse(&text), Err(expected.to_owned()), "{text:?}");
        }
        Ok(())
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
