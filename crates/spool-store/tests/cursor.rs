//! Reading the log after a cursor: exactly the missing events, in pages.

mod common;

use common::backend::TestStore;
use common::*;
use spool_store::{Store, StoreError};

on_every_backend!(
    events_after_a_cursor_are_exactly_the_missing_ones_in_pages,
    an_unknown_thread_is_an_error_not_an_empty_log,
);

async fn events_after_a_cursor_are_exactly_the_missing_ones_in_pages(ts: TestStore) {
    let store = &ts.store;
    let t = new_thread(store, false).await;
    let other = new_thread(store, false).await;
    store
        .append(&t, vec![turn_started(&t, "turn-1")])
        .await
        .unwrap();
    store
        .append(&other, vec![turn_started(&other, "turn-1")])
        .await
        .unwrap();
    for n in 0..10 {
        let item = format!("a{n}");
        store
            .append(
                &t,
                streamed_message(&t, "turn-1", &item, "one two three four"),
            )
            .await
            .unwrap();
    }
    store
        .append(&t, vec![turn_completed(&t, "turn-1")])
        .await
        .unwrap();
    store.flush().await.unwrap();

    let all = store.events_after(&t, 0, usize::MAX).await.unwrap();
    let last = all.last().unwrap().seq;
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=last).collect::<Vec<_>>(),
        "seqs are gap-free from 1"
    );
    assert!(all.iter().all(|e| e.thread_id == t));

    // Page through with a cursor: no gap, no duplicate, same events.
    let mut paged = Vec::new();
    let mut cursor = 0;
    loop {
        let page = store.events_after(&t, cursor, 7).await.unwrap();
        assert!(page.len() <= 7);
        let Some(tail) = page.last() else { break };
        cursor = tail.seq;
        paged.extend(page);
    }
    assert_eq!(paged, all);

    // From any cursor: exactly the events after it.
    for cursor in [1, 2, last / 2, last - 1] {
        let rest = store.events_after(&t, cursor, usize::MAX).await.unwrap();
        assert_eq!(rest.as_slice(), &all[cursor as usize..]);
    }
    assert!(store.events_after(&t, last, 10).await.unwrap().is_empty());
    assert!(
        store
            .events_after(&t, last + 5, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.events_after(&t, 0, 0).await.unwrap().is_empty());
}

async fn an_unknown_thread_is_an_error_not_an_empty_log(ts: TestStore) {
    let store = &ts.store;
    let error = store.events_after("nope", 0, 10).await.unwrap_err();
    assert!(
        matches!(error, StoreError::UnknownThread(ref id) if id == "nope"),
        "{error}"
    );
    let error = store
        .items("nope", spool_core::View::All)
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::UnknownThread(_)), "{error}");
    let error = store
        .append("nope", vec![turn_started("nope", "x")])
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::UnknownThread(_)), "{error}");
    assert!(store.thread("nope").await.unwrap().is_none());
}
