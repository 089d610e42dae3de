//! Which writes to the WAL wait, and when they go out: the part of the
//! VFS that needs no C (see `vfs/mod.rs` for why it exists).
//!
//! SQLite appends a frame as two writes, its 24-byte header and then its
//! page; a commit of n pages is 2n `pwrite`s, ~2.5 µs each on this VM
//! against ~0.8 µs a frame when they go out as one. [`Coalescer`] keeps
//! writes that continue one another in one buffer and hands the buffer to
//! the file as one write.
//!
//! What must hold for SQLite to stay correct is only that nothing it has
//! written stays here when it could be looked for elsewhere:
//!
//! - before anything else is done with the file (a read, a sync, a
//!   truncate, its size, a file control, its close), the buffer goes out
//!   ([`Coalescer::flush`], called by every such method);
//! - when a commit frame is complete (its header says it commits, and its
//!   page has followed it), the buffer goes out before the write returns:
//!   at `synchronous=NORMAL` nothing syncs the WAL at a commit, and the
//!   commit becomes visible to other connections (which read the file
//!   through their own handles) as soon as SQLite updates the WAL index,
//!   right after its last write;
//! - a commit frame's header that is written again over a frame already in
//!   the file (SQLite rewrites checksums that way after overwriting a page
//!   earlier in the same transaction) is not followed by its page, so it
//!   goes out at once, after what was waiting.
//!
//! A write that does not continue the buffer sends the buffer first, so
//! the file sees the writes in the order SQLite made them.

/// The most a buffer holds before it goes out: ~29 frames of 4 KiB pages.
/// A larger transaction goes out in pieces of this size. It must stay
/// below 128 KiB: the unix VFS writes at most that much in one call (it
/// masks a write's length to 17 bits), and a longer write fails as if the
/// disk were full.
pub(super) const CAPACITY: usize = 120 << 10;
const _: () = assert!(CAPACITY < 128 << 10);

/// Size of a WAL frame's header; a commit frame's says so in its bytes
/// 4..8 (the database's size in pages after the commit, zero otherwise).
const FRAME_HEADER: usize = 24;

/// Size of the WAL file's own header, written at offset 0 when the WAL
/// starts over.
const WAL_HEADER: usize = 32;

/// The writes waiting for one WAL file.
#[derive(Debug, Default)]
pub(super) struct Coalescer {
    buf: Vec<u8>,
    /// The file offset of `buf[0]`.
    start: i64,
    /// The end of the furthest write since the WAL last started over: a
    /// commit header written below it is a rewrite, whose page is already
    /// in the file.
    high: i64,
    /// The last write was a commit frame's header: the next, its page,
    /// completes the commit.
    commit_page_next: bool,
}

impl Coalescer {
    /// Takes a write of `data` at `offset`. `sink` writes bytes to the file
    /// and returns SQLite's result code; whatever it fails with is this
    /// write's result (SQLite then fails the transaction).
    pub(super) fn write(
        &mut self,
        data: &[u8],
        offset: i64,
        sink: &mut impl FnMut(&[u8], i64) -> i32,
    ) -> i32 {
        let end = offset + data.len() as i64;
        if offset == 0 && data.len() == WAL_HEADER {
            // The WAL starts over: what lies beyond is the old one's.
            self.high = 0;
        }
        let continues = !self.buf.is_empty() && offset == self.start + self.buf.len() as i64;
        let completes_commit = std::mem::take(&mut self.commit_page_next);
        let is_commit_header = data.len() == FRAME_HEADER && data[4..8] != [0; 4];
        let rewrite = is_commit_header && end < self.high;
        self.high = self.high.max(end);

        if !continues || self.buf.len() + data.len() > CAPACITY || rewrite {
            let rc = self.flush(sink);
            if rc != OK {
                return rc;
            }
        }
        if rewrite || data.len() > CAPACITY {
            return sink(data, offset);
        }
        if self.buf.is_empty() {
            self.start = offset;
        }
        self.buf.extend_from_slice(data);
        if completes_commit {
            return self.flush(sink);
        }
        self.commit_page_next = is_commit_header;
        OK
    }

    /// Sends what is waiting, as one write. The buffer is empty afterwards
    /// whatever the result: after a failed write SQLite abandons the
    /// transaction, and its frames lie beyond the WAL's valid end.
    pub(super) fn flush(&mut self, sink: &mut impl FnMut(&[u8], i64) -> i32) -> i32 {
        self.commit_page_next = false;
        if self.buf.is_empty() {
            return OK;
        }
        let rc = sink(&self.buf, self.start);
        self.buf.clear();
        rc
    }

    /// The file was truncated to `size` bytes (after a [`Self::flush`]).
    pub(super) fn truncated(&mut self, size: i64) {
        self.high = self.high.min(size);
    }
}

/// SQLite's `SQLITE_OK`.
const OK: i32 = 0;

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;
    const FRAME: i64 = (FRAME_HEADER + PAGE) as i64;

    /// The writes that reached the file, as (offset, length).
    #[derive(Default)]
    struct File {
        writes: Vec<(i64, usize)>,
        bytes: Vec<u8>,
    }

    impl File {
        fn sink(&mut self) -> impl FnMut(&[u8], i64) -> i32 + '_ {
            |data, offset| {
                self.writes.push((offset, data.len()));
                let end = offset as usize + data.len();
                if self.bytes.len() < end {
                    self.bytes.resize(end, 0);
                }
                self.bytes[offset as usize..end].copy_from_slice(data);
                OK
            }
        }
    }

    fn header(commit: bool) -> Vec<u8> {
        let mut h = vec![1u8; FRAME_HEADER];
        h[4..8].copy_from_slice(if commit { &[0, 0, 0, 9] } else { &[0; 4] });
        h
    }

    /// Writes frame `i` (0-based, after the WAL header) as SQLite does.
    fn frame(c: &mut Coalescer, file: &mut File, i: i64, commit: bool) {
        let at = WAL_HEADER as i64 + i * FRAME;
        assert_eq!(c.write(&header(commit), at, &mut file.sink()), OK);
        let page = vec![i as u8; PAGE];
        assert_eq!(
            c.write(&page, at + FRAME_HEADER as i64, &mut file.sink()),
            OK
        );
    }

    #[test]
    fn a_transaction_reaches_the_file_as_one_write_when_its_commit_frame_is_complete() {
        let (mut c, mut file) = (Coalescer::default(), File::default());
        assert_eq!(c.write(&[7; WAL_HEADER], 0, &mut file.sink()), OK);
        for i in 0..4 {
            frame(&mut c, &mut file, i, false);
        }
        assert!(file.writes.is_empty(), "nothing goes out before the commit");
        frame(&mut c, &mut file, 4, true);
        assert_eq!(file.writes, vec![(0, WAL_HEADER + 5 * FRAME as usize)]);
        assert_eq!(
            file.bytes[WAL_HEADER + 4 * FRAME as usize + FRAME_HEADER],
            4
        );
        // The next transaction starts a new buffer.
        frame(&mut c, &mut file, 5, true);
        assert_eq!(file.writes.len(), 2);
        assert_eq!(
            file.writes[1],
            (WAL_HEADER as i64 + 5 * FRAME, FRAME as usize)
        );
    }

    #[test]
    fn a_rewritten_commit_header_goes_out_at_once_after_what_waited() {
        let (mut c, mut file) = (Coalescer::default(), File::default());
        frame(&mut c, &mut file, 0, false);
        frame(&mut c, &mut file, 1, true);
        assert_eq!(file.writes.len(), 1);
        // Checksums rewritten: a plain header, then the commit frame's.
        let at0 = WAL_HEADER as i64;
        assert_eq!(c.write(&header(false), at0, &mut file.sink()), OK);
        assert_eq!(c.write(&header(true), at0 + FRAME, &mut file.sink()), OK);
        assert_eq!(
            file.writes[1..],
            [(at0, FRAME_HEADER), (at0 + FRAME, FRAME_HEADER)],
            "both headers are in the file when the last write returns"
        );
    }

    #[test]
    fn a_write_elsewhere_sends_what_waited_first_so_the_order_holds() {
        let (mut c, mut file) = (Coalescer::default(), File::default());
        frame(&mut c, &mut file, 0, false);
        let at0 = WAL_HEADER as i64;
        // A page of the same transaction overwritten in place.
        assert_eq!(c.write(&[9; PAGE], at0 + 24, &mut file.sink()), OK);
        assert_eq!(file.writes, vec![(at0, FRAME as usize)]);
        assert_eq!(c.flush(&mut file.sink()), OK);
        assert_eq!(file.writes[1], (at0 + 24, PAGE));
        assert_eq!(
            file.bytes[at0 as usize + 24],
            9,
            "the later write lands last"
        );
    }

    #[test]
    fn after_the_wal_starts_over_commits_are_coalesced_again() {
        let (mut c, mut file) = (Coalescer::default(), File::default());
        for i in 0..3 {
            frame(&mut c, &mut file, i, true);
        }
        assert_eq!(file.writes.len(), 3);
        assert_eq!(c.write(&[7; WAL_HEADER], 0, &mut file.sink()), OK);
        frame(&mut c, &mut file, 0, true);
        assert_eq!(file.writes[3], (0, WAL_HEADER + FRAME as usize));
    }

    #[test]
    fn a_buffer_never_grows_past_its_capacity() {
        let (mut c, mut file) = (Coalescer::default(), File::default());
        let frames = CAPACITY as i64 / FRAME + 3;
        for i in 0..frames {
            frame(&mut c, &mut file, i, false);
            assert!(c.buf.len() <= CAPACITY);
        }
        assert_eq!(file.writes.len(), 1, "one piece went out when it was full");
        frame(&mut c, &mut file, frames, true);
        let total: usize = file.writes.iter().map(|w| w.1).sum();
        assert_eq!(total, (frames + 1) as usize * FRAME as usize);
    }

    #[test]
    fn a_failed_write_is_the_result_and_leaves_nothing_waiting() {
        let mut c = Coalescer::default();
        let mut ok = |_: &[u8], _: i64| OK;
        assert_eq!(c.write(&header(false), 32, &mut ok), OK);
        assert_eq!(c.write(&[0; PAGE], 56, &mut ok), OK);
        assert_eq!(c.write(&header(true), 32 + FRAME, &mut ok), OK);
        let mut failing = |_: &[u8], _: i64| 778; // SQLITE_IOERR_WRITE
        assert_eq!(c.write(&[0; PAGE], 56 + FRAME, &mut failing), 778);
        assert!(c.buf.is_empty());
        assert_eq!(c.flush(&mut failing), OK, "nothing was left to send");
    }
}
