//! Stamped deltas: a model whose every delta says when it was emitted
//! (and, paced, when it was due), and reading the stamp back off a
//! client's frame. `bench server` and its two-server workload time
//! delivery with them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use spool_model::{ModelEvent, ModelProvider, ModelRequest, ModelStream, ScriptedProvider};

/// When a delta was emitted and, for a paced one, when it was due (in
/// nanoseconds since the bench's start).
pub(super) struct Stamp {
    pub(super) emitted: u64,
    pub(super) due: Option<u64>,
}

/// The stamp of an agent message delta: its text is `EMITTED ` or
/// `EMITTED/DUE ` (see [`Stamping`]).
pub(super) fn delta_stamp(frame: &str) -> Option<Stamp> {
    if !frame.contains("\"item/agentMessage/delta\"") {
        return None;
    }
    let at = frame.find("\"delta\":\"")? + "\"delta\":\"".len();
    let text = &frame[at..];
    let text = &text[..text.find(' ')?];
    let (emitted, due) = match text.split_once('/') {
        Some((emitted, due)) => (emitted, Some(due.parse().ok()?)),
        None => (text, None),
    };
    Some(Stamp {
        emitted: emitted.parse().ok()?,
        due,
    })
}

/// A model that answers every request with one assistant message of
/// `deltas` deltas. Each delta's text is the instant it was emitted, in
/// nanoseconds since `base`: `EMITTED ` when unpaced (a delta as soon as
/// the stream is polled), `EMITTED/DUE ` when paced (a delta every `pace`,
/// the first at a phase of its own within one period, so that many streams
/// do not tick together; `DUE` is when it was scheduled).
pub(super) struct Stamping {
    base: Instant,
    deltas: AtomicUsize,
    /// Nanoseconds between two deltas; 0: as fast as polled.
    pace_ns: AtomicU64,
    responses: AtomicUsize,
}

impl Stamping {
    pub(super) fn new() -> Self {
        Stamping {
            base: Instant::now(),
            deltas: AtomicUsize::new(1),
            pace_ns: AtomicU64::new(0),
            responses: AtomicUsize::new(0),
        }
    }

    pub(super) fn set_deltas(&self, deltas: usize) {
        self.deltas.store(deltas, Ordering::SeqCst);
    }

    pub(super) fn set_pace(&self, pace: Duration) {
        let ns = u64::try_from(pace.as_nanos()).unwrap_or(u64::MAX);
        self.pace_ns.store(ns, Ordering::SeqCst);
    }

    pub(super) fn now_ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl ModelProvider for Stamping {
    fn name(&self) -> &str {
        "bench"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let n = self.responses.fetch_add(1, Ordering::SeqCst);
        let deltas = vec!["x"; self.deltas.load(Ordering::SeqCst)];
        let script = ScriptedProvider::text_response(&format!("resp_{n}"), &deltas);
        let base = self.base;
        let inner = ScriptedProvider::new(vec![script]).stream(request);
        let pace = Duration::from_nanos(self.pace_ns.load(Ordering::SeqCst));
        if pace.is_zero() {
            return Box::pin(
                inner.map(move |event| restamp(event, format!("{} ", base.elapsed().as_nanos()))),
            );
        }
        // A phase in [0, pace) spread evenly over the streams.
        let phase = pace.mul_f64(((n * 7919) % 1000) as f64 / 1000.0);
        let first = tokio::time::Instant::now() + phase;
        let mut sent = 0u32;
        Box::pin(inner.then(move |event| {
            let due = match &event {
                Ok(ModelEvent::OutputTextDelta { .. }) => {
                    let due = first + pace * sent;
                    sent += 1;
                    Some(due)
                }
                _ => None,
            };
            async move {
                let Some(due) = due else {
                    return event;
                };
                tokio::time::sleep_until(due).await;
                let due_ns = due.into_std().saturating_duration_since(base).as_nanos();
                restamp(event, format!("{}/{due_ns} ", base.elapsed().as_nanos()))
            }
        }))
    }
}

/// A text delta with `stamp` for its text; any other event as it is.
fn restamp<E>(event: Result<ModelEvent, E>, stamp: String) -> Result<ModelEvent, E> {
    match event {
        Ok(ModelEvent::OutputTextDelta {
            item_id,
            output_index,
            ..
        }) => Ok(ModelEvent::OutputTextDelta {
            item_id,
            output_index,
            delta: stamp,
        }),
        other => other,
    }
}
