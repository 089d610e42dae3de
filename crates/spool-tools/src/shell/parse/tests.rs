use super::*;

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The words of each simple command, as plain text.
fn words(script: &str) -> Vec<Vec<String>> {
    parse_script(script)
        .expect("parses")
        .commands
        .into_iter()
        .map(|c| c.words.into_iter().map(|w| w.text).collect())
        .collect()
}

fn spans(script: &str) -> Vec<&str> {
    parse_script(script)
        .expect("parses")
        .commands
        .into_iter()
        .map(|c| &script[c.span])
        .collect()
}

#[test]
fn shell_wrappers_are_recognised() {
    assert_eq!(shell_script(&argv(&["bash", "-lc", "ls"])), Some("ls"));
    assert_eq!(shell_script(&argv(&["/bin/sh", "-c", "ls"])), Some("ls"));
    assert_eq!(shell_script(&argv(&["zsh", "-l", "-c", "ls"])), Some("ls"));
    assert_eq!(shell_script(&argv(&["bash", "ls"])), None);
    assert_eq!(shell_script(&argv(&["bash", "-l", "ls"])), None);
    assert_eq!(shell_script(&argv(&["bash", "-c", "ls", "$0"])), None);
    assert_eq!(shell_script(&argv(&["python", "-c", "ls"])), None);
    assert_eq!(shell_script(&argv(&["bash", "-x", "-c", "ls"])), None);
}

#[test]
fn quoting_is_removed() {
    assert_eq!(
        words(r#"grep -n 'a b' "c d" e\ f "x\"y" 'it'\''s'"#),
        vec![vec!["grep", "-n", "a b", "c d", "e f", "x\"y", "it's"]]
    );
    assert_eq!(words(r#"echo "a\nb""#), vec![vec!["echo", "a\\nb"]]);
    assert_eq!(words("echo ''"), vec![vec!["echo", ""]]);
}

#[test]
fn operators_split_commands() {
    assert_eq!(
        words("cd src && ls -la; cat a | head -n 5 || true\npwd"),
        vec![
            vec!["cd", "src"],
            vec!["ls", "-la"],
            vec!["cat", "a"],
            vec!["head", "-n", "5"],
            vec!["true"],
            vec!["pwd"],
        ]
    );
    let script = parse_script("cat a | head |& wc -l && ls").unwrap();
    let piped: Vec<bool> = script.commands.iter().map(|c| c.piped).collect();
    assert_eq!(piped, vec![false, true, true, false]);
    assert!(!script.background && !script.redirects && !script.complex);
}

#[test]
fn operators_inside_quotes_are_text() {
    assert_eq!(
        words("rg 'a|b' \"c && d\" 'e;f'"),
        vec![vec!["rg", "a|b", "c && d", "e;f"]]
    );
}

#[test]
fn spans_cover_each_command_as_written() {
    assert_eq!(
        spans("  rg 'x y' src  &&  cat a 2>/dev/null ;ls"),
        vec!["rg 'x y' src", "cat a 2>/dev/null", "ls"]
    );
}

#[test]
fn comments_are_skipped() {
    assert_eq!(
        words("ls # list\n# done\npwd"),
        vec![vec!["ls"], vec!["pwd"]]
    );
    assert_eq!(words("echo a#b"), vec![vec!["echo", "a#b"]]);
}

#[test]
fn redirections_are_flagged_and_their_targets_dropped() {
    for script in [
        "ls > out",
        "ls >out",
        "ls 2>&1",
        "ls &> out",
        "ls>>out",
        "cat < in",
        "cat <<< word",
    ] {
        let parsed = parse_script(script).unwrap();
        assert!(parsed.redirects, "{script}");
        assert!(!parsed.complex, "{script}");
        assert_eq!(parsed.commands[0].words.len(), 1, "{script}");
    }
    // A digit that is part of a word is not a file descriptor.
    assert_eq!(words("echo a2>f"), vec![vec!["echo", "a2"]]);
    assert_eq!(words("echo 2 >f"), vec![vec!["echo", "2"]]);
}

#[test]
fn background_is_flagged() {
    let parsed = parse_script("sleep 5 & ls").unwrap();
    assert!(parsed.background);
    assert_eq!(parsed.commands.len(), 2);
}

#[test]
fn unmodelled_constructs_are_complex() {
    for script in [
        "echo $(rm -rf x)",
        "echo `id`",
        "echo \"$(id)\"",
        "(cd x && ls)",
        "cat <<EOF\nhi\nEOF",
        "diff <(ls a) <(ls b)",
        "for f in a b; do cat $f; done",
        "if true; then ls; fi",
        "{ ls; }",
        "ls >",
        "FOO=1 while true; do :; done",
    ] {
        assert!(parse_script(script).unwrap().complex, "{script}");
    }
}

#[test]
fn expansions_make_words_dynamic() {
    let dynamic = |script: &str| -> Vec<bool> {
        parse_script(script).unwrap().commands[0]
            .words
            .iter()
            .map(|w| w.dynamic)
            .collect()
    };
    assert_eq!(
        dynamic("ls $HOME \"$X\" '$Y' \\$Z"),
        vec![false, true, true, false, false]
    );
    assert_eq!(
        dynamic("ls *.rs src/*.rs -d* \"-\"* \"*\" a{b,c}"),
        vec![false, true, false, true, true, false, true]
    );
}

#[test]
fn unbalanced_quotes_do_not_parse() {
    assert_eq!(parse_script("echo 'abc"), None);
    assert_eq!(parse_script("echo \"abc"), None);
    assert_eq!(parse_script("echo \"abc\\\""), None);
}

#[test]
fn assignments_are_recognised() {
    assert!(is_assignment("FOO=bar"));
    assert!(is_assignment("_x1="));
    assert!(!is_assignment("1x=bar"));
    assert!(!is_assignment("--color=auto"));
    assert!(!is_assignment("ls"));
}
