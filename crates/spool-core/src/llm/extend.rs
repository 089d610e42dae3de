//! Growing a view by the records logged after it, instead of reading the
//! whole view again: the runner's view from one step of a turn to the next.
//!
//! A view read with `extendable` keeps its input before sanitizing and
//! where it ends ([`ViewBase`]). [`LlmView::extend`] converts the new
//! records, appends them to that input and sanitizes the whole again, so
//! the result is exactly what a fresh read would give, whenever:
//!
//! - every record in the view had finished when it was read (a finished
//!   record never changes, so nothing read needs reading again);
//! - the new records are all finished, all of the view's newest turn, and
//!   none is a compaction (which would start the view over);
//! - under a budget, the view still fits, or holds the newest turn only
//!   (which goes in whole whatever it costs): otherwise older turns would
//!   have to leave.
//!
//! Otherwise `extend` says no and the caller reads the view afresh. Each
//! extension costs the new records plus one pass over the input (copying
//! and sanitizing it), never a read of the thread.

use spool_protocol::responses::ResponseItem;

use super::convert::{convert, in_view, is_cut_point};
use super::{LlmView, LlmViewOptions, sanitize};
use crate::record::ItemRecord;
use crate::tokens::count_input_item;

/// Where an extendable view ends, and its input before sanitizing.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewBase {
    through_ordinal: u64,
    turn_id: String,
    unsanitized: Vec<ResponseItem>,
}

impl ViewBase {
    pub(super) fn new(
        through_ordinal: u64,
        turn_id: String,
        unsanitized: Vec<ResponseItem>,
    ) -> Self {
        ViewBase {
            through_ordinal,
            turn_id,
            unsanitized,
        }
    }

    /// The newest record in the view: read the records after it.
    pub fn through_ordinal(&self) -> u64 {
        self.through_ordinal
    }

    /// The turn of that record: the turn the view can grow by.
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }
}

impl LlmView {
    /// Adds `records` (in ordinal order; the store's records after
    /// [`ViewBase::through_ordinal`]) when that gives exactly what a fresh
    /// read would (see the module docs), and says whether it did. On
    /// `false` the view is unchanged.
    pub fn extend(&mut self, records: &[ItemRecord], options: &LlmViewOptions) -> bool {
        let Some(base) = &mut self.base else {
            return false;
        };
        let mut added = Vec::new();
        let mut tokens = 0usize;
        let mut through = base.through_ordinal;
        for record in records {
            if record.ordinal <= base.through_ordinal {
                // An older record read again: the caller asked for more
                // than the records after the view.
                return false;
            }
            through = through.max(record.ordinal);
            if !in_view(record) {
                continue;
            }
            if record.turn_id != base.turn_id
                || !record.envelope.status.is_terminal()
                || is_cut_point(record)
            {
                return false;
            }
            let start = added.len();
            convert(record, options.reasoning_ids, &mut added);
            tokens += match record.token_count {
                Some(count) => count as usize,
                None if !options.counts_tokens() => 0,
                None => added[start..]
                    .iter()
                    .map(count_input_item)
                    .fold(0u32, u32::saturating_add) as usize,
            };
        }
        let total_tokens = self.total_tokens + tokens;
        let over = options
            .token_budget
            .is_some_and(|budget| total_tokens > budget);
        if over && self.turns_included > 1 {
            return false;
        }
        base.unsanitized.extend(added);
        base.through_ordinal = through;
        let mut input = base.unsanitized.clone();
        sanitize::sanitize(&mut input);
        self.input = input;
        self.total_tokens = total_tokens;
        self.computed_token_counts.clear();
        true
    }
}
