//! `spool bench live` with tiny sizes: the real binary serves a real
//! client over stdio and WebSocket against the bench's loopback model
//! server, and so does its relay floor over stdio, and the report holds
//! every figure, with sane values. The
//! numbers themselves are not judged (that is the release benchmark's job).

mod support;

use serde_json::Value;

fn positive(value: &Value, key: &str) -> f64 {
    let v = value[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {value}"));
    assert!(v > 0.0 && v.is_finite(), "{key} = {v}");
    v
}

#[test]
fn live_bench_streams_over_both_transports() {
    let (report, _) = support::bench_report(&[
        "bench",
        "live",
        "--deltas",
        "50,120",
        "--streams",
        "3",
        "--paced-deltas",
        "5",
        "--pace-ms",
        "2",
    ]);
    assert_eq!(report["workload"], "live");
    let runs = report["runs"].as_array().unwrap();
    let seen: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| {
            (
                r["server"].as_str().unwrap(),
                r["transport"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("spool", "stdio"),
            ("relay", "stdio"),
            ("spool", "websocket")
        ]
    );
    for run in runs {
        let request = positive(run, "first_turn_request_ms");
        assert!(
            positive(run, "first_turn_first_delta_ms") >= request,
            "{run}"
        );
        positive(run, "later_turn_first_delta_ms");
        let throughput = run["throughput"].as_array().unwrap();
        let sizes: Vec<u64> = throughput
            .iter()
            .map(|t| t["deltas"].as_u64().unwrap())
            .collect();
        assert_eq!(sizes, [50, 120]);
        for t in throughput {
            // Every delta arrived, one notification each.
            assert_eq!(t["notifications"], t["deltas"], "{t}");
            positive(t, "deltas_per_s");
            positive(t, "turn_ms");
            assert!(t["cpu_us_per_delta"].as_f64().unwrap() >= 0.0, "{t}");
        }
        let paced = run["paced"].as_array().unwrap();
        let streams: Vec<u64> = paced
            .iter()
            .map(|p| p["streams"].as_u64().unwrap())
            .collect();
        assert_eq!(streams, [1, 3]);
        for p in paced {
            let p50 = positive(p, "p50_ms");
            assert!(positive(p, "p99_ms") >= p50, "{p}");
        }
    }
}
