//! Journals an older pinplan wrote still undo (issue 29): a user may
//! upgrade pinplan between `apply` and `apply --rollback`. The journals here
//! (`tests/fixtures/journals/`) are byte for byte what version 1 of each
//! wrote (`"pinplan_journal": 1`, `"pinplan_fleet_journal": 1`, before the
//! journals' envelope), for libvirt's test driver (`test:///default`,
//! inside the pinplan process: no daemon), its domain `test` as not running
//! then (only its config is restored, which the test driver can do). An
//! `isolate` journal of before is undone in `isolate_cli`.

use crate::util::{self, TempDir};
use serde_json::Value;

/// The journal's `tool`, `version` and `status` as it reads now.
fn stamp(path: &std::path::Path) -> (Value, Value, Value) {
    let journal: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    (
        journal["tool"].clone(),
        journal["version"].clone(),
        journal["status"].clone(),
    )
}

/// A version 1 apply journal rolls back (dry run first), and is rewritten
/// in the envelope as it goes.
#[test]
fn issue_29_a_version_1_apply_journal_rolls_back() {
    // The apply lock of the test driver is localhost's: the live tests' turn.
    let _turn = util::live_guests_turn();
    let dir = TempDir::new();
    let v1 = util::fixture_text("journals/apply-v1.json");
    let journal = dir.write("v1.json", &v1);
    let path = util::arg(&journal);
    let dry = util::pinplan_ok(&["apply", "--rollback", path, "--dry-run"]);
    assert!(
        dry.ends_with(&format!(
            "dry run: rolling back {path} on test:///default would do the above; nothing was changed\n"
        )),
        "{dry}"
    );
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), v1);
    let done = util::pinplan_ok(&["apply", "--rollback", path]);
    assert!(
        done.contains(&format!(
            "rolled back test from {path} and verified: their configs are as they were"
        )),
        "{done}"
    );
    assert_eq!(
        stamp(&journal),
        ("pinplan apply".into(), 2.into(), "rolled-back".into())
    );
}

/// A version 1 fleet journal, with its version 1 host journal, rolls
/// every host back.
#[test]
fn issue_29_a_version_1_fleet_journal_rolls_back() {
    let _turn = util::live_guests_turn();
    let dir = TempDir::new();
    let v1 = util::fixture_text("journals/fleet-v1.json");
    let fleet = dir.write("f.json", &v1);
    let host = dir.write("f-t.json", util::fixture_text("journals/apply-v1.json"));
    let out = util::pinplan_json(&["apply", "--rollback", util::arg(&fleet), "--format", "json"]);
    assert_eq!(out["status"], "rolled-back", "{out}");
    assert_eq!(
        out["hosts"][0]["restored"],
        serde_json::json!(["test"]),
        "{out}"
    );
    assert_eq!(
        stamp(&host),
        ("pinplan apply".into(), 2.into(), "rolled-back".into())
    );
    // The fleet journal itself is only read.
    assert_eq!(std::fs::read_to_string(&fleet).unwrap(), v1);
}
