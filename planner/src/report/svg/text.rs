//! Text in the picture: `<text>` elements, monospace widths, fitting and
//! wrapping to a width, XML escaping. (Counted nouns and byte sizes are
//! [`crate::text`]'s.)

use super::layout::px;
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
}
