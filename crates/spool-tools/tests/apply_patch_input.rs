//! apply_patch input handling against real files: path safety, parse
//! errors, and the sloppiness models bring (whitespace, CRLF, heredocs).

mod patch_support;

use std::fs;

use patch_support::*;
use spool_tools::apply_patch::{PatchError, apply, parse_patch, preview, resolve_in_workspace};

#[test]
fn paths_outside_the_workspace_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    let ws = workspace(&[("ok.txt", "ok\n")]);
    std::os::unix::fs::symlink(outside.path(), ws.path().join("escape")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        ws.path().join("link.txt"),
    )
    .unwrap();
    let before = snapshot(ws.path());

    let cases = [
        "*** Add File: ../x\n+x",
        "*** Add File: sub/../../x\n+x",
        "*** Update File: /etc/passwd\n-root\n+toor",
        "*** Delete File: /etc/passwd",
        "*** Add File: escape/new.txt\n+x",
        "*** Update File: escape/secret.txt\n-secret\n+leaked",
        "*** Delete File: escape/secret.txt",
        "*** Update File: link.txt\n-secret\n+leaked",
        "*** Update File: ok.txt\n*** Move to: ../moved.txt",
        "*** Update File: ok.txt\n*** Move to: escape/moved.txt",
    ];
    for case in cases {
        let text = format!("*** Begin Patch\n*** Add File: fine.txt\n+fine\n{case}\n*** End Patch");
        let patch = parse_patch(&text).unwrap();
        let err = preview(&patch, ws.path()).unwrap_err();
        assert!(
            matches!(err, PatchError::OutsideWorkspace { .. }),
            "{case}: {err}"
        );
        assert!(
            err.to_string().contains("is outside the workspace"),
            "{err}"
        );
        let err = apply(&patch, ws.path()).unwrap_err();
        assert!(
            matches!(err, PatchError::OutsideWorkspace { .. }),
            "{case}: {err}"
        );
    }
    assert_eq!(snapshot(ws.path()), before);
    assert_eq!(
        fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
}

#[test]
fn resolve_accepts_absolute_paths_inside_the_root() {
    let ws = workspace(&[]);
    let root = ws.path().canonicalize().unwrap();
    let inside = ws.path().join("a/b.txt");
    assert_eq!(
        resolve_in_workspace(ws.path(), inside.to_str().unwrap()).unwrap(),
        root.join("a/b.txt")
    );
    let text = format!(
        "*** Begin Patch\n*** Add File: {}\n+x\n*** End Patch",
        inside.display()
    );
    run(ws.path(), &text).unwrap();
    assert_eq!(read(ws.path(), "a/b.txt"), "x\n");
}

#[test]
fn a_symlink_inside_the_workspace_is_edited_through() {
    let ws = workspace(&[("real.txt", "a\n")]);
    std::os::unix::fs::symlink("real.txt", ws.path().join("alias.txt")).unwrap();
    run(
        ws.path(),
        "*** Begin Patch\n*** Update File: alias.txt\n-a\n+b\n*** End Patch",
    )
    .unwrap();
    assert_eq!(read(ws.path(), "real.txt"), "b\n");
    assert!(
        ws.path()
            .join("alias.txt")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn parse_errors_name_the_line() {
    let cases = [
        (
            "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\nfoo\n*** End Patch",
            "line 6: expected a chunk line starting with ' ', '-' or '+', '@@', or a '***' marker, found 'foo'",
        ),
        (
            "*** Begin Patch\nfoo\n*** End Patch",
            "line 2: expected '*** Add File:', '*** Update File:', '*** Delete File:' or '*** End Patch', found 'foo'",
        ),
        (
            "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch",
            "line 3: expected a line starting with '+' (contents of added file 'a'), found 'no plus'",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n*** End Patch",
            "line 3: update chunk for 'a' is empty (expected lines starting with ' ', '-' or '+' after '@@')",
        ),
        (
            "*** Begin Patch\n*** Delete File: a\n",
            "line 2: expected '*** Add File:', '*** Update File:', '*** Delete File:' or '*** End Patch', but the patch ended",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(parse_patch(text).unwrap_err().to_string(), message);
    }
}

#[test]
fn whitespace_lenient_matching() {
    let ws = workspace(&[("a.rs", "fn main() {   \n\tprintln!(\"hi\");\n}\n")]);
    run(
        ws.path(),
        "*** Begin Patch\n*** Update File: a.rs\n@@\n fn main() {\n-    println!(\"hi\");\n+    println!(\"bye\");\n }\n*** End Patch",
    )
    .unwrap();
    // Context lines keep the file's own whitespace (the trailing spaces
    // after `{`); the changed line is the model's.
    assert_eq!(
        read(ws.path(), "a.rs"),
        "fn main() {   \n    println!(\"bye\");\n}\n"
    );
}

#[test]
fn crlf_patch_and_crlf_file() {
    let ws = workspace(&[("win.txt", "one\r\ntwo\r\nthree\r\n")]);
    run(
        ws.path(),
        "*** Begin Patch\r\n*** Update File: win.txt\r\n@@\r\n one\r\n-two\r\n+TWO\r\n*** Add File: new.txt\r\n+x\r\n*** End Patch\r\n",
    )
    .unwrap();
    assert_eq!(read(ws.path(), "win.txt"), "one\r\nTWO\r\nthree\r\n");
    assert_eq!(read(ws.path(), "new.txt"), "x\n");
}

#[test]
fn heredoc_wrapper_and_surrounding_whitespace() {
    let ws = workspace(&[("a.txt", "a\n")]);
    run(
        ws.path(),
        "\n  apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** End Patch\nEOF\n\n",
    )
    .unwrap();
    assert_eq!(read(ws.path(), "a.txt"), "b\n");
}
