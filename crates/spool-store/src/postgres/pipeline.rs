//! Statements sent together, without waiting for each other's answers.
//!
//! A tokio-postgres client sends a request when its future is first
//! polled, and the connection answers requests in the order it got them.
//! [`Pipeline::run`] polls its steps in the order they were pushed, so
//! PostgreSQL receives them in that order and runs them one after the
//! other, as if each had been awaited before the next, for one round trip
//! instead of one per statement. Each step must send its request on its
//! first poll: a prepared statement (never one given as text, which is
//! prepared first, a round trip of its own that would let later steps
//! overtake it), or a simple query.
//!
//! Inside a transaction, a step that fails aborts it: the steps after it
//! fail too ("current transaction is aborted"), and a pipelined `COMMIT`
//! then rolls back. [`Pipeline::run`] answers the first step that failed,
//! which is the cause.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use super::PgError;

type Step<'a> = Pin<Box<dyn Future<Output = Result<(), PgError>> + Send + 'a>>;

/// Steps run in order, in one round trip.
#[derive(Default)]
pub(super) struct Pipeline<'a> {
    steps: Vec<Step<'a>>,
}

/// The first step of a pipeline that failed: its index and its error.
#[derive(Debug)]
pub(super) struct StepFailed {
    pub(super) index: usize,
    pub(super) error: PgError,
}

impl<'a> Pipeline<'a> {
    /// Adds a step; answers its index.
    pub(super) fn push<T>(
        &mut self,
        step: impl Future<Output = Result<T, PgError>> + Send + 'a,
    ) -> usize {
        self.steps
            .push(Box::pin(async move { step.await.map(drop) }));
        self.steps.len() - 1
    }

    /// Sends every step, then waits for all of them; the first that
    /// failed, if any (the steps after it are dropped, their answers
    /// discarded by the connection).
    pub(super) async fn run(self) -> Result<(), StepFailed> {
        let mut steps: Vec<Option<Step<'a>>> = self.steps.into_iter().map(Some).collect();
        std::future::poll_fn(move |cx| {
            let mut pending = false;
            for (index, slot) in steps.iter_mut().enumerate() {
                let Some(step) = slot else { continue };
                match step.as_mut().poll(cx) {
                    Poll::Ready(Ok(())) => *slot = None,
                    Poll::Ready(Err(error)) => {
                        return Poll::Ready(Err(StepFailed { index, error }));
                    }
                    Poll::Pending => pending = true,
                }
            }
            match pending {
                true => Poll::Pending,
                false => Poll::Ready(Ok(())),
            }
        })
        .await
    }
}
