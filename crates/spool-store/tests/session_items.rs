//! The Session API's items: exact round trips of every shape, limits, the
//! window rule, the spool items they are filed as, and reopening.

mod common;
mod session_support;

use common::backend::TestStore;
use common::*;
use serde_json::{Value, json};
use session_support::*;
use spool_core::View;
use spool_protocol::{ItemKind, ServerNotification, ThreadItem, UserInput};
use spool_store::{AnyStore, Session, Store};

/// `get_items(limit)`, checked against `get_items_raw(limit)`: the raw
/// form gives the same items, as JSON text.
async fn both(s: &Session<AnyStore>, limit: Option<usize>) -> Vec<Value> {
    let items = s.get_items(limit).await.unwrap();
    let raw: Vec<Value> = s
        .get_items_raw(limit)
        .await
        .unwrap()
        .iter()
        .map(|item| serde_json::from_str(item.get()).unwrap())
        .collect();
    assert_eq!(
        raw, items,
        "get_items_raw({limit:?}) differs from get_items"
    );
    items
}

async fn session(store: &AnyStore, id: &str) -> Session<AnyStore> {
    Session::open(store.clone(), id)
        .await
        .expect("open session")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shape_comes_back_exactly_as_added() {
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::from(open(dir.path()));
    let s = session(&store, "conv-1").await;
    assert_eq!(s.id(), "conv-1");
    assert_eq!(s.get_items(None).await.unwrap(), Vec::<Value>::new());

    let items = every_shape();
    // One call per item, then all of them again in one call.
    for item in &items {
        s.add_items(vec![item.clone()]).await.unwrap();
    }
    s.add_items(items.clone()).await.unwrap();
    let expected: Vec<Value> = items.iter().chain(&items).cloned().collect();
    let got = s.get_items(None).await.unwrap();
    assert_eq!(got, expected);
    // Key order too: the JSON text is the same.
    assert_eq!(
        serde_json::to_string(&got).unwrap(),
        serde_json::to_string(&expected).unwrap()
    );

    // Opening the session again (another handle) and reopening the file
    // change nothing.
    let again = session(&store, "conv-1").await;
    assert_eq!(again.get_items(None).await.unwrap(), expected);
    drop((s, again, store));
    let store = AnyStore::from(open(dir.path()));
    let s = session(&store, "conv-1").await;
    assert_eq!(s.get_items(None).await.unwrap(), expected);
}

on_every_backend!(
    each_add_is_one_turn_of_started_and_completed_items,
    items_are_filed_as_the_closest_spool_kind,
    limits_are_none_all_zero_none_and_n_the_newest_n,
    a_window_never_holds_an_output_whose_call_it_left_out,
    sessions_are_apart_and_an_existing_thread_opens_as_a_session,
);

async fn each_add_is_one_turn_of_started_and_completed_items(ts: TestStore) {
    let store = ts.store.clone();
    let s = session(&store, "conv-turns").await;
    s.add_items(vec![user("one"), assistant("msg_1", "two")])
        .await
        .unwrap();
    s.add_items(vec![user("three")]).await.unwrap();
    s.add_items(Vec::new()).await.unwrap(); // no items, no turn

    let methods: Vec<&str> = store
        .events_after("conv-turns", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|event| event.payload.method())
        .collect();
    assert_eq!(
        methods,
        [
            "thread/started",
            "turn/started",
            "item/started",
            "item/completed",
            "item/started",
            "item/completed",
            "turn/completed",
            "turn/started",
            "item/started",
            "item/completed",
            "turn/completed",
        ]
    );
    let turns = store.turns("conv-turns").await.unwrap();
    assert_eq!(turns.len(), 2);
    let thread = store.thread("conv-turns").await.unwrap().unwrap();
    assert_eq!(thread.thread.preview, "one");
    // The raw item travels on the completion only.
    let events = store.events_after("conv-turns", 0, 100).await.unwrap();
    for event in &events {
        if let ServerNotification::ItemStarted(n) = &event.payload {
            assert!(n.envelope.as_ref().unwrap().provider_data.is_none());
        }
        if let ServerNotification::ItemCompleted(n) = &event.payload {
            let data = n.envelope.as_ref().unwrap().provider_data.as_ref();
            assert!(data.unwrap().get("inputItem").is_some());
        }
    }
}

async fn items_are_filed_as_the_closest_spool_kind(ts: TestStore) {
    let store = ts.store.clone();
    let s = session(&store, "conv-kinds").await;
    s.add_items(every_shape()).await.unwrap();
    let records = store.items("conv-kinds", View::All).await.unwrap();
    let kinds: Vec<ItemKind> = records.iter().map(|r| r.item.kind()).collect();
    assert_eq!(
        kinds,
        [
            ItemKind::UserMessage,
            ItemKind::UserMessage,
            ItemKind::Context,
            ItemKind::Context,
            ItemKind::Reasoning,
            ItemKind::FunctionCall,
            ItemKind::Component, // function_call_output
            ItemKind::WebSearch,
            ItemKind::AgentMessage,
            ItemKind::Component, // custom_tool_call
            ItemKind::Component, // custom_tool_call_output
            ItemKind::Component, // item_reference
            ItemKind::AgentMessage,
        ]
    );
    let ThreadItem::UserMessage { content, .. } = &records[1].item else {
        panic!("{:?}", records[1].item);
    };
    assert_eq!(content[0], UserInput::text("what is in this image?"));
    assert!(
        matches!(&content[1], UserInput::Image { url: Some(url), .. } if url.ends_with("cat.png"))
    );
    assert_eq!(content[2], UserInput::text("[file: notes.pdf]"));
    assert_eq!(
        records[8].item,
        ThreadItem::agent_message(records[8].item.id(), "Il fait beau.")
    );
    let ThreadItem::Component { name, props, .. } = &records[6].item else {
        panic!("{:?}", records[6].item);
    };
    assert_eq!(name, "function_call_output");
    assert_eq!(props, &output("call_1"));
    // Every session item is for the model; the system/developer context is
    // hidden from clients as context always is.
    assert!(records.iter().all(|r| r.envelope.audience.llm));
    let client = store.items("conv-kinds", View::Client).await.unwrap();
    assert_eq!(client.len(), records.len() - 2);
    // Spool's ids, not the caller's: the same raw item can be added twice.
    assert!(records.iter().all(|r| r.item.id().len() == 36));
}

async fn limits_are_none_all_zero_none_and_n_the_newest_n(ts: TestStore) {
    let store = ts.store.clone();
    let s = session(&store, "conv-limits").await;
    let items: Vec<Value> = (0..25).map(sdk_item).collect();
    for chunk in items.chunks(7) {
        s.add_items(chunk.to_vec()).await.unwrap();
    }
    assert_eq!(both(&s, None).await, items);
    assert!(both(&s, Some(0)).await.is_empty());
    assert_eq!(both(&s, Some(1)).await, items[24..]);
    assert_eq!(both(&s, Some(10)).await, items[15..]);
    assert_eq!(both(&s, Some(25)).await, items);
    assert_eq!(both(&s, Some(1_000)).await, items);
}

async fn a_window_never_holds_an_output_whose_call_it_left_out(ts: TestStore) {
    let store = ts.store.clone();
    let s = session(&store, "conv-window").await;
    let items = vec![
        user("weather?"),
        call("a"),
        call("b"),
        output("a"),
        output("b"),
        assistant("msg_1", "sunny"),
    ];
    s.add_items(items.clone()).await.unwrap();
    // Cut between the call and its output: the output is left out.
    assert_eq!(both(&s, Some(3)).await, [assistant("msg_1", "sunny")]);
    // Cut between parallel calls: b's output stays with b, a's goes.
    assert_eq!(
        both(&s, Some(4)).await,
        [call("b"), output("b"), assistant("msg_1", "sunny")]
    );
    assert_eq!(both(&s, Some(5)).await, items[1..]);
    // Nothing was deleted.
    assert_eq!(both(&s, None).await, items);
    // A whole session keeps even an output that never had a call.
    s.add_items(vec![output("nobody")]).await.unwrap();
    assert_eq!(both(&s, None).await.last(), Some(&output("nobody")));
    assert_eq!(both(&s, Some(2)).await, [assistant("msg_1", "sunny")]);
}

async fn sessions_are_apart_and_an_existing_thread_opens_as_a_session(ts: TestStore) {
    let store = ts.store.clone();
    let a = session(&store, "a").await;
    let b = session(&store, "b").await;
    a.add_items(vec![user("for a")]).await.unwrap();
    b.add_items(vec![user("for b")]).await.unwrap();
    assert_eq!(both(&a, None).await, [user("for a")]);
    assert_eq!(both(&b, None).await, [user("for b")]);

    // A thread the runtime wrote: its items come converted, as the model
    // view converts them.
    let t = new_thread(&store, false).await;
    store
        .append(
            &t,
            vec![
                turn_started(&t, "turn-1"),
                started(&t, "turn-1", user_message("u1", "question")),
                completed(&t, "turn-1", user_message("u1", "question")),
                started(&t, "turn-1", agent_message("a1", "")),
                completed(&t, "turn-1", agent_message("a1", "answer")),
                turn_completed(&t, "turn-1"),
            ],
        )
        .await
        .unwrap();
    let s = session(&store, &t).await;
    s.add_items(vec![user("more")]).await.unwrap();
    assert_eq!(
        both(&s, None).await,
        [
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "question"}]}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "answer", "annotations": []}]}),
            user("more"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_raw_item_is_an_error_naming_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::from(open(dir.path()));
    let s = session(&store, "conv-corrupt").await;
    s.add_items(vec![user("fine")]).await.unwrap();
    raw(dir.path())
        .execute(
            "UPDATE items SET input_item = '{not json' WHERE thread_id = 'conv-corrupt'",
            [],
        )
        .unwrap();
    let raw_error = s.get_items_raw(None).await.unwrap_err();
    assert_eq!(
        raw_error.corrupt_row().map(|row| row.column),
        Some("input_item")
    );
    let error = s.get_items(None).await.unwrap_err();
    let row = error.corrupt_row().expect("a corrupt row error");
    assert_eq!((row.table, row.column), ("items", "input_item"));
    assert_eq!(row.thread_id, "conv-corrupt");
    assert!(row.seq.is_some() && row.item_id.is_some(), "{error}");
}
