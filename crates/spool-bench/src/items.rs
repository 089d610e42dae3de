//! The items every workload stores: the same ones `bench/agents_sdk_bench.py`
//! gives the Agents SDK, so both sides write and read identical bytes.
//!
//! Item `n` (counting from 0) is, for even `n`, a user message
//!
//! ```json
//! {"role":"user","content":"User message <n>: <FILLER repeated>"}
//! ```
//!
//! with `content` cut to exactly 135 characters, and for odd `n` an
//! assistant output message
//!
//! ```json
//! {"id":"msg_<n>","type":"message","role":"assistant","status":"completed",
//!  "content":[{"type":"output_text","text":"Assistant reply <n>: <FILLER repeated>",
//!              "annotations":[],"logprobs":[]}]}
//! ```
//!
//! with `text` cut to exactly 200 characters. Everything is ASCII, so
//! characters and bytes agree. [`digest`] lets the compare script check that
//! the Python twin produced the same items.

use serde_json::{Value, json};

/// The text both kinds of message are padded with.
pub const FILLER: &str = "The quick brown fox jumps over the lazy dog while the agent keeps \
                          a durable log of every item it produces. ";

const USER_CHARS: usize = 135;
const ASSISTANT_CHARS: usize = 200;

/// `prefix` followed by as much of `FILLER`, repeated, as makes `len` characters.
fn padded(prefix: String, len: usize) -> String {
    let mut text = prefix;
    while text.len() < len {
        text.push_str(FILLER);
    }
    text.truncate(len);
    text
}

/// Item `n` of the sequence described above.
pub fn item(n: usize) -> Value {
    if n.is_multiple_of(2) {
        json!({
            "role": "user",
            "content": padded(format!("User message {n}: "), USER_CHARS),
        })
    } else {
        json!({
            "id": format!("msg_{n}"),
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{
                "type": "output_text",
                "text": padded(format!("Assistant reply {n}: "), ASSISTANT_CHARS),
                "annotations": [],
                "logprobs": [],
            }],
        })
    }
}

/// Items `0..count`.
pub fn items(count: usize) -> Vec<Value> {
    items_in(0..count)
}

/// The items numbered `range`.
pub fn items_in(range: std::ops::Range<usize>) -> Vec<Value> {
    range.map(item).collect()
}

/// The items appender `k` of (e) (and its layout floor (l)) adds, one per
/// call: each appender has a range of its own.
pub fn appender_items(k: usize, appends_each: usize) -> Vec<Value> {
    items_in(k * appends_each..(k + 1) * appends_each)
}

/// FNV-1a (64 bit) over the compact JSON of each item followed by `\n`, as
/// 16 hex digits: cheap to reproduce in Python with no dependency.
pub fn digest(items: &[Value]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for item in items {
        let line = item.to_string();
        for byte in line.bytes().chain(std::iter::once(b'\n')) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_shapes_are_as_documented() {
        let user = item(0);
        assert_eq!(user["content"].as_str().unwrap().len(), USER_CHARS);
        assert!(
            user["content"]
                .as_str()
                .unwrap()
                .starts_with("User message 0: ")
        );
        let assistant = item(9_999);
        assert_eq!(assistant["id"], "msg_9999");
        let text = assistant["content"][0]["text"].as_str().unwrap();
        assert_eq!(text.len(), ASSISTANT_CHARS);
        assert!(text.starts_with("Assistant reply 9999: The quick"));
        // Key order is part of the bytes both sides store.
        assert!(
            assistant
                .to_string()
                .starts_with(r#"{"id":"msg_9999","type":"message","#)
        );
    }

    #[test]
    fn digest_matches_the_python_twin() {
        // What `bench/agents_sdk_bench.py`'s digest() gives for the same
        // items; if this changes, change the Python generator with it.
        assert_eq!(digest(&items(2)), "e6d692d89309f45e");
        assert_eq!(digest(&items(10_000)), "b240ee532a840df9");
    }
}
