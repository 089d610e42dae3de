//! What spool keeps beside rmcp's session with a server: the progress of
//! the calls in flight, whether the transport closed, and whether the
//! server said its tools changed.
//!
//! All three are read where messages come off the transport, not in a
//! client handler's `on_progress` and `on_tool_list_changed`: rmcp runs
//! each notification's handler in a task of its own (`tokio::spawn` per
//! notification), so on a runtime with several workers two of them run in
//! either order (the scheduler runs the task spawned last first: a test
//! calling `progress` saw step 42 before step 41 so), and the answer to a
//! call can reach its caller before the handlers of the notifications sent
//! ahead of it ran. Read off the transport, in rmcp's service loop, they
//! are seen in the order the server sent them, every one sent before an
//! answer before that answer reaches its call. Questions the server asks
//! go through the client handler (`elicit.rs`); sampling is not offered.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{JsonRpcMessage, ProgressToken, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

use super::McpProgress;

/// Notifications kept for tokens no call waits for yet: a server can answer
/// with progress before the call that sent the request has subscribed (the
/// request is on its way before rmcp hands back its token). Bounded, the
/// oldest dropped first, since notifications for tokens no call will ever
/// wait for (those of `tools/list`, or of a call already over) land here
/// too.
const EARLY_CAPACITY: usize = 64;

/// Notifications queued for one call: its task hands them to the caller's
/// callback as it runs. Past this, a server flooding progress loses the
/// newest ones, not memory.
const CALL_CAPACITY: usize = 1024;

/// The session's state spool reads: shared by the connection and the
/// transport's tap.
#[derive(Debug, Default)]
pub(crate) struct Session {
    progress: Mutex<Routes>,
    /// The transport ended: the server exited, or closed the connection.
    closed: AtomicBool,
    tools_changed: AtomicBool,
}

#[derive(Debug, Default)]
struct Routes {
    waiting: HashMap<ProgressToken, mpsc::Sender<McpProgress>>,
    early: VecDeque<(ProgressToken, McpProgress)>,
}

impl Session {
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub fn tools_changed(&self) -> bool {
        self.tools_changed.load(Ordering::Acquire)
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `progress` to the call waiting for `token`, or keeps it for
    /// one that will.
    fn route(&self, token: ProgressToken, progress: McpProgress) {
        let mut routes = self.routes();
        if let Some(call) = routes.waiting.get(&token) {
            if call.try_send(progress).is_err() {
                tracing::debug!(?token, "progress dropped: the call is behind");
            }
            return;
        }
        if routes.early.len() == EARLY_CAPACITY {
            routes.early.pop_front();
        }
        routes.early.push_back((token, progress));
    }

    /// The progress of the request `token` was sent with, from now on and
    /// what came before: until the returned subscription is dropped.
    pub fn subscribe(self: &Arc<Self>, token: ProgressToken) -> Subscription {
        let (sender, receiver) = mpsc::channel(CALL_CAPACITY);
        let mut routes = self.routes();
        // Under the same lock as `route`: nothing is routed between the
        // draining and the subscribing, so nothing is missed or reordered.
        let early = std::mem::take(&mut routes.early);
        for (early_token, progress) in early {
            if early_token == token {
                let _ = sender.try_send(progress);
            } else {
                routes.early.push_back((early_token, progress));
            }
        }
        routes.waiting.insert(token.clone(), sender);
        Subscription {
            session: self.clone(),
            token,
            receiver,
        }
    }
}

/// One call's progress; unsubscribes when dropped.
pub(crate) struct Subscription {
    session: Arc<Session>,
    token: ProgressToken,
    pub receiver: mpsc::Receiver<McpProgress>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.session.routes().waiting.remove(&self.token);
    }
}

/// A transport that routes progress as it is read, and notes a change of
/// tools and its own end.
pub(crate) struct Tap<T> {
    pub inner: T,
    pub session: Arc<Session>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Tap<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await;
        match &message {
            None => self.session.closed.store(true, Ordering::Release),
            Some(JsonRpcMessage::Notification(notification)) => match &notification.notification {
                ServerNotification::ProgressNotification(progress) => {
                    let params = &progress.params;
                    self.session.route(
                        params.progress_token.clone(),
                        McpProgress {
                            progress: params.progress,
                            total: params.total,
                            message: params.message.clone(),
                        },
                    );
                }
                ServerNotification::ToolListChangedNotification(_) => {
                    self.session.tools_changed.store(true, Ordering::Release);
                }
                _ => {}
            },
            Some(_) => {}
        }
        message
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;

    use super::*;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    fn update(n: u32) -> McpProgress {
        McpProgress {
            progress: f64::from(n),
            total: None,
            message: Some(format!("step {n}")),
        }
    }

    fn received(subscription: &mut Subscription) -> Vec<McpProgress> {
        std::iter::from_fn(|| subscription.receiver.try_recv().ok()).collect()
    }

    #[test]
    fn progress_sent_before_the_call_subscribed_is_kept_for_it_in_order() {
        let session = Arc::new(Session::default());
        session.route(token(1), update(1));
        session.route(token(2), update(10));
        session.route(token(1), update(2));
        let mut first = session.subscribe(token(1));
        session.route(token(1), update(3));
        assert_eq!(received(&mut first), [update(1), update(2), update(3)]);
        // Another call's progress waits for that call.
        let mut second = session.subscribe(token(2));
        assert_eq!(received(&mut second), [update(10)]);
        // Once a call is over, its progress goes nowhere it could be seen.
        drop(first);
        session.route(token(1), update(4));
        assert!(received(&mut second).is_empty());
    }

    #[test]
    fn progress_no_call_waits_for_is_bounded_and_the_oldest_goes_first() {
        let session = Arc::new(Session::default());
        session.route(token(7), update(1));
        for n in 0..EARLY_CAPACITY {
            session.route(token(100 + n as i64), update(2));
        }
        assert_eq!(session.routes().early.len(), EARLY_CAPACITY);
        // The oldest was dropped to make room; the newest is kept.
        assert!(received(&mut session.subscribe(token(7))).is_empty());
        let newest = token(100 + EARLY_CAPACITY as i64 - 1);
        assert_eq!(received(&mut session.subscribe(newest)), [update(2)]);
    }
}
