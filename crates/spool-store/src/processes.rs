//! Commands a crashed run left running. Every command spool starts for an
//! item is recorded while it runs (`running_processes`: its process group
//! and its leader's start time, see [`crate::Store::process_started`]).
//! Commands normally die with their server (the command helper kills its
//! group when the server dies), so this is the second line: crash
//! recovery, before it closes the items, kills every recorded group still
//! there, then forgets them. So "stopped before it finished; not run
//! again" is true even if the helper could not act.
//!
//! A pid can be reused, so a group is killed only if it is certainly the
//! recorded one: if a process with the group's id exists, its start time
//! must be the recorded one; if none does, the id cannot have been given
//! to anything else while members of the old group live (Linux keeps a
//! pid reserved while a process group uses it), so signalling the group
//! reaches only leftovers, if any.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rusqlite::Connection;

use crate::error::StoreError;

/// Clock ticks after boot at which process `pid` started (field 22 of
/// `/proc/PID/stat`), if it exists.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // count fields after its closing parenthesis (field 3 is the first).
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Kills what a crash left running and forgets every record. Runs on the
/// writer's connection of an open that is alone (no process of the store
/// is running any command), before the writer starts.
pub(crate) fn kill_leftovers(conn: &Connection) -> Result<usize, StoreError> {
    let recorded: Vec<(String, String, i64, i64)> = conn
        .prepare("SELECT thread_id, item_id, pgid, start_ticks FROM running_processes")?
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?
        .collect::<Result<_, _>>()?;
    if recorded.is_empty() {
        return Ok(0);
    }
    let mut killed = 0;
    for (thread_id, item_id, pgid, ticks) in &recorded {
        let Ok(pgid) = u32::try_from(*pgid) else {
            continue;
        };
        let same = match start_ticks(pgid) {
            Some(now) => u64::try_from(*ticks).is_ok_and(|ticks| ticks == now),
            None => true, // the leader is gone: only leftovers can hold the id
        };
        if !same || pgid <= 1 {
            continue;
        }
        let Ok(group) = i32::try_from(pgid).map(Pid::from_raw) else {
            continue;
        };
        if killpg(group, Signal::SIGKILL).is_ok() {
            killed += 1;
            tracing::warn!(%thread_id, %item_id, pgid,
                "killed a command a crashed run left running");
        }
    }
    conn.execute("DELETE FROM running_processes", [])?;
    Ok(killed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_start_time_and_a_missing_one_has_none() {
        assert!(start_ticks(std::process::id()).is_some());
        assert_eq!(start_ticks(u32::MAX), None);
    }
}
