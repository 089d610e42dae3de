//! `spool serve` over stdio: the history and thread methods — paging
//! turns and items both ways (with spool's `view` and `tokens`), archive,
//! rename, fork, revert / rollback (recorded in the log, never by
//! rewriting it) and steering a running turn.

mod support;

use serde_json::{Value, json};
use spool_testkit::ScriptedServer;
use spool_testkit::responses_api::message_response;
use support::rpc::{Client, method_of, thread_id_of};
use support::*;

/// Starts a thread and runs one turn per prompt to completion; returns
/// the thread id and the turn ids.
async fn thread_with_turns(client: &mut Client, prompts: &[&str]) -> (String, Vec<String>) {
    let started = client.call(1, "thread/start", json!({})).await;
    let thread_id = thread_id_of(&started);
    let mut turns = Vec::new();
    for (n, prompt) in prompts.iter().enumerate() {
        // The previous turn may still be winding down after its
        // `turn/completed`: try again then.
        let mut attempt = 0;
        let turn = loop {
            let turn = client
                .call(
                    10 + n as i64 * 100 + attempt,
                    "turn/start",
                    json!({"threadId": thread_id, "input": [{"type": "text", "text": prompt}]}),
                )
                .await;
            let busy = turn["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("in progress"));
            if !busy || attempt > 50 {
                break turn;
            }
            attempt += 1;
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        let turn_id = turn["result"]["turn"]["id"].as_str().unwrap().to_owned();
        let id = turn_id.clone();
        client
            .until(move |m| {
                method_of(m) == "turn/completed" && m["params"]["turn"]["id"] == id.as_str()
            })
            .await;
        turns.push(turn_id);
    }
    (thread_id, turns)
}

fn ids(page: &Value, path: &[&str]) -> Vec<String> {
    page["result"]["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data: {page}"))
        .iter()
        .map(|entry| {
            let mut value = entry;
            for key in path {
                value = &value[*key];
            }
            value.as_str().unwrap().to_owned()
        })
        .collect()
}

fn texts(page: &Value) -> Vec<String> {
    page["result"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let item = &entry["item"];
            match item["type"].as_str() {
                Some("userMessage") => item["content"][0]["text"].as_str().unwrap().to_owned(),
                _ => item["text"].as_str().unwrap_or("").to_owned(),
            }
        })
        .collect()
}

#[tokio::test]
async fn turns_and_items_page_both_ways_with_views_and_token_budgets() {
    let model = ScriptedServer::with_responses([
        message_response("r1", &["one back"]),
        message_response("r2", &["two back"]),
        message_response("r3", &["three back"]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    let init = client
        .initialize(json!({"spool": {"views": true, "provenance": true}}))
        .await;
    assert_eq!(init["result"]["spool"]["views"], true, "{init}");
    let (thread_id, turns) = thread_with_turns(&mut client, &["one", "two", "three"]).await;

    // Turns: newest first by default, two at a time.
    let page1 = client
        .call(
            100,
            "thread/turns/list",
            json!({"threadId": thread_id, "limit": 2}),
        )
        .await;
    assert_eq!(
        ids(&page1, &["id"]),
        vec![turns[2].as_str(), turns[1].as_str()],
        "{page1}"
    );
    assert_eq!(page1["result"]["data"][0]["itemsView"], "summary");
    assert_eq!(
        page1["result"]["data"][0]["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let next = page1["result"]["nextCursor"].clone();
    assert!(next.is_string(), "{page1}");
    let page2 = client
        .call(
            101,
            "thread/turns/list",
            json!({"threadId": thread_id, "limit": 2, "cursor": next}),
        )
        .await;
    assert_eq!(ids(&page2, &["id"]), vec![turns[0].as_str()]);
    assert_eq!(page2["result"]["nextCursor"], Value::Null, "the end");
    // Back again, the other way.
    let back = client
        .call(
            102,
            "thread/turns/list",
            json!({"threadId": thread_id, "cursor": page2["result"]["backwardsCursor"],
                   "sortDirection": "asc", "itemsView": "notLoaded"}),
        )
        .await;
    assert_eq!(
        ids(&back, &["id"]),
        vec![turns[1].as_str(), turns[2].as_str()],
        "{back}"
    );
    assert!(
        back["result"]["data"][0]["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Items: oldest first by default.
    let items1 = client
        .call(
            110,
            "thread/items/list",
            json!({"threadId": thread_id, "limit": 4}),
        )
        .await;
    assert_eq!(
        texts(&items1),
        ["one", "one back", "two", "two back"],
        "{items1}"
    );
    assert_eq!(items1["result"]["data"][0]["turnId"], turns[0].as_str());
    assert!(
        items1["result"]["data"][0]["envelope"].is_object(),
        "opted in"
    );
    let items2 = client
        .call(
            111,
            "thread/items/list",
            json!({"threadId": thread_id, "limit": 4, "cursor": items1["result"]["nextCursor"]}),
        )
        .await;
    assert_eq!(texts(&items2), ["three", "three back"]);
    assert_eq!(items2["result"]["nextCursor"], Value::Null);
    let items_back = client
        .call(
            112,
            "thread/items/list",
            json!({"threadId": thread_id, "sortDirection": "desc", "limit": 3,
                   "cursor": items2["result"]["backwardsCursor"]}),
        )
        .await;
    assert_eq!(texts(&items_back), ["two back", "two", "one back"]);
    // One turn's items.
    let of_turn = client
        .call(
            113,
            "thread/items/list",
            json!({"threadId": thread_id, "turnId": turns[1]}),
        )
        .await;
    assert_eq!(texts(&of_turn), ["two", "two back"]);

    // The model's view under a small budget: whole turns, newest first
    // (the newest always goes in).
    let llm = client
        .call(
            120,
            "thread/items/list",
            json!({"threadId": thread_id, "view": "llm", "tokens": 1}),
        )
        .await;
    assert_eq!(texts(&llm), ["three", "three back"], "{llm}");
    let llm_all = client
        .call(
            121,
            "thread/items/list",
            json!({"threadId": thread_id, "view": "llm"}),
        )
        .await;
    assert_eq!(texts(&llm_all).len(), 6);
    // Another view under a budget: the page stops before the item that
    // would exceed it, and the next page goes on from there.
    let budgeted = client
        .call(
            122,
            "thread/items/list",
            json!({"threadId": thread_id, "view": "all", "tokens": 1}),
        )
        .await;
    assert_eq!(texts(&budgeted), ["one"], "{budgeted}");
    assert!(budgeted["result"]["nextCursor"].is_string());

    // Bad cursors and unknown threads are invalid params.
    for (id, method, params) in [
        (
            130,
            "thread/items/list",
            json!({"threadId": thread_id, "cursor": "nonsense"}),
        ),
        (
            131,
            "thread/turns/list",
            json!({"threadId": thread_id, "cursor": items1["result"]["nextCursor"]}),
        ),
        (132, "thread/items/list", json!({"threadId": "nope"})),
        (
            133,
            "thread/items/list",
            json!({"threadId": thread_id, "turnId": "nope"}),
        ),
    ] {
        let error = client.call(id, method, params).await;
        assert_eq!(error["error"]["code"], -32602, "{error}");
    }
    client.close().await;
}

#[tokio::test]
async fn archive_rename_fork_and_revert_are_recorded_in_the_log() {
    let model = ScriptedServer::with_responses([
        message_response("r1", &["one back"]),
        message_response("r2", &["two back"]),
        message_response("r3", &["three back"]),
    ])
    .await
    .unwrap();
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &[]);
    client.initialize(json!({"spool": {"seq": true}})).await;
    let (thread_id, turns) = thread_with_turns(&mut client, &["one", "two", "three"]).await;

    // Archive: out of the default list, in the archived one; notified.
    let archived = client
        .call(200, "thread/archive", json!({"threadId": thread_id}))
        .await;
    assert_eq!(archived["result"], json!({}), "{archived}");
    client.until(|m| method_of(m) == "thread/archived").await;
    let listed = client.call(201, "thread/list", json!({})).await;
    assert!(!ids(&listed, &["id"]).contains(&thread_id), "{listed}");
    let listed = client
        .call(202, "thread/list", json!({"archived": true}))
        .await;
    assert_eq!(ids(&listed, &["id"]), vec![thread_id.as_str()]);
    let back = client
        .call(203, "thread/unarchive", json!({"threadId": thread_id}))
        .await;
    assert_eq!(back["result"]["thread"]["id"], thread_id.as_str(), "{back}");
    let listed = client.call(204, "thread/list", json!({})).await;
    assert_eq!(ids(&listed, &["id"]), vec![thread_id.as_str()]);

    // Rename: notified, and thread/read has it.
    let named = client
        .call(
            210,
            "thread/name/set",
            json!({"threadId": thread_id, "name": "  Numbers  "}),
        )
        .await;
    assert_eq!(named["result"], json!({}), "{named}");
    let update = client
        .until(|m| method_of(m) == "thread/name/updated")
        .await;
    assert_eq!(update["params"]["threadName"], "Numbers");
    let read = client
        .call(211, "thread/read", json!({"threadId": thread_id}))
        .await;
    assert_eq!(read["result"]["thread"]["name"], "Numbers");
    let empty = client
        .call(
            212,
            "thread/name/set",
            json!({"threadId": thread_id, "name": " "}),
        )
        .await;
    assert_eq!(empty["error"]["code"], -32602);

    // Fork through the first turn: a new thread with a copy of it.
    let fork = client
        .call(
            220,
            "thread/fork",
            json!({"threadId": thread_id, "lastTurnId": turns[0]}),
        )
        .await;
    let fork_thread = &fork["result"]["thread"];
    let fork_id = fork_thread["id"].as_str().unwrap().to_owned();
    assert_ne!(fork_id, thread_id);
    assert_eq!(fork_thread["forkedFromId"], thread_id.as_str(), "{fork}");
    let fork_turns = fork_thread["turns"].as_array().unwrap();
    assert_eq!(fork_turns.len(), 1, "{fork}");
    assert_eq!(fork_turns[0]["id"], turns[0].as_str());
    assert_eq!(fork_turns[0]["items"][1]["text"], "one back");
    let fork_id2 = fork_id.clone();
    client
        .until(move |m| {
            method_of(m) == "thread/started" && m["params"]["thread"]["id"] == fork_id2.as_str()
        })
        .await;
    let fork_items = client
        .call(221, "thread/items/list", json!({"threadId": fork_id}))
        .await;
    assert_eq!(texts(&fork_items), ["one", "one back"]);
    let source = client
        .call(
            222,
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    assert_eq!(
        source["result"]["thread"]["turns"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Revert before the second turn: thread/read and the item views lose
    // turns 2 and 3; the log keeps them.
    let reverted = client
        .call(
            230,
            "thread/revert",
            json!({"threadId": thread_id, "beforeTurnId": turns[1]}),
        )
        .await;
    assert_eq!(
        reverted["result"]["thread"]["id"],
        thread_id.as_str(),
        "{reverted}"
    );
    assert!(reverted["result"]["turnsBackwardsCursor"].is_string());
    let read = client
        .call(
            231,
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let kept: Vec<&str> = read["result"]["thread"]["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(kept, [turns[0].as_str()], "{read}");
    for view in ["all", "client", "llm"] {
        let items = client
            .call(
                232,
                "thread/items/list",
                json!({"threadId": thread_id, "view": view}),
            )
            .await;
        assert_eq!(texts(&items), ["one", "one back"], "{view}: {items}");
    }
    let turns_page = client
        .call(
            233,
            "thread/turns/list",
            json!({"threadId": thread_id, "cursor": reverted["result"]["turnsBackwardsCursor"]}),
        )
        .await;
    assert_eq!(ids(&turns_page, &["id"]), vec![turns[0].as_str()]);
    let unknown = client
        .call(
            234,
            "thread/revert",
            json!({"threadId": thread_id, "beforeTurnId": turns[2]}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "a reverted turn is gone");

    // Rollback (the older spelling): drop the last remaining turn.
    let rolled = client
        .call(
            240,
            "thread/rollback",
            json!({"threadId": thread_id, "numTurns": 1}),
        )
        .await;
    assert_eq!(rolled["result"]["thread"]["turns"], json!([]), "{rolled}");
    let zero = client
        .call(
            241,
            "thread/rollback",
            json!({"threadId": thread_id, "numTurns": 0}),
        )
        .await;
    assert_eq!(zero["error"]["code"], -32602);
    client.close().await;

    // The log still has every item: removals were appended.
    let output = home
        .spool(&model.url(), &["threads", "events", &thread_id])
        .await;
    assert!(output.status.success(), "{output:?}");
    let log = String::from_utf8(output.stdout).unwrap();
    for text in ["two back", "three back"] {
        assert!(log.contains(text), "the log keeps {text}");
    }
    assert_eq!(log.matches("\"item/removed\"").count(), 6, "{log}");
}

#[tokio::test]
async fn steering_adds_input_to_the_running_turn_for_its_next_model_call() {
    let model = model_touching("steered.txt", "Steered.").await;
    let home = Home::new();
    let mut client = Client::start(&home, &model.url(), &["--tools", "shell"]);
    let thread_id = client.approval_thread().await;
    let no_turn = client
        .call(
            2,
            "turn/steer",
            json!({"threadId": thread_id, "expectedTurnId": "t",
                   "input": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(no_turn["error"]["code"], -32602, "{no_turn}");
    let turn = client
        .call(
            3,
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "run it"}]}),
        )
        .await;
    let turn_id = turn["result"]["turn"]["id"].as_str().unwrap().to_owned();
    // The turn waits on an approval: it is running.
    let request = client
        .until(|m| method_of(m) == "item/commandExecution/requestApproval")
        .await;
    let wrong = client
        .call(
            4,
            "turn/steer",
            json!({"threadId": thread_id, "expectedTurnId": "other",
                   "input": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    let steered = client
        .call(
            5,
            "turn/steer",
            json!({"threadId": thread_id, "expectedTurnId": turn_id,
                   "input": [{"type": "text", "text": "also say Steered"}]}),
        )
        .await;
    assert_eq!(steered["result"]["turnId"], turn_id.as_str(), "{steered}");
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"decision": "accept"}}))
        .await;
    let completed = client.until(|m| method_of(m) == "turn/completed").await;
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    // The steering message is an item of the turn, and the next model call
    // had it.
    assert!(client.seen.iter().any(|m| method_of(m) == "item/completed"
        && m["params"]["turnId"] == turn_id.as_str()
        && m["params"]["item"]["content"][0]["text"] == "also say Steered"));
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].body["input"].to_string();
    assert!(second.contains("also say Steered"), "{second}");
    client.close().await;
}
