//! The JSON that `spool bench store` prints, and the arithmetic behind it.
//!
//! Every workload reports its raw run times, so a reader can judge the
//! spread, and a headline `value` in the unit that fits it. `per_s` is always
//! operations per second of the median run, which is what the compare script
//! divides to get a speed ratio, whatever the headline unit.

use serde::Serialize;

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub machine: Machine,
    pub settings: Settings,
    pub items: ItemsInfo,
    pub workloads: Vec<WorkloadReport>,
    /// (a) against the floor (h), when both ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_vs_floor: Option<Target>,
    /// (b) against the batch floor (i), when both ran: how far (b) is from
    /// the best one row per item allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_vs_batch_floor: Option<Target>,
    /// Median time ratios splitting (a) and (b) into the cost of spool's
    /// code and of its layout (see `layout_floor.rs`), when the workloads
    /// involved ran.
    #[serde(skip_serializing_if = "LayoutSplit::is_empty")]
    pub layout: LayoutSplit,
}

/// (a) over (j) and (j) over (h), with (a) over (m) and (m) over (j)
/// splitting (a)'s share into the rest of the code and the hand-offs
/// (see `handoff_floor.rs`); (b) over (k) and (k) over (i); (e) over (l),
/// on each backend, split on SQLite into (e) over (r) and (r) over (l)
/// (`group_floor.rs`); the reads (c), (d) and (n) over their read floors
/// (q), (o) and (p) (`read_floor.rs`).
#[derive(Debug, Default, Serialize)]
pub struct LayoutSplit {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_vs_layout_floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_vs_handoff_floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff_floor_vs_layout_floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout_floor_a_vs_floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_vs_layout_floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout_floor_b_vs_batch_floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e_vs_layout_floor: Option<f64>,
    /// (e) over its group-commit floor (r).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e_vs_group_floor: Option<f64>,
    /// (r) over (l): what the groups waiting callers form cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_floor_vs_layout_floor: Option<f64>,
    /// (e) over (l), both on PostgreSQL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e_vs_layout_floor_postgres: Option<f64>,
    /// (c) over its read floor (q).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c_vs_read_floor: Option<f64>,
    /// (d) over its read floor (o).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub d_vs_read_floor: Option<f64>,
    /// (n) over its read floor (p).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_vs_read_floor: Option<f64>,
}

impl LayoutSplit {
    fn is_empty(&self) -> bool {
        self.a_vs_layout_floor.is_none()
            && self.a_vs_handoff_floor.is_none()
            && self.handoff_floor_vs_layout_floor.is_none()
            && self.layout_floor_a_vs_floor.is_none()
            && self.b_vs_layout_floor.is_none()
            && self.layout_floor_b_vs_batch_floor.is_none()
            && self.e_vs_layout_floor.is_none()
            && self.e_vs_group_floor.is_none()
            && self.group_floor_vs_layout_floor.is_none()
            && self.e_vs_layout_floor_postgres.is_none()
            && self.c_vs_read_floor.is_none()
            && self.d_vs_read_floor.is_none()
            && self.n_vs_read_floor.is_none()
    }
}

#[derive(Debug, Serialize)]
pub struct Settings {
    pub runs: usize,
    pub quick: bool,
    /// The directory each run's fresh store file is created under.
    pub dir: String,
    pub durability: &'static str,
}

/// Which items were stored, so the compare script can check the Python
/// side used the very same ones.
#[derive(Debug, Serialize)]
pub struct ItemsInfo {
    pub count: usize,
    pub fnv1a64: String,
}

#[derive(Debug, Serialize)]
pub struct WorkloadReport {
    pub name: &'static str,
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    pub description: String,
    /// How many operations one run times, and what one operation is.
    pub ops: usize,
    pub op: &'static str,
    /// Seconds of the timed part of each run, in the order they ran.
    pub runs_s: Vec<f64>,
    pub median_s: f64,
    /// Operations per second of the median run.
    pub per_s: f64,
    /// The headline number and its unit (e.g. items/s, or ms for a latency).
    pub value: f64,
    pub unit: &'static str,
    /// Untimed context worth seeing next to the number (e.g. the cold call
    /// of (g)), by name.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
}

/// A target of the store and whether this run met it.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// `>=` or `<=`.
    pub op: &'static str,
    pub value: f64,
    pub unit: &'static str,
    pub measured: f64,
    pub holds: bool,
}

impl Target {
    pub fn at_least(value: f64, unit: &'static str, measured: f64) -> Self {
        Target {
            op: ">=",
            value,
            unit,
            measured,
            holds: measured >= value,
        }
    }

    pub fn at_most(value: f64, unit: &'static str, measured: f64) -> Self {
        Target {
            op: "<=",
            value,
            unit,
            measured,
            holds: measured <= value,
        }
    }
}

/// The median; for an even count, the mean of the middle two.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The nearest-rank percentile of `values` (`p` in 0..=1); NaN when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `value` rounded to `digits` decimals: finer digits are noise.
pub fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// What the numbers were measured on.
#[derive(Debug, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu: Option<String>,
    pub os: String,
    pub kernel: Option<String>,
    pub arch: &'static str,
    pub spool_version: &'static str,
    /// `release` or `debug`: debug numbers are not worth comparing.
    pub build_profile: &'static str,
    pub sqlite_version: &'static str,
    /// How an idle CPU waits (the `cpuidle` driver, and for `haltpoll`
    /// how long a guest polls before it halts): on a VM whose idle CPUs
    /// halt at once, every wake-up of a thread on an idle CPU costs tens
    /// of microseconds, which the hand-offs and the paced workloads pay.
    pub cpu_idle: Option<String>,
}

impl Machine {
    pub fn probe() -> Self {
        let os_release = std::fs::read_to_string("/etc/os-release").ok();
        let pretty = os_release.as_deref().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_owned())
        });
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|text| {
                    text.lines()
                        .find_map(|l| l.strip_prefix("model name"))
                        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
                }),
            os: pretty.unwrap_or_else(|| std::env::consts::OS.to_owned()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|v| v.trim().to_owned()),
            arch: std::env::consts::ARCH,
            spool_version: env!("CARGO_PKG_VERSION"),
            build_profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            sqlite_version: rusqlite::version(),
            cpu_idle: cpu_idle(
                read_trimmed("/sys/devices/system/cpu/cpuidle/current_driver").as_deref(),
                read_trimmed("/sys/module/haltpoll/parameters/guest_halt_poll_ns").as_deref(),
            ),
        }
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_owned())
}

/// `haltpoll, guest polls up to 0 ns before it halts`, or the driver alone.
fn cpu_idle(driver: Option<&str>, halt_poll_ns: Option<&str>) -> Option<String> {
    let driver = driver.filter(|d| !d.is_empty())?;
    Some(match halt_poll_ns {
        Some(ns) if driver == "haltpoll" => {
            format!("{driver}, guest polls up to {ns} ns before it halts")
        }
        _ => driver.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_idle_names_the_driver_and_a_guests_halt_polling() {
        assert_eq!(
            cpu_idle(Some("haltpoll"), Some("0")).as_deref(),
            Some("haltpoll, guest polls up to 0 ns before it halts")
        );
        assert_eq!(
            cpu_idle(Some("intel_idle"), Some("200000")).as_deref(),
            Some("intel_idle")
        );
        assert_eq!(
            cpu_idle(Some("acpi_idle"), None).as_deref(),
            Some("acpi_idle")
        );
        assert_eq!(cpu_idle(Some(""), Some("0")), None);
        assert_eq!(cpu_idle(None, None), None);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn nearest_rank_percentile() {
        let values: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        assert_eq!(percentile(&values, 0.9), 9.0);
        assert_eq!(percentile(&values, 1.0), 10.0);
        assert_eq!(percentile(&[5.0], 0.9), 5.0);
        assert!(percentile(&[], 0.9).is_nan());
    }
}
