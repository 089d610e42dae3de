//! Packing whole turns, newest to oldest, under a token budget.
//!
//! [`Packer`] is fed one turn at a time, newest first, and says when it
//! has seen enough, so a caller holding a long thread (the store, reading
//! newest-first pages) stops reading as soon as the budget is full. Records
//! older than the first turn that does not fit are never converted; the
//! caller only counts their turns ([`count_turns`] over records in memory,
//! or an index in the store). A record's tokens come from its cached
//! count; only an uncached record is converted to be counted, and its
//! conversion is kept for the output.

use std::borrow::Borrow;

use spool_protocol::responses::ResponseItem;

use super::convert::{convert, in_view, is_cut_point};
use super::{LlmView, LlmViewOptions, ViewBase, sanitize};
use crate::record::ItemRecord;
use crate::tokens::count_input_item;

/// A record chosen for the view, with its input items when counting it
/// already converted it.
type Chosen<R> = (R, Option<Vec<ResponseItem>>);

/// What the packer made of a turn offered to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// The turn went in (or had nothing for the model); offer the next
    /// older one.
    Taken,
    /// The view starts in this turn (at its latest finished compaction):
    /// nothing older belongs to it, and nothing older is omitted.
    Cut,
    /// The turn did not fit, so it and every older turn are omitted. When
    /// `count_older` is set, the caller adds the older turns in the view,
    /// back to the latest finished compaction, with [`Packer::add_omitted`]
    /// (see [`count_turns`]); otherwise the view started in this turn.
    Full { count_older: bool },
}

/// Builds an `llm` view from turns offered newest first (see the module
/// docs). `R` is a record or a reference to one, so a caller that owns its
/// records moves them in and one that borrows them does not clone.
pub struct Packer<R> {
    options: LlmViewOptions,
    /// Newest turn first, each turn's records newest first.
    turns: Vec<Vec<Chosen<R>>>,
    total_tokens: usize,
    turns_omitted: usize,
    computed_token_counts: Vec<(String, u32)>,
    done: bool,
}

impl<R: Borrow<ItemRecord>> Packer<R> {
    pub fn new(options: LlmViewOptions) -> Self {
        Packer {
            options,
            turns: Vec::new(),
            total_tokens: 0,
            turns_omitted: 0,
            computed_token_counts: Vec::new(),
            done: false,
        }
    }

    /// Offers the next older turn: all its records, in ordinal order (those
    /// outside the model's view are skipped here). A turn is a maximal run
    /// of consecutive records with one `turn_id`; a thread runs one turn at
    /// a time, so that is the whole turn. Turns with no record in the view
    /// do not count. After `Cut` or `Full`, further offers are ignored.
    pub fn offer(&mut self, turn: impl IntoIterator<Item = R>) -> Offered {
        if self.done {
            return Offered::Full { count_older: false };
        }
        let mut records: Vec<R> = turn
            .into_iter()
            .filter(|record| in_view(record.borrow()))
            .collect();
        let mut chosen = Vec::new();
        let mut tokens = 0usize;
        let mut reached_cut = false;
        while let Some(record) = records.pop() {
            let (count, items) = self.count(record.borrow());
            tokens += count as usize;
            let cut = is_cut_point(record.borrow());
            chosen.push((record, items));
            if cut {
                reached_cut = true;
                break;
            }
        }
        if chosen.is_empty() {
            return Offered::Taken;
        }
        // The newest turn is the one in flight: without it the request
        // makes no sense, so it goes in whatever it costs.
        let newest = self.turns.is_empty();
        let fits = self
            .options
            .token_budget
            .is_none_or(|budget| self.total_tokens + tokens <= budget);
        if newest || fits {
            self.total_tokens += tokens;
            self.turns.push(chosen);
            if reached_cut {
                self.done = true;
                return Offered::Cut;
            }
            return Offered::Taken;
        }
        // Every older turn is omitted too, so that history stays
        // contiguous.
        self.done = true;
        self.turns_omitted += 1;
        Offered::Full {
            count_older: !reached_cut,
        }
    }

    /// Tokens of the turns taken so far.
    pub fn tokens_taken(&self) -> usize {
        self.total_tokens
    }

    /// Adds turns the caller counted as omitted (see [`Offered::Full`]).
    pub fn add_omitted(&mut self, turns: usize) {
        self.turns_omitted += turns;
    }

    /// The cached count of a record, or its conversion and computed count.
    fn count(&mut self, record: &ItemRecord) -> (u32, Option<Vec<ResponseItem>>) {
        if let Some(count) = record.token_count {
            return (count, None);
        }
        if !self.options.counts_tokens() {
            return (0, None); // converted by `finish`
        }
        let mut items = Vec::new();
        convert(record, self.options.reasoning_ids, &mut items);
        let count = items
            .iter()
            .map(count_input_item)
            .fold(0, u32::saturating_add);
        // A count is worth caching only when the record can no longer
        // change, and when it does not depend on the policy (an omitted
        // reasoning item counts 0 here but not under `Preserve`).
        if record.envelope.status.is_terminal() && (count > 0 || !is_reasoning(record)) {
            self.computed_token_counts
                .push((record.item.id().to_owned(), count));
        }
        (count, Some(items))
    }

    /// The view: the chosen records converted in chronological order, then
    /// sanitized (see `sanitize.rs`).
    pub fn finish(self) -> LlmView {
        let turns_included = self.turns.len();
        // The newest record (first of the newest turn) and whether every
        // record is finished: what an extendable view needs.
        let newest = self
            .turns
            .first()
            .and_then(|turn| turn.first())
            .map(|(record, _)| (record.borrow().ordinal, record.borrow().turn_id.clone()));
        let mut all_finished = true;
        let mut input = Vec::new();
        for turn in self.turns.into_iter().rev() {
            for (record, items) in turn.into_iter().rev() {
                all_finished &= record.borrow().envelope.status.is_terminal();
                match items {
                    Some(items) => input.extend(items),
                    None => convert(record.borrow(), self.options.reasoning_ids, &mut input),
                }
            }
        }
        let base = match newest {
            Some((through_ordinal, turn_id)) if self.options.extendable && all_finished => {
                Some(ViewBase::new(through_ordinal, turn_id, input.clone()))
            }
            _ => None,
        };
        sanitize::sanitize(&mut input);
        LlmView {
            input,
            total_tokens: self.total_tokens,
            turns_included,
            turns_omitted: self.turns_omitted,
            computed_token_counts: self.computed_token_counts,
            base,
        }
    }
}

/// Packs `records` (in ordinal order), all in memory.
pub(super) fn pack(records: &[ItemRecord], options: &LlmViewOptions) -> LlmView {
    let mut packer = Packer::new(options.clone());
    let mut end = records.len();
    while end > 0 {
        let turn_id = records[end - 1].turn_id.as_str();
        let mut start = end - 1;
        while start > 0 && records[start - 1].turn_id == turn_id {
            start -= 1;
        }
        let offered = packer.offer(&records[start..end]);
        end = start;
        match offered {
            Offered::Taken => {}
            Offered::Cut => break,
            Offered::Full { count_older } => {
                if count_older {
                    packer.add_omitted(count_turns(&records[..end]));
                }
                break;
            }
        }
    }
    packer.finish()
}

/// The turns of `records` (in ordinal order) in the view, back to the
/// latest finished compaction, which counts. One flat pass that touches
/// each record once: on a long thread in memory this is most of the work
/// of a view whose counts are cached.
pub fn count_turns(records: &[ItemRecord]) -> usize {
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
