//! A thread's items one page at a time (`Store::items_page`): the pages of
//! a view, concatenated, are the view as `Store::items` reads it whole,
//! whatever the page size; a page reads at most `limit` rows, so a view
//! that leaves rows out may give short pages; an unknown thread is the
//! same error as for `items`.

mod common;

use common::backend::TestStore;
use common::*;
use spool_core::{ItemRecord, View};
use spool_protocol::{
    Audience, ItemEnvelope, ItemStartedNotification, ServerNotification, ThreadItem,
};
use spool_store::{AnyStore, Store, StoreError};

on_every_backend!(
    pages_cover_every_record_of_the_view_once_in_order,
    a_page_reads_at_most_limit_rows_and_the_view_filters_them,
    an_unknown_thread_is_the_error_items_gives,
);

/// Turn 1: a hidden context item, a user message, an agent message; turn
/// 2: a user message and an agent message still streaming (two deltas
/// committed), so the last record needs catching up from the log.
async fn thread_with_history(store: &AnyStore) -> String {
    let t = new_thread(store, false).await;
    let hidden = ThreadItem::Context {
        id: "ctx".to_owned(),
        text: "be brief".to_owned(),
    };
    let hidden_started = ServerNotification::ItemStarted(ItemStartedNotification {
        started_at_ms: Default::default(),
        item: hidden.clone(),
        thread_id: t.clone(),
        turn_id: "turn-1".to_owned(),
        envelope: Some(ItemEnvelope::started("runtime", Audience::LLM_ONLY, 0)),
    });
    let mut turn_1 = vec![
        turn_started(&t, "turn-1"),
        hidden_started,
        completed(&t, "turn-1", hidden),
        started(&t, "turn-1", user_message("u1", "What is 2+2?")),
        completed(&t, "turn-1", user_message("u1", "What is 2+2?")),
    ];
    turn_1.extend(streamed_message(&t, "turn-1", "a1", "It is 4."));
    turn_1.push(turn_completed(&t, "turn-1"));
    store.append(&t, turn_1).await.unwrap();
    store
        .append(
            &t,
            vec![
                turn_started(&t, "turn-2"),
                started(&t, "turn-2", user_message("u2", "And 3+3?")),
                completed(&t, "turn-2", user_message("u2", "And 3+3?")),
                started(&t, "turn-2", agent_message("a2", "")),
            ],
        )
        .await
        .unwrap();
    store
        .append(
            &t,
            vec![
                agent_delta(&t, "turn-2", "a2", "It is "),
                agent_delta(&t, "turn-2", "a2", "6."),
            ],
        )
        .await
        .unwrap();
    store.flush().await.unwrap();
    t
}

/// Every page of `view` from the start, `limit` rows at a time, checking
/// that each page follows its cursor.
async fn pages(store: &AnyStore, t: &str, view: View, limit: usize) -> Vec<Vec<ItemRecord>> {
    let mut after = 0;
    let mut pages = Vec::new();
    loop {
        let page = store.items_page(t, view, after, limit).await.unwrap();
        assert!(page.items.len() <= limit, "{view:?} limit {limit}");
        assert!(page.items.iter().all(|r| r.ordinal > after));
        pages.push(page.items);
        match page.next_after {
            Some(next) => {
                assert!(next > after, "the cursor moves on");
                after = next;
            }
            None => return pages,
        }
    }
}

fn ids(records: &[ItemRecord]) -> Vec<&str> {
    records.iter().map(|r| r.item.id()).collect()
}

async fn pages_cover_every_record_of_the_view_once_in_order(ts: TestStore) {
    let store = &ts.store;
    let t = thread_with_history(store).await;
    for view in [View::All, View::Client, View::Llm] {
        let whole = store.items(&t, view).await.unwrap();
        for limit in [1, 2, 3, 100] {
            let paged: Vec<ItemRecord> = pages(store, &t, view, limit)
                .await
                .into_iter()
                .flatten()
                .collect();
            assert_eq!(paged, whole, "{view:?} in pages of {limit}");
        }
    }
    let all = store.items(&t, View::All).await.unwrap();
    assert_eq!(ids(&all), ["ctx", "u1", "a1", "u2", "a2"]);
    // The streaming message comes with its committed deltas.
    let ThreadItem::AgentMessage { text, .. } = &all[4].item else {
        panic!("a2 is {:?}", all[4].item);
    };
    assert_eq!(text, "It is 6.");
    // Past the end: an empty last page.
    let last = all.last().unwrap().ordinal;
    let after_end = store.items_page(&t, View::All, last, 10).await.unwrap();
    assert!(after_end.items.is_empty());
    assert_eq!(after_end.next_after, None);
}

async fn a_page_reads_at_most_limit_rows_and_the_view_filters_them(ts: TestStore) {
    let store = &ts.store;
    let t = thread_with_history(store).await;
    let all = store.items(&t, View::All).await.unwrap();
    // The first two rows are ctx and u1; the client view leaves ctx out,
    // so its first page holds u1 alone and goes on after it.
    let first = store.items_page(&t, View::Client, 0, 2).await.unwrap();
    assert_eq!(ids(&first.items), ["u1"]);
    assert_eq!(first.next_after, Some(all[1].ordinal));
    let first_all = store.items_page(&t, View::All, 0, 2).await.unwrap();
    assert_eq!(ids(&first_all.items), ["ctx", "u1"]);
    assert_eq!(first_all.next_after, Some(all[1].ordinal));
    // A page that ends before the limit is the last one.
    let rest = store
        .items_page(&t, View::All, all[1].ordinal, 10)
        .await
        .unwrap();
    assert_eq!(ids(&rest.items), ["a1", "u2", "a2"]);
    assert_eq!(rest.next_after, None);
    // Limit 0 reads one row: paging never stalls.
    let one = store.items_page(&t, View::All, 0, 0).await.unwrap();
    assert_eq!(ids(&one.items), ["ctx"]);
    assert_eq!(one.next_after, Some(all[0].ordinal));
}

async fn an_unknown_thread_is_the_error_items_gives(ts: TestStore) {
    let store = &ts.store;
    let whole = store.items("nope", View::All).await.unwrap_err();
    assert!(matches!(whole, StoreError::UnknownThread(ref id) if id == "nope"));
    for view in [View::All, View::Client, View::Llm] {
        let paged = store.items_page("nope", view, 0, 10).await.unwrap_err();
        assert!(
            matches!(paged, StoreError::UnknownThread(ref id) if id == "nope"),
            "{view:?}: {paged}"
        );
    }
    // An existing thread with no items is an empty page, not an error.
    let t = new_thread(store, false).await;
    let empty = store.items_page(&t, View::Client, 0, 10).await.unwrap();
    assert!(empty.items.is_empty());
    assert_eq!(empty.next_after, None);
}
