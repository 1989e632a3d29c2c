//! Small text helpers every stage uses: counted nouns, the closest name for
//! "did you mean", positions in a document, byte sizes, a path as a shell word.

/// The hint for a file that is not there: where a relative path is taken
/// from depends on where it was given.
pub const MISSING_FILE_HINT: &str = "check the path; a relative path is taken from the current directory on the command line, from the spec's directory in a spec";

/// `path` as one `sh` word, single-quoted (the hooks pinplan writes name
/// paths); `None` for a path that is not UTF-8 or holds a newline or NUL,
/// which a script line cannot name.
pub fn sh_word(path: &std::path::Path) -> Option<String> {
    let text = path.to_str().filter(|t| !t.contains(['\n', '\0']))?;
    Some(format!("'{}'", text.replace('\'', "'\\''")))
}

/// "a", "a and b", "a, b and c".
pub fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// `1 core`, `2 cores`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Edit distance (Levenshtein), for suggesting the closest name.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// The option closest to `word` (ties: the smallest name), when it is close
/// enough to be a likely typo: at most half the longer word's length, plus one.
pub fn closest<'a>(word: &str, options: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    options
        .into_iter()
        .map(|o| (distance(word, o), o))
        .filter(|(d, o)| *d <= o.len().max(word.len()) / 2 + 1)
        .min()
        .map(|(_, o)| o)
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &[u8], offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, column)
}

/// A byte count as `1.5 GiB`, `512.0 MiB` or `64 KiB`.
pub fn bytes(n: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if n >= GIB {
        format!("{:.1} GiB", n as f64 / GIB as f64)
    } else if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else {
        format!("{} KiB", n >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_names_a_typo_and_nothing_far() {
        assert_eq!(closest("threds", ["threads", "numa"]), Some("threads"));
        assert_eq!(closest("vm-64", ["vm-64b", "vm-1500b"]), Some("vm-64b"));
        assert_eq!(closest("zzzzzz", ["threads", "numa"]), None);
    }

    #[test]
    fn positions_count_from_one() {
        assert_eq!(line_col(b"ab\ncd", 4), (2, 2));
        assert_eq!(line_col(b"ab", 99), (1, 3));
    }

    #[test]
    fn sizes_and_counts_read_naturally() {
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(bytes(64 << 10), "64 KiB");
        assert_eq!(plural(1, "core", "cores"), "1 core");
        assert_eq!(plural(2, "core", "cores"), "2 cores");
    }
}
