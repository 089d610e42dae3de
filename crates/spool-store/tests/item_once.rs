//! An item filed from a raw input item (every Session API item) is stored
//! once: its row holds the raw item, and its `item` column is empty, to be
//! filed again when the row is read. Every read gives back the item as it
//! was appended; an item that says something its raw item does not is
//! stored whole; an empty `item` without its raw item is a corrupt row.

mod common;

use common::*;
use serde_json::{Value, json};
use spool_core::View;
use spool_protocol::{ServerNotification, ThreadItem, UserInput};
use spool_store::{Session, SqliteStore, Store, StoreError};

/// `(item_id, item, input_item)` of every item row of `thread`, in order.
fn item_columns(dir: &std::path::Path, thread: &str) -> Vec<(String, String, Option<String>)> {
    let conn = raw(dir);
    let mut statement = conn
        .prepare(
            "SELECT item_id, item, input_item FROM items WHERE thread_id = ?1 AND NOT is_turn \
             ORDER BY ordinal",
        )
        .unwrap();
    statement
        .query_map([thread], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The raw items of the session test, and the items each is filed as
/// (written out here, not computed by the store's own mapping).
fn raw_and_filed(ids: &[String]) -> Vec<(Value, ThreadItem)> {
    let user = json!({"role": "user", "content": "Where is the log?"});
    let assistant = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "status": "completed", "content": [{"type": "output_text", "text": "In events.",
        "annotations": []}]});
    let output = json!({"type": "function_call_output", "call_id": "call_7",
        "output": "{\"rows\": 3}"});
    vec![
        (
            user,
            ThreadItem::UserMessage {
                id: ids[0].clone(),
                client_id: None,
                content: vec![UserInput::text("Where is the log?")],
            },
        ),
        (
            assistant,
            ThreadItem::AgentMessage {
                id: ids[1].clone(),
                text: "In events.".to_owned(),
                phase: None,
                memory_citation: None,
                delivery: None,
                questions: None,
            },
        ),
        (
            output.clone(),
            ThreadItem::Component {
                id: ids[2].clone(),
                name: "function_call_output".to_owned(),
                props: output,
            },
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_item_is_stored_once_and_reads_back_as_filed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let session: Session<SqliteStore> = Session::open(store.clone(), "s1").await.unwrap();
    let placeholder = vec![String::new(); 3];
    let raws: Vec<Value> = raw_and_filed(&placeholder)
        .into_iter()
        .map(|(raw, _)| raw)
        .collect();
    session.add_items(raws.clone()).await.unwrap();

    let columns = item_columns(dir.path(), "s1");
    let ids: Vec<String> = columns.iter().map(|(id, _, _)| id.clone()).collect();
    assert_eq!(columns.len(), 3);
    for ((_, item, input_item), raw) in columns.iter().zip(&raws) {
        assert_eq!(item, "", "the item is its raw item filed: not stored again");
        let stored: Value = serde_json::from_str(input_item.as_deref().unwrap()).unwrap();
        assert_eq!(&stored, raw);
    }

    let expected: Vec<ThreadItem> = raw_and_filed(&ids)
        .into_iter()
        .map(|(_, item)| item)
        .collect();
    check(store, &expected, &raws).await;
    drop(session);
    check(open(dir.path()), &expected, &raws).await;
}

/// Every read of `s1` gives back `expected`, each with its raw item.
async fn check(store: SqliteStore, expected: &[ThreadItem], raws: &[Value]) {
    let records = store.items("s1", View::All).await.unwrap();
    let items: Vec<&ThreadItem> = records.iter().map(|r| &r.item).collect();
    assert_eq!(items, expected.iter().collect::<Vec<_>>());
    for (record, raw) in records.iter().zip(raws) {
        let data = record.envelope.provider_data.as_deref().unwrap();
        assert_eq!(data.get("inputItem"), Some(raw), "the raw item is back");
    }
    // The log's completions carry the same items.
    let events = store.events_after("s1", 0, 100).await.unwrap();
    let logged: Vec<&ThreadItem> = events
        .iter()
        .filter_map(|event| match &event.payload {
            ServerNotification::ItemCompleted(completed) => Some(&completed.item),
            _ => None,
        })
        .collect();
    assert_eq!(logged, expected.iter().collect::<Vec<_>>());
    assert_eq!(session_items(&store).await, raws);
    store.close().await.unwrap();
}

async fn session_items(store: &SqliteStore) -> Vec<Value> {
    Session::open(store.clone(), "s1")
        .await
        .unwrap()
        .get_items(None)
        .await
        .unwrap()
}

/// An item whose raw input item files as something else (the runtime
/// wrote it, or changed it after filing) keeps its own JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_its_raw_item_does_not_file_as_is_stored_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    let item = user_message("i1", "what the client saw");
    let raw = json!({"role": "user", "content": "what the model saw"});
    let mut appended = vec![turn_started(&t, "u1")];
    appended.extend(born(
        &t,
        "u1",
        item.clone(),
        Some(json!({ "inputItem": raw })),
    ));
    appended.push(turn_completed(&t, "u1"));
    store.append(&t, appended).await.unwrap();
    store.close().await.unwrap();

    let columns = item_columns(dir.path(), &t);
    let stored: ThreadItem = serde_json::from_str(&columns[0].1).unwrap();
    assert_eq!(stored, item);
    let store = open(dir.path());
    let records = store.items(&t, View::All).await.unwrap();
    assert_eq!(records[0].item, item);
}

/// An empty `item` says "file the raw item": without one the row is
/// corrupt, and the read says which row and column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_item_without_its_raw_item_is_a_corrupt_row() {
    let dir = tempfile::tempdir().unwrap();
    one_session_item(dir.path()).await;
    raw(dir.path())
        .execute(
            "UPDATE items SET input_item = NULL WHERE thread_id = 's1'",
            [],
        )
        .unwrap();

    let store = keep_open(dir.path());
    match store.items("s1", View::All).await {
        Err(StoreError::CorruptRow(row)) => {
            assert_eq!((row.table, row.column), ("items", "item"));
            assert!(
                row.cause.to_string().contains("no raw input item"),
                "{}",
                row.cause
            );
        }
        other => panic!("expected a corrupt row, got {other:?}"),
    }
}
