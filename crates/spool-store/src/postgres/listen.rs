//! Commits of other servers, as they happen: the writer of every server
//! sends `NOTIFY spool_events, '<server> <last seq> <thread>'` in each
//! commit (PostgreSQL delivers it when the commit does), and one
//! connection per store `LISTEN`s.
//!
//! A notification only says when to read: a consumer reads the log by
//! cursor (`Store::events_after`), so a lost or late notification delays
//! an event and never loses one. When the listening connection drops,
//! it is opened again and [`RemoteCommit::Resync`] tells consumers that
//! notices may have been missed, so they read every thread they follow.

use std::time::Duration;

use tokio::sync::{broadcast, mpsc};
use tokio_postgres::{AsyncMessage, Config, Notification};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::PgError;

/// The channel the writers notify.
pub(super) const CHANNEL: &str = "spool_events";

/// What [`crate::Store::remote_commits`] tells: another server committed
/// events of a thread, or notices may have been missed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteCommit {
    /// `thread_id`'s log now ends at `last_seq` (or later).
    Commit { thread_id: String, last_seq: u64 },
    /// Notices may have been missed (the listening connection was opened
    /// again): read every thread followed.
    Resync,
}

/// How long to wait before opening the listening connection again.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// Listens until the store is dropped (the task is aborted then), passing
/// on what other servers than `me` commit.
pub(super) async fn listen(
    config: Config,
    tls: MakeRustlsConnect,
    me: std::sync::Arc<str>,
    commits: broadcast::Sender<RemoteCommit>,
) {
    loop {
        if let Err(error) = listen_once(&config, tls.clone(), &me, &commits).await {
            tracing::warn!(%error, "the PostgreSQL listening connection ended; opening it again");
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

async fn listen_once(
    config: &Config,
    tls: MakeRustlsConnect,
    me: &str,
    commits: &broadcast::Sender<RemoteCommit>,
) -> Result<(), PgError> {
    let (client, mut connection) = config.connect(tls).await?;
    let (notices, mut received) = mpsc::unbounded_channel::<Notification>();
    // The connection yields notifications only when polled for messages.
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(notice))) => {
                    if notices.send(notice).is_err() {
                        return Ok(());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error),
                None => return Ok(()),
            }
        }
    });
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    // Whatever was committed before the LISTEN took effect was not heard.
    let _ = commits.send(RemoteCommit::Resync);
    while let Some(notice) = received.recv().await {
        if let Some(commit) = parse(notice.payload(), me) {
            // No receiver (nobody follows a thread now) is not an error.
            let _ = commits.send(commit);
        }
    }
    drop(client);
    match driver.await {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}

/// `<server> <last seq> <thread>` (the thread id last: it may hold
/// spaces), unless the server is `me`.
fn parse(payload: &str, me: &str) -> Option<RemoteCommit> {
    let mut parts = payload.splitn(3, ' ');
    let (server, last_seq, thread_id) = (parts.next()?, parts.next()?, parts.next()?);
    if server == me || thread_id.is_empty() {
        return None;
    }
    Some(RemoteCommit::Commit {
        thread_id: thread_id.to_owned(),
        last_seq: last_seq.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_of_other_servers_are_parsed_and_ones_own_are_not() {
        assert_eq!(
            parse("b 42 t-1", "a"),
            Some(RemoteCommit::Commit {
                thread_id: "t-1".to_owned(),
                last_seq: 42
            })
        );
        assert_eq!(
            parse("b 7 a session id", "a"),
            Some(RemoteCommit::Commit {
                thread_id: "a session id".to_owned(),
                last_seq: 7
            })
        );
        assert_eq!(parse("a 42 t-1", "a"), None);
        assert_eq!(parse("b 42", "a"), None);
        assert_eq!(parse("b 42 ", "a"), None);
        assert_eq!(parse("b x t-1", "a"), None);
    }
}
