//! Workspaces for the apply_patch tests: real files in temporary
//! directories, and snapshots that prove a refused patch changed nothing.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use spool_tools::apply_patch::{PatchError, apply, parse_patch};
use tempfile::TempDir;

pub fn workspace(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, contents) in files {
        let p = dir.path().join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, contents).unwrap();
    }
    dir
}

pub fn read(root: &Path, path: &str) -> String {
    fs::read_to_string(root.join(path)).unwrap()
}

/// Every file under `root`, relative, with contents: a snapshot to prove a
/// failed patch changed nothing.
pub fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                out.push((rel, Vec::new()));
                walk(root, &path, out);
            } else {
                out.push((rel, fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

pub fn run(root: &Path, text: &str) -> Result<Vec<spool_protocol::FileUpdateChange>, PatchError> {
    apply(&parse_patch(text)?, root)
}
