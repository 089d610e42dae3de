//! `spool bench server` with tiny sizes: the in-process server runs every
//! workload through and the JSON on stdout has every figure with its
//! target and verdict. The numbers themselves are not judged (timing is
//! the release benchmark's job, not a test's).

mod support;

use serde_json::Value;

fn number(section: &Value, key: &str) -> f64 {
    section[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {section}"))
}

/// `spool bench server ARGS` on a fresh PostgreSQL database, its temp
/// files in a directory of the test's: the JSON report and stderr.
fn on_postgres(args: &[&str]) -> (Value, String) {
    let db = spool_testkit::postgres::TestDatabase::create();
    let dir = tempfile::tempdir().unwrap();
    let mut full = vec!["--store", db.url(), "bench", "server"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--dir", dir.path().to_str().unwrap()]);
    support::bench_report(&full)
}

#[test]
fn server_bench_reports_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let (report, _) = support::bench_report(&[
        "bench",
        "server",
        "--deltas",
        "50",
        "--threads",
        "3",
        "--thread-deltas",
        "4",
        "--idle-threads",
        "5",
        "--items",
        "20",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(report["workload"], "server");

    let a = &report["notifications"];
    assert_eq!(a["deltas"], 50);
    // At least every delta, the turn's start and end.
    assert!(number(a, "notifications") >= 52.0, "{a}");
    assert!(number(a, "last_seq") >= 50.0, "{a}");
    let per_s = number(a, "per_s");
    assert!(per_s > 0.0);
    assert_eq!(number(a, "target_per_s"), 100_000.0);
    assert_eq!(a["holds"], per_s >= 100_000.0, "{a}");

    let b = &report["latency"];
    assert_eq!(b["threads"], 3);
    assert_eq!(b["samples"], 12);
    let (p50, p99) = (number(b, "p50_ms"), number(b, "p99_ms"));
    assert!(
        p50 >= 0.0 && p50 <= p99 && p99 <= number(b, "max_ms"),
        "{b}"
    );
    assert_eq!(number(b, "target_p99_ms"), 2.0);
    assert_eq!(b["holds"], p99 <= 2.0, "{b}");

    let c = &report["idle_thread_memory"];
    assert_eq!(c["threads"], 5);
    assert!(number(c, "rss_before_kib") > 0.0, "{c}");
    number(c, "kib_per_thread");
    assert_eq!(number(c, "target_kib_per_thread"), 64.0);
    assert!(c["holds"].is_boolean(), "{c}");

    let d = &report["resume"];
    assert_eq!(d["items"], 20);
    assert_eq!(d["turns"], 10);
    let resume_ms = number(d, "median_ms");
    assert!(resume_ms > 0.0, "{d}");
    assert_eq!(number(d, "target_ms"), 50.0);
    assert_eq!(d["holds"], resume_ms <= 50.0, "{d}");

    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);
    // The store was removed with its temp directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// (e) on a real PostgreSQL: both servers' clients received every delta,
/// and the delivery floor heard a notice for each of the same deltas.
#[test]
fn the_two_server_workload_reports_its_latency_beside_its_floor() {
    let (report, stderr) = on_postgres(&[
        "--workloads",
        "e",
        "--replica-deltas",
        "50",
        "--replica-threads",
        "3",
        "--thread-deltas",
        "4",
        "--pace-ms",
        "1",
    ]);
    let e = &report["replicas"];
    assert_eq!(e["events"]["deltas"], 50);
    let latency = &e["latency"];
    let floor = &e["floor"];
    for percentiles in [&latency["holder"], &latency["other"], &floor["latency"]] {
        assert_eq!(percentiles["samples"], 12, "{e}");
        let (p50, p99) = (number(percentiles, "p50_ms"), number(percentiles, "p99_ms"));
        assert!(
            0.0 < p50 && p50 <= p99 && p99 <= number(percentiles, "max_ms"),
            "{e}"
        );
    }
    let other_p99 = number(&latency["other"], "p99_ms");
    let floor_p99 = number(&floor["latency"], "p99_ms");
    let ratio = number(floor, "other_p99_over_floor");
    assert!((ratio - other_p99 / floor_p99).abs() < 0.01, "{e}");
    assert!(stderr.contains("(e) floor:"), "{stderr}");
}

/// (f) on a real PostgreSQL and real `spool serve` children: one takeover
/// timed, and it cannot have come before the killed server's lease ran out
/// (renewals keep at least three fifths of it ahead, so more than a second
/// is left at any kill).
#[test]
fn the_takeover_workload_times_a_real_kill() {
    let (report, stderr) = on_postgres(&["--workloads", "f", "--takeovers", "1"]);
    let f = &report["takeover"];
    assert_eq!(f["rounds"], 1, "{f}");
    assert!(
        report["replicas"].is_null(),
        "only (f) was asked for: {report}"
    );
    let (interrupted, next) = (&f["interrupted_s"][0], &f["next_turn_s"][0]);
    let (interrupted, next) = (interrupted.as_f64().unwrap(), next.as_f64().unwrap());
    assert!(1.0 < interrupted && interrupted <= next, "{f}");
    let ttl = number(f, "lease_ttl_s");
    assert_eq!(number(f, "max_interrupted_s"), interrupted, "{f}");
    assert!(
        (number(f, "max_over_ttl") - interrupted / ttl).abs() < 0.01,
        "{f}"
    );
    assert_eq!(f["holds"], interrupted <= number(f, "target_s"), "{f}");
    assert!(stderr.contains("(f) round 0: interrupted on B"), "{stderr}");
}
