//! The stdio JSON-RPC framing: spool-server's capped, lossy line reader
//! over arbitrary bytes (small caps, tiny read buffers), then every line
//! through the JSON-RPC envelope parser.
//!
//! Asserts: the reader terminates; it returns exactly the lines of the
//! input, each without its `\n` and a final `\r`; a line of at most `cap`
//! bytes comes back whole (lossily decoded), a longer one as more than
//! `cap` bytes (its first `cap + 1`, so the server refuses it as too large)
//! and never longer; parsing never panics, and a parsed message survives
//! `to_line` and parsing again unchanged.
#![no_main]

use std::io::{BufReader, Cursor};

use libfuzzer_sys::fuzz_target;
use spool_protocol::jsonrpc::JsonRpcMessage;
use spool_server::fuzzing::read_line_blocking_capped;

fuzz_target!(|data: &[u8]| {
    let [a, b, c, rest @ ..] = data else {
        return;
    };
    let cap = usize::from(*a) * 4 + usize::from(*b & 3); // 0..=1023
    let buffer = usize::from(*c) + 1; // read in pieces of 1..=256 bytes
    let mut reader = BufReader::with_capacity(buffer, Cursor::new(rest));

    // The lines the input holds: split on `\n`; a final line needs no `\n`.
    let mut expected: Vec<&[u8]> = rest.split(|b| *b == b'\n').collect();
    if rest.is_empty() || rest.ends_with(b"\n") {
        expected.pop();
    }

    let mut lines = Vec::new();
    loop {
        let line = read_line_blocking_capped(&mut reader, cap).expect("a Cursor never fails");
        let Some(line) = line else { break };
        assert!(
            lines.len() < expected.len(),
            "more lines than the input has: {lines:?} then {line:?}"
        );
        lines.push(line);
    }
    assert_eq!(lines.len(), expected.len(), "lines lost");

    for (line, raw) in lines.iter().zip(&expected) {
        let content = raw.strip_suffix(b"\r").unwrap_or(raw);
        // Every returned char stands for at least one input byte.
        assert!(
            line.chars().count() <= cap + 1,
            "{line:?} longer than the cap {cap}"
        );
        if content.len() <= cap {
            assert_eq!(
                *line,
                String::from_utf8_lossy(content),
                "a line within the cap changed"
            );
        } else {
            let kept = &content[..cap + 1];
            assert_eq!(
                *line,
                String::from_utf8_lossy(kept),
                "an over-long line must come back as its first cap + 1 bytes, to be refused"
            );
            continue; // the server refuses it without parsing
        }
        if let Ok(message) = JsonRpcMessage::parse(line) {
            let again = JsonRpcMessage::parse(&message.to_line())
                .unwrap_or_else(|e| panic!("{message:?} does not read back: {e}"));
            assert_eq!(again, message, "a message changed on the way out and back");
        }
    }
});
