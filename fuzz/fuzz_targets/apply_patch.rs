//! The `apply_patch` tool's parser, and its chunk matching applied to a
//! file's text in memory (nothing touches the file system).
//!
//! Input: the patch text, then optionally a NUL byte and the file's text.
//!
//! Asserts: no panic; a parsed patch has operations, each with a path, and
//! updates have chunks or a move; applying an update's chunks to the file
//! text either fails with an error or gives a text whose unified diff is
//! empty exactly when the text is unchanged; and the chunks of a patch
//! without `@@` headers, `*** End of File` or pure insertions always apply
//! to the file made of their own old lines.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spool_tools::apply_patch::fuzzing::apply_chunks;
use spool_tools::apply_patch::{FileOp, affected_paths, parse_patch, unified_diff};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (patch_text, file) = text.split_once('\0').unwrap_or((&text, ""));
    let Ok(patch) = parse_patch(patch_text) else {
        return;
    };
    assert!(!patch.ops.is_empty(), "an empty patch parsed");
    let _ = affected_paths(&patch);
    for op in &patch.ops {
        assert!(!op.path().is_empty(), "an operation without a path: {op:?}");
        let FileOp::Update {
            path,
            move_to,
            chunks,
        } = op
        else {
            continue;
        };
        assert!(
            !chunks.is_empty() || move_to.is_some(),
            "an empty update parsed"
        );
        if let Ok(new) = apply_chunks(path, file, chunks) {
            let diff = unified_diff(file, &new, "a", "b");
            assert_eq!(diff.is_empty(), new == file, "the diff disagrees:\n{diff}");
        }
        let plain = chunks
            .iter()
            .all(|c| c.header.is_none() && !c.end_of_file && !c.old_lines.is_empty());
        if plain && !chunks.is_empty() {
            let mut own = String::new();
            for chunk in chunks {
                for line in &chunk.old_lines {
                    own.push_str(line);
                    own.push('\n');
                }
            }
            if let Err(e) = apply_chunks(path, &own, chunks) {
                panic!(
                    "chunks do not apply to their own old lines: {e}\nfile: {own:?}\nchunks: {chunks:#?}"
                );
            }
        }
    }
});
