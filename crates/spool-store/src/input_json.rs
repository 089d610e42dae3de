//! What the Session API's reads give an input item back as.
//!
//! A [`Value`] is a tree the caller can inspect and edit; building it costs
//! an allocation per string, array and object of the item, which is most
//! of a small read's time. A caller that only passes the items on (into a
//! model request, over the wire) asks for [`RawValue`]s instead: the item's
//! JSON text as the store keeps it, checked to be JSON but never built into
//! a tree.
//!
//! A large window of [`Value`]s is read as [`Text`] on a blocking thread
//! and built on the caller's task ([`build_on_caller`]): the allocator
//! frees a block faster on the thread that allocated it, and a `Value`
//! holds a dozen blocks where its text holds one.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use spool_core::llm::{ToolSide, tool_side, tool_side_of};
use spool_protocol::responses::ResponseItem;

use crate::error::StoreError;
use crate::types::InputItems;

/// A form of an input item the store's reads can give back: [`Value`] or
/// `Box<RawValue>`. Sealed: the store knows how to make each.
pub trait InputJson: sealed::Form {}

impl InputJson for Value {}
impl InputJson for Box<RawValue> {}
impl InputJson for Text {}

/// Where an input item's row is, for the error if its text is not JSON.
pub struct RowAt<'r> {
    pub seq: Option<u64>,
    pub item_id: Option<&'r str>,
}

/// An input item's JSON text as read, not yet checked, with where its
/// row is: what a blocking thread hands the caller to build.
pub(crate) struct Text {
    /// The item id, then the JSON: one allocation for both.
    buf: Box<str>,
    json_at: usize,
    seq: Option<u64>,
}

impl Text {
    fn new(json: &str, at: RowAt<'_>) -> Text {
        let item_id = at.item_id.unwrap_or("");
        let mut buf = String::with_capacity(item_id.len() + json.len());
        buf.push_str(item_id);
        buf.push_str(json);
        Text {
            buf: buf.into_boxed_str(),
            json_at: item_id.len(),
            seq: at.seq,
        }
    }

    fn json(&self) -> &str {
        &self.buf[self.json_at..]
    }

    fn corrupt(&self, thread_id: &str, cause: serde_json::Error) -> StoreError {
        let item_id = &self.buf[..self.json_at];
        let at = RowAt {
            seq: self.seq,
            item_id: (!item_id.is_empty()).then_some(item_id),
        };
        crate::codec::corrupt_input_item(thread_id, at, cause)
    }
}

/// Items built per slice before the caller's task yields, so that a read
/// of thousands of items leaves what the task joins or selects on (and
/// the worker's other tasks) a turn every fraction of a millisecond.
const SLICE: usize = 256;

/// Builds items read as [`Text`] into `T`, on the caller's task, a slice
/// at a time, each text freed on the thread that built from it.
pub(crate) async fn build_on_caller<T: InputJson>(
    read: InputItems<Text>,
    thread_id: &str,
) -> Result<InputItems<T>, StoreError> {
    let InputItems { items, complete } = read;
    let mut built = Vec::with_capacity(items.len());
    for (n, text) in items.into_iter().enumerate() {
        if n > 0 && n % SLICE == 0 {
            tokio::task::yield_now().await;
        }
        let item = T::parse(text.json(), || RowAt {
            seq: text.seq,
            item_id: None,
        })
        .map_err(|cause| text.corrupt(thread_id, cause))?;
        built.push(item);
    }
    Ok(InputItems {
        items: built,
        complete,
    })
}

pub(crate) mod sealed {
    use super::*;

    /// How the store makes an input item of this form, and how the window
    /// rule reads it.
    pub trait Form: Sized + Send + 'static {
        /// Whether a read of a large window hands this form over as
        /// [`Text`], to be built on the caller's task.
        const BUILT_ON_CALLER: bool;
        /// From an input item's JSON text as stored; `at` says where its
        /// row is (asked only by a form that keeps it).
        fn parse<'r>(text: &str, at: impl FnOnce() -> RowAt<'r>) -> serde_json::Result<Self>;
        /// From an input item a stored record converts to.
        fn from_item(item: &ResponseItem) -> serde_json::Result<Self>;
        /// Which half of a tool exchange the item is, by `type` and
        /// `call_id`, as `spool_core::llm::tool_side` says.
        fn side(&self) -> Option<Side<'_>>;
    }

    /// A tool call (`call: true`) or output, and its `call_id`.
    pub struct Side<'a> {
        pub call: bool,
        pub call_id: Cow<'a, str>,
    }

    impl Side<'_> {
        fn of(side: ToolSide<'_>) -> Side<'_> {
            match side {
                ToolSide::Call(id) => Side {
                    call: true,
                    call_id: Cow::Borrowed(id),
                },
                ToolSide::Output(id) => Side {
                    call: false,
                    call_id: Cow::Borrowed(id),
                },
            }
        }
    }

    impl Form for Value {
        // Built from a dozen allocations: freed faster where they were made.
        const BUILT_ON_CALLER: bool = true;

        fn parse<'r>(text: &str, _: impl FnOnce() -> RowAt<'r>) -> serde_json::Result<Self> {
            serde_json::from_str(text)
        }

        fn from_item(item: &ResponseItem) -> serde_json::Result<Self> {
            serde_json::to_value(item)
        }

        fn side(&self) -> Option<Side<'_>> {
            tool_side(self).map(Side::of)
        }
    }

    impl Form for Box<RawValue> {
        // One allocation: nothing to gain from a second pass.
        const BUILT_ON_CALLER: bool = false;

        fn parse<'r>(text: &str, _: impl FnOnce() -> RowAt<'r>) -> serde_json::Result<Self> {
            // Checked (scanned, not built): a damaged row is an error here
            // as it is for a `Value`.
            serde_json::from_str(text)
        }

        fn from_item(item: &ResponseItem) -> serde_json::Result<Self> {
            serde_json::value::to_raw_value(item)
        }

        fn side(&self) -> Option<Side<'_>> {
            side_of_text(self.get())
        }
    }

    impl Form for Text {
        const BUILT_ON_CALLER: bool = false;

        fn parse<'r>(text: &str, at: impl FnOnce() -> RowAt<'r>) -> serde_json::Result<Self> {
            // Checked when it is built, on the caller's task.
            Ok(Text::new(text, at()))
        }

        fn from_item(item: &ResponseItem) -> serde_json::Result<Self> {
            let json = serde_json::to_string(item)?;
            Ok(Text::new(
                &json,
                RowAt {
                    seq: None,
                    item_id: None,
                },
            ))
        }

        fn side(&self) -> Option<Side<'_>> {
            side_of_text(self.json())
        }
    }

    /// The tool side of an item given as JSON text, reading only the two
    /// fields it needs.
    fn side_of_text(text: &str) -> Option<Side<'_>> {
        // Every tool item has a `call_id`; most items have none, and
        // for them this one scan is all the window rule costs. A key
        // appears literally: the store writes its JSON with serde_json,
        // which never escapes a letter or an underscore.
        if !text.contains("\"call_id\"") {
            return None;
        }
        let head: Head<'_> = serde_json::from_str(text).ok()?;
        let call_id = head.call_id?;
        let call = match tool_side_of(head.kind.as_deref()?, &call_id)? {
            ToolSide::Call(_) => true,
            ToolSide::Output(_) => false,
        };
        Some(Side { call, call_id })
    }

    /// The two fields of an item the window rule reads.
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        call_id: Option<Cow<'a, str>>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn texts(jsons: &[String]) -> InputItems<Text> {
        let at = |n: usize| RowAt {
            seq: Some(n as u64 + 1),
            item_id: Some("item-x"),
        };
        InputItems {
            items: jsons
                .iter()
                .enumerate()
                .map(|(n, json)| Text::new(json, at(n)))
                .collect(),
            complete: true,
        }
    }

    fn run<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn building_on_the_caller_yields_between_slices() {
        let jsons: Vec<String> = (0..1_000).map(|n| format!(r#"{{"n":{n}}}"#)).collect();
        let polls = Cell::new(0);
        let built = run(async {
            let sibling = async {
                loop {
                    polls.set(polls.get() + 1);
                    tokio::task::yield_now().await;
                }
            };
            tokio::select! {
                biased;
                built = build_on_caller::<Value>(texts(&jsons), "t") => built,
                _ = sibling => unreachable!("the sibling never ends"),
            }
        })
        .unwrap();
        let expected: Vec<Value> = (0..1_000).map(|n| serde_json::json!({ "n": n })).collect();
        assert_eq!(built.items, expected);
        assert!(built.complete);
        // The sibling ran once at each slice's end, between the builds.
        assert_eq!(polls.get(), (1_000 - 1) / SLICE);
    }

    #[test]
    fn text_that_is_not_json_names_its_row() {
        let jsons = vec![r#"{"ok":1}"#.to_owned(), "{not json".to_owned()];
        let error = run(build_on_caller::<Value>(texts(&jsons), "t-1")).unwrap_err();
        let row = error.corrupt_row().expect("a corrupt row");
        assert_eq!((row.table, row.column), ("items", "input_item"));
        assert_eq!(row.thread_id, "t-1");
        assert_eq!((row.seq, row.item_id.as_deref()), (Some(2), Some("item-x")));
    }
}
