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

/// Where the notices go.
#[derive(Clone)]
pub(super) struct Heard {
    pub(super) commits: broadcast::Sender<RemoteCommit>,
    /// A command may be waiting for this server.
    pub(super) commands: std::sync::Arc<tokio::sync::Notify>,
    /// Ids of commands this server forwarded that were answered.
    pub(super) replies: broadcast::Sender<String>,
}

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
    heard: Heard,
) {
    loop {
        if let Err(error) = listen_once(&config, tls.clone(), &me, &heard).await {
            tracing::warn!(%error, "the PostgreSQL listening connection ended; opening it again");
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

async fn listen_once(
    config: &Config,
    tls: MakeRustlsConnect,
    me: &str,
    heard: &Heard,
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
    client
        .batch_execute("LISTEN spool_events; LISTEN spool_commands; LISTEN spool_replies")
        .await?;
    // Whatever was said before the LISTEN took effect was not heard.
    let _ = heard.commits.send(RemoteCommit::Resync);
    heard.commands.notify_one();
    while let Some(notice) = received.recv().await {
        // No receiver (nobody follows a thread now) is not an error.
        match notice.channel() {
            "spool_events" => {
                if let Some(commit) = parse(notice.payload(), me) {
                    let _ = heard.commits.send(commit);
                }
            }
            "spool_commands" if addressee(notice.payload()) == Some(me) => {
                heard.commands.notify_one();
            }
            "spool_replies" => {
                if let Some(id) = notice
                    .payload()
                    .strip_prefix(me)
                    .and_then(|rest| rest.strip_prefix(' '))
                {
                    let _ = heard.replies.send(id.to_owned());
                }
            }
            _ => {}
        }
    }
    drop(client);
    match driver.await {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}

/// The server a `<server> <id>` notice is for.
fn addressee(payload: &str) -> Option<&str> {
    payload.split_once(' ').map(|(server, _)| server)
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
