//! Packing whole turns, newest to oldest, under a token budget.
//!
//! The walk starts at the newest record and goes back one turn at a time,
//! so a long thread costs only as much as the part that fits: records
//! older than the first turn that does not fit are looked at only to count
//! the omitted turns, and never converted. A record's tokens come from its
//! cached count; only an uncached record is converted to be counted, and
//! its conversion is kept for the output.

use spool_protocol::responses::ResponseItem;

use super::LlmViewOptions;
use super::convert::{convert, in_view, is_cut_point};
use crate::record::ItemRecord;
use crate::tokens::count_input_item;

/// A record chosen for the view, with its input items when counting it
/// already converted it.
pub(super) type Chosen<'a> = (&'a ItemRecord, Option<Vec<ResponseItem>>);

/// What fits, newest turn first and each turn's records newest first.
#[derive(Default)]
pub(super) struct Packed<'a> {
    pub turns: Vec<Vec<Chosen<'a>>>,
    pub total_tokens: usize,
    pub turns_omitted: usize,
    pub computed_token_counts: Vec<(String, u32)>,
}

/// Chooses the turns of `records` (in ordinal order) that go to the model.
///
/// A turn is a maximal run of consecutive records with the same `turn_id`;
/// a thread runs one turn at a time, so that is the whole turn. Turns with
/// no record in the model's view do not count. Everything before the latest
/// finished compaction is left out, and does not count as omitted.
pub(super) fn pack<'a>(records: &'a [ItemRecord], options: &LlmViewOptions) -> Packed<'a> {
    let mut packed = Packed::default();
    let mut end = records.len();
    while end > 0 {
        let turn_id = records[end - 1].turn_id.as_str();
        let mut start = end - 1;
        while start > 0 && records[start - 1].turn_id == turn_id {
            start -= 1;
        }
        let turn = &records[start..end];
        end = start;

        let mut chosen = Vec::new();
        let mut tokens = 0usize;
        let mut reached_cut = false;
        for record in turn.iter().rev().filter(|record| in_view(record)) {
            let (count, items) = match record.token_count {
                Some(count) => (count, None),
                None => {
                    let mut items = Vec::new();
                    convert(record, options.reasoning_ids, &mut items);
                    let count = items
                        .iter()
                        .map(count_input_item)
                        .fold(0, u32::saturating_add);
                    // A count is worth caching only when the record can no
                    // longer change, and when it does not depend on the
                    // policy (an omitted reasoning item counts 0 here but
                    // not under `Preserve`).
                    if record.envelope.status.is_terminal() && (count > 0 || !is_reasoning(record))
                    {
                        packed
                            .computed_token_counts
                            .push((record.item.id().to_owned(), count));
                    }
                    (count, Some(items))
                }
            };
            tokens += count as usize;
            chosen.push((record, items));
            if is_cut_point(record) {
                reached_cut = true;
                break;
            }
        }

        if !chosen.is_empty() {
            // The newest turn is the one in flight: without it the request
            // makes no sense, so it goes in whatever it costs.
            let newest = packed.turns.is_empty();
            let fits = options
                .token_budget
                .is_none_or(|budget| packed.total_tokens + tokens <= budget);
            if newest || fits {
                packed.total_tokens += tokens;
                packed.turns.push(chosen);
            } else {
                // Every older turn is omitted too, so that history stays
                // contiguous; they are only counted, back to where the view
                // starts.
                packed.turns_omitted += 1;
                if !reached_cut {
                    packed.turns_omitted += count_turns(&records[..end]);
                }
                break;
            }
        }
        if reached_cut {
            break;
        }
    }
    packed
}

/// The turns of `records` in the view, back to the compaction where the
/// view starts. One flat pass that touches each record once: on a long
/// thread this is most of the work of a view whose counts are cached.
fn count_turns(records: &[ItemRecord]) -> usize {
    let mut turns = 0;
    let mut current: Option<&str> = None;
    for record in records.iter().rev().filter(|record| in_view(record)) {
        if current != Some(record.turn_id.as_str()) {
            turns += 1;
            current = Some(&record.turn_id);
        }
        if is_cut_point(record) {
            break;
        }
    }
    turns
}

fn is_reasoning(record: &ItemRecord) -> bool {
    record.item.kind() == spool_protocol::ItemKind::Reasoning
}
