//! Thread rows: creation, listing in pages, archiving; and the views of a
//! thread's items, with the model view caching its token counts.

mod common;

use common::backend::TestStore;
use common::*;
use spool_core::View;
use spool_core::llm::LlmViewOptions;
use spool_protocol::{
    Audience, HistoryMode, ItemEnvelope, ItemStartedNotification, ServerNotification,
    ThreadArchivedNotification, ThreadItem, ThreadStatus,
};
use spool_store::{NewThread, Store, StoreError, ThreadListQuery, ThreadSortKey};

on_every_backend!(
    threads_are_created_with_their_settings_and_thread_started_as_seq_one,
    threads_list_newest_first_in_pages_and_archived_apart,
    threads_are_found_by_a_piece_of_their_title,
    views_select_items_and_the_model_view_caches_token_counts,
);

async fn threads_are_created_with_their_settings_and_thread_started_as_seq_one(ts: TestStore) {
    let store = &ts.store;
    let new = NewThread {
        id: Some("thread-a".to_owned()),
        name: Some("first".to_owned()),
        model: Some("gpt-test".to_owned()),
        history_mode: HistoryMode::PreviousResponseId,
        forked_from_id: Some("thread-0".to_owned()),
        ..NewThread::new("openai", "/repo")
    };
    let created = store.create_thread(new.clone()).await.unwrap();
    assert_eq!(created.last_seq, 1);
    assert_eq!(store.thread("thread-a").await.unwrap().unwrap(), created);
    let thread = &created.thread;
    assert_eq!(thread.name.as_deref(), Some("first"));
    assert_eq!(thread.model.as_deref(), Some("gpt-test"));
    assert_eq!(thread.history_owner, Some(HistoryMode::PreviousResponseId));
    assert_eq!(thread.forked_from_id.as_deref(), Some("thread-0"));
    assert_eq!(thread.cwd, "/repo");
    assert_eq!(thread.status, ThreadStatus::NotLoaded);

    let events = store.events_after("thread-a", 0, 10).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].seq, 1);
    let ServerNotification::ThreadStarted(started) = &events[0].payload else {
        panic!("seq 1 is {}", events[0].payload.method());
    };
    assert_eq!(started.thread.id, "thread-a");

    let error = store.create_thread(new).await.unwrap_err();
    assert!(
        matches!(error, StoreError::ThreadExists(ref id) if id == "thread-a"),
        "{error}"
    );

    // Generated ids are UUIDv7 strings.
    let generated = new_thread(store, false).await;
    assert_eq!(generated.len(), 36);
}

async fn threads_list_newest_first_in_pages_and_archived_apart(ts: TestStore) {
    let store = &ts.store;
    let mut ids = Vec::new();
    for _ in 0..7 {
        ids.push(new_thread(store, false).await);
    }
    let archived = ids.remove(3);
    store
        .append(
            &archived,
            vec![ServerNotification::ThreadArchived(
                ThreadArchivedNotification {
                    thread_id: archived.clone(),
                },
            )],
        )
        .await
        .unwrap();

    // UUIDv7 ids created in order sort like their creation times.
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    let mut listed = Vec::new();
    let mut query = ThreadListQuery {
        limit: 4,
        ..ThreadListQuery::default()
    };
    loop {
        let page = store.list_threads(query.clone()).await.unwrap();
        assert!(page.threads.len() <= 4);
        listed.extend(page.threads.into_iter().map(|r| r.thread.id));
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => break,
        }
    }
    assert_eq!(listed, newest_first);

    let page = store
        .list_threads(ThreadListQuery {
            archived: true,
            ..ThreadListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.threads.len(), 1);
    assert!(page.threads[0].archived);
    assert_eq!(page.next_cursor, None);

    // Sorted by last update, the thread touched last comes first.
    let touched = ids[0].clone();
    store
        .append(&touched, vec![turn_started(&touched, "turn-1")])
        .await
        .unwrap();
    let page = store
        .list_threads(ThreadListQuery {
            limit: 1,
            sort_key: ThreadSortKey::UpdatedAt,
            ..ThreadListQuery::default()
        })
        .await
        .unwrap();
    // Times are in ms; several threads may share the newest millisecond.
    let first = &page.threads[0];
    assert!(first.thread.updated_at >= first.thread.created_at);

    let error = store
        .list_threads(ThreadListQuery {
            cursor: Some("no-such-thread".to_owned()),
            ..ThreadListQuery::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::BadCursor(_)), "{error}");
}

async fn threads_are_found_by_a_piece_of_their_title(ts: TestStore) {
    let store = &ts.store;
    let named = NewThread {
        name: Some("Deploy the Fix".to_owned()),
        ..NewThread::new("openai", "/repo")
    };
    let named = store.create_thread(named).await.unwrap().thread.id;
    // Named: its name is its title, so its preview is not searched.
    store
        .append(
            &named,
            vec![
                turn_started(&named, "turn-1"),
                started(&named, "turn-1", user_message("u0", "the parser")),
            ],
        )
        .await
        .unwrap();
    let unnamed = new_thread(store, false).await;
    store
        .append(
            &unnamed,
            vec![
                turn_started(&unnamed, "turn-1"),
                started(
                    &unnamed,
                    "turn-1",
                    user_message("u1", "Please review the parser"),
                ),
            ],
        )
        .await
        .unwrap();
    let found = async |search: &str| -> Vec<String> {
        let query = ThreadListQuery {
            search: Some(search.to_owned()),
            ..ThreadListQuery::default()
        };
        let page = store.list_threads(query).await.unwrap();
        page.threads.into_iter().map(|r| r.thread.id).collect()
    };
    assert_eq!(found("deploy").await, [named.as_str()]);
    assert_eq!(found("THE FIX").await, [named.as_str()]);
    assert_eq!(found("Parser").await, [unnamed.as_str()]);
    assert!(found("zebra").await.is_empty());
    assert_eq!(found("e").await.len(), 2);
}

async fn views_select_items_and_the_model_view_caches_token_counts(ts: TestStore) {
    let store = &ts.store;
    let t = new_thread(store, false).await;
    let hidden = ThreadItem::Context {
        id: "ctx".to_owned(),
        text: "the user prefers short answers".to_owned(),
    };
    let hidden_started = ServerNotification::ItemStarted(ItemStartedNotification {
        started_at_ms: Default::default(),
        item: hidden.clone(),
        thread_id: t.clone(),
        turn_id: "turn-1".to_owned(),
        envelope: Some(ItemEnvelope::started("runtime", Audience::LLM_ONLY, 0)),
    });
    store
        .append(
            &t,
            vec![
                turn_started(&t, "turn-1"),
                hidden_started,
                completed(&t, "turn-1", hidden),
                started(&t, "turn-1", user_message("u1", "What is 2+2?")),
                completed(&t, "turn-1", user_message("u1", "What is 2+2?")),
            ],
        )
        .await
        .unwrap();
    store
        .append(&t, streamed_message(&t, "turn-1", "a1", "It is 4."))
        .await
        .unwrap();
    store
        .append(&t, vec![turn_completed(&t, "turn-1")])
        .await
        .unwrap();

    let ids = |records: Vec<spool_core::ItemRecord>| {
        records
            .iter()
            .map(|r| r.item.id().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(store.items(&t, View::All).await.unwrap()),
        ["ctx", "u1", "a1"]
    );
    assert_eq!(
        ids(store.items(&t, View::Client).await.unwrap()),
        ["u1", "a1"]
    );
    assert_eq!(
        ids(store.items(&t, View::Llm).await.unwrap()),
        ["ctx", "u1", "a1"]
    );
    assert_eq!(
        store.thread(&t).await.unwrap().unwrap().thread.preview,
        "What is 2+2?"
    );

    let all = store.items(&t, View::All).await.unwrap();
    assert!(all.iter().all(|r| r.token_count.is_none()));
    let view = store.llm_view(&t, LlmViewOptions::default()).await.unwrap();
    assert!(!view.input.is_empty());
    assert!(view.total_tokens > 0);
    assert!(!view.computed_token_counts.is_empty());

    store.flush().await.unwrap();
    let cached = store.items(&t, View::All).await.unwrap();
    for (item_id, count) in &view.computed_token_counts {
        let record = cached.iter().find(|r| r.item.id() == item_id).unwrap();
        assert_eq!(record.token_count, Some(*count), "{item_id}");
    }
    // A second view finds every count cached.
    let again = store.llm_view(&t, LlmViewOptions::default()).await.unwrap();
    assert!(again.computed_token_counts.is_empty());
    assert_eq!(again.total_tokens, view.total_tokens);
}

/// `threads.updated_at_ms` and the time of the thread's newest event.
fn updated_and_newest(dir: &std::path::Path, thread: &str) -> (i64, i64) {
    raw(dir)
        .query_row(
            "SELECT updated_at_ms, (SELECT max(at_ms) FROM events WHERE thread_id = ?1) \
             FROM threads WHERE id = ?1",
            [thread],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updated_at_lags_by_under_a_second_and_is_exact_after_close_or_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let t = new_thread(&store, false).await;
    for n in 0..20 {
        let turn = format!("turn-{n}");
        let events = vec![turn_started(&t, &turn), turn_completed(&t, &turn)];
        store.append(&t, events).await.unwrap();
        // While the store runs, the row lags by less than a second.
        let (updated, newest) = updated_and_newest(dir.path(), &t);
        assert!(
            updated <= newest && newest - updated < 1_000,
            "{updated} {newest}"
        );
        // A read is exact all the same: it takes the newest event's time.
        let read = store.thread(&t).await.unwrap().unwrap();
        assert_eq!(read.thread.updated_at, newest.div_euclid(1000));
    }
    // However far the row is behind, a read and a listing say the newest
    // event's time (the listing's order still follows the row).
    raw(dir.path())
        .execute(
            "UPDATE threads SET updated_at_ms = updated_at_ms - 5000 WHERE id = ?1",
            [&t],
        )
        .unwrap();
    let (_, newest) = updated_and_newest(dir.path(), &t);
    let read = store.thread(&t).await.unwrap().unwrap();
    assert_eq!(read.thread.updated_at, newest.div_euclid(1000));
    let listed = store
        .list_threads(ThreadListQuery {
            sort_key: ThreadSortKey::UpdatedAt,
            ..ThreadListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.threads[0].thread.updated_at, newest.div_euclid(1000));
    raw(dir.path())
        .execute(
            "UPDATE threads SET updated_at_ms = updated_at_ms + 5000 WHERE id = ?1",
            [&t],
        )
        .unwrap();
    // Closing writes it exactly.
    store.close().await.unwrap();
    drop(store);
    let (updated, newest) = updated_and_newest(dir.path(), &t);
    assert_eq!(updated, newest);

    // A crash can leave it behind (by less than a second); the next open
    // that is alone takes it from the log.
    raw(dir.path())
        .execute(
            "UPDATE threads SET updated_at_ms = updated_at_ms - 900 WHERE id = ?1",
            [&t],
        )
        .unwrap();
    let store = open(dir.path());
    let (updated, newest) = updated_and_newest(dir.path(), &t);
    assert_eq!(updated, newest);
    let listed = store.thread(&t).await.unwrap().unwrap();
    assert_eq!(listed.thread.updated_at, newest.div_euclid(1000));
    assert_eq!(listed.last_seq, 41);
}
