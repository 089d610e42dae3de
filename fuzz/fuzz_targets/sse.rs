//! The SSE framing of model streams (spool-model's UTF-8 decoding and
//! incremental framing) over arbitrary bytes in arbitrary chunkings.
//!
//! Asserts: no panic; the events do not depend on how the body is chunked;
//! for a UTF-8 body they are the events of a reference parser (WHATWG
//! event-stream interpretation) and nothing ends in an error; for a body
//! that is not UTF-8, the events before the first bad byte come out, then
//! one error; and nothing is held back: each event (and the UTF-8 error)
//! comes out before the chunk after the one that completed it is read.
#![no_main]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;
use spool_fuzz::{RefEvent, chunk, chunk_of, reference_sse};
use spool_model::fuzzing::sse_events;

/// (event, data) or an error, and how many chunks had been read when it
/// came out.
type Seen = Vec<(Result<(String, String), String>, usize)>;

fn run(chunks: &[Vec<u8>]) -> Seen {
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let body = futures::stream::iter(chunks.to_vec()).inspect(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    block_on(async {
        let mut events = std::pin::pin!(sse_events(body));
        let mut seen = Vec::new();
        while let Some(item) = events.next().await {
            let failed = item.is_err();
            seen.push((
                item.map_err(|e| e.to_string()),
                pulled.load(Ordering::SeqCst),
            ));
            assert!(seen.len() <= chunks.iter().map(Vec::len).sum::<usize>() + 1);
            if failed {
                break;
            }
        }
        seen
    })
}

fuzz_target!(|data: &[u8]| {
    let [seed, body @ ..] = data else {
        return;
    };
    let chunks = chunk(body, *seed);
    let seen = run(&chunks);
    let whole = run(&[body.to_vec()]);
    let items = |seen: &Seen| seen.iter().map(|(i, _)| i.clone()).collect::<Vec<_>>();
    let same = |a: &Seen, b: &Seen| {
        // Error texts may name positions within a chunk: compare kinds.
        a.len() == b.len()
            && a.iter().zip(b).all(|((x, _), (y, _))| match (x, y) {
                (Ok(x), Ok(y)) => x == y,
                (Err(_), Err(_)) => true,
                _ => false,
            })
    };
    assert!(
        same(&seen, &whole),
        "chunking changed the events:\n{:?}\nvs whole:\n{:?}",
        items(&seen),
        items(&whole)
    );

    // The oracle: the valid UTF-8 prefix, and where it ends.
    let (text, bad) = match std::str::from_utf8(body) {
        Ok(text) => (text, None),
        Err(e) => (
            // Safe: `valid_up_to` is where valid UTF-8 stops.
            std::str::from_utf8(&body[..e.valid_up_to()]).unwrap(),
            Some(e),
        ),
    };
    let expected: Vec<RefEvent> = reference_sse(text);
    let events: Vec<_> = seen.iter().filter(|(i, _)| i.is_ok()).collect();
    assert_eq!(
        events.len(),
        expected.len(),
        "events differ from the reference:\n{:?}\nexpected:\n{expected:?}",
        items(&seen)
    );
    for ((item, pulled), want) in events.iter().zip(&expected) {
        let (event, data) = item.as_ref().unwrap();
        assert_eq!((event, data), (&want.event, &want.data), "an event differs");
        // Out before the chunk after the one that completed it is read; an
        // event ended by a lone `\r` needs the next character, to know that
        // it is not the start of a CRLF (the reference saw it: it is whole).
        let last = if body[want.end - 1] == b'\r' {
            let next = text[want.end..].chars().next().map_or(1, char::len_utf8);
            want.end + next - 1
        } else {
            want.end - 1
        };
        let limit = chunk_of(&chunks, last) + 1;
        assert!(
            *pulled <= limit,
            "{want:?} held back: out after {pulled} chunks, due after {limit}"
        );
    }
    match bad {
        None => assert!(
            seen.iter().all(|(i, _)| i.is_ok()),
            "a UTF-8 body ended in an error: {:?}",
            items(&seen)
        ),
        Some(e) => {
            let (last, pulled) = seen.last().expect("a bad body yields its error");
            assert!(
                last.is_err(),
                "a body that is not UTF-8 must end in an error"
            );
            // Known bad once the byte after the bad sequence's start is read
            // (at most one past it; a truncated one only at the end).
            let known_at = match e.error_len() {
                Some(len) => chunk_of(&chunks, (e.valid_up_to() + len).min(body.len() - 1)) + 1,
                None => chunks.len(),
            };
            assert!(
                *pulled <= known_at,
                "the UTF-8 error was held back: out after {pulled} chunks, due after {known_at}"
            );
        }
    }
});
