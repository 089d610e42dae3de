//! What the Session API's reads give an input item back as.
//!
//! A [`Value`] is a tree the caller can inspect and edit; building it costs
//! an allocation per string, array and object of the item, which is most
//! of a small read's time. A caller that only passes the items on (into a
//! model request, over the wire) asks for [`RawValue`]s instead: the item's
//! JSON text as the store keeps it, checked to be JSON but never built into
//! a tree.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use spool_core::llm::{ToolSide, tool_side, tool_side_of};
use spool_protocol::responses::ResponseItem;

/// A form of an input item the store's reads can give back: [`Value`] or
/// `Box<RawValue>`. Sealed: the store knows how to make each.
pub trait InputJson: sealed::Form {}

impl InputJson for Value {}
impl InputJson for Box<RawValue> {}

pub(crate) mod sealed {
    use super::*;

    /// How the store makes an input item of this form, and how the window
    /// rule reads it.
    pub trait Form: Sized + Send + 'static {
        /// From an input item's JSON text as stored.
        fn parse(text: &str) -> serde_json::Result<Self>;
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
        fn parse(text: &str) -> serde_json::Result<Self> {
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
        fn parse(text: &str) -> serde_json::Result<Self> {
            // Checked (scanned, not built): a damaged row is an error here
            // as it is for a `Value`.
            serde_json::from_str(text)
        }

        fn from_item(item: &ResponseItem) -> serde_json::Result<Self> {
            serde_json::value::to_raw_value(item)
        }

        fn side(&self) -> Option<Side<'_>> {
            let text = self.get();
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
