//! Helpers shared by the fuzz targets.

pub mod provider_stream;

/// Splits `body` into chunks the way a network might deliver it: one
/// chunk when `seed` is 0, else chunks of pseudo-random sizes from 1 to
/// `seed` bytes (deterministic in `seed` and `body`).
pub fn chunk(body: &[u8], seed: u8) -> Vec<Vec<u8>> {
    if seed == 0 {
        return vec![body.to_vec()];
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (u64::from(seed) << 32) ^ body.len() as u64;
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let size = (state % u64::from(seed)) as usize + 1;
        let (head, tail) = rest.split_at(size.min(rest.len()));
        out.push(head.to_vec());
        rest = tail;
    }
    out
}

/// The index of the chunk that holds byte `offset` of the body.
pub fn chunk_of(chunks: &[Vec<u8>], offset: usize) -> usize {
    let mut end = 0;
    for (i, c) in chunks.iter().enumerate() {
        end += c.len();
        if offset < end {
            return i;
        }
    }
    chunks.len()
}

/// One event of the reference SSE parser, with the byte offset just past
/// the blank line that dispatched it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefEvent {
    pub event: String,
    pub data: String,
    pub end: usize,
}

/// A straightforward SSE parser after the WHATWG "event stream
/// interpretation", used as the oracle of the `sse` target. `text` is the
/// UTF-8 body. Like any streaming parser it cannot tell whether a `\r` at
/// the very end of the body is followed by a `\n`, so that `\r` (and any
/// unterminated line) ends nothing.
pub fn reference_sse(text: &str) -> Vec<RefEvent> {
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let bytes = text.as_bytes();
    let mut pos = bom;
    let mut out = Vec::new();
    let mut event_type = String::new();
    let mut data = String::new();
    // Up to the end of each line.
    while let Some(rel) = bytes[pos..].iter().position(|b| *b == b'\n' || *b == b'\r') {
        let line_end = pos + rel;
        let next = match bytes[line_end] {
            b'\r' if line_end + 1 == bytes.len() => break, // `\r` or `\r\n`? unknown yet
            b'\r' if bytes[line_end + 1] == b'\n' => line_end + 2,
            _ => line_end + 1,
        };
        let line = &text[pos..line_end];
        pos = next;
        if line.is_empty() {
            if !data.is_empty() {
                if data.ends_with('\n') {
                    data.pop();
                }
                let event = if event_type.is_empty() {
                    "message".to_owned()
                } else {
                    std::mem::take(&mut event_type)
                };
                out.push(RefEvent {
                    event,
                    data: std::mem::take(&mut data),
                    end: pos,
                });
            }
            event_type.clear();
            data.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => event_type = value.to_owned(),
            "data" => {
                data.push_str(value);
                data.push('\n');
            }
            _ => {}
        }
    }
    out
}
