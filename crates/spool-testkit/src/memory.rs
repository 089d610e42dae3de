//! A process's heap as a test weighs it: anonymous memory less what is
//! already given back lazily.

/// From the text of `/proc/PID/smaps_rollup`: anonymous memory less
/// `LazyFree` (pages given back with `MADV_FREE`, still resident until the
/// kernel needs them, but free), in MiB. Panics on a text without those
/// fields.
pub fn heap_mib(smaps_rollup: &str) -> u64 {
    let field = |name: &str| -> u64 {
        smaps_rollup
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap_or_else(|| panic!("{name} in smaps_rollup"))
    };
    (field("Anonymous:") - field("LazyFree:")) / 1024
}

#[cfg(test)]
mod tests {
    #[test]
    fn anonymous_memory_less_lazy_free_in_mib() {
        let text = "Rss:  9000 kB\nAnonymous:   5120 kB\nLazyFree:   1024 kB\n";
        assert_eq!(super::heap_mib(text), 4);
    }
}
