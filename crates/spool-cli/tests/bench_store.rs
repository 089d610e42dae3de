//! `spool bench store --quick`: every workload runs and reports positive
//! numbers as JSON on stdout. Tiny sizes; the numbers themselves are not
//! checked (timing is the release benchmark's job, not a test's).

mod support;

use std::process::Command;

#[test]
fn quick_bench_reports_every_workload() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let (report, _) =
        support::bench_report(&["bench", "store", "--quick", "--runs", "1", "--dir", dir_arg]);

    let workloads = report["workloads"].as_array().unwrap();
    let names: Vec<&str> = workloads
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
            "r"
        ]
    );
    for w in workloads {
        let runs = w["runs_s"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{w}");
        for key in ["median_s", "per_s", "value"] {
            let v = w[key].as_f64().unwrap_or(0.0);
            assert!(v > 0.0 && v.is_finite(), "{key} of {w}");
        }
        assert!(w["ops"].as_u64().unwrap() > 0, "{w}");
        assert!(!w["unit"].as_str().unwrap().is_empty(), "{w}");
    }
    assert!(report["a_vs_floor"]["measured"].as_f64().unwrap() > 0.0);
    for split in [
        "a_vs_layout_floor",
        "a_vs_handoff_floor",
        "handoff_floor_vs_layout_floor",
        "layout_floor_a_vs_floor",
        "b_vs_layout_floor",
        "layout_floor_b_vs_batch_floor",
        "e_vs_layout_floor",
        "e_vs_group_floor",
        "group_floor_vs_layout_floor",
        "c_vs_read_floor",
        "d_vs_read_floor",
        "n_vs_read_floor",
    ] {
        assert!(report["layout"][split].as_f64().unwrap() > 0.0, "{split}");
    }
    assert_eq!(report["items"]["count"], 200);
    assert_eq!(report["settings"]["quick"], true);
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);

    // Every run's store was removed with its temp directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn unknown_workload_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_spool"))
        .args(["bench", "store", "--workloads", "a,z"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("'z'"), "{stderr}");
}
