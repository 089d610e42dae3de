//! Tests hold a store's next `COMMIT` at a door, wherever it runs, or the
//! writing of a batch's next slice (`slice.rs`), to see what waits for it
//! (on a disk busy with other writes, the sync in a `COMMIT` can take
//! hundreds of milliseconds, and a batch that grew meanwhile takes tens of
//! milliseconds to write).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use rusqlite::Connection;

/// Where a door stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Place {
    /// Before a `COMMIT`.
    Commit,
    /// Before a slice of a batch other than its first.
    Slice,
}

/// What a door does to the connection before it is passed.
type Action = Box<dyn FnOnce(&Connection) + Send>;

struct Held {
    dir: PathBuf,
    place: Place,
    entered: Sender<()>,
    open: Receiver<()>,
    action: Option<Action>,
}

/// Doors set, across the process's tests, each for one store's
/// directory.
static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());

pub(crate) struct Door {
    /// Sent when the store reaches the door.
    pub(crate) entered: Receiver<()>,
    /// The store goes on once this sends or is dropped.
    pub(crate) open: Sender<()>,
}

/// Holds the store whose file is in `dir` the next time it reaches
/// `place`.
pub(crate) fn hold(dir: &Path, place: Place) -> Door {
    register(dir, place, None)
}

/// [`hold`], and has the writer run `action` on its connection once the
/// door opens, before it goes on (a test's way to make what follows
/// fail).
pub(crate) fn hold_and(
    dir: &Path,
    place: Place,
    action: impl FnOnce(&Connection) + Send + 'static,
) -> Door {
    register(dir, place, Some(Box::new(action)))
}

fn register(dir: &Path, place: Place, action: Option<Action>) -> Door {
    let (entered, entered_rx) = channel();
    let (open_tx, open) = channel();
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    HELD.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(Held {
            dir,
            place,
            entered,
            open,
            action,
        });
    Door {
        entered: entered_rx,
        open: open_tx,
    }
}

pub(super) fn pass(conn: &Connection, place: Place) {
    let Some(dir) = conn.path().and_then(|path| Path::new(path).parent()) else {
        return;
    };
    let held = {
        let mut all = HELD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let at = all
            .iter()
            .position(|held| held.dir == dir && held.place == place);
        at.map(|at| all.remove(at))
    };
    if let Some(held) = held {
        let _ = held.entered.send(());
        let _ = held.open.recv();
        if let Some(action) = held.action {
            action(conn);
        }
    }
}

/// Waits until the store reaches `door`, failing with `what` if it does not
/// within `patience`, and gives back what opens it.
pub(crate) async fn entered(door: Door, patience: Duration, what: &str) -> Sender<()> {
    let (entered, open) = tokio::task::spawn_blocking(move || {
        (door.entered.recv_timeout(patience).is_ok(), door.open)
    })
    .await
    .unwrap();
    assert!(entered, "{what}");
    open
}
