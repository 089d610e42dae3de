//! What a durable relay floor has sent and not yet kept, grouped as spool
//! groups its delta commits: a group is due [`SYNC_WITHIN`] after its
//! first entry was sent, and the thread that keeps the groups sleeps until
//! then.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How soon after it was sent an entry is kept: spool's default group
/// commit delay for deltas.
pub(super) const SYNC_WITHIN: Duration = Duration::from_millis(5);

/// Entries sent and not yet taken, and when the first of them was.
pub(super) struct Unsynced<T> {
    state: Mutex<(Vec<T>, Option<Instant>)>,
    wake: Condvar,
}

impl<T> Unsynced<T> {
    pub(super) fn new() -> Self {
        Unsynced {
            state: Mutex::new((Vec::new(), None)),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, (Vec<T>, Option<Instant>)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds what was just sent; the first entry of a group wakes the
    /// keeping thread.
    pub(super) fn push(&self, entries: impl IntoIterator<Item = T>) {
        let mut state = self.lock();
        state.0.extend(entries);
        if state.1.is_none() {
            state.1 = Some(Instant::now());
            self.wake.notify_one();
        }
    }

    /// Blocks until a group has waited [`SYNC_WITHIN`] since its first
    /// entry was sent.
    pub(super) fn wait_due(&self) {
        let state = self.lock();
        let state = self
            .wake
            .wait_while(state, |state| state.1.is_none())
            .unwrap_or_else(|p| p.into_inner());
        // `wait_while` returns only once the group has a first entry.
        let Some(since) = state.1 else { return };
        drop(state);
        std::thread::sleep((since + SYNC_WITHIN).saturating_duration_since(Instant::now()));
    }

    /// Moves every entry waiting into `group` (empty), starting a new group.
    pub(super) fn take(&self, group: &mut Vec<T>) {
        let mut state = self.lock();
        std::mem::swap(group, &mut state.0);
        state.1 = None;
    }
}
