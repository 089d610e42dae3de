//! Server-managed history across pauses, restarts and snapshots, and the
//! reasoning-id policy: a resumed run sends the provider exactly what it
//! lacks, never what it acknowledged, and never loses a tool output.

mod history_support;

use std::sync::Arc;

use history_support::*;
use serde_json::{Value, json};
use spool_core::llm::ReasoningIdPolicy;
use spool_core::run_state::RunState;
use spool_model::{ModelRequest, RetryPolicy};
use spool_protocol::HistoryMode;
use spool_protocol::responses::{KnownResponseItem, ResponseItem};
use spool_runtime::{RunResult, RunStatus, Runner};
use spool_store::{Session, SqliteStore, Store, StoredHistory};
use spool_testkit::Reply;
use tokio::sync::{mpsc, watch};

fn touch(call_id: &str, file: &str) -> Reply {
    Reply::call(call_id, "shell", json!({"command": ["touch", file]}))
}

/// A turn that asks to make a file and pauses on the approval.
async fn make_a_file(setup: &Setup) -> RunResult {
    let runner = setup.runner(RetryPolicy::none());
    setup
        .run(&runner, setup.asking_agent(), "make a file")
        .await
}

async fn accept(setup: &Setup, paused: &RunResult) {
    let request = paused.interruptions()[0].request_id.clone();
    setup
        .store
        .resolve_request(&setup.thread_id, &request, json!({"decision": "accept"}))
        .await
        .unwrap();
}

async fn resume(setup: &Setup, runner: &Runner<SqliteStore>) -> RunResult {
    let (events, _) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    runner
        .resume(setup.asking_agent(), &setup.thread_id, &events, interrupt)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_paused_approval_resumes_after_a_restart_in_each_mode() {
    for mode in [
        HistoryMode::Replay,
        HistoryMode::PreviousResponseId,
        HistoryMode::ConversationId,
    ] {
        let replies = vec![
            touch("call_touch", "made.txt"),
            Reply::message("Made."),
            Reply::message("Bye."),
        ];
        let mut setup = setup(mode, replies).await;
        let paused = make_a_file(&setup).await;
        assert_eq!(paused.status, RunStatus::Paused, "{mode:?}");
        assert!(!setup.workspace.join("made.txt").exists());

        // A restart: a new store handle on the file, a new runner.
        setup.reopen();
        accept(&setup, &paused).await;
        let runner = setup.runner(RetryPolicy::none());
        let resumed = resume(&setup, &runner).await;
        assert_eq!(
            resumed.status,
            RunStatus::Completed,
            "{mode:?}: {:?}",
            resumed.error
        );
        assert!(setup.workspace.join("made.txt").exists());
        let next = setup.run(&runner, setup.asking_agent(), "thanks").await;
        assert_eq!(next.status, RunStatus::Completed, "{mode:?}");

        let exchanges = setup.server.exchanges();
        assert_every_request_accepted(&exchanges);
        assert_eq!(exchanges.len(), 3, "{mode:?}");
        let sent: Vec<Vec<String>> = exchanges.iter().map(|e| shapes(&input(e))).collect();
        let expected: Vec<Vec<&str>> = match mode {
            HistoryMode::Replay => vec![
                vec!["user: make a file"],
                vec!["user: make a file", "call call_touch", "output call_touch"],
                expected_whole(),
            ],
            // The provider kept the call its response made: the resumed
            // run sends the output only, then the next turn the new input.
            HistoryMode::PreviousResponseId | HistoryMode::ConversationId => vec![
                vec!["user: make a file"],
                vec!["output call_touch"],
                vec!["user: thanks"],
            ],
        };
        assert_eq!(sent, expected, "{mode:?}");
        // Whatever the mode, the model saw the same conversation.
        assert_eq!(shapes(&exchanges[2].context), expected_whole(), "{mode:?}");
        if mode == HistoryMode::PreviousResponseId {
            assert_eq!(
                exchanges[1].body["previous_response_id"],
                json!(exchanges[0].response_id.clone().unwrap())
            );
        }
    }
}

fn expected_whole() -> Vec<&'static str> {
    vec![
        "user: make a file",
        "call call_touch",
        "output call_touch",
        "assistant: Made.",
        "user: thanks",
    ]
}

#[tokio::test]
async fn a_run_state_resumes_previous_response_id_mode_with_only_the_delta() {
    let replies = vec![
        Reply::call("call_1", "weather", json!({"city": "Paris"})),
        Reply::message("Sunny in Paris."),
        touch("call_touch", "made.txt"),
        Reply::message("Made."),
    ];
    let mut setup = setup(HistoryMode::PreviousResponseId, replies).await;
    let runner = setup.runner(RetryPolicy::none());
    assert_eq!(setup.turn(&runner, "weather?").await, RunStatus::Completed);
    let paused = setup
        .run(&runner, setup.asking_agent(), "make a file")
        .await;
    assert_eq!(paused.status, RunStatus::Paused);
    let exported = paused.to_state();
    let state = RunState::from_json(&exported).unwrap();
    let history = state
        .history
        .clone()
        .expect("the snapshot carries the history");
    assert_eq!(history.mode, HistoryMode::PreviousResponseId);
    let exchanges = setup.server.exchanges();
    assert_eq!(
        history.cursor.previous_response_id, exchanges[2].response_id,
        "the snapshot continues from the response that made the call"
    );
    assert_eq!(history.cursor.held_calls, ["call_touch"]);

    // Another machine: the same log, but its copy of the cursor is gone.
    // The snapshot alone must say what the provider holds.
    setup.reopen();
    setup
        .store
        .set_history(&setup.thread_id, &StoredHistory::default())
        .await
        .unwrap();
    accept(&setup, &paused).await;
    let (events, _) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    let resumed = setup
        .runner(RetryPolicy::none())
        .resume_from_state(setup.asking_agent(), state, &events, interrupt)
        .await
        .unwrap();
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.error);

    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    let last = exchanges.last().unwrap();
    assert_eq!(shapes(&input(last)), ["output call_touch"]);
    assert_eq!(
        last.body["previous_response_id"],
        json!(exchanges[2].response_id.clone().unwrap())
    );
    assert_eq!(
        shapes(&last.context),
        [
            "user: weather?",
            "call call_1",
            "output call_1",
            "assistant: Sunny in Paris.",
            "user: make a file",
            "call call_touch",
            "output call_touch"
        ]
    );
}

#[tokio::test]
async fn a_snapshot_of_another_mode_is_refused() {
    let replies = vec![touch("call_touch", "made.txt")];
    let setup = setup(HistoryMode::Replay, replies).await;
    let paused = make_a_file(&setup).await;
    let mut state = RunState::from_json(&paused.to_state()).unwrap();
    assert_eq!(state.history, None, "replay keeps no provider history");
    state.history = Some(spool_core::run_state::RunHistory {
        mode: HistoryMode::ConversationId,
        cursor: Default::default(),
        conversation_id: Some("conv_elsewhere".into()),
    });
    let (events, _) = mpsc::unbounded_channel();
    let (_stop, interrupt) = watch::channel(false);
    let refused = setup
        .runner(RetryPolicy::none())
        .resume_from_state(setup.asking_agent(), state, &events, interrupt)
        .await;
    let Err(error) = refused else {
        panic!("a snapshot of another mode resumed");
    };
    let message = error.to_string();
    assert!(message.contains("`conversationId` mode"), "{message}");
    assert_eq!(setup.server.exchanges().len(), 1, "no model call made");
}

#[tokio::test]
async fn a_call_the_provider_did_not_keep_goes_again_with_its_output() {
    // The first response has no id: the provider keeps nothing of it, so
    // the next request must not start with an output whose call it lacks.
    let replies = vec![
        Reply::message("Hello."),
        Reply::CallsWithoutId(vec![(
            "call_1".into(),
            "weather".into(),
            json!({"city": "Oslo"}).to_string(),
        )]),
        Reply::message("Snow, probably."),
    ];
    let setup = setup(HistoryMode::PreviousResponseId, replies).await;
    let runner = setup.runner(RetryPolicy::none());
    assert_eq!(setup.turn(&runner, "hi").await, RunStatus::Completed);
    assert_eq!(
        setup.turn(&runner, "weather in Oslo?").await,
        RunStatus::Completed
    );
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    assert_eq!(
        shapes(&input(&exchanges[2])),
        ["user: weather in Oslo?", "call call_1", "output call_1"]
    );
    assert_eq!(
        exchanges[2].body["previous_response_id"],
        json!(exchanges[0].response_id.clone().unwrap())
    );
}

/// A raw reasoning item the caller kept from another run, with its id.
fn callers_reasoning() -> Value {
    json!({"type": "reasoning", "id": "rs_caller",
           "summary": [{"type": "summary_text", "text": "earlier thoughts"}],
           "encrypted_content": "enc_caller"})
}

/// What that reasoning led to (reasoning alone is refused by the API).
fn callers_answer() -> Value {
    json!({"type": "message", "role": "assistant",
           "content": [{"type": "output_text", "text": "earlier answer"}]})
}

#[tokio::test]
async fn omit_strips_generated_reasoning_ids_only_and_survives_a_resume() {
    let replies = vec![
        touch("call_touch", "made.txt").reasoned("a file is needed"),
        Reply::message("Made."),
        Reply::message("Bye.").reasoned("saying goodbye"),
        Reply::message("Again."),
    ];
    let mut setup = setup(HistoryMode::Replay, replies).await;
    // The caller's own history, given as raw Responses items.
    let session = Session::open(setup.store.clone(), &setup.thread_id)
        .await
        .unwrap();
    session
        .add_items(vec![user("before"), callers_reasoning(), callers_answer()])
        .await
        .unwrap();

    let mut omitting = setup.runner(RetryPolicy::none());
    omitting.reasoning_ids = ReasoningIdPolicy::Omit;
    let paused = setup
        .run(&omitting, setup.asking_agent(), "make a file")
        .await;
    assert_eq!(paused.status, RunStatus::Paused);
    assert_eq!(
        RunState::from_json(&paused.to_state())
            .unwrap()
            .reasoning_ids,
        ReasoningIdPolicy::Omit
    );

    // Resumed after a restart by a runner that would keep ids: the run's
    // own policy still applies.
    setup.reopen();
    accept(&setup, &paused).await;
    let preserving = setup.runner(RetryPolicy::none());
    let resumed = resume(&setup, &preserving).await;
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.error);
    let exchanges = setup.server.exchanges();
    assert_eq!(
        shapes(&input(&exchanges[1])),
        [
            "user: before",
            "reasoning rs_caller",
            "assistant: earlier answer",
            "user: make a file",
            "reasoning (no id)",
            "call call_touch",
            "output call_touch"
        ]
    );
    assert_eq!(
        input(&exchanges[1])[1],
        callers_reasoning(),
        "caller input untouched"
    );

    // A filter may put ids back: what it leaves is what goes.
    let mut filtered = setup.runner(RetryPolicy::none());
    filtered.reasoning_ids = ReasoningIdPolicy::Omit;
    filtered.input_filter = Some(Arc::new(|request: &mut ModelRequest| {
        for item in &mut request.input {
            if let ResponseItem::Known(KnownResponseItem::Reasoning {
                id,
                encrypted_content: Some(encrypted),
                ..
            }) = item
                && id.is_empty()
            {
                // The scripted provider's encrypted content names its id.
                *id = encrypted.trim_start_matches("enc_").to_owned();
            }
        }
    }));
    assert_eq!(setup.turn(&filtered, "bye").await, RunStatus::Completed);
    assert_eq!(setup.turn(&filtered, "again").await, RunStatus::Completed);
    let exchanges = setup.server.exchanges();
    assert_every_request_accepted(&exchanges);
    let last = shapes(&input(exchanges.last().unwrap()));
    let reasoning: Vec<&String> = last.iter().filter(|s| s.starts_with("reasoning")).collect();
    assert_eq!(reasoning.len(), 3, "{last:?}");
    assert_eq!(reasoning[0], "reasoning rs_caller");
    for put_back in &reasoning[1..] {
        assert!(put_back.starts_with("reasoning rs_"), "{last:?}");
    }
}
