//! Embeds the trace viewer's files (`viewer/`, a flat folder) in the
//! binary: writes `$OUT_DIR/viewer_assets.rs`, a table of every file's
//! name, content type, bytes (`include_bytes!`) and ETag, sorted by name,
//! which `src/http/viewer.rs` serves. A file added to the folder is served
//! on the next build, with no list to keep by hand.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let out = std::env::var_os("OUT_DIR").map(PathBuf::from);
    let (Some(manifest), Some(out)) = (manifest, out) else {
        fail("cargo sets CARGO_MANIFEST_DIR and OUT_DIR for build scripts");
    };
    let folder = manifest.join("viewer");
    // The folder: a file added or removed; each file: its content.
    println!("cargo:rerun-if-changed=viewer");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&folder) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.is_file())
            .collect(),
        Err(error) => fail(&format!("cannot read {}: {error}", folder.display())),
    };
    files.sort();
    let mut table = String::from(
        "/// (name, content type, bytes, ETag) of every viewer file, by name.\n\
         pub(crate) const VIEWER_ASSETS: &[(&str, &str, &[u8], &str)] = &[\n",
    );
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            fail(&format!("{} is not a UTF-8 file name", path.display()));
        };
        if name.starts_with('.') {
            // Editor swap files and the like are not the viewer's.
            continue;
        }
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) => fail(&format!("cannot read {}: {error}", path.display())),
        };
        let _ = writeln!(
            table,
            "    ({name:?}, {:?}, include_bytes!({:?}), \"\\\"{:016x}\\\"\"),",
            content_type(path),
            path.display().to_string(),
            fnv1a(&bytes),
        );
    }
    table.push_str("];\n");
    if let Err(error) = std::fs::write(out.join("viewer_assets.rs"), table) {
        fail(&format!("cannot write viewer_assets.rs: {error}"));
    }
}

/// The `Content-Type` of a file by its extension; text is UTF-8.
fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        // Served as bytes the browser will not interpret (with nosniff).
        _ => "application/octet-stream",
    }
}

/// FNV-1a, 64 bits: a stable hash of the bytes, so the ETag changes
/// exactly when the file does (no collision resistance is needed: a
/// stale ETag only costs a reload).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

fn fail(message: &str) -> ! {
    eprintln!("spool-server build script: {message}");
    std::process::exit(1)
}
