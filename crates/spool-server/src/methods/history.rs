//! `thread/turns/list` and `thread/items/list`: a thread's history one page
//! at a time, in either direction, with spool's `view` and `tokens`.
//!
//! A cursor names a place in the thread (the seq that started a turn or an
//! item) and is exclusive: a page holds what comes after it in the page's
//! direction. `nextCursor` names the page's last entry (`null` when nothing
//! follows); `backwardsCursor` names its first, so passing it with the
//! opposite direction pages back over what came before (`null` on an empty
//! page). Cursors are opaque to clients; one that does not parse is -32602.

use std::sync::Arc;

use spool_core::ItemRecord;
use spool_core::llm::{LlmViewOptions, Offered, Packer, ReasoningIdPolicy, input_items};
use spool_core::tokens::{count_input_item, count_text};
use spool_core::{TurnRecord, View};
use spool_protocol::*;
use spool_store::Store;

use super::{MethodError, Reply, history_turns, reply, thread_record};
use crate::connection::ConnectionState;
use crate::hub::Hub;

const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 1_000;

/// Which kind of place a cursor names.
#[derive(Clone, Copy)]
pub(super) enum Place {
    Turn,
    Item,
}

impl Place {
    fn tag(self) -> char {
        match self {
            Place::Turn => 't',
            Place::Item => 'i',
        }
    }
}

pub(super) fn cursor(place: Place, ordinal: u64) -> String {
    format!("{}{ordinal}", place.tag())
}

fn parse_cursor(place: Place, cursor: Option<&str>) -> Result<Option<u64>, MethodError> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    cursor
        .strip_prefix(place.tag())
        .and_then(|n| n.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| MethodError::invalid_params(format!("invalid cursor {cursor:?}")))
}

/// The token cost of one entry.
type Cost<'a, T> = &'a dyn Fn(&T) -> u64;

/// One page and its two cursors.
struct Page<T> {
    data: Vec<T>,
    next_cursor: Option<String>,
    backwards_cursor: Option<String>,
}

/// Pages `entries` (oldest first) from `after` in `direction`: at most
/// `limit` entries, and no more than `budget` tokens by `cost` (the first
/// entry always goes in, so paging never stalls).
fn paginate<T>(
    entries: Vec<T>,
    ordinal: impl Fn(&T) -> u64,
    place: Place,
    direction: SortDirection,
    after: Option<u64>,
    limit: u32,
    budget: Option<(u64, Cost<'_, T>)>,
) -> Page<T> {
    let limit = limit.clamp(1, MAX_LIMIT) as usize;
    let mut ordered: Vec<T> = match direction {
        SortDirection::Asc => entries
            .into_iter()
            .filter(|e| after.is_none_or(|after| ordinal(e) > after))
            .collect(),
        SortDirection::Desc => entries
            .into_iter()
            .rev()
            .filter(|e| after.is_none_or(|after| ordinal(e) < after))
            .collect(),
    };
    let mut taken = 0;
    let mut spent = 0u64;
    while taken < ordered.len() && taken < limit {
        if let Some((budget, cost)) = &budget {
            let next = cost(&ordered[taken]);
            if taken > 0 && spent + next > *budget {
                break;
            }
            spent += next;
        }
        taken += 1;
    }
    let more = ordered.len() > taken;
    ordered.truncate(taken);
    Page {
        next_cursor: more
            .then(|| ordered.last().map(|e| cursor(place, ordinal(e))))
            .flatten(),
        backwards_cursor: ordered.first().map(|e| cursor(place, ordinal(e))),
        data: ordered,
    }
}

fn view_of(view: Option<ItemsView>) -> View {
    view.unwrap_or_default().into()
}

/// Tokens of one item: of its model input, or (for an item the model
/// never sees) of its JSON.
fn item_tokens(record: &ItemRecord) -> u64 {
    if let Some(count) = record.token_count {
        return u64::from(count);
    }
    let input = input_items(record, ReasoningIdPolicy::Preserve);
    if input.is_empty() {
        let json = serde_json::to_string(&record.item).unwrap_or_default();
        return count_text(&json) as u64;
    }
    input.iter().map(|i| u64::from(count_input_item(i))).sum()
}

/// Whether this client may see the item (spool's kinds only with opt-in).
fn shown_to(state: &ConnectionState, record: &ItemRecord) -> bool {
    state.capabilities.spool_items || record.item.kind().is_codex_kind()
}

pub(super) async fn turns_list(
    hub: &Arc<Hub>,
    state: &ConnectionState,
    params: ThreadTurnsListParams,
) -> Result<Reply, MethodError> {
    let after = parse_cursor(Place::Turn, params.cursor.as_deref())?;
    thread_record(hub, &params.thread_id).await?;
    let turns: Vec<(TurnRecord, Vec<ItemRecord>)> =
        history_turns(hub, &params.thread_id, view_of(params.view))
            .await?
            .into_iter()
            .map(|(turn, items)| {
                let items = items.into_iter().filter(|r| shown_to(state, r)).collect();
                (turn, items)
            })
            .collect();
    let cost = |(_, items): &(TurnRecord, Vec<ItemRecord>)| items.iter().map(item_tokens).sum();
    let page = paginate(
        turns,
        |(turn, _)| turn.ordinal,
        Place::Turn,
        params.sort_direction.unwrap_or(SortDirection::Desc),
        after,
        params.limit.unwrap_or(DEFAULT_LIMIT),
        params
            .tokens
            .map(|budget| (budget, &cost as &dyn Fn(&_) -> u64)),
    );
    let items_view = params.items_view.unwrap_or(TurnItemsView::Summary);
    let data = page
        .data
        .into_iter()
        .map(|(turn, items)| {
            let items: Vec<ThreadItem> = items.into_iter().map(|r| r.item).collect();
            let mut turn = turn.to_turn(match items_view {
                TurnItemsView::NotLoaded => Vec::new(),
                TurnItemsView::Summary => summary(items),
                TurnItemsView::Full => items,
            });
            turn.items_view = items_view;
            turn
        })
        .collect();
    reply(ThreadTurnsListResponse {
        data,
        next_cursor: page.next_cursor,
        backwards_cursor: page.backwards_cursor,
    })
}

/// A turn in brief: its first user message and its last agent message.
fn summary(items: Vec<ThreadItem>) -> Vec<ThreadItem> {
    let first_user = items
        .iter()
        .position(|i| matches!(i, ThreadItem::UserMessage { .. }));
    let last_agent = items
        .iter()
        .rposition(|i| matches!(i, ThreadItem::AgentMessage { .. }));
    items
        .into_iter()
        .enumerate()
        .filter(|(index, _)| Some(*index) == first_user || Some(*index) == last_agent)
        .map(|(_, item)| item)
        .collect()
}

pub(super) async fn items_list(
    hub: &Arc<Hub>,
    state: &ConnectionState,
    params: ThreadItemsListParams,
) -> Result<Reply, MethodError> {
    let after = parse_cursor(Place::Item, params.cursor.as_deref())?;
    thread_record(hub, &params.thread_id).await?;
    let view = view_of(params.view);
    let mut records = hub.store().items(&params.thread_id, view).await?;
    if let Some(turn_id) = &params.turn_id {
        let turns = hub.store().turns(&params.thread_id).await?;
        if !turns.iter().any(|turn| &turn.id == turn_id) {
            return Err(MethodError::invalid_params(format!(
                "thread {} has no turn {turn_id}",
                params.thread_id
            )));
        }
        records.retain(|r| &r.turn_id == turn_id);
    }
    // The model's view packs whole turns under the budget, newest first;
    // the other views page item by item under it.
    let mut budget = params.tokens;
    if view == View::Llm
        && let Some(tokens) = budget.take()
    {
        records = pack_turns(records, tokens);
    }
    records.retain(|r| shown_to(state, r));
    let cost = |record: &ItemRecord| item_tokens(record);
    let page = paginate(
        records,
        |record| record.ordinal,
        Place::Item,
        params.sort_direction.unwrap_or(SortDirection::Asc),
        after,
        params.limit.unwrap_or(DEFAULT_LIMIT),
        budget.map(|budget| (budget, &cost as Cost<'_, _>)),
    );
    let envelopes = state.capabilities.spool_items;
    let data = page
        .data
        .into_iter()
        .map(|record| ThreadItemEntry {
            turn_id: record.turn_id,
            item: record.item,
            envelope: envelopes.then_some(record.envelope),
        })
        .collect();
    reply(ThreadItemsListResponse {
        data,
        next_cursor: page.next_cursor,
        backwards_cursor: page.backwards_cursor,
    })
}

/// The records (in the model's view, oldest first) of the newest whole
/// turns that fit in `tokens`, as the model view packs them (the newest
/// turn always goes in).
fn pack_turns(records: Vec<ItemRecord>, tokens: u64) -> Vec<ItemRecord> {
    let mut packer = Packer::new(LlmViewOptions {
        token_budget: Some(usize::try_from(tokens).unwrap_or(usize::MAX)),
        ..LlmViewOptions::default()
    });
    let mut start_of_kept = records.len();
    let mut end = records.len();
    while end > 0 {
        let turn_id = records[end - 1].turn_id.as_str();
        let mut start = end - 1;
        while start > 0 && records[start - 1].turn_id == turn_id {
            start -= 1;
        }
        match packer.offer(&records[start..end]) {
            Offered::Taken => start_of_kept = start,
            Offered::Cut => {
                start_of_kept = start;
                break;
            }
            Offered::Full { .. } => break,
        }
        end = start;
    }
    records.into_iter().skip(start_of_kept).collect()
}
