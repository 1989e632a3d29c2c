//! Text in the picture: `<text>` elements, monospace widths, fitting and
//! wrapping to a width, XML escaping. (Counted nouns and byte sizes are
//! [`crate::text`]'s.)

use super::MARGIN;
use crate::cpuset::CpuSet;
use crate::report::Severity;

/// A `<text>` element, `y` its baseline, `content` escaped.
pub(super) fn text(out: &mut String, x: i64, y: i64, size: i64, attrs: &str, content: &str) {
    out.push_str(&format!(
        "<text x=\"{x}\" y=\"{y}\" font-size=\"{size}\" {attrs}>{}</text>\n",
        esc(content)
    ));
}

/// A bold dark line at the left margin, `y` its baseline.
pub(super) fn heading(out: &mut String, y: i64, size: i64, content: &str) {
    text(
        out,
        MARGIN,
        y,
        size,
        "font-weight=\"bold\" fill=\"#1f2a36\"",
        content,
    );
}

/// Wrapped lines of 11-pixel text, 14 apart, the first one's baseline 13
/// below `top`.
pub(super) fn paragraph(out: &mut String, x: i64, top: i64, attrs: &str, lines: &[String]) {
    for (n, line) in lines.iter().enumerate() {
        text(out, x, top + 13 + px(n) * 14, 11, attrs, line);
    }
}

/// Width of `s` in DejaVu Sans Mono (0.6 em a character), rounded up.
pub(super) fn text_w(s: &str, size: i64) -> i64 {
    (px(s.chars().count()) * size * 61 + 99) / 100
}

/// How many monospace characters fit in `width`.
pub(super) fn chars_fitting(width: i64, size: i64) -> usize {
    usize::try_from(width * 100 / (size * 61).max(1))
        .unwrap_or(1)
        .max(8)
}

/// `label` shortened with an ellipsis so it fits `width`.
pub(super) fn fit(label: &str, width: i64, size: i64) -> String {
    let max = chars_fitting(width, size);
    if label.chars().count() <= max {
        label.to_owned()
    } else {
        let mut short: String = label.chars().take(max.saturating_sub(1)).collect();
        short.push('…');
        short
    }
}

/// Word-wraps `text` into lines of at most `width` characters; words longer
/// than a line are cut, after a `/` (else a `-`, `.`, `,` or `_`) where there
/// is one in the second half of the line.
pub(super) fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let need = if len == 0 {
                word.len()
            } else {
                len + 1 + word.len()
            };
            if need <= width {
                if len > 0 {
                    line.push(' ');
                    len += 1;
                }
                line.extend(word.iter());
                len += word.len();
                break;
            }
            if len > 0 {
                lines.push(std::mem::take(&mut line));
                len = 0;
                continue;
            }
            // Cut a path or list after a separator (a slash first) when one
            // is not too early.
            let after = |is_separator: fn(&char) -> bool| {
                word.iter()
                    .take(width)
                    .rposition(is_separator)
                    .map(|i| i + 1)
                    .filter(|i| *i >= width / 2)
            };
            let cut = after(|c| *c == '/')
                .or_else(|| after(|c| matches!(c, '-' | '.' | ',' | '_')))
                .unwrap_or(width);
            let rest = word.split_off(cut);
            lines.push(word.iter().collect());
            word = rest;
        }
    }
    if len > 0 || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Wraps a line made of phrases — joined by ` · ` or `; ` — into lines of at
/// most `width` characters, breaking only between phrases (a ` · ` at a
/// break is dropped, a `;` stays at the end of its line). A phrase longer
/// than a line starts a line of its own and is broken between its words
/// ([`wrap`]), so no line is ever longer than `width`.
pub(super) fn wrap_phrases(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    // How the previous phrase joins the next one on the same line.
    let mut joiner = "";
    for (phrase, next_joiner) in phrases(text) {
        let fits = |s: &str| s.chars().count() <= width;
        let joined = format!("{line}{joiner}{phrase}");
        if line.is_empty() && fits(&phrase) {
            line = phrase;
        } else if !line.is_empty() && fits(&joined) {
            line = joined;
        } else {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            let mut pieces = wrap(&phrase, width);
            line = pieces.pop().unwrap_or_default();
            lines.extend(pieces);
        }
        joiner = next_joiner;
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` cut at each ` · ` and `; ` into phrases, each with what joins it
/// to the next one on a line (` · `, or a space after its own `;`).
fn phrases(text: &str) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let dot = rest.find(" · ");
        let semi = rest.find("; ");
        let (cut, keep, skip, joiner) = match (dot, semi) {
            (Some(d), Some(s)) if s < d => (s, 1, 2, " "),
            (Some(d), _) => (d, 0, " · ".len(), " · "),
            (None, Some(s)) => (s, 1, 2, " "),
            (None, None) => {
                out.push((rest.to_owned(), ""));
                return out;
            }
        };
        out.push((rest[..cut + keep].to_owned(), joiner));
        rest = &rest[cut + skip..];
    }
}

/// Escapes text for XML content and attribute values; characters XML 1.0
/// cannot hold at all become U+FFFD.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if u32::from(c) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push('\u{fffd}');
            }
            c => out.push(c),
        }
    }
    out
}

/// `cpus` in libvirt syntax, or `none`.
pub(super) fn or_none(cpus: &CpuSet) -> String {
    if cpus.is_empty() {
        "none".to_owned()
    } else {
        cpus.to_string()
    }
}

/// `error` or `warning`.
pub(super) fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// A count as a coordinate.
pub(super) fn px(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_text() {
        for (text, width, expected) in [
            ("a bb ccc", 4, &["a bb", "ccc"][..]),
            ("abcdefgh", 3, &["abc", "def", "gh"]),
            ("x /a/bb/ccc/dddd", 8, &["x", "/a/bb/", "ccc/dddd"]),
            ("", 5, &[""]),
            ("one two", 20, &["one two"]),
        ] {
            assert_eq!(wrap(text, width), expected, "{text:?}");
        }
    }

    #[test]
    fn wraps_phrases_between_phrases() {
        for (text, width, expected) in [
            ("a b · c d · e", 20, &["a b · c d · e"][..]),
            ("a b · c d · e", 9, &["a b · c d", "e"]),
            ("a b · c d · e", 5, &["a b", "c d", "e"]),
            ("one; two three; four", 12, &["one;", "two three;", "four"]),
            ("one; two three; four", 15, &["one; two three;", "four"]),
            // The tail of a long phrase may share its line with the next phrase.
            (
                "x · long phrase here · y",
                8,
                &["x", "long", "phrase", "here · y"],
            ),
            ("", 5, &[""]),
        ] {
            assert_eq!(wrap_phrases(text, width), expected, "{text:?} in {width}");
        }
    }
}
