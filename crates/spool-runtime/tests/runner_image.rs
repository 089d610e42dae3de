//! `view_image`: the image goes to the next model request as image input.

mod runner_support;

use runner_support::*;
use serde_json::json;
use spool_runtime::{RunStatus, Tool};
use spool_testkit::responses_api::{calls_response, message_response};

#[tokio::test]
async fn a_viewed_image_reaches_the_next_request_as_input_image() {
    let f = Fixture::new(vec![
        calls_response(
            "r1",
            &[("call_1", "view_image", json!({"path": "pic.png"}))],
        ),
        calls_response(
            "r2",
            &[("call_2", "view_image", json!({"path": "../outside.png"}))],
        ),
        message_response("r3", &["A red dot."]),
    ])
    .await;
    std::fs::write(f.workspace.join("pic.png"), b"\x89PNG fake bytes").unwrap();
    let agent = f.agent("viewer").with_tool(Tool::ViewImage);
    let result = f.run(&f.runner(), agent, "what is in pic.png?").await;
    assert_eq!(result.status, RunStatus::Completed, "{:?}", result.error);

    let bodies = f.request_bodies();
    let input = bodies[1]["input"].as_array().unwrap();
    let image = input
        .iter()
        .flat_map(|item| item["content"].as_array().cloned().unwrap_or_default())
        .find(|part| part["type"] == "input_image")
        .expect("an input_image in the next request");
    assert_eq!(
        image["image_url"],
        "data:image/png;base64,iVBORyBmYWtlIGJ5dGVz"
    );
    let sent = outputs(&bodies[1]);
    assert_eq!(sent[0].0, "call_1");
    assert!(sent[0].1.contains("Attached the image"), "{}", sent[0].1);
    // A path outside the workspace is refused back to the model.
    let sent = outputs(&bodies[2]);
    assert!(
        sent.iter()
            .any(|(id, out)| id == "call_2" && out.contains("outside")),
        "{sent:?}"
    );
}
