//! Commands forwarded between servers (`docs/internals/replicas.md`,
//! "Commands"): a request that appends to a thread another server holds
//! is inserted as a `commands` row and its holder told (`NOTIFY
//! spool_commands`); the holder claims it, runs it as if a client of its
//! own had asked, and writes the reply (`NOTIFY spool_replies`), which
//! the forwarding server gives its client.
//!
//! A command is claimed by the server holding its thread, or by any
//! server when nobody holds it (its holder died, or let it go): that
//! server then takes the thread over to run it. A takeover also frees the
//! claims a lost holder left unfinished (`holder.rs`), so a command whose
//! holder died before it took effect runs on the new holder. One that had
//! taken effect (`applied_at`, set in the transaction of its first events:
//! `Store::forward_applying`) is never run twice: the takeover ends it
//! with an error saying so.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::handle::PgStore;
use super::query::Query;
use crate::error::StoreError;

/// A command forwarded to this server, claimed by it.
#[derive(Debug, Clone, PartialEq)]
pub struct Forwarded {
    pub id: String,
    pub thread_id: String,
    /// A JSON-RPC method and its params, as a client sent them.
    pub method: String,
    pub params: Value,
}

/// A forwarded command's reply: what its JSON-RPC reply carries.
#[derive(Debug, Clone, PartialEq)]
pub enum ForwardReply {
    Result(Value),
    Error { code: i64, message: String },
}

/// How often a waiting forwarder reads its command's row anyway (a
/// notice may be lost), and how often claimable commands are looked for.
pub(super) const POLL: Duration = Duration::from_secs(1);

/// The longest a forwarder waits for a reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

const HELD_ELSEWHERE: &str = "SELECT holder FROM thread_leases \
     WHERE thread_id = $1 AND holder <> $2 AND expires_at > now()";
const INSERT: &str = "WITH c AS (INSERT INTO commands (id, thread_id, method, params, from_server) \
     VALUES ($1, $2, $3, $4, $5) RETURNING id) \
     SELECT pg_notify('spool_commands', $6 || ' ' || c.id) FROM c";
const REPLY: &str = "SELECT reply, error FROM commands WHERE id = $1 AND done_at IS NOT NULL";
/// Commands of threads this server holds, or that nobody holds.
const CLAIM: &str = "UPDATE commands c SET claimed_by = $1 \
     WHERE c.done_at IS NULL AND c.claimed_by IS NULL AND c.id IN ( \
       SELECT c2.id FROM commands c2 LEFT JOIN thread_leases l ON l.thread_id = c2.thread_id \
       WHERE c2.done_at IS NULL AND c2.claimed_by IS NULL \
         AND (l.thread_id IS NULL OR l.expires_at <= now() OR l.holder = $1) \
       ORDER BY c2.created_at LIMIT 64 FOR UPDATE OF c2 SKIP LOCKED) \
     RETURNING c.id, c.thread_id, c.method, c.params";
const DONE: &str = "WITH c AS (UPDATE commands SET done_at = now(), reply = $2, error = $3 \
     WHERE id = $1 RETURNING from_server, id) \
     SELECT pg_notify('spool_replies', c.from_server || ' ' || c.id) FROM c";

pub(super) async fn held_elsewhere(
    q: &impl Query,
    thread_id: &str,
    me: &str,
) -> Result<Option<String>, StoreError> {
    Ok(q.opt_row(HELD_ELSEWHERE, &[&thread_id, &me])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?)
}

/// Inserts the command for `holder`, then waits for its reply, told by
/// `replies` (ids of answered commands) and read from the row every
/// [`POLL`] anyway.
pub(super) async fn forward(
    q: &impl Query,
    me: &str,
    holder: &str,
    thread_id: &str,
    method: &str,
    params: &Value,
    mut replies: tokio::sync::broadcast::Receiver<String>,
) -> Result<ForwardReply, StoreError> {
    let id = uuid::Uuid::now_v7().to_string();
    let params_json = crate::codec::encode("forwarded params", params)?;
    q.rows(
        INSERT,
        &[&id, &thread_id, &method, &params_json, &me, &holder],
    )
    .await?;
    let deadline = tokio::time::Instant::now() + REPLY_TIMEOUT;
    loop {
        if let Some(row) = q.opt_row(REPLY, &[&id]).await? {
            let reply: Option<String> = row.try_get(0)?;
            let error: Option<String> = row.try_get(1)?;
            return decode_reply(&id, thread_id, reply.as_deref(), error.as_deref());
        }
        let wait = async {
            loop {
                match replies.recv().await {
                    Ok(answered) if answered == id => return,
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        let until = deadline.min(tokio::time::Instant::now() + POLL);
        let _ = tokio::time::timeout_at(until, wait).await;
        if tokio::time::Instant::now() >= deadline {
            return Err(StoreError::ForwardTimeout {
                thread_id: thread_id.to_owned(),
                waited: REPLY_TIMEOUT,
            });
        }
    }
}

fn decode_reply(
    id: &str,
    thread_id: &str,
    reply: Option<&str>,
    error: Option<&str>,
) -> Result<ForwardReply, StoreError> {
    let corrupt = |column: &'static str, cause: String| {
        StoreError::CorruptRow(Box::new(crate::error::CorruptRow {
            table: "commands",
            thread_id: thread_id.to_owned(),
            seq: None,
            item_id: Some(id.to_owned()),
            column,
            cause: cause.into(),
        }))
    };
    match (reply, error) {
        (Some(reply), None) => serde_json::from_str(reply)
            .map(ForwardReply::Result)
            .map_err(|e| corrupt("reply", e.to_string())),
        (None, Some(error)) => {
            let value: Value =
                serde_json::from_str(error).map_err(|e| corrupt("error", e.to_string()))?;
            Ok(ForwardReply::Error {
                code: value["code"].as_i64().unwrap_or(-32603),
                message: value["message"].as_str().unwrap_or_default().to_owned(),
            })
        }
        _ => Err(corrupt("reply", "neither a reply nor an error".to_owned())),
    }
}

/// Claims what commands this server may run now.
pub(super) async fn claim(q: &impl Query, me: &str) -> Result<Vec<Forwarded>, StoreError> {
    q.rows(CLAIM, &[&me])
        .await?
        .iter()
        .map(|row| {
            let params: String = row.try_get(3)?;
            Ok(Forwarded {
                id: row.try_get(0)?,
                thread_id: row.try_get(1)?,
                method: row.try_get(2)?,
                params: serde_json::from_str(&params).unwrap_or(Value::Null),
            })
        })
        .collect()
}

/// The error that ends a command whose holder died after it took effect
/// (`holder.rs`), as the `error` column holds it.
pub(super) fn ended_by_takeover() -> String {
    serde_json::json!({
        "code": spool_protocol::jsonrpc::error_codes::INTERNAL_ERROR,
        "message": "the server running this request stopped after it took effect, \
                    before answering; it is not run again: read the thread to see what it did",
    })
    .to_string()
}

/// Records a command's reply and tells the server that forwarded it.
pub(super) async fn done(q: &impl Query, id: &str, reply: &ForwardReply) -> Result<(), StoreError> {
    let (result, error) = match reply {
        ForwardReply::Result(value) => (Some(value.to_string()), None),
        ForwardReply::Error { code, message } => (
            None,
            Some(serde_json::json!({"code": code, "message": message}).to_string()),
        ),
    };
    q.rows(DONE, &[&id, &result, &error]).await?;
    Ok(())
}

/// Claims commands for `store`'s server as they are announced (`wake`) and
/// every [`POLL`] anyway, sending them on, until the receiver is dropped.
pub(super) fn spawn_claims(
    store: PgStore,
    wake: Arc<tokio::sync::Notify>,
) -> tokio::sync::mpsc::UnboundedReceiver<Forwarded> {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while !sender.is_closed() {
            let claimed = match store.client().await {
                Ok(client) => claim(&client, store.server_id()).await,
                Err(error) => Err(error),
            };
            match claimed {
                Ok(claimed) => {
                    for command in claimed {
                        if sender.send(command).is_err() {
                            return;
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "cannot claim forwarded commands"),
            }
            let _ = tokio::time::timeout(POLL, wake.notified()).await;
        }
    });
    receiver
}
