//! The store syncs with `fdatasync(2)`, never `fsync(2)`: the workspace
//! builds the bundled SQLite with `HAVE_FDATASYNC` (`.cargo/config.toml`;
//! `docs/internals/log.md`, "Writing"), and without it every SQLite sync
//! is an `fsync`.
//!
//! Checked by behaviour: this process forbids `fsync` (a seccomp filter
//! makes it fail with `EIO`) and the store must still commit durably, and
//! read back what it committed after a reopen. With a full `fsync` the
//! first durable commit fails. Its own test binary, since the filter holds
//! for the whole process.

#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
use serde_json::json;
use spool_store::{Session, SqliteStore, Store, StoreOptions};

/// From here on, in this thread and every thread it starts, `fsync` fails
/// with `EIO`; everything else is allowed.
fn forbid_fsync() {
    let rules = BTreeMap::from([(libc::SYS_fsync, Vec::new())]);
    let arch = std::env::consts::ARCH.try_into().expect("a seccomp target");
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EIO as u32),
        arch,
    )
    .expect("the filter");
    let program: BpfProgram = filter.try_into().expect("the program");
    seccompiler::apply_filter(&program).expect("the filter applies");
}

#[test]
fn durable_commits_need_no_fsync() {
    // Before any thread starts: the runtime's threads and the store's
    // inherit the filter.
    forbid_fsync();
    // The filter works: an fsync here fails, an fdatasync does not.
    let probe = tempfile::tempfile().unwrap();
    let fsync = probe.sync_all().unwrap_err();
    assert_eq!(fsync.raw_os_error(), Some(libc::EIO), "{fsync}");
    probe.sync_data().unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spool.db");
    let items: Vec<_> = (0..50)
        .map(|n| json!({"role": "user", "content": format!("item {n}")}))
        .collect();
    runtime.block_on(async {
        // Durability `full`, the default: every add_items is synced before
        // it returns.
        assert_eq!(
            StoreOptions::default().durability,
            spool_store::Durability::Full
        );
        let store = SqliteStore::open(&path, StoreOptions::default()).unwrap();
        let session = Session::open(store.clone(), "s").await.unwrap();
        for item in &items {
            session.add_items(vec![item.clone()]).await.unwrap();
        }
        store.close().await.unwrap();

        let store = SqliteStore::open(&path, StoreOptions::default()).unwrap();
        let session = Session::open(store.clone(), "s").await.unwrap();
        assert_eq!(session.get_items(None).await.unwrap(), items);
        store.close().await.unwrap();
    });
}
