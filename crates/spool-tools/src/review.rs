//! What a code review looks at: the changes of a [`ReviewTarget`], read
//! from git in the workspace, and the prompt that hands them to a reviewer.
//!
//! Every target becomes a [`ReviewMaterial`]: a short `hint` naming what is
//! reviewed ("uncommitted changes", "commit 1a2b3c4: Fix the parser") and a
//! `prompt` holding the request and the diff itself, so the reviewer needs
//! no tool call to see the changes. A diff larger than [`MAX_DIFF_BYTES`]
//! is cut at a line boundary, and the prompt says so.
//!
//! | target | diff |
//! |---|---|
//! | `uncommittedChanges` | `git diff HEAD` (staged and unstaged; `git diff --cached` plus `git diff` before the first commit), then every untracked file not ignored, as a new-file diff (one larger than [`MAX_DIFF_BYTES`] is named with its size, not read) |
//! | `baseBranch` | `git diff <merge base of HEAD and branch>`: the branch's commits and the working tree's changes |
//! | `commit` | `git show <sha>` (its message and diff) |
//! | `custom` | none: the instructions are the request |
//!
//! Failures are [`ReviewError`]s that say what to fix: not a git
//! repository, an unknown commit or branch, nothing to review.

use std::path::Path;

use spool_protocol::ReviewTarget;
use tokio::process::Command;

/// The most diff text a prompt carries.
pub const MAX_DIFF_BYTES: usize = 256 * 1024;

/// What a reviewer is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewMaterial {
    /// What is reviewed, in a few words (the `enteredReviewMode` text).
    pub hint: String,
    /// The reviewer's request, with the diff.
    pub prompt: String,
}

/// Why there is nothing a reviewer could be given.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("{dir} is not inside a git repository")]
    NotARepository { dir: String },
    #[error("there are no uncommitted changes to review in {dir}")]
    NothingToReview { dir: String },
    #[error("no commit {0} in this repository")]
    UnknownCommit(String),
    #[error("no branch or revision {0} in this repository")]
    UnknownBranch(String),
    #[error("the review instructions are empty")]
    EmptyInstructions,
    #[error("git {args} failed: {message}")]
    Git { args: String, message: String },
    #[error("cannot run git: {0}")]
    Spawn(#[from] std::io::Error),
}

/// Reads the changes `target` names from the repository around `dir`.
pub async fn gather(dir: &Path, target: &ReviewTarget) -> Result<ReviewMaterial, ReviewError> {
    if let ReviewTarget::Custom { instructions } = target {
        let instructions = instructions.trim();
        if instructions.is_empty() {
            return Err(ReviewError::EmptyInstructions);
        }
        return Ok(ReviewMaterial {
            hint: first_line(instructions),
            prompt: instructions.to_owned(),
        });
    }
    let git = Git::at(dir).await?;
    match target {
        ReviewTarget::UncommittedChanges => {
            let diff = git.uncommitted().await?;
            if diff.trim().is_empty() {
                return Err(ReviewError::NothingToReview {
                    dir: dir.display().to_string(),
                });
            }
            Ok(material(
                "uncommitted changes".to_owned(),
                "Review the uncommitted changes of this repository's working tree \
                 (staged, unstaged and untracked files) against HEAD.",
                &diff,
            ))
        }
        ReviewTarget::BaseBranch { branch } => {
            let base = git
                .read(&["merge-base", "HEAD", branch])
                .await
                .map_err(|_| ReviewError::UnknownBranch(branch.clone()))?;
            let base = base.trim();
            let diff = git
                .read(&["diff", "--no-color", "--no-ext-diff", base])
                .await?;
            let short = &base[..base.len().min(7)];
            Ok(material(
                format!("changes against '{branch}'"),
                &format!(
                    "Review the changes of the current branch against '{branch}': \
                     everything since their merge base {short}, uncommitted work included."
                ),
                &diff,
            ))
        }
        ReviewTarget::Commit { sha, title } => {
            let resolved = git
                .read(&[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("{sha}^{{commit}}"),
                ])
                .await
                .map_err(|_| ReviewError::UnknownCommit(sha.clone()))?;
            let resolved = resolved.trim();
            let subject = match title {
                Some(title) => title.clone(),
                None => git
                    .read(&["log", "-1", "--format=%s", resolved])
                    .await?
                    .trim()
                    .to_owned(),
            };
            let diff = git
                .read(&[
                    "show",
                    "--no-color",
                    "--no-ext-diff",
                    "--format=medium",
                    resolved,
                ])
                .await?;
            let short = &resolved[..resolved.len().min(7)];
            let hint = if subject.is_empty() {
                format!("commit {short}")
            } else {
                format!("commit {short}: {subject}")
            };
            Ok(material(
                hint,
                &format!("Review the changes introduced by commit {short}."),
                &diff,
            ))
        }
        ReviewTarget::Custom { .. } => unreachable!("handled above"),
    }
}

fn material(hint: String, request: &str, diff: &str) -> ReviewMaterial {
    let (diff, cut) = cut_at_line(diff, MAX_DIFF_BYTES);
    let mut prompt = format!("{request}\n\n```diff\n{diff}");
    if !diff.ends_with('\n') {
        prompt.push('\n');
    }
    prompt.push_str("```\n");
    if cut {
        prompt.push_str(&format!(
            "\nThe diff was cut at {MAX_DIFF_BYTES} bytes; read the rest from the \
             repository if it matters.\n"
        ));
    }
    ReviewMaterial { hint, prompt }
}

/// `text` up to the last line break within `max` bytes, and whether
/// anything was left out.
fn cut_at_line(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let end = text[..end].rfind('\n').map_or(end, |i| i + 1);
    (&text[..end], true)
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > 80 {
        let short: String = line.chars().take(79).collect();
        format!("{short}…")
    } else {
        line.to_owned()
    }
}

/// git, run in one working tree.
struct Git<'a> {
    dir: &'a Path,
}

impl<'a> Git<'a> {
    async fn at(dir: &'a Path) -> Result<Git<'a>, ReviewError> {
        let git = Git { dir };
        match git.read(&["rev-parse", "--is-inside-work-tree"]).await {
            Ok(inside) if inside.trim() == "true" => Ok(git),
            Ok(_) | Err(ReviewError::Git { .. }) => Err(ReviewError::NotARepository {
                dir: dir.display().to_string(),
            }),
            Err(other) => Err(other),
        }
    }

    /// Staged, unstaged and untracked changes against `HEAD`.
    async fn uncommitted(&self) -> Result<String, ReviewError> {
        let has_head = self
            .read(&["rev-parse", "--verify", "--quiet", "HEAD"])
            .await
            .is_ok();
        let mut diff = if has_head {
            self.read(&["diff", "--no-color", "--no-ext-diff", "HEAD"])
                .await?
        } else {
            let staged = self
                .read(&["diff", "--no-color", "--no-ext-diff", "--cached"])
                .await?;
            let unstaged = self.read(&["diff", "--no-color", "--no-ext-diff"]).await?;
            staged + &unstaged
        };
        let untracked = self
            .read(&["ls-files", "--others", "--exclude-standard", "-z"])
            .await?;
        for path in untracked.split('\0').filter(|p| !p.is_empty()) {
            if diff.len() > MAX_DIFF_BYTES {
                break;
            }
            // A file too big to show is named, not read.
            let size = std::fs::metadata(self.dir.join(path)).map_or(0, |m| m.len());
            if size > MAX_DIFF_BYTES as u64 {
                diff.push_str(&format!(
                    "new file {path}: {size} bytes, too large to show here\n"
                ));
                continue;
            }
            // `--no-index` exits 1 when the files differ, which they do.
            let new_file = self
                .run(
                    &[
                        "diff",
                        "--no-color",
                        "--no-ext-diff",
                        "--no-index",
                        "--",
                        "/dev/null",
                        path,
                    ],
                    &[0, 1],
                )
                .await?;
            diff.push_str(&new_file);
        }
        Ok(diff)
    }

    /// Runs git; its stdout when it exits 0.
    async fn read(&self, args: &[&str]) -> Result<String, ReviewError> {
        self.run(args, &[0]).await
    }

    async fn run(&self, args: &[&str], ok_codes: &[i32]) -> Result<String, ReviewError> {
        let output = Command::new("git")
            .args(args)
            .current_dir(self.dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .kill_on_drop(true)
            .output()
            .await?;
        let code = output.status.code().unwrap_or(-1);
        if ok_codes.contains(&code) {
            return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
        }
        Err(ReviewError::Git {
            args: args.join(" "),
            message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_diff_is_cut_at_a_line_break() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(cut_at_line(text, 100), (text, false));
        assert_eq!(cut_at_line(text, 9), ("one\ntwo\n", true));
        assert_eq!(cut_at_line("é\né", 2), ("é", true));
        let prompt = material("h".into(), "Look.", &"+x\n".repeat(MAX_DIFF_BYTES)).prompt;
        assert!(prompt.len() < MAX_DIFF_BYTES + 200);
        assert!(prompt.contains("The diff was cut"));
    }

    #[test]
    fn the_hint_of_custom_instructions_is_their_first_line() {
        assert_eq!(first_line("Check x\nand y"), "Check x");
        assert_eq!(first_line(&"a".repeat(100)).chars().count(), 80);
    }
}
