//! What a killed child's file must satisfy once reopened.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::AddAssign;

use spool_core::{ThreadReducer, View};
use spool_protocol::{ItemStatus, ServerNotification, ThreadEvent, TurnStatus};
use spool_store::{AnyStore, Store};
use spool_testkit::postgres::query_at;

use crate::child::{Config, Target};
use crate::script::{Script, thread_id, thread_seed};

/// More events than any run writes.
const ALL: usize = 10_000_000;

/// The file as the crash left it, read before any store opens it.
#[derive(Debug, Default)]
pub struct Before {
    /// Each thread's last committed seq.
    pub last_seq: BTreeMap<String, u64>,
}

/// What recovery closed, summed over runs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Events the crash left, over all threads.
    pub events_before: u64,
    pub turns: usize,
    pub items: usize,
}

impl AddAssign for Recovered {
    fn add_assign(&mut self, other: Recovered) {
        self.events_before += other.events_before;
        self.turns += other.turns;
        self.items += other.items;
    }
}

/// The rows of `sql` read straight from the store, before or beside any
/// store handle, each as its columns' text.
fn raw_rows(db: &Target, sql: &str) -> Vec<Vec<String>> {
    match db {
        Target::File(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            let mut statement = conn.prepare(sql).unwrap();
            let columns = statement.column_count();
            statement
                .query_map([], |row| {
                    (0..columns)
                        .map(|i| {
                            let value: rusqlite::types::Value = row.get(i)?;
                            Ok(match value {
                                rusqlite::types::Value::Integer(n) => n.to_string(),
                                rusqlite::types::Value::Text(text) => text,
                                other => format!("{other:?}"),
                            })
                        })
                        .collect()
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        }
        Target::Postgres(url) => query_at(url, sql)
            .unwrap()
            .lines()
            .filter(|line| !line.is_empty())
            .map(|line| line.split('|').map(str::to_owned).collect())
            .collect(),
    }
}

/// On PostgreSQL, waits until every session of the killed child has ended.
/// A `COMMIT` the child sent just before it died may still wait in its
/// backend's socket: the backend commits it, and only then finds the
/// connection closed. Reading the log before that would count the commit
/// that lands afterwards among the events recovery appended. (Sessions of
/// this process must be closed first.)
pub fn wait_for_child_sessions(db: &Target) {
    if matches!(db, Target::File(_)) {
        return;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let open = raw_rows(
            db,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
        );
        if open[0][0] == "0" {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the killed child's sessions are still open after 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

pub fn read_before(db: &Target) -> Before {
    // A child killed early may not have created the schema yet.
    let has_schema = match db {
        Target::File(_) => raw_rows(
            db,
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'threads'",
        ),
        Target::Postgres(_) => raw_rows(
            db,
            "SELECT count(*) FROM pg_tables WHERE tablename = 'threads'",
        ),
    };
    if has_schema[0][0] == "0" {
        return Before::default();
    }
    let last_seq = raw_rows(
        db,
        "SELECT id, (SELECT max(seq) FROM events WHERE thread_id = threads.id) FROM threads",
    )
    .into_iter()
    .map(|row| (row[0].clone(), row[1].parse().unwrap()))
    .collect();
    Before { last_seq }
}

/// Checks the reopened (so recovered) store against the acknowledgements,
/// the child's script and the file as the crash left it.
pub async fn after_recovery(
    store: &AnyStore,
    config: &Config,
    acked: &BTreeMap<String, u64>,
    before: &Before,
) -> Recovered {
    for (thread, &seq) in acked {
        let kept = before.last_seq.get(thread).copied().unwrap_or(0);
        assert!(
            kept >= seq,
            "{thread}: seq {seq} was acknowledged durable, the file has up to {kept}"
        );
    }
    let children: BTreeSet<String> = (0..config.threads).map(thread_id).collect();
    let found: BTreeSet<String> = before.last_seq.keys().cloned().collect();
    assert!(found.is_subset(&children), "unknown threads: {found:?}");
    let mut recovered = Recovered::default();
    for index in 0..config.threads {
        let thread = thread_id(index);
        if let Some(&last_seq) = before.last_seq.get(&thread) {
            let seed = thread_seed(config.seed, index);
            recovered += check_thread(store, &thread, seed, last_seq).await;
        }
    }
    assert_eq!(
        thread_ids(&config.db),
        found,
        "recovery created or lost threads"
    );
    assert_no_item_started_twice(&config.db);
    recovered
}

async fn check_thread(
    store: &AnyStore,
    thread: &str,
    seed: u64,
    last_seq_before: u64,
) -> Recovered {
    let events = store.events_after(thread, 0, ALL).await.unwrap();
    // Seqs are 1..=n but for one range voided by the crash, named by the
    // `thread/eventsLost` logged right after it: seqs handed out to deltas
    // before their commit are never given to other events.
    let mut expected = 1;
    for event in &events {
        if let ServerNotification::ThreadEventsLost(lost) = &event.payload {
            assert_eq!(lost.from_seq, expected, "{thread}: lost range start");
            assert!(lost.to_seq >= lost.from_seq, "{thread}: empty lost range");
            expected = lost.to_seq + 1;
        }
        assert_eq!(event.seq, expected, "{thread}: seqs have an unnamed gap");
        expected += 1;
    }
    let record = store.thread(thread).await.unwrap().unwrap();
    assert_eq!(record.last_seq, expected - 1, "{thread}: last_seq");

    // Up to where the crash stopped it, the log is exactly what the child
    // appended, in its order: nothing lost in between, nothing twice.
    let crashed = usize::try_from(last_seq_before).unwrap();
    assert!(crashed <= events.len(), "{thread}: recovery removed events");
    assert_eq!(events[0].payload.method(), "thread/started");
    let script = Script::new(thread, seed).events();
    for (event, appended) in events[1..crashed].iter().zip(script) {
        assert_eq!(event.payload, appended, "{thread} seq {}", event.seq);
    }

    // The reducer accepts the log as the crash left it; what it finds open
    // there is what recovery must close, with events at the end of the log.
    let mut reducer = ThreadReducer::new(thread);
    reducer
        .apply_all(&events[..crashed])
        .unwrap_or_else(|error| panic!("{thread}: the crashed log is refused: {error}"));
    let at_crash = reducer.clone();
    let mut recovery = &events[crashed..];
    if let Some(ServerNotification::ThreadEventsLost(lost)) = recovery.first().map(|e| &e.payload) {
        // Seqs handed out after the last commit: voided, not reused.
        assert_eq!(lost.from_seq, last_seq_before + 1, "{thread}: lost range");
        reducer.apply(&recovery[0]).unwrap();
        recovery = &recovery[1..];
    }
    let closed = check_recovery_events(thread, &at_crash, recovery);
    reducer
        .apply_all(recovery)
        .unwrap_or_else(|error| panic!("{thread}: the recovery events are refused: {error}"));
    assert!(
        reducer.active_turn().is_none(),
        "{thread}: a turn is still in progress"
    );
    for record in at_crash.items() {
        let now = reducer.item(record.item.id()).unwrap();
        match record.envelope.status.is_terminal() {
            true => assert_eq!(now, record, "{thread}: a closed item changed"),
            false => assert_eq!(now.envelope.status, ItemStatus::Incomplete),
        }
    }

    // The projection is what replaying the whole log gives.
    let items = store.items(thread, View::All).await.unwrap();
    assert_eq!(items, reducer.items(), "{thread}: items projection");
    assert_eq!(
        store.turns(thread).await.unwrap(),
        reducer.turns(),
        "{thread}: turns projection"
    );
    Recovered {
        events_before: last_seq_before,
        ..closed
    }
}

/// The events recovery appended close exactly what was open at the crash:
/// each open item `incomplete` with the content its committed deltas built,
/// then each open turn `interrupted`.
fn check_recovery_events(
    thread: &str,
    at_crash: &ThreadReducer,
    recovery: &[ThreadEvent],
) -> Recovered {
    let open_items: Vec<_> = at_crash
        .items()
        .iter()
        .filter(|record| !record.envelope.status.is_terminal())
        .collect();
    let open_turns: Vec<_> = at_crash
        .turns()
        .iter()
        .filter(|turn| !turn.status.is_terminal())
        .collect();
    assert_eq!(
        recovery.len(),
        open_items.len() + open_turns.len(),
        "{thread}: recovery events {recovery:#?} for open items {open_items:#?} and turns {open_turns:#?}"
    );
    let (item_events, turn_events) = recovery.split_at(open_items.len());
    for (event, open) in item_events.iter().zip(&open_items) {
        let ServerNotification::ItemCompleted(completed) = &event.payload else {
            panic!("{thread}: expected item/completed, got {event:?}");
        };
        // These kinds have no status of their own, so the item is exactly
        // what the committed deltas built.
        assert_eq!(completed.item, open.item, "{thread}: recovered content");
        let envelope = completed.envelope.as_ref().expect("an envelope");
        assert_eq!(envelope.status, ItemStatus::Incomplete);
    }
    for (event, open) in turn_events.iter().zip(&open_turns) {
        let ServerNotification::TurnCompleted(completed) = &event.payload else {
            panic!("{thread}: expected turn/completed, got {event:?}");
        };
        assert_eq!(completed.turn.id, open.id);
        assert_eq!(completed.turn.status, TurnStatus::Interrupted);
    }
    Recovered {
        events_before: 0,
        turns: open_turns.len(),
        items: open_items.len(),
    }
}

fn thread_ids(db: &Target) -> BTreeSet<String> {
    raw_rows(db, "SELECT id FROM threads")
        .into_iter()
        .map(|row| row[0].clone())
        .collect()
}

/// Straight from the store, not through the reducer: no item id is
/// started twice in a thread's log, and the projection has one row per
/// started id.
fn assert_no_item_started_twice(db: &Target) {
    let twice = raw_rows(
        db,
        "SELECT thread_id, item_id FROM events \
         WHERE method IN ('item/started', 'item/recorded', 'item/projected') \
         GROUP BY thread_id, item_id HAVING count(*) > 1",
    );
    assert!(twice.is_empty(), "items started twice: {twice:?}");
    // SQLite keeps a thread's turns among its rows of `items`.
    let items = match db {
        Target::Postgres(_) => "items",
        Target::File(_) => "items WHERE NOT is_turn",
    };
    let counts = raw_rows(
        db,
        &format!(
            "SELECT (SELECT count(*) FROM events \
                     WHERE method IN ('item/started', 'item/recorded', 'item/projected')), \
                    (SELECT count(*) FROM {items})"
        ),
    );
    assert_eq!(
        counts[0][0], counts[0][1],
        "item rows vs item/started events"
    );
}

/// Every event of every thread the crash left, to compare two opens.
pub async fn snapshot(store: &AnyStore, before: &Before) -> BTreeMap<String, Vec<ThreadEvent>> {
    let mut all = BTreeMap::new();
    for thread in before.last_seq.keys() {
        let events = store.events_after(thread, 0, ALL).await.unwrap();
        all.insert(thread.clone(), events);
    }
    all
}
