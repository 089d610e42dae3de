//! Rows ⇄ records, for every backend. Every decode failure becomes
//! [`StoreError::CorruptRow`] naming the table, thread, seq and item: a bad
//! row is never skipped and never a panic.
//!
//! A backend reads columns through [`Cells`] (by index, in the order of the
//! column lists its SQL names); the decoding itself, and every encoding,
//! is one code for all backends, so what a row means cannot differ between
//! them.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;
use spool_core::llm::{INPUT_ITEM_KEY, ReasoningIdPolicy, input_items, is_cut_point};
use spool_core::{ItemRecord, TurnRecord};
use spool_protocol::{
    HistoryMode, ItemEnvelope, ItemStatus, ServerNotification, Thread, ThreadEvent, ThreadItem,
    TurnStatus,
};

use crate::error::{CorruptRow, DecodeCause, StoreError};
use crate::input_json::{InputJson, RowAt};
use crate::types::{PendingRequest, StoredHistory, ThreadRecord};

mod encode;
pub(crate) mod filing;
mod json_text;
mod log_row;
pub(crate) use encode::*;
use filing::thread_item;
pub(crate) use log_row::{Bodies, decode_log_row};

/// One row of a backend's result, read by column index.
pub(crate) trait Cells {
    fn text(&self, idx: usize) -> Result<&str, DecodeCause>;
    fn opt_text(&self, idx: usize) -> Result<Option<&str>, DecodeCause>;
    fn int(&self, idx: usize) -> Result<i64, DecodeCause>;
    fn opt_int(&self, idx: usize) -> Result<Option<i64>, DecodeCause>;
    /// A boolean column (SQLite stores it as an integer).
    fn flag(&self, idx: usize) -> Result<bool, DecodeCause>;
}

/// Where a row came from, for the error if it cannot be decoded.
struct RowContext<'a> {
    table: &'static str,
    thread_id: &'a str,
    seq: Option<u64>,
    item_id: Option<&'a str>,
}

impl RowContext<'_> {
    fn corrupt(&self, column: &'static str, cause: impl Into<DecodeCause>) -> StoreError {
        StoreError::CorruptRow(Box::new(CorruptRow {
            table: self.table,
            thread_id: self.thread_id.to_owned(),
            seq: self.seq,
            item_id: self.item_id.map(str::to_owned),
            column,
            cause: cause.into(),
        }))
    }

    fn text<'r, R: Cells + ?Sized>(
        &self,
        row: &'r R,
        idx: usize,
        column: &'static str,
    ) -> Result<&'r str, StoreError> {
        row.text(idx).map_err(|e| self.corrupt(column, e))
    }

    fn opt_text<'r, R: Cells + ?Sized>(
        &self,
        row: &'r R,
        idx: usize,
        column: &'static str,
    ) -> Result<Option<&'r str>, StoreError> {
        row.opt_text(idx).map_err(|e| self.corrupt(column, e))
    }

    fn int<R: Cells + ?Sized>(
        &self,
        row: &R,
        idx: usize,
        column: &'static str,
    ) -> Result<i64, StoreError> {
        row.int(idx).map_err(|e| self.corrupt(column, e))
    }

    fn opt_int<R: Cells + ?Sized>(
        &self,
        row: &R,
        idx: usize,
        column: &'static str,
    ) -> Result<Option<i64>, StoreError> {
        row.opt_int(idx).map_err(|e| self.corrupt(column, e))
    }

    fn flag<R: Cells + ?Sized>(
        &self,
        row: &R,
        idx: usize,
        column: &'static str,
    ) -> Result<bool, StoreError> {
        row.flag(idx).map_err(|e| self.corrupt(column, e))
    }

    fn unsigned<R: Cells + ?Sized>(
        &self,
        row: &R,
        idx: usize,
        column: &'static str,
    ) -> Result<u64, StoreError> {
        let value = self.int(row, idx, column)?;
        u64::try_from(value).map_err(|e| self.corrupt(column, e))
    }

    fn json<T: DeserializeOwned, R: Cells + ?Sized>(
        &self,
        row: &R,
        idx: usize,
        column: &'static str,
    ) -> Result<T, StoreError> {
        let text = self.text(row, idx, column)?;
        serde_json::from_str(text).map_err(|e| self.corrupt(column, e))
    }

    fn opt_json<T: DeserializeOwned, R: Cells + ?Sized>(
        &self,
        row: &R,
        idx: usize,
        column: &'static str,
    ) -> Result<Option<T>, StoreError> {
        match self.opt_text(row, idx, column)? {
            Some(text) => serde_json::from_str(text)
                .map(Some)
                .map_err(|e| self.corrupt(column, e)),
            None => Ok(None),
        }
    }
}

/// An item row (see [`item_columns`]) of `thread_id`.
pub(crate) fn decode_item<R: Cells + ?Sized>(
    row: &R,
    thread_id: &str,
) -> Result<ItemRecord, StoreError> {
    let mut cx = RowContext {
        table: "items",
        thread_id,
        seq: None,
        item_id: None,
    };
    cx.seq = Some(cx.unsigned(row, 0, "seq")?);
    let item_id = cx.text(row, 1, "item_id")?;
    cx.item_id = Some(item_id);
    let turn_id = cx.text(row, 2, "turn_id")?.to_owned();
    let ordinal = cx.unsigned(row, 3, "ordinal")?;
    let input_item = cx.opt_json::<Value, R>(row, 7, "input_item")?;
    let item = match (cx.text(row, 4, "item")?, &input_item) {
        (DERIVED_ITEM, Some(raw)) => thread_item(item_id.to_owned(), raw),
        (DERIVED_ITEM, None) => {
            return Err(cx.corrupt("item", "empty, and the row has no raw input item"));
        }
        (text, _) => {
            let item: ThreadItem = serde_json::from_str(text).map_err(|e| cx.corrupt("item", e))?;
            if item.id() != item_id {
                let cause = format!("the item JSON has id {:?}", item.id());
                return Err(cx.corrupt("item", cause));
            }
            item
        }
    };
    let envelope_text = cx.text(row, 5, "envelope")?;
    let mut envelope: ItemEnvelope = match envelope_text.as_bytes().first() {
        // JSON: an envelope is an object.
        Some(b'{') => serde_json::from_str(envelope_text).map_err(|e| cx.corrupt("envelope", e))?,
        // The time of a derived envelope (`encode.rs`).
        _ => {
            let at_ms: i64 = envelope_text
                .parse()
                .map_err(|e| cx.corrupt("envelope", format!("neither JSON nor a time: {e}")))?;
            if input_item.is_none() {
                return Err(cx.corrupt(
                    "envelope",
                    "a time alone, and the row has no raw input item",
                ));
            }
            derived_envelope(&item, at_ms)
        }
    };
    if let Some(input_item) = input_item {
        join_input_item(&mut envelope, input_item);
    }
    let token_count = match cx.opt_int(row, 6, "token_count")? {
        Some(count) => Some(u32::try_from(count).map_err(|e| cx.corrupt("token_count", e))?),
        None => None,
    };
    Ok(ItemRecord {
        thread_id: thread_id.to_owned(),
        turn_id,
        ordinal,
        seq: cx.seq.unwrap_or_default(),
        item,
        envelope,
        token_count,
    })
}

/// The raw input item of an item row (see [`item_columns`]), if it has
/// one. Only that column is decoded; the seq and item id are read only to
/// name the row in an error.
pub(crate) fn decode_input_item<T: InputJson, R: Cells + ?Sized>(
    row: &R,
    thread_id: &str,
) -> Result<Option<T>, StoreError> {
    let cx = RowContext {
        table: "items",
        thread_id,
        seq: None,
        item_id: None,
    };
    let Some(text) = cx.opt_text(row, 7, "input_item")? else {
        return Ok(None);
    };
    let at = || RowAt {
        seq: cx.unsigned(row, 0, "seq").ok(),
        item_id: cx.text(row, 1, "item_id").ok(),
    };
    T::parse(text, at)
        .map(Some)
        .map_err(|cause| corrupt_input_item(thread_id, at(), cause))
}

/// The error for an `items` row whose raw input item is not JSON.
pub(crate) fn corrupt_input_item(
    thread_id: &str,
    at: RowAt<'_>,
    cause: serde_json::Error,
) -> StoreError {
    let cx = RowContext {
        table: "items",
        thread_id,
        seq: at.seq,
        item_id: at.item_id,
    };
    cx.corrupt("input_item", cause)
}

/// A turn row (see [`turn_columns`]) of `thread_id`, read from `table`
/// (SQLite keeps turns among the rows of `items`, PostgreSQL in `turns`).
pub(crate) fn decode_turn<R: Cells + ?Sized>(
    row: &R,
    thread_id: &str,
    table: &'static str,
) -> Result<TurnRecord, StoreError> {
    let mut cx = RowContext {
        table,
        thread_id,
        seq: None,
        item_id: None,
    };
    let seq = cx.unsigned(row, 0, "seq")?;
    cx.seq = Some(seq);
    let id = cx.text(row, 1, "turn_id")?.to_owned();
    let ordinal = cx.unsigned(row, 2, "ordinal")?;
    let status_text = cx.text(row, 3, "status")?;
    let status = parse_turn_status(status_text)
        .ok_or_else(|| cx.corrupt("status", format!("unknown turn status {status_text:?}")))?;
    Ok(TurnRecord {
        thread_id: thread_id.to_owned(),
        id,
        status,
        error: cx.opt_json(row, 4, "error")?,
        started_at: cx.opt_int(row, 5, "started_at")?,
        completed_at: cx.opt_int(row, 6, "completed_at")?,
        duration_ms: cx.opt_int(row, 7, "duration_ms")?,
        token_usage: cx.opt_json(row, 8, "token_usage")?,
        ordinal,
        seq,
    })
}

/// A thread row (see [`thread_columns`]).
pub(crate) fn decode_thread<R: Cells + ?Sized>(row: &R) -> Result<ThreadRecord, StoreError> {
    let mut cx = RowContext {
        table: "threads",
        thread_id: "(unreadable id)",
        seq: None,
        item_id: None,
    };
    let id = cx.text(row, 0, "id")?;
    cx.thread_id = id;
    let last_seq = cx.unsigned(row, 13, "last_seq")?;
    cx.seq = Some(last_seq);
    let history_text = cx.text(row, 7, "history_mode")?;
    let history_mode = parse_history_mode(history_text).ok_or_else(|| {
        cx.corrupt(
            "history_mode",
            format!("unknown history mode {history_text:?}"),
        )
    })?;
    let mut thread = Thread::new(
        id,
        cx.text(row, 3, "model_provider")?,
        cx.text(row, 5, "cwd")?,
        cx.int(row, 11, "created_at_ms")?.div_euclid(1000),
    );
    thread.preview = cx.text(row, 2, "preview")?.to_owned();
    thread.updated_at = cx.int(row, 12, "updated_at_ms")?.div_euclid(1000);
    thread.cli_version = cx.text(row, 6, "cli_version")?.to_owned();
    thread.name = cx.opt_text(row, 1, "name")?.map(str::to_owned);
    thread.forked_from_id = cx.opt_text(row, 9, "forked_from_id")?.map(str::to_owned);
    thread.history_owner = Some(history_mode);
    thread.model = cx.opt_text(row, 4, "model")?.map(str::to_owned);
    thread.ephemeral = cx.flag(row, 14, "ephemeral")?;
    Ok(ThreadRecord {
        thread,
        dev_mode: cx.flag(row, 8, "dev_mode")?,
        archived: cx.flag(row, 10, "archived")?,
        last_seq,
    })
}

/// An event row's seq and time, and the context for its errors.
fn event_head<'a, R: Cells + ?Sized>(
    row: &R,
    thread_id: &'a str,
) -> Result<(u64, i64, RowContext<'a>), StoreError> {
    let mut cx = RowContext {
        table: "events",
        thread_id,
        seq: None,
        item_id: None,
    };
    let seq = cx.unsigned(row, 0, "seq")?;
    cx.seq = Some(seq);
    let at_ms = cx.int(row, 1, "at_ms")?;
    Ok((seq, at_ms, cx))
}

/// An event row (see [`event_columns`]) of `thread_id`.
pub(crate) fn decode_event<R: Cells + ?Sized>(
    row: &R,
    thread_id: &str,
) -> Result<ThreadEvent, StoreError> {
    let (seq, at_ms, cx) = event_head(row, thread_id)?;
    let payload: ServerNotification = cx.json(row, 2, "payload")?;
    if payload.thread_id() != thread_id {
        let cause = format!("the payload belongs to thread {:?}", payload.thread_id());
        return Err(cx.corrupt("payload", cause));
    }
    Ok(ThreadEvent {
        thread_id: thread_id.to_owned(),
        seq,
        at_ms,
        payload,
    })
}

/// A `pending_requests` row: request id, thread id, turn id, item id,
/// request, created at, answer, resolved at.
pub(crate) fn decode_pending_request<R: Cells + ?Sized>(
    row: &R,
) -> Result<PendingRequest, StoreError> {
    let mut cx = RowContext {
        table: "pending_requests",
        thread_id: "(unreadable id)",
        seq: None,
        item_id: None,
    };
    let thread_id = cx.text(row, 1, "thread_id")?;
    cx.thread_id = thread_id;
    let request_id = cx.text(row, 0, "request_id")?;
    cx.item_id = Some(request_id);
    let mut request: spool_protocol::ServerRequest = cx.json(row, 4, "request")?;
    let created_at_ms = cx.int(row, 5, "created_at_ms")?;
    // Rows written before approvals carried their start time.
    request.stamp_started_at(created_at_ms);
    Ok(PendingRequest {
        request_id: request_id.to_owned(),
        thread_id: thread_id.to_owned(),
        turn_id: cx.text(row, 2, "turn_id")?.to_owned(),
        item_id: cx.text(row, 3, "item_id")?.to_owned(),
        request,
        created_at_ms,
        answer: cx.opt_json(row, 6, "answer")?,
        resolved_at_ms: cx.opt_int(row, 7, "resolved_at_ms")?,
    })
}

/// A `history_cursors` row of `thread_id`: cursor, conversation id.
pub(crate) fn decode_history<R: Cells + ?Sized>(
    row: &R,
    thread_id: &str,
) -> Result<StoredHistory, StoreError> {
    let cx = RowContext {
        table: "history_cursors",
        thread_id,
        seq: None,
        item_id: None,
    };
    Ok(StoredHistory {
        cursor: cx.json(row, 0, "cursor")?,
        conversation_id: cx.opt_text(row, 1, "conversation_id")?.map(str::to_owned),
    })
}

/// The input items of an item row, oldest first: its raw input item (the
/// Session API's), or the record converted as the model view converts it. True when the row is a
/// finished compaction: nothing older is in the view.
pub(crate) fn push_input_items<T: InputJson, R: Cells + ?Sized>(
    row: &R,
    thread_id: &str,
    out: &mut Vec<T>,
) -> Result<bool, StoreError> {
    if let Some(raw) = decode_input_item(row, thread_id)? {
        out.push(raw);
        return Ok(false);
    }
    push_converted(row, thread_id, out)
}

/// The input items of a row without a raw item: the record, converted.
fn push_converted<T: InputJson, R: Cells + ?Sized>(
    row: &R,
    thread_id: &str,
    out: &mut Vec<T>,
) -> Result<bool, StoreError> {
    let record = decode_item(row, thread_id)?;
    for item in input_items(&record, ReasoningIdPolicy::Preserve) {
        let value = T::from_item(&item).map_err(|source| StoreError::Encode {
            what: "input item",
            source,
        })?;
        out.push(value);
    }
    Ok(is_cut_point(&record))
}

/// Puts a raw input item read from its column back where it came from.
fn join_input_item(envelope: &mut ItemEnvelope, input_item: Value) {
    match envelope.provider_data.as_mut().map(Arc::make_mut) {
        Some(Value::Object(data)) => {
            data.insert(INPUT_ITEM_KEY.to_owned(), input_item);
        }
        // Only object payloads are split (`encode_item_json`), so a row with a
        // raw item has an object or nothing here.
        Some(_) | None => {
            let mut data = serde_json::Map::new();
            data.insert(INPUT_ITEM_KEY.to_owned(), input_item);
            envelope.provider_data = Some(Arc::new(Value::Object(data)));
        }
    }
}

/// Integer column value of a seq, ordinal or count. Values beyond
/// `i64::MAX` cannot occur (seqs count events), so saturating is only a
/// guard against a panic, not a case to handle.
pub(crate) fn sql_int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The envelope status as the `items.status` column spells it.
pub(crate) fn parse_item_status(text: &str) -> Option<ItemStatus> {
    const ALL: [ItemStatus; 5] = [
        ItemStatus::InProgress,
        ItemStatus::Completed,
        ItemStatus::Incomplete,
        ItemStatus::Failed,
        ItemStatus::Declined,
    ];
    ALL.into_iter().find(|status| status.as_str() == text)
}

pub(crate) fn parse_turn_status(text: &str) -> Option<TurnStatus> {
    const ALL: [TurnStatus; 4] = [
        TurnStatus::InProgress,
        TurnStatus::Completed,
        TurnStatus::Interrupted,
        TurnStatus::Failed,
    ];
    ALL.into_iter().find(|status| status.as_str() == text)
}

fn parse_history_mode(text: &str) -> Option<HistoryMode> {
    const ALL: [HistoryMode; 3] = [
        HistoryMode::Replay,
        HistoryMode::PreviousResponseId,
        HistoryMode::ConversationId,
    ];
    ALL.into_iter().find(|mode| mode.as_str() == text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parse tables list every variant: each one round-trips through
    /// the serde spelling, which is what `as_str` writes.
    #[test]
    fn status_and_mode_spellings_round_trip() {
        for status in [
            TurnStatus::InProgress,
            TurnStatus::Completed,
            TurnStatus::Interrupted,
            TurnStatus::Failed,
        ] {
            assert_eq!(parse_turn_status(status.as_str()), Some(status));
            let json = serde_json::to_value(status).unwrap();
            assert_eq!(json.as_str(), Some(status.as_str()));
        }
        for status in [
            ItemStatus::InProgress,
            ItemStatus::Completed,
            ItemStatus::Incomplete,
            ItemStatus::Failed,
            ItemStatus::Declined,
        ] {
            assert_eq!(parse_item_status(status.as_str()), Some(status));
            let json = serde_json::to_value(status).unwrap();
            assert_eq!(json.as_str(), Some(status.as_str()));
        }
        for mode in [
            HistoryMode::Replay,
            HistoryMode::PreviousResponseId,
            HistoryMode::ConversationId,
        ] {
            assert_eq!(parse_history_mode(mode.as_str()), Some(mode));
            let json = serde_json::to_value(mode).unwrap();
            assert_eq!(json.as_str(), Some(mode.as_str()));
        }
    }
}
