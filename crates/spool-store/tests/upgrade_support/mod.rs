//! What an upgrade must keep: every read of the store, written out as
//! text, and the contents of the file the text was taken from.
//!
//! `tests/fixtures/v2.sql` is a dump (`sqlite3 .dump`, plus the
//! `user_version`) of a store that the schema version 2 build (commit
//! eed43d7) filled with [`fill`], copied with `VACUUM INTO` right after;
//! `v2.reads.txt` is [`digest_lines`] of [`snapshot`] of that store, taken
//! by the same build. `upgrade.rs` loads the dump, opens it with this
//! build (which migrates it) and checks every read comes out the same.

#![allow(dead_code)] // each test binary uses a different subset

use std::fmt::Write as _;

use serde_json::json;
use spool_core::View;
use spool_core::llm::LlmViewOptions;
use spool_protocol::{
    ServerNotification, ThreadArchivedNotification, ThreadNameUpdatedNotification,
};
use spool_store::{NewThread, Session, SqliteStore, Store, ThreadListQuery, ThreadSortKey};

use crate::common::*;
use crate::session_support::{every_shape, sdk_item};

/// Writes the threads the fixture holds: sessions (with a pop and a
/// clear), a runtime thread of streamed turns, a named and archived one,
/// and a thread whose last turn is still streaming (a reader catches its
/// item up from the deltas).
pub async fn fill(store: &SqliteStore) {
    let s = Session::open(store.clone(), "session-a").await.unwrap();
    s.add_items(every_shape()).await.unwrap();
    s.add_items((0..6).map(sdk_item).collect()).await.unwrap();
    for n in 6..9 {
        s.add_items(vec![sdk_item(n)]).await.unwrap();
    }
    s.pop_item().await.unwrap();
    let cleared = Session::open(store.clone(), "session-cleared")
        .await
        .unwrap();
    cleared
        .add_items((0..4).map(sdk_item).collect())
        .await
        .unwrap();
    cleared.clear().await.unwrap();
    cleared
        .add_items(vec![json!({"role": "user", "content": "after the clear"})])
        .await
        .unwrap();

    let t = thread_with_id(store, "runtime-thread").await;
    for n in 0..12 {
        let turn = format!("turn-{n}");
        let mut events = vec![turn_started(&t, &turn)];
        if n % 3 != 0 {
            events.push(started(
                &t,
                &turn,
                user_message(&format!("u{n}"), "hi there"),
            ));
            events.push(completed(
                &t,
                &turn,
                user_message(&format!("u{n}"), "hi there"),
            ));
            events.extend(streamed_message(
                &t,
                &turn,
                &format!("a{n}"),
                "hello there friend",
            ));
        }
        events.push(turn_completed(&t, &turn));
        store.append(&t, events).await.unwrap();
    }

    let named = thread_with_id(store, "named-archived").await;
    store
        .append(
            &named,
            vec![
                ServerNotification::ThreadNameUpdated(ThreadNameUpdatedNotification {
                    thread_id: named.clone(),
                    thread_name: Some("a name".to_owned()),
                }),
                ServerNotification::ThreadArchived(ThreadArchivedNotification {
                    thread_id: named.clone(),
                }),
            ],
        )
        .await
        .unwrap();

    let open = thread_with_id(store, "streaming").await;
    store
        .append(
            &open,
            streamed_message(&open, "turn-0", "done", "finished text"),
        )
        .await
        .unwrap_err(); // no turn yet: refused, nothing stored
    start_message(store, &open, "turn-0", "live").await;
    for word in ["still ", "going "] {
        store
            .append(&open, vec![agent_delta(&open, "turn-0", "live", word)])
            .await
            .unwrap();
    }
    store.flush().await.unwrap();
}

async fn thread_with_id(store: &SqliteStore, id: &str) -> String {
    let new = NewThread {
        id: Some(id.to_owned()),
        ..NewThread::new("openai", "/work")
    };
    store.create_thread(new).await.unwrap().thread.id
}

/// Every read of every thread, as text.
pub async fn snapshot(store: &SqliteStore) -> String {
    let mut out = String::new();
    let mut ids = Vec::new();
    for archived in [false, true] {
        for sort_key in [ThreadSortKey::CreatedAt, ThreadSortKey::UpdatedAt] {
            let query = ThreadListQuery {
                limit: 100,
                sort_key,
                archived,
                cursor: None,
                search: None,
            };
            let page = store.list_threads(query).await.unwrap();
            let listed: Vec<_> = page.threads.iter().map(|t| t.thread.id.clone()).collect();
            writeln!(out, "list archived={archived} {sort_key:?}: {listed:?}").unwrap();
            for id in listed {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
    }
    ids.sort();
    for id in &ids {
        writeln!(out, "== thread {id}").unwrap();
        writeln!(out, "{:?}", store.thread(id).await.unwrap()).unwrap();
        writeln!(out, "{:?}", store.turns(id).await.unwrap()).unwrap();
        for view in [View::All, View::Client, View::Llm] {
            writeln!(out, "{view:?}: {:?}", store.items(id, view).await.unwrap()).unwrap();
        }
        writeln!(
            out,
            "{:?}",
            store.events_after(id, 0, 10_000).await.unwrap()
        )
        .unwrap();
        writeln!(out, "{:?}", store.events_after(id, 5, 3).await.unwrap()).unwrap();
        for limit in [None, Some(1), Some(5)] {
            let got = store
                .input_items::<serde_json::Value>(id, limit)
                .await
                .unwrap();
            writeln!(out, "input {limit:?}: {got:?}").unwrap();
        }
        for budget in [None, Some(60)] {
            let options = LlmViewOptions {
                token_budget: budget,
                ..LlmViewOptions::default()
            };
            let view = store.llm_view(id, options).await.unwrap();
            // The fields the fixtures were written with (a view asked for
            // no `base` has none).
            assert_eq!(view.base, None);
            writeln!(
                out,
                "llm {budget:?}: LlmView {{ input: {:?}, total_tokens: {:?}, turns_included: {:?}, \
                 turns_omitted: {:?}, computed_token_counts: {:?} }}",
                view.input,
                view.total_tokens,
                view.turns_included,
                view.turns_omitted,
                view.computed_token_counts
            )
            .unwrap();
            // The token counts it computed are cached by a commit of their
            // own: wait for it, so the next read does not race it.
            store.flush().await.unwrap();
        }
    }
    out
}

/// A snapshot as kept in the fixture: per line, its FNV-1a hash and the
/// start of the line (to say which read it is).
pub fn digest_lines(snapshot: &str) -> String {
    let mut out = String::new();
    for line in snapshot.lines() {
        let label: String = line.chars().take(60).collect();
        writeln!(out, "{:016x} {label}", fnv1a(line)).unwrap();
    }
    out
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
