//! The global allocator, and when it gives freed memory back to the system.
//!
//! The only `unsafe` in spool: two calls into mimalloc's C API, each with
//! the reason it is sound.
#![allow(unsafe_code)]

#[cfg(test)]
use libmimalloc_sys::mi_option_get;
use libmimalloc_sys::{mi_option_set, mi_option_t};

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

/// Free pages are given back at once rather than after mimalloc's default
/// second. The delay is only checked when the thread that owns the pages
/// allocates or frees again, so a server gone idle (a slow client closed,
/// its megabytes of unsent replies dropped) kept 40-120 MiB it no longer
/// used, for as long as it stayed idle. `MIMALLOC_PURGE_DELAY` in the
/// environment still wins.
pub fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mimalloc's option setters are not thread-safe; `main` calls
    // this before it starts any thread.
    unsafe { mi_option_set(PURGE_DELAY, 0) }
}

#[cfg(test)]
mod tests {
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
}
