//! A run's questions to people: a server → client request goes to every
//! connection watching the thread, the first answer wins ([`HubClient`]);
//! with nobody watching, the run pauses, the request durable in the store,
//! and an answer given later resumes it ([`Hub::answer_paused`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};

use spool_protocol::*;
use spool_runtime::ClientRequests;
use spool_store::{Appended, PendingRequest, Store};
use tokio::sync::{mpsc, oneshot};

use super::{Delivery, Hub, HubError};

/// A run in this process waiting for the answer to one of its requests.
pub(super) struct Waiting {
    pub(super) thread_id: String,
    answer: oneshot::Sender<ServerRequestAnswer>,
}

impl Hub {
    /// A client's answer to a server request, given to the run waiting on it
    /// in this process. `Invalid` when no run is waiting (the run paused, or
    /// the server restarted): the caller then records the answer and resumes
    /// the paused run with [`Hub::answer_paused`].
    pub async fn answer(
        self: &Arc<Self>,
        request_id: &str,
        answer: ServerRequestAnswer,
    ) -> Result<(), HubError> {
        if self.hand_to_waiting_run(request_id, answer) {
            return Ok(());
        }
        Err(HubError::Invalid(format!(
            "no run is waiting on request {request_id}"
        )))
    }

    /// Gives `answer` to the run waiting on `request_id` in this process;
    /// false when none is.
    fn hand_to_waiting_run(&self, request_id: &str, answer: ServerRequestAnswer) -> bool {
        let waiting = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(request_id);
        match waiting {
            Some(waiting) => {
                let _ = waiting.answer.send(answer);
                true
            }
            None => false,
        }
    }

    /// Records an answer for a paused run's request (the run is not waiting
    /// in this process) and resumes the run.
    pub async fn answer_paused(
        self: &Arc<Self>,
        thread_id: &str,
        request_id: &str,
        answer: ServerRequestAnswer,
    ) -> Result<(), HubError> {
        let json = serde_json::to_value(&answer).map_err(|e| HubError::Invalid(e.to_string()))?;
        // The thread runs on another server (PostgreSQL): the answer goes
        // there, or to whichever server takes the thread over if that one
        // died (`forward.rs`).
        if let Some(holder) = self.store.held_elsewhere(thread_id).await? {
            return crate::forward::forward_answer(self, &holder, thread_id, request_id, json)
                .await;
        }
        let resolved = self
            .store
            .resolve_request(thread_id, request_id, json)
            .await?;
        self.broadcast(thread_id, Delivery::Event(Appended::Logged(resolved.event)));
        // A run that asked it meanwhile (a resumed run, between reading the
        // store and waiting) takes it now.
        if self.hand_to_waiting_run(request_id, answer) {
            return Ok(());
        }
        self.resume_paused(thread_id).await
    }

    /// Resumes a thread's paused run if it has one and it is not running.
    pub async fn resume_paused(self: &Arc<Self>, thread_id: &str) -> Result<(), HubError> {
        if self.store.run_states(thread_id).await?.is_empty() {
            return Ok(());
        }
        // Another server holds the thread (PostgreSQL): the run goes on
        // there, when its answer reaches it (`forward.rs`).
        if self.store.held_elsewhere(thread_id).await?.is_some() {
            return Ok(());
        }
        let Some(launch) = self.claim(thread_id) else {
            return Ok(());
        };
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let thread = thread_id.to_owned();
        let run = tokio::spawn(async move {
            let runner = launch.hub.runner(&thread);
            runner
                .resume(launch.agent, &thread, &events_tx, launch.stop)
                .await
        });
        self.forward(thread_id.to_owned(), events_rx, run, String::new());
        Ok(())
    }
}

/// How a run on the hub asks its questions.
pub(super) struct HubClient {
    pub(super) hub: Arc<Hub>,
    pub(super) thread_id: String,
}

impl ClientRequests for HubClient {
    fn ask<'a>(
        &'a self,
        request: &'a PendingRequest,
    ) -> Pin<Box<dyn Future<Output = Option<ServerRequestAnswer>> + Send + 'a>> {
        Box::pin(async move {
            let (answer_tx, answer_rx) = oneshot::channel();
            self.hub
                .waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(
                    request.request_id.clone(),
                    Waiting {
                        thread_id: self.thread_id.clone(),
                        answer: answer_tx,
                    },
                );
            // Answered and recorded since the run read the store (the
            // answer found nobody waiting): take that answer.
            if let Ok(Some(stored)) = self
                .hub
                .store
                .request(&self.thread_id, &request.request_id)
                .await
                && let Some(answer) = stored.answer.clone()
                && let Ok(answer) = crate::answers::answer_of(&stored.request, answer)
            {
                self.hub
                    .waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&request.request_id);
                return Some(answer);
            }
            let asked = self
                .hub
                .broadcast(&self.thread_id, Delivery::Request(request.clone()));
            if asked == 0 {
                // Nobody to ask: the run pauses; the request is durable.
                self.hub
                    .waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&request.request_id);
                return None;
            }
            answer_rx.await.ok()
        })
    }
}
