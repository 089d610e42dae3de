//! The global allocator, and when it gives freed memory back to the system.
//!
//! The only `unsafe` in spool: three calls into mimalloc's C API, each with
//! the reason it is sound.
#![allow(unsafe_code)]

use std::time::Duration;

#[cfg(test)]
use libmimalloc_sys::mi_option_get;
use libmimalloc_sys::{mi_collect, mi_option_set, mi_option_t};

/// mimalloc: decoding JSON into `serde_json::Value`s (session reads, views)
/// is mostly small allocations, which glibc's allocator made the largest
/// cost in profiles of `get_items`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e`, which the Rust
/// bindings do not name. The test below pins it by its default (1,000 ms
/// in mimalloc 3.3's `options.c`), so a reordered enum fails the tests
/// instead of silently setting another option.
const PURGE_DELAY: mi_option_t = 15;

/// How long a free page stays mapped for reuse before it is given back.
///
/// Not 0 (give it back at once): a burst that frees its memory and then
/// allocates as much again (a session read of 10,000 items, then the next)
/// would fault every page in afresh, each zeroed by the kernel. With the
/// pages given back at once, `clear_page_erms` was a third of the samples
/// of `spool bench store --workloads c`, and (c) ran at 266,000–356,000
/// items/s against 488,000–550,000 with this delay (two alternating
/// rounds, `docs/internals/sessions.md`).
const PURGE_DELAY_MS: std::ffi::c_long = 250;

/// How often the purger thread gives back what is past the delay.
const PURGE_EVERY: Duration = Duration::from_secs(1);

/// Sets the purge delay, unless `MIMALLOC_PURGE_DELAY` in the environment
/// does.
pub fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mimalloc's option setters are not thread-safe; `main` calls
    // this before it starts any thread.
    unsafe { mi_option_set(PURGE_DELAY, PURGE_DELAY_MS) }
}

/// Starts the thread that gives back free pages past their delay.
///
/// mimalloc checks the delay only when some thread allocates or frees, so
/// a process gone idle would keep what it freed last for as long as it
/// stays idle (a server whose slow client was closed kept the 40–120 MiB
/// of replies queued for it). Once a second this thread asks for the
/// check; the pages of every thread are returned through the same arenas,
/// so one caller covers them all. Not started by a process that must stay
/// single-threaded (`sandbox-exec`).
pub fn start_purger() {
    let started = std::thread::Builder::new()
        .name("spool-purge".to_owned())
        .spawn(|| {
            loop {
                std::thread::sleep(PURGE_EVERY);
                // SAFETY: `mi_collect` may be called from any thread at any
                // time; unforced, it frees this thread's own empty pages and
                // purges the arenas' expired ranges.
                unsafe { mi_collect(false) }
            }
        });
    if let Err(error) = started {
        // Memory is still given back whenever a thread allocates.
        eprintln!("warning: cannot start the allocator's purger thread: {error}");
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    #[test]
    fn the_purge_delay_option_is_the_one_that_defaults_to_a_second() {
        // The test binary has mimalloc as its allocator too, and nothing
        // here has called `configure`.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: reading an option only loads its value.
            let delay = unsafe { super::mi_option_get(super::PURGE_DELAY) };
            assert_eq!(delay, 1000);
        }
    }

    /// This process's heap in MiB (`spool_testkit::memory::heap_mib`),
    /// read into a buffer allocated beforehand: an allocation that needs a
    /// fresh page could purge on its own and hide whether the purger did
    /// (opening the file allocates only its path, a few bytes).
    fn heap_mib(buffer: &mut [u8]) -> u64 {
        let mut file = std::fs::File::open("/proc/self/smaps_rollup").unwrap();
        let mut len = 0;
        loop {
            let read = file.read(&mut buffer[len..]).unwrap();
            if read == 0 {
                break;
            }
            len += read;
        }
        spool_testkit::memory::heap_mib(std::str::from_utf8(&buffer[..len]).unwrap())
    }

    #[test]
    fn an_idle_process_gives_freed_memory_back() {
        // nextest runs each test in a process of its own, so nothing else
        // allocates here meanwhile; under `cargo test` other tests could
        // purge for the purger, which only makes this pass sooner.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        super::configure();
        super::start_purger();
        let mut buffer = vec![0u8; 1 << 16];
        let before = heap_mib(&mut buffer);
        // 256 MiB in blocks of 16 KiB, touched, then all freed.
        let blocks: Vec<Vec<u8>> = (0..16_384).map(|_| vec![1u8; 16 << 10]).collect();
        let full = heap_mib(&mut buffer);
        drop(std::hint::black_box(blocks));
        // Nothing allocates from here on: only the purger can give the
        // pages back, within the delay and one period of its own.
        let mut now = heap_mib(&mut buffer);
        for _ in 0..20 {
            if now < before + 64 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
            now = heap_mib(&mut buffer);
        }
        assert!(
            full >= before + 200 && now < before + 64,
            "heap before {before} MiB, with the blocks {full} MiB, 5 s after freeing them {now} MiB"
        );
    }
}
