//! The main job on a PostgreSQL store: `spool run` logs a turn there, and
//! the thread commands read it back, from a database of the test server
//! (`scripts/postgres.sh`).

mod support;

use spool_testkit::ScriptedServer;
use spool_testkit::postgres::TestDatabase;
use spool_testkit::responses_api::message_response;
use support::*;

#[tokio::test]
async fn a_turn_runs_on_a_postgres_store_and_reads_back() {
    let db = TestDatabase::create();
    let server =
        ScriptedServer::with_responses([message_response("resp_1", &["Hello", " from PG"])])
            .await
            .unwrap();
    let home = Home::new();
    let store = ["--store", db.url()];
    let (stdout, stderr) = home
        .spool_ok(&server.url(), &[&store[..], &["run", "say hello"]].concat())
        .await;
    assert!(stdout.contains("Hello from PG"), "{stdout}");
    let thread = thread_id_from(&stderr);

    let (listed, _) = home
        .spool_ok(&server.url(), &[&store[..], &["threads", "list"]].concat())
        .await;
    assert!(listed.contains(&thread), "{listed}");
    let (events, _) = home
        .spool_ok(
            &server.url(),
            &[&store[..], &["threads", "events", &thread]].concat(),
        )
        .await;
    let events = json_lines(&events);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "gap-free seqs"
    );
    let completed: Vec<_> = events
        .iter()
        .filter(|e| e["method"] == "turn/completed")
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["params"]["turn"]["status"], "completed");
    // The rows are in the database, not in a file of the home (a row of
    // an item born complete stands for its start and its completion).
    let stored = db
        .query(&format!(
            "SELECT sum(CASE WHEN method = 'item/recorded' THEN 2 ELSE 1 END) FROM events \
             WHERE thread_id = '{thread}'"
        ))
        .unwrap();
    assert_eq!(stored, seqs.len().to_string());
    assert!(
        !home.db().exists(),
        "a SQLite file was made beside the database"
    );
}
