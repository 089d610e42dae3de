//! The aggregated output kept for a command: everything up to a cap, then
//! the head and the tail with a marker for what was dropped in between.
//!
//! The head usually says what the command set out to do and the tail how it
//! ended (the error, the summary line), so those are the parts worth keeping
//! when a build or test run prints megabytes.

use std::collections::VecDeque;

/// Which pipe a chunk of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// Output bytes in arrival order, bounded by `cap` bytes (plus the marker).
#[derive(Debug)]
pub(crate) struct CappedOutput {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    elided: u64,
}

impl CappedOutput {
    pub(crate) fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        Self {
            head_cap,
            tail_cap: cap - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            elided: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < self.head_cap {
            let take = bytes.len().min(self.head_cap - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() {
            return;
        }
        // Only the last `tail_cap` bytes of this chunk can survive, so skip the
        // rest up front instead of pushing and popping them one by one.
        if bytes.len() > self.tail_cap {
            let skip = bytes.len() - self.tail_cap;
            self.elided += (skip + self.tail.len()) as u64;
            self.tail.clear();
            bytes = &bytes[skip..];
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.elided += overflow as u64;
        self.tail.extend(bytes);
    }

    /// Lossy UTF-8. A character cut in half by the elision is dropped whole
    /// (and counted as elided) rather than shown as replacement characters.
    pub(crate) fn into_string(self) -> String {
        let mut tail: Vec<u8> = self.tail.into();
        if self.elided == 0 {
            let mut all = self.head;
            all.append(&mut tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let head_end = complete_prefix_len(&self.head);
        let tail_start = tail
            .iter()
            .take(3)
            .take_while(|b| is_continuation(**b))
            .count();
        let elided = self.elided + (self.head.len() - head_end + tail_start) as u64;
        let mut out = String::from_utf8_lossy(&self.head[..head_end]).into_owned();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("[… {elided} bytes elided …]\n"));
        out.push_str(&String::from_utf8_lossy(&tail[tail_start..]));
        out
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0b1100_0000 == 0b1000_0000
}

/// Length of `bytes` without a trailing UTF-8 sequence that was cut short.
/// Invalid bytes elsewhere are left alone for the lossy conversion to mark.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let b = bytes[len - back];
        if is_continuation(b) {
            continue;
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(cap: usize, chunks: &[&[u8]]) -> String {
        let mut out = CappedOutput::new(cap);
        for chunk in chunks {
            out.push(chunk);
        }
        out.into_string()
    }

    #[test]
    fn under_the_cap_everything_is_kept_in_order() {
        assert_eq!(collect(100, &[b"ab", b"cd", b"ef"]), "abcdef");
        assert_eq!(collect(6, &[b"abc", b"def"]), "abcdef");
    }

    #[test]
    fn over_the_cap_head_and_tail_survive() {
        assert_eq!(
            collect(6, &[b"abc", b"defg"]),
            "abc\n[… 1 bytes elided …]\nefg"
        );
        let many: Vec<&[u8]> = vec![b"0123456789"; 100];
        assert_eq!(collect(10, &many), "01234\n[… 990 bytes elided …]\n56789");
    }

    #[test]
    fn one_huge_chunk_is_capped_too() {
        let big = vec![b'x'; 1 << 20];
        let s = collect(8, &[b"head", &big, b"tail"]);
        assert_eq!(s, format!("head\n[… {} bytes elided …]\ntail", 1 << 20));
    }

    #[test]
    fn characters_split_by_the_elision_are_dropped_whole() {
        // "é" is two bytes; a head of 2 cuts the first one in half.
        let s = collect(4, &["aé".as_bytes(), b"xxxx", "é".as_bytes()]);
        assert_eq!(s, "a\n[… 6 bytes elided …]\né");
        // "€" is three bytes; the tail starts inside one.
        let s = collect(8, &[b"abcd", b"xxxx", "€€".as_bytes()]);
        assert_eq!(s, "abcd\n[… 7 bytes elided …]\n€");
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(collect(100, &[b"a\xffb"]), "a\u{fffd}b");
    }

    #[test]
    fn zero_cap_keeps_only_the_marker() {
        assert_eq!(collect(0, &[b"abc"]), "[… 3 bytes elided …]\n");
        assert_eq!(collect(0, &[]), "");
    }
}
