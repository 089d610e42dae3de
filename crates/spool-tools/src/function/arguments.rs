//! Turning the model's raw argument string into a checked JSON object, or
//! into an error message the model can act on.
//!
//! The message goes back to the model as the tool's output, so it names
//! every problem with a JSON pointer (the model fixes them all in one retry
//! instead of one per round trip) but stays bounded: a huge argument value
//! echoed inside each error would otherwise blow up the context window.

use jsonschema::Validator;
use jsonschema::error::ValidationErrorKind;
use serde_json::{Map, Value};

/// At most this many schema errors are listed; the rest are counted.
const MAX_ERRORS: usize = 10;
/// Each error's text is cut at this many characters (it may quote the value).
const MAX_ERROR_CHARS: usize = 300;
/// The whole message is cut at this many characters.
const MAX_MESSAGE_CHARS: usize = 2000;

/// Parses and validates `raw` against the tool's schema.
/// `Err` carries the complete message for the model.
pub(super) fn parse_arguments(
    tool: &str,
    validator: &Validator,
    raw: &str,
) -> Result<Value, String> {
    // Some providers send "" for a tool without parameters; that means {}.
    let value = if raw.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str::<Value>(raw).map_err(|e| {
            invalid(
                tool,
                &format!("not valid JSON ({e}); send a JSON object matching the parameters schema"),
            )
        })?
    };
    if !value.is_object() {
        return Err(invalid(
            tool,
            &format!("expected a JSON object, got {}", type_name(&value)),
        ));
    }

    let mut listed = Vec::new();
    let mut total = 0usize;
    for error in validator.iter_errors(&value) {
        total += 1;
        if listed.len() < MAX_ERRORS {
            let mut pointer = error.instance_path().as_str().to_owned();
            // "required" is reported at the object that lacks the property;
            // pointing at the missing property itself tells the model
            // exactly where to add it.
            if let ValidationErrorKind::Required { property } = error.kind()
                && let Some(name) = property.as_str()
            {
                pointer.push('/');
                pointer.push_str(&name.replace('~', "~0").replace('/', "~1"));
            }
            if pointer.is_empty() {
                pointer.push_str("(root)");
            }
            listed.push(format!(
                "{pointer}: {}",
                truncate(&error.to_string(), MAX_ERROR_CHARS)
            ));
        }
    }
    if total == 0 {
        return Ok(value);
    }
    let mut details = listed.join("; ");
    if total > listed.len() {
        details.push_str(&format!("; and {} more", total - listed.len()));
    }
    Err(invalid(tool, &details))
}

fn invalid(tool: &str, details: &str) -> String {
    truncate(
        &format!("invalid arguments for tool \"{tool}\": {details}"),
        MAX_MESSAGE_CHARS,
    )
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Cuts `text` to at most `max` characters (on a char boundary), marking the cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 10), "héllo");
        assert_eq!(truncate("héllo", 2), "hé…");
    }
}
