//! apply_patch against real files in temporary workspaces.

mod patch_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use patch_support::*;
use spool_protocol::PatchChangeKind;
use spool_tools::apply_patch::{FileOp, PatchError, affected_paths, apply, parse_patch, preview};

#[test]
fn add_creates_the_file_and_missing_directories() {
    let ws = workspace(&[]);
    let changes = run(
        ws.path(),
        "*** Begin Patch\n*** Add File: nested/dir/new.txt\n+line one\n+line two\n*** End Patch\n",
    )
    .unwrap();
    assert_eq!(
        read(ws.path(), "nested/dir/new.txt"),
        "line one\nline two\n"
    );
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].kind, PatchChangeKind::Add);
    assert!(changes[0].path.ends_with("nested/dir/new.txt"));
    assert!(Path::new(&changes[0].path).is_absolute());
    assert_eq!(
        changes[0].diff,
        "--- /dev/null\n+++ b/nested/dir/new.txt\n@@ -0,0 +1,2 @@\n+line one\n+line two\n"
    );
}

#[test]
fn add_refuses_an_existing_file() {
    let ws = workspace(&[("a.txt", "keep\n")]);
    let err = run(
        ws.path(),
        "*** Begin Patch\n*** Add File: a.txt\n+new\n*** End Patch",
    )
    .unwrap_err();
    assert!(matches!(&err, PatchError::AlreadyExists { path } if path == "a.txt"));
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(read(ws.path(), "a.txt"), "keep\n");
}

#[test]
fn update_with_several_chunks_a_header_and_end_of_file() {
    let src = "\
fn one() {
    let x = 1;
}

fn two() {
    let x = 1;
}

fn three() {}
// end
";
    let ws = workspace(&[("src/lib.rs", src)]);
    let changes = run(
        ws.path(),
        "*** Begin Patch
*** Update File: src/lib.rs
@@
 fn one() {
-    let x = 1;
+    let x = 10;
 }
@@ fn two
-    let x = 1;
+    let x = 2;
@@
 fn three() {}
-// end
+// the end
*** End of File
*** End Patch",
    )
    .unwrap();
    assert_eq!(
        read(ws.path(), "src/lib.rs"),
        "fn one() {\n    let x = 10;\n}\n\nfn two() {\n    let x = 2;\n}\n\nfn three() {}\n// the end\n"
    );
    assert_eq!(changes[0].kind, PatchChangeKind::Update { move_path: None });
    let diff = &changes[0].diff;
    assert!(
        diff.starts_with("--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ "),
        "{diff}"
    );
    for line in [
        "-    let x = 1;\n+    let x = 10;\n",
        "-    let x = 1;\n+    let x = 2;\n",
        "-// end\n+// the end\n",
    ] {
        assert!(diff.contains(line), "{line:?} not in\n{diff}");
    }
}

#[test]
fn the_header_narrows_to_the_right_occurrence() {
    let ws = workspace(&[("a.py", "def f():\n    return 1\n\ndef g():\n    return 1\n")]);
    run(
        ws.path(),
        "*** Begin Patch\n*** Update File: a.py\n@@ def g():\n-    return 1\n+    return 2\n*** End Patch",
    )
    .unwrap();
    assert_eq!(
        read(ws.path(), "a.py"),
        "def f():\n    return 1\n\ndef g():\n    return 2\n"
    );
}

#[test]
fn delete_removes_the_file() {
    let ws = workspace(&[("old.txt", "bye\n"), ("keep.txt", "hi\n")]);
    let changes = run(
        ws.path(),
        "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch",
    )
    .unwrap();
    assert!(!ws.path().join("old.txt").exists());
    assert_eq!(read(ws.path(), "keep.txt"), "hi\n");
    assert_eq!(changes[0].kind, PatchChangeKind::Delete);
    assert_eq!(
        changes[0].diff,
        "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
    );
    let names: Vec<_> = fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["keep.txt"], "no backup or temporary file left");
}

#[test]
fn update_or_delete_of_a_missing_file_is_refused() {
    let ws = workspace(&[]);
    let err = run(
        ws.path(),
        "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot delete 'nope.txt': the file does not exist"
    );
    let err = run(
        ws.path(),
        "*** Begin Patch\n*** Update File: nope.txt\n-a\n+b\n*** End Patch",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot update 'nope.txt': the file does not exist"
    );
}

#[test]
fn move_updates_the_file_keeps_permissions_and_removes_the_old_path() {
    let ws = workspace(&[("src/old.sh", "#!/bin/sh\necho old\n")]);
    let old = ws.path().join("src/old.sh");
    fs::set_permissions(&old, fs::Permissions::from_mode(0o751)).unwrap();
    let text = "*** Begin Patch\n*** Update File: src/old.sh\n*** Move to: bin/new.sh\n@@\n-echo old\n+echo new\n*** End Patch";
    let patch = parse_patch(text).unwrap();
    assert_eq!(
        affected_paths(&patch),
        [PathBuf::from("src/old.sh"), PathBuf::from("bin/new.sh")]
    );
    let changes = apply(&patch, ws.path()).unwrap();
    assert!(!old.exists());
    let new = ws.path().join("bin/new.sh");
    assert_eq!(fs::read_to_string(&new).unwrap(), "#!/bin/sh\necho new\n");
    assert_eq!(
        fs::metadata(&new).unwrap().permissions().mode() & 0o777,
        0o751
    );
    let PatchChangeKind::Update {
        move_path: Some(dest),
    } = &changes[0].kind
    else {
        panic!("{:?}", changes[0].kind);
    };
    assert!(dest.ends_with("bin/new.sh"));
    assert!(
        changes[0]
            .diff
            .starts_with("--- a/src/old.sh\n+++ b/bin/new.sh\n")
    );
}

#[test]
fn move_onto_an_existing_file_is_refused() {
    let ws = workspace(&[("a", "a\n"), ("b", "b\n")]);
    let err = run(
        ws.path(),
        "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch",
    )
    .unwrap_err();
    assert!(matches!(err, PatchError::MoveTargetExists { .. }), "{err}");
    assert_eq!(
        (read(ws.path(), "a"), read(ws.path(), "b")),
        ("a\n".into(), "b\n".into())
    );
}

#[test]
fn update_preserves_permissions() {
    let ws = workspace(&[("run.sh", "echo 1\n")]);
    let path = ws.path().join("run.sh");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).unwrap();
    run(
        ws.path(),
        "*** Begin Patch\n*** Update File: run.sh\n-echo 1\n+echo 2\n*** End Patch",
    )
    .unwrap();
    assert_eq!(read(ws.path(), "run.sh"), "echo 2\n");
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

#[test]
fn a_failing_third_file_leaves_everything_untouched() {
    let ws = workspace(&[("one.txt", "1\n"), ("two.txt", "2\n"), ("three.txt", "3\n")]);
    let before = snapshot(ws.path());
    let err = run(
        ws.path(),
        "*** Begin Patch
*** Update File: one.txt
-1
+one
*** Add File: added/new.txt
+new
*** Delete File: two.txt
*** Update File: three.txt
@@
-three
+THREE
*** End Patch",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "'three.txt': the chunk at patch line 9 does not match the file; first context line not found: 'three'"
    );
    assert_eq!(snapshot(ws.path()), before);
}

#[test]
fn preview_writes_nothing_and_shows_the_diff() {
    let ws = workspace(&[("a.txt", "1\n2\n3\n4\n5\n6\n7\n8\n")]);
    let before = snapshot(ws.path());
    let patch = parse_patch(
        "*** Begin Patch\n*** Update File: a.txt\n@@\n 4\n-5\n+five\n*** Add File: b.txt\n+b\n*** Delete File: a.txt\n*** End Patch",
    )
    .unwrap();
    let changes = preview(&patch, ws.path()).unwrap();
    assert_eq!(snapshot(ws.path()), before);
    assert_eq!(changes.len(), 3);
    assert_eq!(
        changes[0].diff,
        "--- a/a.txt\n+++ b/a.txt\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
    );
    // The delete sees the file as the earlier update left it.
    assert!(changes[2].diff.contains("-five\n"), "{}", changes[2].diff);
    assert_eq!(apply(&patch, ws.path()).unwrap(), changes);
    assert!(!ws.path().join("a.txt").exists());
    assert_eq!(read(ws.path(), "b.txt"), "b\n");
}

#[test]
fn later_operations_see_earlier_ones() {
    let ws = workspace(&[]);
    run(
        ws.path(),
        "*** Begin Patch\n*** Add File: a.txt\n+one\n*** Update File: a.txt\n-one\n+two\n*** End Patch",
    )
    .unwrap();
    assert_eq!(read(ws.path(), "a.txt"), "two\n");
}

#[test]
fn other_refusals() {
    let ws = workspace(&[("blocker", "a file\n"), ("bin.dat", "")]);
    fs::write(ws.path().join("bin.dat"), [0xff, 0xfe, 0x00]).unwrap();
    fs::create_dir(ws.path().join("dir")).unwrap();
    let before = snapshot(ws.path());
    type Check = fn(&PatchError) -> bool;
    let cases: [(&str, Check); 3] = [
        ("*** Add File: blocker/x.txt\n+x", |e| {
            matches!(e, PatchError::ParentNotADirectory { .. })
        }),
        ("*** Update File: bin.dat\n-a\n+b", |e| {
            matches!(e, PatchError::NotUtf8 { .. })
        }),
        ("*** Delete File: dir", |e| {
            matches!(e, PatchError::NotAFile { .. })
        }),
    ];
    for (case, check) in cases {
        let err = run(
            ws.path(),
            &format!("*** Begin Patch\n{case}\n*** End Patch"),
        )
        .unwrap_err();
        assert!(check(&err), "{case}: {err}");
    }
    assert_eq!(snapshot(ws.path()), before);
}

#[test]
fn affected_paths_lists_each_path_once() {
    let patch = parse_patch(
        "*** Begin Patch\n*** Add File: a\n+x\n*** Update File: a\n*** Move to: b\n*** Delete File: c\n*** End Patch",
    )
    .unwrap();
    assert!(matches!(patch.ops[1], FileOp::Update { .. }));
    assert_eq!(affected_paths(&patch), ["a", "b", "c"].map(PathBuf::from));
}
