use super::*;

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn safe(args: &[&str]) -> bool {
    is_known_safe(&argv(args))
}

fn safe_script(script: &str) -> bool {
    is_known_safe(&argv(&["bash", "-lc", script]))
}

#[test]
fn plain_readers_are_safe() {
    for args in [
        &["ls", "-la"][..],
        &["cat", "a.txt"],
        &["head", "-n", "5", "f"],
        &["tail", "f"],
        &["wc", "-l", "f"],
        &["pwd"],
        &["echo", "hi"],
        &["true"],
        &["which", "cargo"],
        &["file", "-b", "x"],
        &["stat", "x"],
        &["nl", "x"],
        &["tree", "-L", "2"],
        &["grep", "-rn", "x", "."],
        &["rg", "-n", "-A", "2", "x"],
        &["find", ".", "-name", "*.rs", "-type", "f"],
        &["sed", "-n", "1,20p", "f"],
        &["git", "status"],
        &["git", "--no-pager", "log", "--oneline", "-n", "5"],
        &["git", "diff", "HEAD~1", "--stat"],
        &["git", "show", "HEAD:src/lib.rs"],
        &["git", "branch", "--list", "feat/*"],
        &["git", "branch", "-a", "-v"],
        &["git", "grep", "-n", "TODO"],
    ] {
        assert!(safe(args), "{args:?}");
    }
}

#[test]
fn unknown_programs_and_paths_are_not() {
    assert!(!safe(&[]));
    assert!(!safe(&["rm", "-rf", "x"]));
    assert!(!safe(&["cargo", "build"]));
    assert!(!safe(&["./ls"]));
    assert!(!safe(&["/tmp/cat", "x"]));
    assert!(!safe(&["python", "-c", "print(1)"]));
}

#[test]
fn find_that_deletes_or_executes_is_not() {
    assert!(!safe(&["find", ".", "-delete"]));
    assert!(!safe(&[
        "find", ".", "-name", "x", "-exec", "rm", "{}", ";"
    ]));
    assert!(!safe(&["find", ".", "-execdir", "id", ";"]));
    assert!(!safe(&["find", ".", "-ok", "id", ";"]));
    assert!(!safe(&["find", ".", "-fprint", "out"]));
    assert!(!safe(&["find", ".", "-fprintf", "out", "%p"]));
    assert!(!safe(&["find", ".", "-fls", "out"]));
}

#[test]
fn sed_must_print_only() {
    assert!(safe(&["sed", "-n", "/start/,/end/p", "f"]));
    assert!(safe(&["sed", "-n", "-e", "1p", "-e", "$p", "f"]));
    assert!(safe(&["sed", "-ne", "10q;5,+2p", "f"]));
    assert!(safe(&["sed", "--quiet", "1~2!p", "f"]));
    assert!(!safe(&["sed", "1,20p", "f"]), "without -n");
    assert!(!safe(&["sed", "-i", "-n", "1p", "f"]));
    assert!(!safe(&["sed", "-ni", "1p", "f"]));
    assert!(!safe(&["sed", "-n", "-i.bak", "1p", "f"]));
    assert!(!safe(&["sed", "--in-place", "-n", "1p", "f"]));
    assert!(
        !safe(&["sed", "--in", "-n", "1p", "f"]),
        "abbreviated --in-place"
    );
    assert!(!safe(&["sed", "-n", "1w out", "f"]));
    assert!(!safe(&["sed", "-n", "1p;w out", "f"]));
    assert!(!safe(&["sed", "-n", "1e id", "f"]));
    assert!(!safe(&["sed", "-n", "s/a/b/w out", "f"]));
    assert!(!safe(&["sed", "-n", "s/a/b/e", "f"]));
    assert!(!safe(&["sed", "-n", "-f", "script.sed", "f"]));
    assert!(!safe(&["sed", "-n", "1{p}", "f"]));
    // A `/` escaped inside a regex address does not end it.
    assert!(safe(&["sed", "-n", r"/a\/b/p", "f"]));
    assert!(!safe(&["sed", "-n", "/a/b/p", "f"]));
}

#[test]
fn git_only_reads_without_extra_config() {
    assert!(!safe(&["git", "-c", "core.pager=sh", "log"]));
    assert!(!safe(&["git", "-C", "/elsewhere", "status"]));
    assert!(!safe(&["git", "--git-dir=x", "status"]));
    assert!(!safe(&["git"]));
    assert!(!safe(&["git", "commit", "-m", "x"]));
    assert!(!safe(&["git", "push"]));
    assert!(!safe(&["git", "diff", "--output=patch.txt"]));
    assert!(!safe(&["git", "diff", "--out=patch.txt"]));
    assert!(!safe(&["git", "log", "-p", "--ext-diff"]));
    assert!(!safe(&["git", "show", "--textconv", "HEAD:x"]));
    assert!(!safe(&["git", "branch", "new-branch"]));
    assert!(!safe(&["git", "branch", "-D", "old"]));
    assert!(!safe(&["git", "branch", "-m", "a", "b"]));
    assert!(!safe(&["git", "grep", "-O", "x"]));
    assert!(!safe(&["git", "grep", "--open-files-in-pager=vim", "x"]));
}

#[test]
fn rg_and_tree_and_file_options_that_write_or_run_are_not() {
    assert!(!safe(&["rg", "--pre", "sh", "x"]));
    assert!(!safe(&["rg", "--pre=sh", "x"]));
    assert!(!safe(&["rg", "-z", "x"]));
    assert!(!safe(&["rg", "-nz", "x"]));
    assert!(!safe(&["rg", "--search-zip", "x"]));
    assert!(!safe(&["rg", "--hostname-bin", "sh", "x"]));
    // `-e` takes the rest of the cluster: this searches for "z".
    assert!(safe(&["rg", "-ez", "x"]));
    assert!(!safe(&["tree", "-o", "out"]));
    assert!(!safe(&["tree", "-Lo", "2", "out"]));
    assert!(!safe(&["tree", "-R"]));
    assert!(!safe(&["file", "-C", "-m", "magic"]));
    assert!(!safe(&["file", "--comp", "-m", "magic"]));
    assert!(!safe(&["file", "-z", "x.gz"]));
}

#[test]
fn scripts_of_safe_commands_are_safe() {
    assert!(safe_script("ls -la && cat README.md"));
    assert!(safe_script("rg -n foo src | head -n 20"));
    assert!(safe_script("git status; git diff --stat || true"));
    assert!(safe_script("grep -rn 'a > b' src"), "quoted > is text");
    assert!(safe_script("ls src/*.rs"));
    assert!(is_known_safe(&argv(&["/bin/sh", "-c", "pwd"])));
}

#[test]
fn scripts_that_write_or_escape_are_not() {
    for script in [
        "ls > files.txt",
        "cat a >> b",
        "echo hi 2>err",
        "cat < /etc/passwd",
        "ls && rm -rf x",
        "echo $(rm -rf x)",
        "echo `id`",
        "echo \"$(id)\"",
        "sleep 1 & ls",
        "(ls)",
        "FOO=1 ls",
        "PAGER=sh git log",
        "ls $DIR",
        "find . ${X}",
        "find . -d*",
        "ls *.rs",
        "grep x *",
        "echo a{b,c}",
        "for f in *; do cat \"$f\"; done",
        "cat <<EOF\nx\nEOF",
        "ls 'unterminated",
        "",
        "find . -delete",
        "sed -i 's/a/b/' f",
        "git -c core.pager=sh log",
        "ls | xargs rm",
    ] {
        assert!(!safe_script(script), "{script}");
    }
}

#[test]
fn shells_that_could_be_anything_are_not() {
    assert!(!is_known_safe(&argv(&["./bash", "-lc", "ls"])));
    assert!(!is_known_safe(&argv(&["/tmp/bin/bash", "-lc", "ls"])));
    assert!(!is_known_safe(&argv(&["bash", "-c", "ls", "extra"])));
    assert!(!is_known_safe(&argv(&["bash", "script.sh"])));
}
