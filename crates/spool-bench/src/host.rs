//! What the host took from this machine while a workload ran.
//!
//! On a virtual machine the hypervisor may run other guests on the cores
//! this one thinks it has; the time it does is the "steal" of `/proc/stat`.
//! A run taken while the host was busy is slower for reasons no code of
//! spool's has, and on a shared 2-core VM such runs are common (a paced
//! p99 of 5.7 ms for the relay floor, whose usual is under 1). The benches
//! report the share stolen during each run beside its figures, so a reader
//! can tell a slow run from a slow server.

/// CPU time of the whole machine, all cores, in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostClock {
    total: u64,
    steal: u64,
}

impl HostClock {
    /// Now, or `None` where `/proc/stat` cannot be read (not Linux).
    pub fn now() -> Option<HostClock> {
        parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The share of CPU time, in percent, that was stolen between `self`
    /// and now; `None` without `/proc/stat` or when no tick passed.
    pub fn steal_pct(self) -> Option<f64> {
        self.steal_pct_until(HostClock::now()?)
    }

    fn steal_pct_until(self, later: HostClock) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let steal = later.steal.checked_sub(self.steal)?;
        (total > 0).then(|| (steal as f64 * 1000.0 / total as f64).round() / 10.0)
    }
}

/// `, N% of the CPU stolen by the host`, for a run's line on stderr; nothing
/// when the share is unknown.
pub fn stolen(pct: Option<f64>) -> String {
    pct.map_or(String::new(), |pct| {
        format!(", {pct}% of the CPU stolen by the host")
    })
}

/// The `cpu` line of `/proc/stat`: user, nice, system, idle, iowait, irq,
/// softirq, steal, then guest and guest_nice, which user and nice already
/// count. Kernels before 2.6.11 have no steal field: then it is 0.
fn parse(stat: &str) -> Option<HostClock> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_ascii_whitespace()
        .skip(1)
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if fields.len() < 4 {
        return None;
    }
    Some(HostClock {
        total: fields.iter().sum(),
        steal: fields.get(7).copied().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_its_share_of_every_tick_guests_not_counted_twice() {
        let before = parse("cpu  100 0 50 800 10 0 5 35 7 0\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(
            before,
            HostClock {
                total: 1000,
                steal: 35
            }
        );
        // 400 ticks later, 100 of them stolen.
        let after = parse("cpu  200 0 100 950 10 0 5 135 9 0\n").unwrap();
        assert_eq!(before.steal_pct_until(after), Some(25.0));
        assert_eq!(before.steal_pct_until(before), None);
    }

    #[test]
    fn a_kernel_without_steal_reports_none_stolen_and_garbage_nothing() {
        assert_eq!(
            parse("cpu  10 0 5 85\n"),
            Some(HostClock {
                total: 100,
                steal: 0
            })
        );
        assert_eq!(parse("cpu  10 x 5 85\n"), None);
        assert_eq!(parse("intr 1 2 3\n"), None);
    }

    #[test]
    fn this_machine_has_a_clock() {
        if cfg!(target_os = "linux") {
            let now = HostClock::now().expect("/proc/stat");
            assert!(now.total > 0);
        }
    }
}
