use super::*;

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn bash(script: &str) -> Vec<CommandAction> {
    command_actions(&argv(&["bash", "-lc", script]))
}

fn read(command: &str, path: &str) -> CommandAction {
    CommandAction::Read {
        command: command.to_owned(),
        name: file_name(path),
        path: path.to_owned(),
    }
}

fn list(command: &str, path: Option<&str>) -> CommandAction {
    CommandAction::ListFiles {
        command: command.to_owned(),
        path: path.map(str::to_owned),
    }
}

fn search(command: &str, query: Option<&str>, path: Option<&str>) -> CommandAction {
    CommandAction::Search {
        command: command.to_owned(),
        query: query.map(str::to_owned),
        path: path.map(str::to_owned),
    }
}

fn unknown(command: &str) -> CommandAction {
    CommandAction::Unknown {
        command: command.to_owned(),
    }
}

#[test]
fn reads() {
    assert_eq!(
        command_actions(&argv(&["cat", "src/main.rs"])),
        vec![read("cat src/main.rs", "src/main.rs")]
    );
    assert_eq!(
        bash("head -n 50 'docs/my file.md'"),
        vec![read("head -n 50 'docs/my file.md'", "docs/my file.md")]
    );
    assert_eq!(
        bash("sed -n '1,200p' src/lib.rs"),
        vec![read("sed -n '1,200p' src/lib.rs", "src/lib.rs")]
    );
    assert_eq!(
        bash("bat -r 10:20 a.rs"),
        vec![read("bat -r 10:20 a.rs", "a.rs")]
    );
    assert_eq!(
        bash("cat a b"),
        vec![read("cat a b", "a"), read("cat a b", "b")]
    );
    assert_eq!(
        bash("tail -20 log.txt"),
        vec![read("tail -20 log.txt", "log.txt")]
    );
}

#[test]
fn reads_need_a_file_and_a_printing_sed() {
    assert_eq!(bash("cat"), vec![unknown("cat")]);
    assert_eq!(bash("cat -"), vec![unknown("cat -")]);
    assert_eq!(bash("sed 's/a/b/' f"), vec![unknown("sed 's/a/b/' f")]);
    assert_eq!(
        bash("sed -n 's/a/b/p' f"),
        vec![unknown("sed -n 's/a/b/p' f")]
    );
    assert_eq!(bash("sed -i -n 1p f"), vec![unknown("sed -i -n 1p f")]);
}

#[test]
fn listings() {
    assert_eq!(
        command_actions(&argv(&["ls", "-la"])),
        vec![list("ls -la", None)]
    );
    assert_eq!(
        bash("ls -I target src"),
        vec![list("ls -I target src", Some("src"))]
    );
    assert_eq!(
        bash("tree -L 2 crates"),
        vec![list("tree -L 2 crates", Some("crates"))]
    );
    assert_eq!(
        bash("find . -type f"),
        vec![list("find . -type f", Some("."))]
    );
    assert_eq!(bash("find -type f"), vec![list("find -type f", None)]);
    assert_eq!(
        bash("rg --files src"),
        vec![list("rg --files src", Some("src"))]
    );
    assert_eq!(bash("fd -e rs"), vec![list("fd -e rs", None)]);
    assert_eq!(bash("fd . src"), vec![list("fd . src", Some("src"))]);
    assert_eq!(bash("git ls-files"), vec![list("git ls-files", None)]);
}

#[test]
fn searches() {
    assert_eq!(
        bash("rg -n 'fn main' src"),
        vec![search("rg -n 'fn main' src", Some("fn main"), Some("src"))]
    );
    assert_eq!(
        bash("rg -g '*.rs' -A 3 todo"),
        vec![search("rg -g '*.rs' -A 3 todo", Some("todo"), None)]
    );
    assert_eq!(
        bash("grep -rn -e needle -- lib"),
        vec![search(
            "grep -rn -e needle -- lib",
            Some("needle"),
            Some("lib")
        )]
    );
    assert_eq!(
        bash("grep -f pats.txt src"),
        vec![search("grep -f pats.txt src", None, Some("src"))]
    );
    assert_eq!(
        bash("git grep -n TODO -- crates"),
        vec![search(
            "git grep -n TODO -- crates",
            Some("TODO"),
            Some("crates")
        )]
    );
    assert_eq!(
        bash("find src -name '*.rs'"),
        vec![search("find src -name '*.rs'", Some("*.rs"), Some("src"))]
    );
    assert_eq!(
        bash("fd -t f config etc"),
        vec![search("fd -t f config etc", Some("config"), Some("etc"))]
    );
    assert_eq!(
        bash("ag -g rs$"),
        vec![search("ag -g rs$", Some("rs$"), None)]
    );
}

#[test]
fn scripts_split_into_commands() {
    assert_eq!(
        bash("cd crates && rg -l spool | head -n 5; cat Cargo.toml"),
        vec![
            search("rg -l spool", Some("spool"), None),
            read("cat Cargo.toml", "Cargo.toml"),
        ]
    );
    assert_eq!(
        bash("ls src && echo done"),
        vec![list("ls src", Some("src")), unknown("echo done")]
    );
    assert_eq!(
        bash("cat a.txt 2>/dev/null || true"),
        vec![read("cat a.txt 2>/dev/null", "a.txt"), unknown("true")]
    );
    // A lone `cd` is what the command does.
    assert_eq!(bash("cd src"), vec![unknown("cd src")]);
    assert_eq!(bash("echo x | head -n 1"), vec![unknown("echo x")]);
    // With a file operand it is not a filter.
    assert_eq!(
        bash("ls | head -n 1 notes"),
        vec![list("ls", None), read("head -n 1 notes", "notes")]
    );
    assert_eq!(bash("ls | wc -l"), vec![list("ls", None)]);
    // Repeats collapse.
    assert_eq!(bash("ls; ls"), vec![list("ls", None)]);
}

#[test]
fn assignments_before_a_command_are_skipped() {
    assert_eq!(
        bash("LC_ALL=C grep -n x f"),
        vec![search("LC_ALL=C grep -n x f", Some("x"), Some("f"))]
    );
}

#[test]
fn scripts_it_cannot_follow_are_one_unknown() {
    for script in [
        "cat $(ls)",
        "for f in *.rs; do cat $f; done",
        "echo 'unterminated",
        "(cd x && ls)",
    ] {
        assert_eq!(bash(script), vec![unknown(script)], "{script}");
    }
    assert_eq!(bash("  "), vec![unknown("")]);
}

#[test]
fn other_commands_are_unknown() {
    assert_eq!(
        command_actions(&argv(&["cargo", "test", "--", "a b"])),
        vec![unknown("cargo test -- 'a b'")]
    );
    assert_eq!(
        command_actions(&argv(&["git", "status"])),
        vec![unknown("git status")]
    );
    assert_eq!(command_actions(&[]), vec![]);
}

#[test]
fn program_paths_are_recognised() {
    assert_eq!(
        command_actions(&argv(&["/usr/bin/cat", "x"])),
        vec![read("/usr/bin/cat x", "x")]
    );
}
