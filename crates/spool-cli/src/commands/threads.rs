//! `spool threads`: list, show, and the raw event log of stored threads.

use std::io::Write;

use anyhow::Context;
use spool_core::View;
use spool_core::llm::LlmViewOptions;
use spool_store::{AnyStore, Store, ThreadListQuery};

use crate::render;

pub async fn list(store: &AnyStore, limit: usize, json: bool) -> anyhow::Result<()> {
    let page = store
        .list_threads(ThreadListQuery {
            limit,
            ..ThreadListQuery::default()
        })
        .await?;
    let mut out = std::io::stdout().lock();
    if !json && page.threads.is_empty() {
        writeln!(out, "no threads yet: start one with `spool run \"…\"`")?;
    }
    for record in &page.threads {
        let t = &record.thread;
        if json {
            writeln!(out, "{}", serde_json::to_string(t)?)?;
        } else {
            let preview: String = t.preview.chars().take(60).collect();
            writeln!(
                out,
                "{}  {}  {}  {}",
                t.id,
                format_time(t.updated_at),
                t.model.as_deref().unwrap_or(&t.model_provider),
                preview.replace('\n', " ")
            )?;
        }
    }
    Ok(())
}

pub async fn show(
    store: &AnyStore,
    id: &str,
    view: View,
    tokens: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    let record = store
        .thread(id)
        .await?
        .with_context(|| format!("no thread {id} in the store"))?;
    let mut out = std::io::stdout().lock();
    match view {
        View::Llm => {
            let options = LlmViewOptions {
                token_budget: tokens,
                ..LlmViewOptions::default()
            };
            let llm = store.llm_view(id, options).await?;
            for item in &llm.input {
                if json {
                    writeln!(out, "{}", serde_json::to_string(item)?)?;
                } else {
                    writeln!(out, "{}", render::input_item(item))?;
                }
            }
            if !json {
                writeln!(
                    out,
                    "-- {} tokens, {} turn(s) included, {} left out",
                    llm.total_tokens, llm.turns_included, llm.turns_omitted
                )?;
            }
        }
        View::All | View::Client => {
            let items = store.items(id, view).await?;
            if json {
                for item in &items {
                    writeln!(out, "{}", serde_json::to_string(item)?)?;
                }
                return Ok(());
            }
            let t = &record.thread;
            writeln!(
                out,
                "thread {}  created {}  {}",
                t.id,
                format_time(t.created_at),
                t.model.as_deref().unwrap_or(&t.model_provider)
            )?;
            let mut turn = None;
            for item in &items {
                if turn.as_deref() != Some(item.turn_id.as_str()) {
                    writeln!(out, "\n── turn {}", item.turn_id)?;
                    turn = Some(item.turn_id.clone());
                }
                writeln!(out, "{}", render::item(item))?;
            }
        }
    }
    Ok(())
}

/// The thread's log as JSON Lines (`seq`, `atMs`, `method`, `params`).
pub async fn events(store: &AnyStore, id: &str, after: u64) -> anyhow::Result<()> {
    store
        .thread(id)
        .await?
        .with_context(|| format!("no thread {id} in the store"))?;
    let mut out = std::io::stdout().lock();
    let mut cursor = after;
    loop {
        let page = store.events_after(id, cursor, 1000).await?;
        let Some(last) = page.last() else { break };
        cursor = last.seq;
        for event in &page {
            writeln!(out, "{}", serde_json::to_string(event)?)?;
        }
    }
    Ok(())
}

/// Unix seconds as `YYYY-MM-DD HH:MM` UTC.
fn format_time(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_unix_time() {
        assert_eq!(super::format_time(0), "1970-01-01 00:00");
        assert_eq!(super::format_time(1_795_240_076), "2026-11-21 05:47");
        assert_eq!(super::format_time(951_782_400), "2000-02-29 00:00");
    }
}
