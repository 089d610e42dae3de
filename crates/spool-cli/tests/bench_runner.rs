//! `spool bench runner --steps 5 --runs 1`: one short turn per durability
//! runs through and the JSON on stdout has every field, with sane values.
//! The numbers themselves are not judged (timing is the release
//! benchmark's job, not a test's).

mod support;

use std::process::Command;

use serde_json::Value;

/// A positive, finite number of microseconds.
fn positive(report: &Value, key: &str) -> f64 {
    let v = report[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {report}"));
    assert!(v > 0.0 && v.is_finite(), "{key} = {v}");
    v
}

fn check_figures(figures: &Value, durability: &str) {
    assert_eq!(figures["durability"], durability, "{figures}");
    let median = positive(figures, "median_us");
    let p90 = positive(figures, "p90_us");
    positive(figures, "mean_us");
    positive(figures, "first_tenth_median_us");
    positive(figures, "last_tenth_median_us");
    assert!(p90 >= median, "p90 {p90} < median {median}");
    assert_eq!(figures["holds"], median <= 200.0, "{figures}");
    for key in ["runs_median_us", "runs_turn_ms"] {
        let runs = figures[key].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{key}: {figures}");
        assert!(runs[0].as_f64().unwrap() > 0.0, "{key}: {figures}");
    }
    // Three of the five steps take the median or longer, and the turn
    // holds all of them.
    let turn_us = figures["runs_turn_ms"][0].as_f64().unwrap() * 1000.0;
    assert!(median * 3.0 <= turn_us + 1.0, "{figures}");
}

#[test]
fn runner_bench_reports_both_durabilities() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let (report, _) = support::bench_report(&[
        "bench", "runner", "--steps", "5", "--runs", "1", "--dir", dir_arg,
    ]);

    assert_eq!(report["workload"], "runner_step");
    assert_eq!(report["steps"], 5);
    assert_eq!(report["runs"], 1);
    assert_eq!(report["target_us"].as_f64(), Some(200.0));
    assert!(report["aggregate"].as_str().unwrap().contains("median"));
    check_figures(&report, "normal");
    check_figures(&report["with_fsync"], "full");
    // The floor is measured beside the headline only.
    positive(&report, "store_floor_median_us");
    assert_eq!(
        report["runs_store_floor_median_us"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(report["with_fsync"].get("store_floor_median_us"), None);
    let modes = report["modes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(names, ["previousResponseId", "conversationId"]);
    for mode in modes {
        check_figures(mode, "normal");
    }
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);

    // Every run's store was removed with its temp directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn zero_steps_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_spool"))
        .args(["bench", "runner", "--steps", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--steps"), "{stderr}");
}
