//! `llm_view` conversion: each item kind → Responses API input items (tool
//! items in `views_convert_tools.rs`).

mod views_support;

use serde_json::{Value, json};
use spool_core::ItemRecord;
use spool_core::llm::{LlmViewOptions, ReasoningIdPolicy, llm_view};
use spool_protocol::{FunctionCallStatus, ItemStatus, ThreadItem, UserInput};
use views_support::{
    agent, convert, convert_one, function_call, json as to_json, record, user, with_provider,
    with_status,
};

#[test]
fn user_message_becomes_user_input_parts() {
    let item = ThreadItem::UserMessage {
        client_id: Default::default(),
        id: "u".into(),
        content: vec![
            UserInput::text("look"),
            UserInput::Image {
                detail: Default::default(),
                file_id: Default::default(),
                url: Some("https://x/cat.png".into()),
            },
            UserInput::LocalImage {
                detail: Default::default(),
                path: "/tmp/dog.png".into(),
            },
            UserInput::Skill {
                name: "deploy".into(),
                path: "skills/deploy.md".into(),
            },
            UserInput::Mention {
                name: "main.rs".into(),
                path: "src/main.rs".into(),
            },
        ],
    };
    assert_eq!(
        convert_one(item),
        [json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "https://x/cat.png"},
            {"type": "input_text", "text": "[local image: /tmp/dog.png]"},
            {"type": "input_text", "text": "[skill: deploy (skills/deploy.md)]"},
            {"type": "input_text", "text": "[mention: main.rs (src/main.rs)]"},
        ]})]
    );
}

#[test]
fn agent_message_becomes_assistant_output_text_without_ids_or_status() {
    let r = with_provider(record("t", 1, agent("a", "Paris.")), json!({"id": "msg_1"}));
    assert_eq!(
        convert(&[r]),
        [json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Paris.", "annotations": []}]})]
    );
    assert!(
        convert_one(agent("a", "")).is_empty(),
        "empty messages say nothing"
    );
}

fn reasoning_record(ordinal: u64, provider: Value, summary: &[&str]) -> ItemRecord {
    with_provider(
        record(
            "t",
            ordinal,
            ThreadItem::Reasoning {
                id: format!("r{ordinal}"),
                summary: summary.iter().map(|s| s.to_string()).collect(),
                content: vec!["raw thought".into()],
            },
        ),
        provider,
    )
}

#[test]
fn reasoning_keeps_the_provider_id_and_encrypted_content_by_default() {
    let records = [
        reasoning_record(
            1,
            json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA"}),
            &["**Plan**"],
        ),
        record("t", 2, agent("a", "done")),
    ];
    let input = convert(&records);
    assert_eq!(
        input[0],
        json!({"type": "reasoning", "id": "rs_1",
               "summary": [{"type": "summary_text", "text": "**Plan**"}],
               "content": [{"type": "reasoning_text", "text": "raw thought"}],
               "encrypted_content": "gAAAA"})
    );
    assert_eq!(input.len(), 2);
}

#[test]
fn reasoning_id_policy_omit_strips_ids_and_drops_empty_items() {
    let records = [
        reasoning_record(
            1,
            json!({"id": "rs_1", "encrypted_content": "gAAAA"}),
            &["s"],
        ),
        // Only an id: nothing left once the id goes.
        with_provider(
            record(
                "t",
                2,
                ThreadItem::Reasoning {
                    id: "r2".into(),
                    summary: Vec::new(),
                    content: Vec::new(),
                },
            ),
            json!({"id": "rs_2"}),
        ),
        record("t", 3, agent("a", "done")),
    ];
    let options = LlmViewOptions {
        token_budget: None,
        reasoning_ids: ReasoningIdPolicy::Omit,
        ..LlmViewOptions::default()
    };
    let input = to_json(&llm_view(&records, &options).input);
    assert_eq!(input.len(), 2);
    assert_eq!(input[0]["type"], "reasoning");
    assert!(input[0].get("id").is_none(), "{}", input[0]);
    assert_eq!(input[0]["encrypted_content"], "gAAAA");
    assert_eq!(input[1]["role"], "assistant");

    // Preserve keeps the id-only item: the id points at stored reasoning.
    let input = convert(&records);
    assert_eq!(input.len(), 3);
    assert_eq!(input[1]["id"], "rs_2");
}

#[test]
fn reasoning_with_an_id_and_nothing_after_it_is_dropped() {
    // Its call is still running, so the call is left out, and the API would
    // reject reasoning without the item it led to.
    let mut running = function_call("f", "call_1", "");
    if let ThreadItem::FunctionCall { status, output, .. } = &mut running {
        *status = FunctionCallStatus::InProgress;
        *output = None;
    }
    let records = [
        reasoning_record(1, json!({"id": "rs_1"}), &["s"]),
        with_status(record("t", 2, running), ItemStatus::InProgress),
    ];
    assert!(convert(&records).is_empty());
}

#[test]
fn context_becomes_a_developer_message() {
    assert_eq!(
        convert_one(ThreadItem::Context {
            id: "c".into(),
            text: "Today is Monday.".into(),
        }),
        [json!({"type": "message", "role": "developer",
                "content": [{"type": "input_text", "text": "Today is Monday."}]})]
    );
}

#[test]
fn compaction_replaces_everything_before_it() {
    let records = [
        record("t1", 1, user("u1", "old question")),
        record("t1", 2, agent("a1", "old answer")),
        record("t2", 3, user("u2", "same turn, before the compaction")),
        record(
            "t2",
            4,
            ThreadItem::ContextCompaction {
                id: "cc".into(),
                summary: Some("They asked an old question.".into()),
                replaces: None,
            },
        ),
        record("t2", 5, agent("a2", "after")),
    ];
    let view = llm_view(&records, &LlmViewOptions::default());
    assert_eq!(
        to_json(&view.input),
        [
            json!({"type": "message", "role": "user", "content": [{"type": "input_text",
                   "text": "Summary of the conversation so far:\nThey asked an old question."}]}),
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": "after", "annotations": []}]}),
        ]
    );
    assert_eq!((view.turns_included, view.turns_omitted), (1, 0));

    // A compaction still in progress replaces nothing yet.
    let mut unfinished = records.clone();
    unfinished[3].envelope.status = ItemStatus::InProgress;
    assert_eq!(
        llm_view(&unfinished, &LlmViewOptions::default())
            .input
            .len(),
        4
    );
}

#[test]
fn ui_and_bookkeeping_items_produce_nothing() {
    let items = [
        ThreadItem::Component {
            id: "2".into(),
            name: "Card".into(),
            props: json!({}),
        },
        ThreadItem::Container {
            id: "3".into(),
            title: None,
            children: vec!["2".into()],
        },
        ThreadItem::Status {
            id: "4".into(),
            text: "working".into(),
        },
        ThreadItem::StateChange {
            id: "5".into(),
            key: "k".into(),
            value: json!(1),
        },
        ThreadItem::ResourceChange {
            id: "6".into(),
            uri: "file:///x".into(),
            change: "modified".into(),
        },
        ThreadItem::StepError {
            id: "7".into(),
            message: "retrying".into(),
        },
        ThreadItem::Error {
            id: "8".into(),
            message: "boom".into(),
        },
        ThreadItem::EnteredReviewMode {
            id: "9".into(),
            review: "r".into(),
        },
    ];
    for item in items {
        // Even when a producer puts them in the model's audience.
        let mut r = record("t", 1, item);
        r.envelope.audience = spool_protocol::Audience::BOTH;
        let view = llm_view(&[r], &LlmViewOptions::default());
        assert!(view.input.is_empty(), "{:?}", view.input);
        assert_eq!(view.turns_included, 0);
    }
}

#[test]
fn a_finished_review_reaches_the_model_as_its_findings_and_an_unfinished_one_not_at_all() {
    let exited = |review: &str| {
        record(
            "t",
            1,
            ThreadItem::ExitedReviewMode {
                id: "10".into(),
                review: review.into(),
            },
        )
    };
    let view = llm_view(&[exited("x.rs:3 leaks a file")], &LlmViewOptions::default());
    assert_eq!(
        serde_json::to_value(&view.input).unwrap(),
        json!([{
            "type": "message",
            "role": "user",
            "content": [{
                "type": "input_text",
                "text": format!("{}x.rs:3 leaks a file", spool_core::llm::REVIEW_PREFIX)
            }]
        }])
    );
    let empty = llm_view(&[exited("")], &LlmViewOptions::default());
    assert!(empty.input.is_empty(), "{:?}", empty.input);
}

#[test]
fn records_outside_the_model_audience_are_left_out() {
    let mut hidden = record("t", 1, user("u", "secret"));
    hidden.envelope.audience = spool_protocol::Audience::CLIENT_ONLY;
    assert!(convert(&[hidden, record("t", 2, agent("a", "ok"))]).len() == 1);
}

#[test]
fn a_viewed_image_goes_to_the_model_as_its_call_output_and_image_input() {
    let r = with_provider(
        record(
            "t",
            1,
            ThreadItem::ImageView {
                id: "img".into(),
                path: "/w/a.png".into(),
            },
        ),
        json!({"type": "function_call", "call_id": "call_7", "name": "view_image",
               "arguments": "{\"path\":\"a.png\"}", "imageUrl": "data:image/png;base64,AAAA"}),
    );
    assert_eq!(
        convert(&[r]),
        [
            json!({"type": "function_call", "call_id": "call_7", "name": "view_image",
                   "arguments": "{\"path\":\"a.png\"}"}),
            json!({"type": "function_call_output", "call_id": "call_7",
                   "output": "Attached the image /w/a.png."}),
            json!({"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Image /w/a.png:"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}),
        ]
    );
    // Without a recorded image or call there is nothing to send.
    let bare = record(
        "t",
        1,
        ThreadItem::ImageView {
            id: "img".into(),
            path: "/w/a.png".into(),
        },
    );
    assert!(convert(&[bare]).is_empty());
}
