//! Running git without the programs a repository can name.
//!
//! A repository's config can make git run programs: `core.fsmonitor` on
//! every `git status`, an external diff (`diff.external`,
//! `diff.<driver>.command`) and textconv drivers on `git diff`, `git log -p`
//! and `git show`, a signature program on `git log` with `log.showSignature`.
//! A model that can write `.git/config` could turn a command everyone
//! treats as read-only into one that runs anything. So every command spool
//! runs gets [`GIT_ENV`] (git reads it as `-c` settings, in every git
//! process the command starts, scripts included), and every git invocation
//! spool can see in the command (the argv, or simple commands of a `bash -lc`
//! script) gets `--no-ext-diff --no-textconv` after `diff`, `log`, `show`
//! and `whatchanged`.

use super::format::format_command;
use super::parse::{is_assignment, parse_script, shell_script};

/// Settings that turn off the program-running parts of git's config for
/// read commands. Git applies `GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`
/// after every config file, so a repository cannot override them.
pub const GIT_ENV: [(&str, &str); 5] = [
    ("GIT_CONFIG_COUNT", "2"),
    ("GIT_CONFIG_KEY_0", "core.fsmonitor"),
    ("GIT_CONFIG_VALUE_0", "false"),
    ("GIT_CONFIG_KEY_1", "log.showSignature"),
    ("GIT_CONFIG_VALUE_1", "false"),
];

/// Subcommands that produce diffs, where external diff programs and
/// textconv drivers run.
const DIFFING: [&str; 4] = ["diff", "log", "show", "whatchanged"];

/// `argv` with `--no-ext-diff --no-textconv` added to every diffing git
/// invocation it can see. Scripts it cannot rewrite exactly (redirections,
/// expansions, anything it does not model) are left as they are: such
/// scripts are never known-safe, so they are asked about or confined.
// Invariant: `shell_script` found a script, so argv is not empty.
#[allow(clippy::expect_used)]
pub fn neutralize_git(argv: &[String]) -> Vec<String> {
    if let Some(script) = shell_script(argv) {
        let mut out = argv.to_vec();
        if let Some(rewritten) = neutralize_script(script) {
            *out.last_mut()
                .expect("a shell invocation ends with its script") = rewritten;
        }
        return out;
    }
    neutralize_words(argv).unwrap_or_else(|| argv.to_vec())
}

/// The words of one git invocation with the flags added, or `None` when
/// it is not a diffing git invocation.
fn neutralize_words(words: &[String]) -> Option<Vec<String>> {
    let program = words.first()?;
    if program.rsplit('/').next() != Some("git") {
        return None;
    }
    let mut i = 1;
    while let Some(word) = words.get(i) {
        match word.as_str() {
            // Global options that take their value as the next word.
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env" => i += 2,
            w if w.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let sub = words.get(i)?;
    if !DIFFING.contains(&sub.as_str()) {
        return None;
    }
    let mut out = words[..=i].to_vec();
    out.push("--no-ext-diff".to_owned());
    out.push("--no-textconv".to_owned());
    out.extend_from_slice(&words[i + 1..]);
    Some(out)
}

fn neutralize_script(script: &str) -> Option<String> {
    let parsed = parse_script(script)?;
    if parsed.complex || parsed.redirects {
        return None;
    }
    let mut out = script.to_owned();
    // Back to front, so earlier spans stay valid.
    for command in parsed.commands.iter().rev() {
        if command.words.iter().any(|w| w.dynamic)
            || command
                .words
                .first()
                .is_some_and(|w| is_assignment(&w.text))
        {
            continue;
        }
        let words: Vec<String> = command.words.iter().map(|w| w.text.clone()).collect();
        if let Some(rewritten) = neutralize_words(&words) {
            out.replace_range(command.span.clone(), &format_command(&rewritten));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn diffing_git_commands_get_the_flags_after_their_subcommand() {
        assert_eq!(
            neutralize_git(&argv(&["git", "diff", "HEAD"])),
            argv(&["git", "diff", "--no-ext-diff", "--no-textconv", "HEAD"])
        );
        assert_eq!(
            neutralize_git(&argv(&[
                "/usr/bin/git",
                "--no-pager",
                "-C",
                "sub",
                "log",
                "-p"
            ])),
            argv(&[
                "/usr/bin/git",
                "--no-pager",
                "-C",
                "sub",
                "log",
                "--no-ext-diff",
                "--no-textconv",
                "-p"
            ])
        );
        assert_eq!(
            neutralize_git(&argv(&["git", "status"])),
            argv(&["git", "status"])
        );
        assert_eq!(
            neutralize_git(&argv(&["ls", "diff"])),
            argv(&["ls", "diff"])
        );
    }

    #[test]
    fn scripts_are_rewritten_command_by_command() {
        assert_eq!(
            neutralize_git(&argv(&[
                "bash",
                "-lc",
                "git status && git log -p | head -n 5"
            ])),
            argv(&[
                "bash",
                "-lc",
                "git status && git log --no-ext-diff --no-textconv -p | head -n 5"
            ])
        );
        assert_eq!(
            neutralize_git(&argv(&["sh", "-c", "git show 'a b'"])),
            argv(&["sh", "-c", "git show --no-ext-diff --no-textconv 'a b'"])
        );
        // Not rewritten exactly: left alone (and never known-safe).
        let redirect = argv(&["bash", "-lc", "git diff > out.txt"]);
        assert_eq!(neutralize_git(&redirect), redirect);
        let dynamic = argv(&["bash", "-lc", "git diff $REV"]);
        assert_eq!(neutralize_git(&dynamic), dynamic);
    }
}
