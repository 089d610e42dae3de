//! When a PostgreSQL group commit waits a moment for more appends
//! (`writer.rs` runs the commits).

use std::time::Duration;

/// The longest a group commit waits for more appends (`Linger`).
pub(super) const LINGER: Duration = Duration::from_micros(500);

/// Commits after a wait that was in vain during which none waits.
const LINGER_BACKOFF: u32 = 64;

/// Whether a group commit waits a moment for more appends before it
/// commits. When the last commit wrote several threads, their callers are
/// likely to append again at once (each waits for its answer, then sends
/// its next append): a commit that begins with an append waits, at most
/// [`LINGER`], until appends of as many threads are in, and so carries
/// their appends instead of leaving them to the next commit. A thread
/// alone never waits (its caller is the one being answered), nor does a
/// commit after a wait in vain (callers pacing themselves, such as a
/// model's deltas, would only be delayed), for [`LINGER_BACKOFF`]
/// commits. A wait is in vain when it ran out with fewer than half of the
/// threads it waited for in: one slow caller among many does not stop the
/// others from being carried together.
#[derive(Debug, Default)]
pub(super) struct Linger {
    threads: usize,
    skip: u32,
}

impl Linger {
    /// How many threads' appends the next commit waits for.
    pub(super) fn threads(&self) -> usize {
        match self.skip {
            0 if self.threads > 1 => self.threads,
            _ => 0,
        }
    }

    /// A commit of `threads` threads is being made, after waiting for
    /// `waited_for` of them (0: it did not wait); whether the wait ran out.
    pub(super) fn after(&mut self, threads: usize, waited_for: usize, ran_out: bool) {
        self.threads = threads;
        let in_vain = waited_for > 0 && ran_out && threads * 2 <= waited_for;
        self.skip = match in_vain {
            true => LINGER_BACKOFF,
            false => self.skip.saturating_sub(1),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::{LINGER_BACKOFF, Linger};

    #[test]
    fn a_commit_waits_for_the_threads_of_the_last_until_a_wait_is_in_vain() {
        let mut linger = Linger::default();
        assert_eq!(linger.threads(), 0, "nothing answered yet");
        linger.after(1, 0, false);
        assert_eq!(linger.threads(), 0, "a thread alone never waits");
        linger.after(8, 0, false);
        assert_eq!(linger.threads(), 8);
        linger.after(5, 8, true);
        assert_eq!(linger.threads(), 5, "5 of 8 came: not in vain");
        linger.after(8, 5, false);
        linger.after(4, 8, true);
        for _ in 0..LINGER_BACKOFF {
            assert_eq!(linger.threads(), 0, "no wait after one in vain");
            linger.after(8, 0, false);
        }
        assert_eq!(linger.threads(), 8, "waits again after the backoff");
    }
}
