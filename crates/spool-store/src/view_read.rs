//! Reading a thread's model view newest-first, only as far as the budget
//! reaches, whatever the backend.
//!
//! Item rows in the view (`items.llm`) are read in pages, newest first,
//! grouped into turns and offered to [`Packer`] one turn at a time;
//! reading stops as soon as the packer has what it needs. Packing uses the
//! cached token counts, so on a long thread with counts cached the cost is
//! the rows that fit plus one turn, whatever the thread's length.
//!
//! The turns left out beyond the first that did not fit are counted with
//! a turn's stored `view_rank` (how many turns up to it have an item in the
//! view): the rank of that turn, minus the rank of the turn before the
//! latest finished compaction older than it (where the view starts), or
//! minus nothing when there is none.
//!
//! [`ViewRead`] is the algorithm; a backend drives it with its reads, in
//! one snapshot: [`ViewRead::next_page`] says which rows to read next,
//! [`ViewRead::take_page`] takes them (pulling only as many as it needs;
//! [`ViewRead::take`] one at a time), and [`ViewRead::left_out`] what to
//! count once reading stopped.

use std::collections::HashMap;

use spool_core::ItemRecord;
use spool_core::llm::{LlmView, LlmViewOptions, Offered, Packer};

/// Rows of the first page. A 20,000-token budget over short messages
/// fits a few hundred rows.
const FIRST_PAGE: usize = 128;
/// The bounds of every next page (see [`next_page_size`]).
const MIN_PAGE: usize = 32;
const MAX_PAGE: usize = 4_096;

/// The size of the page after a full one of `size` rows. Without a
/// budget (or before a turn was packed, or when the packed ones cost
/// nothing), twice `size`. Under a budget, the rows its `room` holds at
/// what the `offered` rows packed so far cost (`tokens`), less the
/// `gathered` rows of the turn not yet offered, plus a quarter and
/// [`MIN_PAGE`] for the turn that does not fit (reading stops only past
/// its oldest row), and never fewer than the gathered turn has so far: a
/// long turn (a tool loop of hundreds of items) is read in pages that
/// double, not in pages of [`MIN_PAGE`]. A page too short costs one more
/// query; rows past the stop cost a backend that fetches a page whole
/// (PostgreSQL) their transfer, and the others nothing. Always within
/// [`MIN_PAGE`] and [`MAX_PAGE`].
fn next_page_size(
    size: usize,
    room: Option<usize>,
    tokens: usize,
    offered: usize,
    gathered: usize,
) -> usize {
    let estimate = match room {
        Some(room) if tokens > 0 && offered > 0 => {
            let fit = u128::try_from(room).unwrap_or(u128::MAX) * offered as u128 / tokens as u128;
            let fit = usize::try_from(fit).unwrap_or(usize::MAX);
            let left = fit.saturating_sub(gathered);
            let estimate = left.saturating_add(left / 4).saturating_add(MIN_PAGE);
            estimate.max(gathered)
        }
        _ => size.saturating_mul(2),
    };
    estimate.clamp(MIN_PAGE, MAX_PAGE)
}

/// A token count computed for an item as of its `seq`.
pub(crate) struct TokenCount {
    pub(crate) item_id: String,
    pub(crate) seq: u64,
    pub(crate) token_count: u32,
}

/// One model view being read (see the module docs).
pub(crate) struct ViewRead {
    packer: Packer<ItemRecord>,
    /// Seqs of the records read without a cached count, by item id: a
    /// computed count is cached only for the item as it was read.
    uncached: HashMap<String, u64>,
    /// The turn being gathered, newest record first.
    turn: Vec<ItemRecord>,
    /// Ordinal below which the next page starts.
    before: u64,
    page_size: usize,
    /// The view's token budget, if it has one.
    budget: Option<usize>,
    /// Records taken so far, the gathered turn's included.
    rows: usize,
    stop: Option<Stop>,
}

/// Why reading stopped.
enum Stop {
    /// The oldest row was read, or the view starts at a compaction in the
    /// last turn offered.
    Done,
    /// This turn did not fit; the older turns in the view, back to where
    /// the view starts, are left out too and must be counted.
    Full { turn_id: String, oldest: u64 },
}

impl ViewRead {
    pub(crate) fn new(options: LlmViewOptions) -> Self {
        ViewRead {
            budget: options.token_budget,
            packer: Packer::new(options),
            uncached: HashMap::new(),
            turn: Vec::new(),
            before: u64::MAX,
            page_size: FIRST_PAGE,
            rows: 0,
            stop: None,
        }
    }

    /// The next page to read: at most `limit` rows in the view with an
    /// ordinal below `before`, newest first; `None` once reading stopped.
    pub(crate) fn next_page(&self) -> Option<(u64, usize)> {
        self.stop.is_none().then_some((self.before, self.page_size))
    }

    /// Takes the page [`Self::next_page`] asked for, newest first. Records
    /// are pulled only while reading goes on: a page is sized before the
    /// packer knows how many rows it needs, and decoding a row costs
    /// several times stepping to it, so a backend that decodes as it is
    /// pulled never decodes the rows past the stop. The first error a
    /// record gives ends the read.
    pub(crate) fn take_page<E>(
        &mut self,
        page: impl IntoIterator<Item = Result<ItemRecord, E>>,
    ) -> Result<(), E> {
        let mut taken = 0;
        for record in page {
            taken += 1;
            if !self.take(record?) {
                return Ok(());
            }
        }
        self.end_page(taken);
        Ok(())
    }

    /// Takes the page's next record, for a backend that cannot hand the
    /// page over as an iterator (its records need an `await`); `false`
    /// once reading stopped: the rest of the page is not wanted. A page
    /// taken to its end is closed with [`Self::end_page`].
    pub(crate) fn take(&mut self, record: ItemRecord) -> bool {
        self.before = record.ordinal;
        if self
            .turn
            .last()
            .is_some_and(|last| last.turn_id != record.turn_id)
            && let Some(stop) = self.offer()
        {
            self.stop = Some(stop);
            return false;
        }
        self.rows += 1;
        if record.token_count.is_none() {
            self.uncached
                .insert(record.item.id().to_owned(), record.seq);
        }
        self.turn.push(record);
        true
    }

    /// Every record of the page was taken, `taken` of them: a full page
    /// asks for another (sized by [`next_page_size`]), a short one was the
    /// oldest.
    pub(crate) fn end_page(&mut self, taken: usize) {
        if taken == self.page_size {
            let offered = self.rows - self.turn.len();
            let tokens = self.packer.tokens_taken();
            let room = self.budget.map(|budget| budget.saturating_sub(tokens));
            self.page_size = next_page_size(self.page_size, room, tokens, offered, self.turn.len());
        } else {
            self.stop = Some(self.offer().unwrap_or(Stop::Done));
        }
    }

    /// Offers the gathered turn (emptying it); `Some` when reading can stop.
    fn offer(&mut self) -> Option<Stop> {
        let (turn_id, oldest) = match self.turn.last() {
            Some(oldest) => (oldest.turn_id.clone(), oldest.ordinal),
            None => return None,
        };
        match self.packer.offer(self.turn.drain(..).rev()) {
            Offered::Taken => None,
            Offered::Cut | Offered::Full { count_older: false } => Some(Stop::Done),
            Offered::Full { count_older: true } => Some(Stop::Full { turn_id, oldest }),
        }
    }

    /// When a turn did not fit: that turn, and the ordinal of its oldest
    /// record in the view. The caller reads its view rank and that of the
    /// turn of the latest finished compaction older than the ordinal, and
    /// gives them to [`Self::finish`].
    pub(crate) fn left_out(&self) -> Option<(&str, u64)> {
        match &self.stop {
            Some(Stop::Full { turn_id, oldest }) => Some((turn_id, *oldest)),
            Some(Stop::Done) | None => None,
        }
    }

    /// The view, and the token counts it computed, to cache. `ranks`: the
    /// view ranks [`Self::left_out`] asked for (the compaction's `None`
    /// when there is none).
    pub(crate) fn finish(
        mut self,
        ranks: Option<(i64, Option<i64>)>,
    ) -> (LlmView, Vec<TokenCount>) {
        if let Some((stop_rank, cut_rank)) = ranks {
            // The turn that did not fit is in the view: the turns before it
            // in the view are one fewer than its rank; the compaction's turn
            // counts, the turns before it do not.
            let before_stop = stop_rank - 1;
            let start = cut_rank.map_or(0, |rank| rank - 1);
            self.packer
                .add_omitted(usize::try_from(before_stop - start).unwrap_or(0));
        }
        let view = self.packer.finish();
        let counts = view
            .computed_token_counts
            .iter()
            .filter_map(|(item_id, token_count)| {
                self.uncached.get(item_id).map(|&seq| TokenCount {
                    item_id: item_id.clone(),
                    seq,
                    token_count: *token_count,
                })
            })
            .collect();
        (view, counts)
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_PAGE, MIN_PAGE, next_page_size};

    #[test]
    fn without_a_budget_or_a_packed_turn_pages_double() {
        assert_eq!(next_page_size(128, None, 5_000, 120, 8), 256);
        assert_eq!(next_page_size(128, Some(10_000), 0, 0, 128), 256);
        assert_eq!(next_page_size(128, Some(10_000), 0, 120, 8), 256);
        assert_eq!(next_page_size(MAX_PAGE, None, 1, 1, 0), MAX_PAGE);
    }

    #[test]
    fn under_a_budget_a_page_holds_what_the_rest_of_it_fits_and_a_margin() {
        // 120 rows packed 4,800 tokens (40 a row); 15,200 left fit 380
        // rows, 8 of them already gathered: 372, a quarter more, and a
        // last turn's worth.
        assert_eq!(
            next_page_size(128, Some(15_200), 4_800, 120, 8),
            372 + 93 + MIN_PAGE
        );
        // A budget spent: a page for the turn that does not fit.
        assert_eq!(next_page_size(128, Some(0), 20_000, 120, 8), MIN_PAGE);
        // Unless that turn is long: pages as large as what it has shown.
        assert_eq!(next_page_size(128, Some(0), 20_000, 8, 120), 120);
        assert_eq!(next_page_size(120, Some(0), 20_000, 8, 240), 240);
        // A budget far beyond the thread: the largest page.
        assert_eq!(next_page_size(128, Some(usize::MAX), 1, 1, 0), MAX_PAGE);
    }
}
