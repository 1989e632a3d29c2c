//! Bad input to `pinplan topology --source ... --format json`, through the real
//! binary: every case must exit with status 2, print nothing on stdout, and
//! print on stderr a message that starts with "error: ", names the source, and
//! is not a Rust panic.

use crate::util::{self, fixture, TempDir};
use std::ffi::OsStr;
use std::path::PathBuf;

/// One bad input and what its message must contain besides the source name.
struct Case {
    /// Also the name of its snapshot, with `-` for spaces and punctuation.
    name: &'static str,
    source: PathBuf,
    /// Fragments that must all appear in stderr; alternatives are separated by `|`.
    must_mention: Vec<String>,
}

/// How the program handled one case: what is wrong with it, and stderr.
fn problems(case: &Case) -> (Vec<String>, String) {
    let source = case.source.as_os_str();
    let output = util::pinplan([
        OsStr::new("topology"),
        OsStr::new("--source"),
        source,
        OsStr::new("--format"),
        OsStr::new("json"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let source = case.source.display().to_string();
    let mut problems = Vec::new();
    if output.status.code() != Some(2) {
        problems.push(format!(
            "exit status must be 2, got {:?} ({})",
            output.status.code(),
            output.status
        ));
    }
    if !stdout.is_empty() {
        problems.push(format!("stdout must be empty, got {} bytes", stdout.len()));
    }
    if !stderr.starts_with("error: ") {
        problems.push("stderr must start with \"error: \"".to_string());
    }
    if !stderr.contains(&source) {
        problems.push(format!("stderr must name the source {source:?}"));
    }
    if stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE") {
        problems.push("stderr shows a Rust panic".to_string());
    }
    for fragment in &case.must_mention {
        if !fragment.split('|').any(|alt| stderr.contains(alt)) {
            problems.push(format!("stderr must mention {fragment:?}"));
        }
    }
    let failure = (!problems.is_empty()).then(|| {
        format!(
            "{}: {}\n    stderr was: {:?}",
            case.name,
            problems.join("; "),
            stderr
        )
    });
    (failure.into_iter().collect(), stderr.into_owned())
}

/// Checks every case, fails once with all that is wrong, then compares each
/// message with its snapshot.
fn check_all(cases: &[Case]) {
    let results: Vec<(Vec<String>, String)> = cases.iter().map(problems).collect();
    let failures: Vec<&String> = results.iter().flat_map(|(p, _)| p).collect();
    assert!(
        failures.is_empty(),
        "{} of {} bad inputs were not handled cleanly:\n{}",
        failures.len(),
        cases.len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    for (case, (_, stderr)) in cases.iter().zip(&results) {
        insta::assert_snapshot!(slug(case.name), util::redact(stderr));
    }
}

/// `"hwloc format 3.0 (Skylake)"` → `"hwloc-format-3-0-skylake"`.
fn slug(name: &str) -> String {
    let lower = name.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words.join("-")
}

fn case(name: &'static str, source: PathBuf, must_mention: &[&str]) -> Case {
    Case {
        name,
        source,
        must_mention: must_mention.iter().map(|s| (*s).to_string()).collect(),
    }
}

/// The first half of an hwloc fixture, cut in the middle of an element start
/// tag, and the line that unclosed tag starts on.
fn truncated_fixture() -> (Vec<u8>, usize) {
    let text = std::fs::read(fixture(
        "hwloc-xml/x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml",
    ))
    .expect("fixture");
    let half = text.len() / 2;
    let tag = text[half..]
        .windows(b"<object".len())
        .position(|w| w == b"<object")
        .expect("an <object> tag after the middle")
        + half;
    let cut = tag + "<object ty".len();
    let head = text[..cut].to_vec();
    let line = 1 + head.iter().filter(|&&b| b == b'\n').count();
    (head, line)
}

#[test]
fn bad_inputs_are_clean_errors() {
    let tmp = TempDir::new();
    let (truncated, truncated_line) = truncated_fixture();
    let truncated_path = tmp.write("truncated.xml", &truncated);
    let truncated_at = format!(
        "{}:{truncated_line}:|line {truncated_line}",
        truncated_path.display()
    );

    let cases = vec![
        case(
            "missing file",
            tmp.path("does-not-exist.xml"),
            &["does-not-exist.xml"],
        ),
        case("directory instead of a file", tmp.root().to_owned(), &[]),
        case(
            "plain text, not XML",
            tmp.write("notes.txt", b"CPU 0-3 are for the VM\n"),
            &[],
        ),
        case("empty file", tmp.write("empty.xml", b""), &[]),
        case("whitespace only", tmp.write("blank.xml", b"  \n\t\n"), &[]),
        case(
            "libvirt domain XML",
            fixture("inputs/libvirt-guest.xml"),
            &["domain"],
        ),
        case(
            "HTML document",
            tmp.write(
                "page.xml",
                b"<html><head><title>lstopo</title></head><body><p>hi</p></body></html>\n",
            ),
            &["html"],
        ),
        case("truncated hwloc XML", truncated_path, &[&truncated_at]),
        case(
            "hwloc format 3.0 (cxlmem+dax)",
            fixture("hwloc-xml/cxlmem+dax.v3.xml"),
            &["format 3.0"],
        ),
        case(
            "hwloc format 3.0 (Skylake)",
            fixture("hwloc-xml/x86-Intel-Skylake-2xXeon6140.v3.xml"),
            &["format 3.0"],
        ),
        case(
            "hwloc format 3.0 (disallowed CPUs)",
            fixture("hwloc-xml/irregulargroups-disallowed.v3.xml"),
            &["format 3.0"],
        ),
        case(
            "hwloc XML without any object",
            tmp.write(
                "no-objects.xml",
                b"<topology version=\"2.0\">\n</topology>\n",
            ),
            &[],
        ),
        case(
            "capabilities without <cells>",
            fixture("libvirt-caps/caps-test2.xml"),
            &["no <host><topology><cells>"],
        ),
        case(
            "capabilities whose only cell has no CPU",
            tmp.write(
                "caps-no-cpu.xml",
                b"<capabilities><host><topology><cells num='1'><cell id='0'>\
                  <memory unit='KiB'>1024</memory><cpus num='0'/></cell></cells>\
                  </topology></host></capabilities>\n",
            ),
            &[],
        ),
        case(
            "capabilities with a non-numeric CPU id",
            tmp.write(
                "caps-bad-id.xml",
                b"<capabilities><host><topology><cells num='1'><cell id='0'>\
                  <cpus num='1'><cpu id='x1'/></cpus></cell></cells>\
                  </topology></host></capabilities>\n",
            ),
            &["x1"],
        ),
        case(
            "garbage synthetic description",
            PathBuf::from("synthetic:garbage"),
            &[],
        ),
    ];
    check_all(&cases);
}

/// hwloc itself accepts this file (two PUs claim OS index 0, one of them with
/// cpuset 0x2), but it is inconsistent: pinplan must refuse it with a message,
/// not crash.
#[test]
fn inconsistent_hwloc_xml_is_an_error_not_a_crash() {
    let path = fixture("inputs/hwloc-duplicate-pu.xml");
    check_all(&[case("PU os_index 0 twice", path, &[])]);
}

#[test]
fn truncation_helper_cuts_inside_a_tag() {
    let (head, line) = truncated_fixture();
    let text = String::from_utf8(head).expect("ASCII fixture");
    let last = text.lines().last().expect("some lines");
    assert!(last.trim_start().starts_with("<object ty"), "{last:?}");
    assert_eq!(text.lines().count(), line);
    assert!(fixture("").is_dir());
}

/// Issue 14, defect 4: a PU of a real machine's file without its
/// `complete_cpuset` made libhwloc 2.9 crash (SIGSEGV); it is exit 2 and the
/// object's line, before hwloc sees the file.
#[test]
fn a_corrupted_hwloc_xml_kills_the_process_no_more() {
    let text = util::fixture_text("hwloc-xml/16em64t-4s2c2t.xml");
    let at = text.find("type=\"PU\"").expect("the fixture has PUs");
    let attr = text[at..]
        .find(" complete_cpuset=\"")
        .expect("PUs have sets")
        + at;
    let end = text[attr + 18..].find('"').expect("a closing quote") + attr + 19;
    let line = text[..at].matches('\n').count() + 1;
    let broken = format!("{}{}", &text[..attr], &text[end..]);
    let dir = TempDir::new();
    let path = dir.write("no-complete-cpuset.xml", broken);
    let out = util::pinplan(["topology", "--source", util::arg(&path)]);
    assert_eq!(out.status.code(), Some(2), "{}", util::text(&out.stderr));
    let stderr = util::text(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:{line}: <object type=\"PU\"", path.display())),
        "{stderr}"
    );
    assert!(stderr.contains("has no complete_cpuset"), "{stderr}");
}
