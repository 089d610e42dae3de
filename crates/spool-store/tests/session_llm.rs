//! The model view of sessions (their raw items, paired) and the store's
//! newest-first reading of the model view: it must give exactly what
//! `spool_core::llm::llm_view` gives over all the records, including the
//! count of turns left out (kept by `turns.view_rank`), through removals,
//! clears, compactions and migration from schema version 1; and it decodes
//! only the rows the budget reaches.

mod common;
mod session_support;

use common::backend::{TestStore, quote};
use common::*;
use serde_json::Value;
use session_support::*;
use spool_core::View;
use spool_core::llm::{LlmView, LlmViewOptions, ReasoningIdPolicy, llm_view};
use spool_protocol::{ItemRemovedNotification, ServerNotification, ThreadItem};
use spool_store::{AnyStore, Session, Store, StoreOptions};

async fn session(store: &AnyStore, id: &str) -> Session<AnyStore> {
    Session::open(store.clone(), id)
        .await
        .expect("open session")
}

fn sent(view: &LlmView) -> Vec<Value> {
    view.input
        .iter()
        .map(|item| serde_json::to_value(item).unwrap())
        .collect()
}

fn budget(tokens: usize) -> LlmViewOptions {
    LlmViewOptions {
        token_budget: Some(tokens),
        ..LlmViewOptions::default()
    }
}

/// `turns` turns of two session items each: items `2n` and `2n + 1`.
async fn add_pairs(s: &Session<AnyStore>, turns: usize) {
    for n in 0..turns {
        s.add_items(vec![sdk_item(2 * n), sdk_item(2 * n + 1)])
            .await
            .unwrap();
    }
}

/// The store's view equals the in-memory view over every record.
async fn assert_same_view(store: &AnyStore, thread_id: &str, options: LlmViewOptions) {
    let records = store.items(thread_id, View::All).await.unwrap();
    let expected = llm_view(&records, &options);
    let got = store.llm_view(thread_id, options.clone()).await.unwrap();
    assert_eq!(got.input, expected.input, "{options:?}");
    assert_eq!(
        (got.total_tokens, got.turns_included, got.turns_omitted),
        (
            expected.total_tokens,
            expected.turns_included,
            expected.turns_omitted
        ),
        "{options:?}"
    );
}

on_every_backend!(
    the_model_gets_the_raw_items_paired,
    newest_first_reading_matches_the_whole_thread_view,
    the_view_starts_at_the_latest_compaction,
    a_message_in_progress_is_read_with_its_deltas,
    a_corrupt_row_fails_the_view_only_if_it_reaches_it,
    sessions_written_in_shared_commits_keep_views_of_their_own,
    an_unknown_thread_has_no_view_and_an_empty_one_an_empty_view,
    turns_longer_than_a_page_are_read_whole,
);

/// Turns of hundreds of items span pages, and the pages after a spent
/// budget are sized by the turn being read: the view is still the whole
/// thread's.
async fn turns_longer_than_a_page_are_read_whole(ts: TestStore) {
    let store = ts.store.clone();
    let s = session(&store, "conv-long").await;
    for (n, len) in [(0, 300), (1, 3), (2, 450), (3, 2)] {
        let turn = (0..len).map(|k| sdk_item(n * 1_000 + k)).collect();
        s.add_items(turn).await.unwrap();
    }
    store.flush().await.unwrap();
    for tokens in [0, 40, 2_000, 20_000, 1_000_000] {
        assert_same_view(&store, "conv-long", budget(tokens)).await;
    }
    assert_same_view(&store, "conv-long", LlmViewOptions::default()).await;
}

/// The view of a thread that does not exist is an error, whatever the
/// budget; that of a thread without items is empty.
async fn an_unknown_thread_has_no_view_and_an_empty_one_an_empty_view(ts: TestStore) {
    let store = ts.store.clone();
    for options in [budget(0), budget(20_000), LlmViewOptions::default()] {
        let error = store.llm_view("nope", options.clone()).await.unwrap_err();
        assert!(
            matches!(error, spool_store::StoreError::UnknownThread(ref t) if t == "nope"),
            "{error}"
        );
    }
    session(&store, "conv-empty").await;
    let view = store.llm_view("conv-empty", budget(20_000)).await.unwrap();
    assert!(view.input.is_empty());
    assert_eq!((view.turns_included, view.turns_omitted), (0, 0));
}

/// Sessions appended at the same time share group commits, which write
/// the rows of all their threads together: each session's view, its turn
/// counts included, must still be its own.
async fn sessions_written_in_shared_commits_keep_views_of_their_own(ts: TestStore) {
    let store = ts.store.clone();
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..6usize {
        let s = session(&store, &format!("shared-{k}")).await;
        tasks.spawn(async move {
            for n in 0..25usize {
                let size = (n + k) % 4 + 1;
                let turn: Vec<Value> = (0..size).map(|j| sdk_item(k * 1000 + n * 10 + j)).collect();
                s.add_items(turn).await.unwrap();
                // Some turns end up with nothing in the view.
                if (n + k) % 6 == 0 {
                    for _ in 0..size {
                        s.pop_item().await.unwrap();
                    }
                }
            }
            s
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    for k in 0..6 {
        let thread_id = format!("shared-{k}");
        for tokens in [0, 120, 900, 1_000_000] {
            assert_same_view(&store, &thread_id, budget(tokens)).await;
        }
        assert_ranks_true(&ts, &thread_id);
    }

    // A turn with nothing in the view does not count; then a store that
    // knows nothing of the threads yet (reopened) goes on ranking them.
    for k in 0..6 {
        let thread_id = format!("shared-{k}");
        let turn = format!("empty-{k}");
        store
            .append(
                &thread_id,
                vec![
                    turn_started(&thread_id, &turn),
                    turn_completed(&thread_id, &turn),
                ],
            )
            .await
            .unwrap();
        session(&store, &thread_id)
            .await
            .add_items(vec![user("after")])
            .await
            .unwrap();
        assert_ranks_true(&ts, &thread_id);
    }
    store.close().await.unwrap();
    let store = ts.reopen(StoreOptions::default()).await;
    for k in 0..6 {
        let thread_id = format!("shared-{k}");
        let s = session(&store, &thread_id).await;
        s.add_items(vec![user("reopened")]).await.unwrap();
        s.add_items(vec![sdk_item(1), sdk_item(2)]).await.unwrap();
        assert_ranks_true(&ts, &thread_id);
        for tokens in [0, 120, 1_000_000] {
            assert_same_view(&store, &thread_id, budget(tokens)).await;
        }
    }
}

/// Every turn's stored `view_rank` is what it is by definition: how many
/// turns up to it have an item in the model's view (items of a turn lie
/// between its start and the next turn's).
fn assert_ranks_true(ts: &TestStore, thread_id: &str) {
    let id = quote(thread_id);
    // SQLite keeps a thread's turns among its rows of `items`.
    let (turns, items) = match ts.backend() {
        "sqlite" => (
            "(SELECT * FROM items WHERE is_turn)",
            "(SELECT * FROM items WHERE NOT is_turn)",
        ),
        _ => ("turns", "items"),
    };
    let wrong = ts.count(&format!(
        "SELECT count(*) FROM {turns} t WHERE t.thread_id = {id} AND t.view_rank <> ( \
           SELECT count(*) FROM {turns} u WHERE u.thread_id = t.thread_id \
             AND u.ordinal <= t.ordinal AND EXISTS (SELECT 1 FROM {items} i \
               WHERE i.thread_id = u.thread_id AND i.ordinal > u.ordinal AND i.llm \
               AND i.ordinal < coalesce((SELECT min(n.ordinal) FROM {turns} n \
                 WHERE n.thread_id = u.thread_id AND n.ordinal > u.ordinal), \
                 9223372036854775807)))"
    ));
    let turns = ts.count(&format!(
        "SELECT count(*) FROM {turns} t WHERE thread_id = {id}"
    ));
    assert!(turns > 0, "{thread_id} has no turns");
    assert_eq!(
        wrong, 0,
        "{wrong} of {turns} turns of {thread_id} have a wrong view rank"
    );
}

async fn the_model_gets_the_raw_items_paired(ts: TestStore) {
    let store = ts.store.clone();
    let s = session(&store, "conv-llm").await;
    let items = every_shape();
    s.add_items(items.clone()).await.unwrap();
    let view = store
        .llm_view("conv-llm", LlmViewOptions::default())
        .await
        .unwrap();
    assert_eq!(sent(&view), items);

    // An output whose call is gone, and a call never answered, are not
    // sent (the pairing rules); the session still has them.
    s.add_items(vec![output("gone"), call("open"), user("next")])
        .await
        .unwrap();
    let view = store
        .llm_view("conv-llm", LlmViewOptions::default())
        .await
        .unwrap();
    let mut expected = items.clone();
    expected.push(user("next"));
    assert_eq!(sent(&view), expected);
    assert_eq!(s.get_items(None).await.unwrap().len(), items.len() + 3);

    // The caller's own items are sent as given: the omit policy is for
    // reasoning spool generated, never for the caller's input.
    let omit = LlmViewOptions {
        reasoning_ids: ReasoningIdPolicy::Omit,
        ..LlmViewOptions::default()
    };
    let view = store.llm_view("conv-llm", omit).await.unwrap();
    let reasoning = sent(&view)
        .into_iter()
        .find(|item| item["type"] == "reasoning")
        .unwrap();
    assert_eq!(reasoning, items[4]);
    assert!(reasoning.get("id").is_some());
}

async fn newest_first_reading_matches_the_whole_thread_view(ts: TestStore) {
    let store = ts.store.clone();
    let s = session(&store, "conv-budget").await;
    // Turns of different sizes, some with tool exchanges.
    for n in 0..60 {
        let mut turn: Vec<Value> = (0..(n % 7 + 1)).map(|k| sdk_item(n * 10 + k)).collect();
        if n % 5 == 0 {
            turn.push(call(&format!("c{n}")));
            turn.push(output(&format!("c{n}")));
        }
        s.add_items(turn).await.unwrap();
    }
    for tokens in [0, 50, 700, 3_000, 20_000, 1_000_000] {
        assert_same_view(&store, "conv-budget", budget(tokens)).await;
    }
    assert_same_view(&store, "conv-budget", LlmViewOptions::default()).await;
    // Counts are cached now; the views stay the same.
    store.flush().await.unwrap();
    let view = store.llm_view("conv-budget", budget(3_000)).await.unwrap();
    assert!(view.computed_token_counts.is_empty());
    assert!(view.turns_omitted > 0 && view.turns_included > 1);
    assert_same_view(&store, "conv-budget", budget(3_000)).await;

    // Removing items, old and new, keeps the counts of turns true: a turn
    // emptied by removals no longer counts.
    let records = store.items("conv-budget", View::All).await.unwrap();
    let single_item_turn = records
        .iter()
        .find(|r| records.iter().filter(|o| o.turn_id == r.turn_id).count() == 1)
        .unwrap();
    let removals = [single_item_turn, &records[40], &records[41]]
        .iter()
        .map(|record| {
            ServerNotification::ItemRemoved(ItemRemovedNotification {
                thread_id: "conv-budget".into(),
                turn_id: record.turn_id.clone(),
                item_id: record.item.id().into(),
            })
        })
        .collect();
    store.append("conv-budget", removals).await.unwrap();
    for _ in 0..5 {
        s.pop_item().await.unwrap();
    }
    for tokens in [0, 700, 3_000, 20_000] {
        assert_same_view(&store, "conv-budget", budget(tokens)).await;
    }
    s.clear().await.unwrap();
    s.add_items(vec![user("after the clear")]).await.unwrap();
    s.add_items(vec![sdk_item(1), sdk_item(2)]).await.unwrap();
    for tokens in [0, 60, 20_000] {
        assert_same_view(&store, "conv-budget", budget(tokens)).await;
    }
}

async fn the_view_starts_at_the_latest_compaction(ts: TestStore) {
    let store = ts.store.clone();
    let t = new_thread(&store, false).await;
    let s = session(&store, &t).await;
    add_pairs(&s, 20).await;
    let compaction = ThreadItem::ContextCompaction {
        id: "cc".into(),
        summary: Some("the first twenty turns".into()),
        replaces: None,
    };
    store
        .append(
            &t,
            vec![
                turn_started(&t, "turn-cc"),
                started(&t, "turn-cc", compaction.clone()),
                completed(&t, "turn-cc", compaction),
                turn_completed(&t, "turn-cc"),
            ],
        )
        .await
        .unwrap();
    add_pairs(&s, 20).await;
    for tokens in [0, 500, 1_000, 1_500, 100_000] {
        assert_same_view(&store, &t, budget(tokens)).await;
    }
    let view = store.llm_view(&t, LlmViewOptions::default()).await.unwrap();
    assert_eq!(view.turns_included, 21);
}

/// The newest row of the view is a message still streaming, whose deltas
/// were committed after its row: it is brought up to date while the page
/// it is on is still being read, and the view is what the whole thread's
/// records give, at budgets that stop inside the first page and beyond it.
async fn a_message_in_progress_is_read_with_its_deltas(ts: TestStore) {
    let store = ts.store.clone();
    let t = new_thread(&store, false).await;
    let s = session(&store, &t).await;
    // 200 rows: the first page (128 rows) ends inside them.
    add_pairs(&s, 100).await;
    start_message(&store, &t, "turn-live", "live").await;
    for word in ["still ", "streaming"] {
        store
            .append(&t, vec![agent_delta(&t, "turn-live", "live", word)])
            .await
            .unwrap();
    }
    // Deltas are committed in groups, after `append` answers.
    store.flush().await.unwrap();
    for tokens in [0, 500, 3_000, 6_000, 1_000_000] {
        assert_same_view(&store, &t, budget(tokens)).await;
    }
    assert_same_view(&store, &t, LlmViewOptions::default()).await;
    let view = store.llm_view(&t, budget(500)).await.unwrap();
    let newest = serde_json::to_value(view.input.last().unwrap()).unwrap();
    assert!(
        newest.to_string().contains("still streaming"),
        "the newest input is not the message as streamed so far: {newest}"
    );
    assert!(view.turns_omitted > 0, "500 tokens hold every turn");
}

/// The view decodes the rows its budget reaches and no more: a corrupt row
/// older than that does not fail it, though it is on a page the view read
/// (SQLite steps only as far as needed, PostgreSQL fetches the page whole
/// but decodes only what it takes), and a view that reaches the row fails
/// naming it.
async fn a_corrupt_row_fails_the_view_only_if_it_reaches_it(ts: TestStore) {
    let store = ts.store.clone();
    let t = new_thread(&store, false).await;
    // 40 turns, 80 item rows: all on the view's first page.
    let events = (0..40)
        .flat_map(|n| {
            let turn = format!("turn-{n}");
            let user = user_message(&format!("u{n}"), &format!("question {n}"));
            let agent = agent_message(&format!("a{n}"), &format!("answer {n}"));
            vec![
                turn_started(&t, &turn),
                started(&t, &turn, user.clone()),
                completed(&t, &turn, user),
                started(&t, &turn, agent.clone()),
                completed(&t, &turn, agent),
                turn_completed(&t, &turn),
            ]
        })
        .collect();
    store.append(&t, events).await.unwrap();
    store.flush().await.unwrap();
    let corrupt = format!(
        "UPDATE items SET item = 'not json' WHERE thread_id = {} AND item_id = 'u5'",
        quote(&t)
    );
    let updated = match ts.backend() {
        "sqlite" => ts.count(&format!("{corrupt} RETURNING 1")),
        _ => ts.count(&format!(
            "WITH u AS ({corrupt} RETURNING 1) SELECT count(*) FROM u"
        )),
    };
    assert_eq!(updated, 1);

    let view = store.llm_view(&t, budget(100)).await.unwrap();
    assert!(
        view.turns_included > 1 && view.turns_omitted > 0,
        "{} turns in, {} out",
        view.turns_included,
        view.turns_omitted
    );
    let error = store.llm_view(&t, budget(100_000)).await.unwrap_err();
    let row = error
        .corrupt_row()
        .unwrap_or_else(|| panic!("expected a corrupt row error, got {error}"));
    assert_eq!((row.table, row.item_id.as_deref()), ("items", Some("u5")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_file_migrates_with_its_view_columns_filled() {
    let dir = tempfile::tempdir().unwrap();
    let t = {
        let store = AnyStore::from(open(dir.path()));
        let t = new_thread(&store, false).await;
        for n in 0..30 {
            let turn = format!("turn-{n}");
            let mut events = vec![turn_started(&t, &turn)];
            if n % 3 != 0 {
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
        t
    };
    let expected = {
        let store = AnyStore::from(open(dir.path()));
        let view = store.llm_view(&t, budget(60)).await.unwrap();
        assert!(view.turns_omitted > 0);
        view
    };
    // Take the file back to version 1: its columns and index names (the
    // tables keep the storage of the current version, which the
    // migrations copy from as they would from version 1's; `upgrade.rs`
    // upgrades a file written by version 2 itself).
    raw(dir.path())
        .execute_batch(
            "DROP TABLE pending_requests;
             DROP TABLE run_states;
             DROP TABLE deleted_threads;
             DROP TABLE seq_reservations;
             DROP TABLE running_processes;
             DROP TABLE history_cursors;
             ALTER TABLE threads DROP COLUMN ephemeral;
             CREATE TABLE turns (
                 thread_id    TEXT NOT NULL REFERENCES threads (id),
                 turn_id      TEXT NOT NULL,
                 ordinal      INTEGER NOT NULL,
                 seq          INTEGER NOT NULL,
                 status       TEXT NOT NULL,
                 error        TEXT,
                 started_at   INTEGER,
                 completed_at INTEGER,
                 duration_ms  INTEGER,
                 token_usage  TEXT,
                 PRIMARY KEY (thread_id, ordinal)
             ) STRICT, WITHOUT ROWID;
             INSERT INTO turns SELECT thread_id, item_id, ordinal, seq, status, error, started_at,
                 completed_at, duration_ms, token_usage FROM items WHERE is_turn = 1;
             CREATE INDEX turns_open ON turns (thread_id) WHERE status = 'inProgress';
             DELETE FROM items WHERE is_turn = 1;
             DROP INDEX items_by_id;
             DROP INDEX items_open;
             CREATE INDEX items_open ON items (thread_id) WHERE status = 'inProgress';
             ALTER TABLE items DROP COLUMN is_turn;
             ALTER TABLE items DROP COLUMN error;
             ALTER TABLE items DROP COLUMN started_at;
             ALTER TABLE items DROP COLUMN completed_at;
             ALTER TABLE items DROP COLUMN duration_ms;
             ALTER TABLE items DROP COLUMN token_usage;
             ALTER TABLE items DROP COLUMN view_rank;
             DROP INDEX items_compactions;
             DROP TABLE thread_keys;
             DROP INDEX threads_by_key;
             ALTER TABLE threads DROP COLUMN key;
             CREATE UNIQUE INDEX items_by_ordinal ON items (thread_id, ordinal);
             ALTER TABLE items DROP COLUMN input_item;
             ALTER TABLE items DROP COLUMN llm;
             CREATE UNIQUE INDEX turns_v1_key ON turns (thread_id, turn_id);
             CREATE UNIQUE INDEX turns_by_ordinal ON turns (thread_id, ordinal);
             ALTER TABLE threads ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
             PRAGMA user_version = 1;",
        )
        .unwrap();
    let store = AnyStore::from(open(dir.path()));
    let view = store.llm_view(&t, budget(60)).await.unwrap();
    assert_eq!(
        (view.input, view.turns_included, view.turns_omitted),
        (
            expected.input,
            expected.turns_included,
            expected.turns_omitted
        )
    );
    assert_same_view(&store, &t, budget(60)).await;
}
