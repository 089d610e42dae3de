//! In-process function tools: argument checking happens before the handler,
//! failures and panics become failed calls, emissions carry their call.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use spool_tools::function::{
    EmissionKind, FunctionTool, FunctionToolError, ToolContext, ToolEmission,
};
use tokio::sync::mpsc;

fn weather_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "minimum": 1}
        },
        "required": ["city"],
        "additionalProperties": false
    })
}

/// A get_weather tool that counts how often its handler ran.
fn weather_tool(calls: Arc<AtomicUsize>) -> FunctionTool {
    FunctionTool::new(
        "get_weather",
        "Weather for a city",
        weather_schema(),
        move |args, _ctx| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(format!("sunny in {}", args["city"].as_str().unwrap()))
            }
        },
    )
    .unwrap()
}

fn ctx() -> ToolContext {
    ToolContext::detached("item_1", "call_1")
}

#[tokio::test]
async fn valid_call_runs_the_handler() {
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = weather_tool(Arc::clone(&calls));
    let outcome = tool.invoke(r#"{"city": "Paris"}"#, ctx()).await;
    assert!(outcome.success);
    assert_eq!(outcome.output, "sunny in Paris");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn invalid_json_does_not_call_the_handler() {
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = weather_tool(Arc::clone(&calls));
    let outcome = tool.invoke(r#"{"city": "Par"#, ctx()).await;
    assert!(!outcome.success);
    assert!(
        outcome
            .output
            .starts_with(r#"invalid arguments for tool "get_weather": not valid JSON"#),
        "{}",
        outcome.output
    );
    let outcome = tool.invoke(r#"["Paris"]"#, ctx()).await;
    assert!(!outcome.success);
    assert_eq!(
        outcome.output,
        r#"invalid arguments for tool "get_weather": expected a JSON object, got an array"#
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn schema_violations_are_all_listed_with_pointers() {
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = weather_tool(Arc::clone(&calls));
    let outcome = tool.invoke(r#"{"days": 0, "extra": true}"#, ctx()).await;
    assert!(!outcome.success);
    let out = &outcome.output;
    assert!(
        out.starts_with(r#"invalid arguments for tool "get_weather": "#),
        "{out}"
    );
    assert!(
        out.contains(r#"/city: "city" is a required property"#),
        "{out}"
    );
    assert!(
        out.contains("/days: 0 is less than the minimum of 1"),
        "{out}"
    );
    assert!(out.contains("(root): Additional properties"), "{out}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn empty_arguments_mean_an_empty_object() {
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = weather_tool(Arc::clone(&calls));
    // {} lacks "city", so the schema (not the JSON parser) rejects it.
    let outcome = tool.invoke("  ", ctx()).await;
    assert!(!outcome.success);
    assert!(outcome.output.contains("/city:"), "{}", outcome.output);

    let no_params = FunctionTool::new("now", "", json!({"type": "object"}), |args, _| async move {
        Ok(args.to_string())
    })
    .unwrap();
    let outcome = no_params.invoke("", ctx()).await;
    assert!(outcome.success);
    assert_eq!(outcome.output, "{}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn error_message_is_bounded() {
    let tool = FunctionTool::new(
        "t",
        "",
        json!({"type": "object", "additionalProperties": {"type": "integer"}}),
        |_, _| async { Ok(String::new()) },
    )
    .unwrap();
    let mut args = serde_json::Map::new();
    for i in 0..50 {
        args.insert(format!("k{i}"), Value::String("x".repeat(10_000)));
    }
    let outcome = tool.invoke(&Value::Object(args).to_string(), ctx()).await;
    assert!(!outcome.success);
    assert!(
        outcome.output.chars().count() <= 2001,
        "{}",
        outcome.output.len()
    );
    assert!(outcome.output.contains("/k0: "), "{}", outcome.output);
}

#[tokio::test]
async fn handler_error_is_a_failed_call() {
    let tool = FunctionTool::new("fails", "", json!({"type": "object"}), |_, _| async {
        Err("city not found".to_owned())
    })
    .unwrap();
    let outcome = tool.invoke("{}", ctx()).await;
    assert!(!outcome.success);
    assert_eq!(outcome.output, "city not found");
}

#[tokio::test]
async fn panicking_handler_is_a_failed_call() {
    let tool = FunctionTool::new("boom", "", json!({"type": "object"}), |_, _| async {
        if true {
            panic!("index out of range");
        }
        Ok(String::new())
    })
    .unwrap();
    let outcome = tool.invoke("{}", ctx()).await;
    assert!(!outcome.success);
    assert_eq!(outcome.output, "tool boom panicked: index out of range");

    // A closure that panics before returning its future is caught too.
    let eager = FunctionTool::new("eager", "", json!({"type": "object"}), |_, _| {
        panic!("bad {}", 42);
        #[allow(unreachable_code)]
        async {
            Ok(String::new())
        }
    })
    .unwrap();
    let outcome = eager.invoke("{}", ctx()).await;
    assert_eq!(outcome.output, "tool eager panicked: bad 42");
}

#[tokio::test]
async fn emissions_arrive_with_parent_and_call_ids() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let tool = FunctionTool::new(
        "chatty",
        "",
        json!({"type": "object"}),
        |_, ctx| async move {
            ctx.emit_status("working");
            ctx.emit_message("hello");
            ctx.emit_component("Chart", json!({"points": [1, 2]}));
            ctx.emit_context("remember this");
            Ok(format!("{} {}", ctx.parent_item_id(), ctx.call_id()))
        },
    )
    .unwrap();
    let outcome = tool
        .invoke("{}", ToolContext::new("item_7", "call_9", tx))
        .await;
    assert_eq!(outcome.output, "item_7 call_9");

    let mut got = Vec::new();
    while let Ok(e) = rx.try_recv() {
        got.push(e);
    }
    let expect = |kind| ToolEmission {
        parent_item_id: "item_7".into(),
        call_id: "call_9".into(),
        kind,
    };
    assert_eq!(
        got,
        vec![
            expect(EmissionKind::Status {
                text: "working".into()
            }),
            expect(EmissionKind::Message {
                text: "hello".into()
            }),
            expect(EmissionKind::Component {
                name: "Chart".into(),
                props: json!({"points": [1, 2]})
            }),
            expect(EmissionKind::Context {
                text: "remember this".into()
            }),
        ]
    );
}

#[tokio::test]
async fn emitting_without_a_receiver_is_ignored() {
    let (tx, rx) = mpsc::unbounded_channel();
    drop(rx);
    let tool = FunctionTool::new("late", "", json!({"type": "object"}), |_, ctx| async move {
        ctx.emit_message("nobody listens");
        Ok("done".to_owned())
    })
    .unwrap();
    let outcome = tool.invoke("{}", ToolContext::new("i", "c", tx)).await;
    assert!(outcome.success);
    let outcome = tool.invoke("{}", ToolContext::detached("i", "c")).await;
    assert!(outcome.success);
}

#[tokio::test]
async fn definition_is_a_responses_api_function_tool() {
    let tool = weather_tool(Arc::default()).with_strict(true);
    assert_eq!(
        tool.definition(),
        json!({
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": weather_schema(),
            "strict": true
        })
    );
}

#[test]
fn bad_definitions_are_rejected_at_construction() {
    let handler = |_: Value, _: ToolContext| async { Ok(String::new()) };
    let err = FunctionTool::new("t", "", json!({"type": "nonsense"}), handler).unwrap_err();
    assert!(
        matches!(err, FunctionToolError::InvalidSchema { .. }),
        "{err}"
    );
    let err = FunctionTool::new("t", "", json!(true), handler).unwrap_err();
    assert!(
        matches!(err, FunctionToolError::InvalidSchema { .. }),
        "{err}"
    );
    let err = FunctionTool::new("get weather", "", json!({}), handler).unwrap_err();
    assert!(
        matches!(err, FunctionToolError::InvalidName { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn dropping_invoke_aborts_the_handler() {
    /// Counts when the handler's future is dropped (aborted mid-await).
    struct OnDrop(Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&dropped);
    let tool = FunctionTool::new("slow", "", json!({"type": "object"}), move |_, _| {
        let guard = OnDrop(Arc::clone(&counter));
        async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(String::new())
        }
    })
    .unwrap();
    let timed_out = tokio::time::timeout(
        std::time::Duration::from_millis(20),
        tool.invoke("{}", ctx()),
    )
    .await;
    assert!(timed_out.is_err());
    for _ in 0..100 {
        if dropped.load(Ordering::SeqCst) == 1 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the handler kept running after invoke was dropped");
}
