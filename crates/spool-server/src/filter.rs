//! What each client sees: a client that did not opt in to spool's
//! additions (in `initialize` capabilities) sees exactly what Codex's
//! app-server would send; one that did gets the `seq` cursor, item
//! envelopes (status, provenance, audience) and spool's own item kinds and
//! notifications.

use std::fmt::Write;

use serde_json::Value;
use spool_protocol::*;
use spool_store::Appended;

/// spool's opt-in additions for one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// `params.seq` on every logged notification (the resume cursor).
    pub seq: bool,
    /// spool's item kinds, envelopes, `item/removed`, `thread/cleared`.
    pub spool_items: bool,
    /// Notification methods the client opted out of (`initialize`'s
    /// `optOutNotificationMethods`), one bit per index in
    /// `ServerNotification::METHODS`.
    pub opted_out: u64,
}

impl Capabilities {
    /// The bits of `methods` (names spool never sends are ignored).
    pub fn opt_out_mask(methods: &[String]) -> u64 {
        methods
            .iter()
            .filter_map(|m| {
                ServerNotification::METHODS
                    .iter()
                    .position(|known| known == m)
            })
            .fold(0, |mask, index| mask | (1 << index))
    }

    /// Whether this client gets `notification` at all. `thread/eventsLost`
    /// goes to every client that reads seqs: it is what keeps their cursors
    /// honest across a crash.
    fn sends(&self, notification: &ServerNotification) -> bool {
        let lost = matches!(notification, ServerNotification::ThreadEventsLost(_));
        (self.spool_items || codex_knows(notification) || (self.seq && lost))
            && !self.opted_out_of(notification)
    }

    fn opted_out_of(&self, notification: &ServerNotification) -> bool {
        self.opted_out != 0
            && ServerNotification::METHODS
                .iter()
                .position(|m| *m == notification.method())
                .is_some_and(|index| self.opted_out & (1 << index) != 0)
    }
}

/// The notification as this client gets it (JSON-RPC), or `None` when it
/// is not for this client.
pub fn for_client(appended: &Appended, capabilities: &Capabilities) -> Option<Value> {
    let notification = appended.notification();
    if !capabilities.sends(notification) {
        return None;
    }
    let mut value = serde_json::to_value(notification).ok()?;
    let object = value.as_object_mut()?;
    object.insert("jsonrpc".to_owned(), Value::from("2.0"));
    if let Some(params) = object.get_mut("params").and_then(Value::as_object_mut) {
        if !capabilities.spool_items {
            params.remove("envelope");
        }
        if capabilities.seq
            && let Some(seq) = appended.seq()
        {
            params.insert("seq".to_owned(), Value::from(seq));
        }
    }
    Some(value)
}

/// [`for_client`] as the line sent, encoded straight from the notification
/// rather than through a `Value` when nothing has to be taken out of it (the
/// client opted in to envelopes, or there is none): `params.seq` and
/// `jsonrpc` are added to the encoded text where `for_client` puts them,
/// so the line is the same byte for byte.
pub fn line_for_client(appended: &Appended, capabilities: &Capabilities) -> Option<String> {
    let notification = appended.notification();
    if !capabilities.sends(notification) {
        return None;
    }
    if !capabilities.spool_items && notification.envelope().is_some() {
        return for_client(appended, capabilities).map(|value| value.to_string());
    }
    // `{"method":"…","params":{…}}`: every notification's params are an
    // object, so the text ends with the two closing braces.
    let mut line = serde_json::to_string(notification).ok()?;
    if !line.ends_with("}}") {
        return for_client(appended, capabilities).map(|value| value.to_string());
    }
    line.truncate(line.len() - 2);
    if capabilities.seq
        && let Some(seq) = appended.seq()
    {
        if !line.ends_with('{') {
            line.push(',');
        }
        let _ = write!(line, "\"seq\":{seq}");
    }
    line.push_str("},\"jsonrpc\":\"2.0\"}");
    Some(line)
}

/// Whether a Codex app-server client would get this notification: not
/// spool's own kinds, nor an item kept from the client's view (a review's
/// prompt).
fn codex_knows(notification: &ServerNotification) -> bool {
    let for_client = notification.envelope().is_none_or(|e| e.audience.client);
    let codex_item = notification
        .carried_item_kind()
        .is_none_or(|kind| kind.is_codex_kind());
    notification.dialect() == Dialect::Codex && codex_item && for_client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(seq: u64, payload: ServerNotification) -> Appended {
        Appended::Logged(ThreadEvent {
            thread_id: "t".to_owned(),
            seq,
            at_ms: 0,
            payload,
        })
    }

    /// The direct encoding is the `Value` one byte for byte, for every
    /// combination of opt-ins, with and without an envelope to remove.
    #[test]
    fn line_for_client_is_for_client_encoded() {
        let item = ThreadItem::agent_message("msg_1", "Hello \"there\"");
        let envelope = ItemEnvelope::started("test", Audience::BOTH, 7);
        let started = |envelope| {
            ServerNotification::ItemStarted(ItemStartedNotification {
                item: item.clone(),
                thread_id: "t".to_owned(),
                turn_id: "turn_1".to_owned(),
                started_at_ms: 7,
                envelope,
            })
        };
        let delta = ServerNotification::AgentMessageDelta(TextDeltaNotification {
            thread_id: "t".to_owned(),
            turn_id: "turn_1".to_owned(),
            item_id: "msg_1".to_owned(),
            delta: "wor\u{e9}ld\n".to_owned(),
        });
        let events = [
            logged(3, started(Some(envelope))),
            logged(4, started(None)),
            logged(5, delta.clone()),
            Appended::Transient(delta),
        ];
        for seq in [false, true] {
            for spool_items in [false, true] {
                let capabilities = Capabilities {
                    seq,
                    spool_items,
                    opted_out: 0,
                };
                for event in &events {
                    let expected = for_client(event, &capabilities).map(|v| v.to_string());
                    assert_eq!(line_for_client(event, &capabilities), expected);
                }
            }
        }
    }
}
