//! `spool bench live` with tiny sizes: the real binary serves a real
//! client over stdio and WebSocket against the bench's loopback model
//! server, and so do its relay floors over stdio, and the report holds
//! every figure, with sane values, and `--paced-log` a line per paced
//! delta. The numbers themselves are not judged (that is the release
//! benchmark's job).

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
    let dir = tempfile::tempdir().unwrap();
    let paced_log = dir.path().join("paced.log");
    let (report, _) = support::bench_report(&[
        "bench",
        "live",
        "--deltas",
        "50,120",
        "--runs",
        "2",
        "--timed-deltas",
        "150",
        "--streams",
        "3",
        "--paced-deltas",
        "5",
        "--pace-ms",
        "2",
        "--paced-log",
        paced_log.to_str().unwrap(),
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
            ("durable-relay", "stdio"),
            ("store-relay", "stdio"),
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
            positive(t, "first_delta_ms");
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
            assert!(p["cpu_us_per_delta"].as_f64().unwrap() >= 0.0, "{p}");
        }
    }
    // One line per paced delta of every server: 5 with one stream, 15
    // with three, each naming its server, stream and place.
    let log = std::fs::read_to_string(&paced_log).unwrap();
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), runs.len() * 20, "{log}");
    for (server, transport) in &seen {
        let of = |streams: &str| {
            lines
                .iter()
                .filter(|l| l[0] == *server && l[1] == *transport && l[2] == streams)
                .count()
        };
        assert_eq!((of("1"), of("3")), (5, 15), "{server} {transport}");
    }
    for line in &lines {
        assert_eq!(line.len(), 7, "{line:?}");
        let latency: f64 = line[6].parse().unwrap();
        assert!(latency > 0.0, "{line:?}");
    }
}
