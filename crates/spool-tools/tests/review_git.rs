//! Review material read from real git repositories (the `git` binary on
//! PATH, in temporary directories).

use std::path::Path;
use std::process::Command;

use spool_protocol::ReviewTarget;
use spool_tools::review::{ReviewError, gather};

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// A repository with one commit of `lib.rs`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("lib.rs"), "fn one() -> u32 {\n    1\n}\n").unwrap();
    git(dir.path(), &["add", "lib.rs"]);
    git(dir.path(), &["commit", "-q", "-m", "First commit"]);
    dir
}

#[tokio::test]
async fn uncommitted_changes_hold_staged_unstaged_and_untracked_work() {
    let dir = repo();
    let root = dir.path();
    std::fs::write(root.join("lib.rs"), "fn one() -> u32 {\n    2\n}\n").unwrap();
    std::fs::write(root.join("staged.rs"), "pub const S: u8 = 1;\n").unwrap();
    git(root, &["add", "staged.rs"]);
    std::fs::write(root.join("new.rs"), "pub fn fresh() {}\n").unwrap();
    std::fs::write(root.join(".gitignore"), "ignored.txt\n").unwrap();
    std::fs::write(root.join("ignored.txt"), "secret\n").unwrap();
    let huge = "y".repeat(spool_tools::review::MAX_DIFF_BYTES + 1);
    std::fs::write(root.join("huge.log"), &huge).unwrap();

    let material = gather(root, &ReviewTarget::UncommittedChanges)
        .await
        .unwrap();
    assert_eq!(material.hint, "uncommitted changes");
    let prompt = &material.prompt;
    assert!(prompt.contains("-    1\n+    2"), "{prompt}");
    assert!(prompt.contains("+pub const S: u8 = 1;"), "{prompt}");
    assert!(prompt.contains("+pub fn fresh() {}"), "{prompt}");
    assert!(
        !prompt.contains("secret"),
        "ignored files stay out: {prompt}"
    );
}

#[tokio::test]
async fn a_commit_is_reviewed_with_its_message_and_diff() {
    let dir = repo();
    let root = dir.path();
    std::fs::write(root.join("lib.rs"), "fn one() -> u32 {\n    3\n}\n").unwrap();
    git(root, &["commit", "-q", "-am", "Return three"]);
    let sha = git(root, &["rev-parse", "HEAD"]).trim().to_owned();
    // Later uncommitted work is not part of the commit's review.
    std::fs::write(root.join("lib.rs"), "fn one() -> u32 {\n    4\n}\n").unwrap();

    let material = gather(
        root,
        &ReviewTarget::Commit {
            sha: sha[..10].to_owned(),
            title: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(material.hint, format!("commit {}: Return three", &sha[..7]));
    assert!(
        material.prompt.contains("-    1\n+    3"),
        "{}",
        material.prompt
    );
    assert!(!material.prompt.contains("+    4"));

    let titled = gather(
        root,
        &ReviewTarget::Commit {
            sha: "HEAD".into(),
            title: Some("Shown title".into()),
        },
    )
    .await
    .unwrap();
    assert_eq!(titled.hint, format!("commit {}: Shown title", &sha[..7]));
}

#[tokio::test]
async fn a_branch_is_reviewed_from_its_merge_base() {
    let dir = repo();
    let root = dir.path();
    git(root, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(root.join("feature.rs"), "pub fn feature() {}\n").unwrap();
    git(root, &["add", "feature.rs"]);
    git(root, &["commit", "-q", "-m", "Add the feature"]);
    let material = gather(
        root,
        &ReviewTarget::BaseBranch {
            branch: "main".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(material.hint, "changes against 'main'");
    assert!(material.prompt.contains("+pub fn feature() {}"));
    assert!(
        !material.prompt.contains("fn one"),
        "main's own lines are context-free"
    );
}

#[tokio::test]
async fn what_cannot_be_reviewed_says_why() {
    let dir = repo();
    let root = dir.path();
    assert!(matches!(
        gather(root, &ReviewTarget::UncommittedChanges).await,
        Err(ReviewError::NothingToReview { .. })
    ));
    assert!(matches!(
        gather(
            root,
            &ReviewTarget::Commit {
                sha: "0123456789abcdef".into(),
                title: None
            }
        )
        .await,
        Err(ReviewError::UnknownCommit(_))
    ));
    assert!(matches!(
        gather(
            root,
            &ReviewTarget::BaseBranch {
                branch: "no-such-branch".into()
            }
        )
        .await,
        Err(ReviewError::UnknownBranch(_))
    ));
    let plain = tempfile::tempdir().unwrap();
    let error = gather(plain.path(), &ReviewTarget::UncommittedChanges)
        .await
        .unwrap_err();
    assert!(
        matches!(error, ReviewError::NotARepository { .. }),
        "{error}"
    );
    assert!(matches!(
        gather(
            plain.path(),
            &ReviewTarget::Custom {
                instructions: "  ".into()
            }
        )
        .await,
        Err(ReviewError::EmptyInstructions)
    ));
    let custom = gather(
        plain.path(),
        &ReviewTarget::Custom {
            instructions: "Check the error handling\nin detail".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(custom.hint, "Check the error handling");
    assert_eq!(custom.prompt, "Check the error handling\nin detail");
}
