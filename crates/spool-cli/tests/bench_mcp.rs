//! `spool bench mcp --calls 20`: both transports run through, spool's path
//! and the floor's, with the test MCP server found beside `spool`, and the
//! report has every figure, in JSON and as a table. The numbers themselves
//! are not judged (timing is the release benchmark's job, not a test's).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// `spool bench mcp --calls 20 ARGS`, checked to succeed.
fn bench(args: &[&str]) -> Output {
    // The bench finds the test server beside `spool`, as cargo builds it
    // (`cargo nextest run --workspace` builds every binary).
    let spool = PathBuf::from(env!("CARGO_BIN_EXE_spool"));
    let server = spool.with_file_name("spool-mcp-test-server");
    assert!(
        server.exists(),
        "{} is not built: run the tests with --workspace, or `cargo build -p spool-mcp`",
        server.display()
    );
    let out = Command::new(spool)
        .args(["bench", "mcp", "--calls", "20"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A positive, finite number.
fn positive(figures: &Value, key: &str) -> f64 {
    let v = figures[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {figures}"));
    assert!(v > 0.0 && v.is_finite(), "{key} = {v}");
    v
}

#[test]
fn mcp_bench_times_spool_and_the_floor_over_both_transports() {
    let out = bench(&["--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(report["workload"], "mcp_call");
    assert_eq!(report["calls"], 20);
    assert_eq!(report["warmup"], 50);
    let transports = report["transports"].as_array().unwrap();
    let names: Vec<&str> = transports
        .iter()
        .map(|t| t["transport"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stdio", "http"]);
    for t in transports {
        for path in ["spool", "floor"] {
            let median = positive(&t[path], "median_us");
            let p99 = positive(&t[path], "p99_us");
            assert!(p99 >= median, "{t}");
        }
        // The ratio is spool's over the floor's, as rounded.
        let ratio = positive(t, "median_ratio");
        let expected =
            t["spool"]["median_us"].as_f64().unwrap() / t["floor"]["median_us"].as_f64().unwrap();
        assert!((ratio - expected).abs() < 0.01, "{t}");
        positive(t, "p99_ratio");
    }
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);

    let table = bench(&[]);
    let table = String::from_utf8(table.stdout).unwrap();
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 4, "{table}");
    assert!(rows[1].starts_with("transport"), "{table}");
    assert!(
        rows[2].starts_with("stdio ") && rows[2].ends_with('x'),
        "{table}"
    );
    assert!(
        rows[3].starts_with("http ") && rows[3].ends_with('x'),
        "{table}"
    );
}
