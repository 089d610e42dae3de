//! The rules file: round trip, append-only behaviour, thread scoping, and
//! errors that point at the bad line.

use std::path::Path;

use spool_tools::policy::{
    ExecRule, Grants, NetworkRule, Rule, RuleDecision, RulesFile, RulesFileError, format_rule,
};

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[test]
fn missing_file_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let rules = RulesFile::load(&dir.path().join("nope.rules")).unwrap();
    assert!(rules.rules.is_empty());
}

#[test]
fn append_then_load_round_trips() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("nested/dir/spool.rules");
    let written = vec![
        Rule::Exec(
            ExecRule::new(argv(&["cargo", "test"]), RuleDecision::Allow)
                .with_note("thread 0196, 2026-11-21T10:00:00Z"),
        ),
        Rule::Exec(
            // Awkward argv words survive: quotes, spaces, '#', ')', unicode.
            ExecRule::new(
                argv(&["sh", "-c", "echo \"a) # b\"", "é"]),
                RuleDecision::Deny,
            )
            .for_thread("0196abcd"),
        ),
        Rule::Network(NetworkRule::new("pypi.org", RuleDecision::Deny).with_note("no\nnewlines")),
        Rule::Network(NetworkRule::new("crates.io", RuleDecision::Allow).for_thread("t2")),
    ];
    for rule in &written {
        RulesFile::append(&path, rule)?;
    }
    let text = std::fs::read_to_string(&path)?;
    assert_eq!(
        text.lines().next(),
        Some(
            r#"prefix_rule(pattern=["cargo","test"], decision="allow")  # thread 0196, 2026-11-21T10:00:00Z"#
        )
    );
    assert!(
        text.contains(r#"network_rule(host="pypi.org", decision="deny")  # no newlines"#),
        "{text}"
    );
    assert!(
        text.contains(r#"decision="deny", thread="0196abcd")"#),
        "{text}"
    );
    assert_eq!(text.lines().count(), 4);

    let mut expected = written.clone();
    if let Rule::Network(r) = &mut expected[2] {
        r.note = Some("no newlines".into());
    }
    assert_eq!(RulesFile::load(&path)?.rules, expected);
    Ok(())
}

#[test]
fn append_keeps_what_the_operator_wrote() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("spool.rules");
    // Hand-written: comments, blank lines, spacing, no final newline.
    let by_hand = "# reviewed by ops\n\n  prefix_rule( pattern = [ \"make\" ] , decision = \"allow\" , )  \nnetwork_rule(host=\"example.com\", decision=\"allow\")";
    std::fs::write(&path, by_hand)?;
    RulesFile::append(
        &path,
        &Rule::Exec(ExecRule::new(argv(&["ls"]), RuleDecision::Allow)),
    )?;
    let text = std::fs::read_to_string(&path)?;
    assert!(text.starts_with(by_hand));
    assert!(
        text.ends_with("decision=\"allow\")\nprefix_rule(pattern=[\"ls\"], decision=\"allow\")\n")
    );
    let rules = RulesFile::load(&path)?.rules;
    assert_eq!(rules.len(), 3);
    assert_eq!(
        rules[0],
        Rule::Exec(ExecRule::new(argv(&["make"]), RuleDecision::Allow))
    );
    Ok(())
}

#[test]
fn loaded_rules_respect_thread_scope() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("spool.rules");
    std::fs::write(
        &path,
        concat!(
            "prefix_rule(pattern=[\"make\"], decision=\"allow\", thread=\"t1\")  # thread t2 in a comment means nothing\n",
            "prefix_rule(pattern=[\"ls\"], decision=\"allow\")\n",
        ),
    )?;
    let rules = RulesFile::load(&path)?.rules;
    let make = argv(&["make"]);
    let ls = argv(&["ls"]);

    let mut t1 = Grants::for_thread("t1");
    t1.add_rules(rules.clone());
    let mut t2 = Grants::for_thread("t2");
    t2.add_rules(rules);
    assert!(t1.exec_rules.evaluate(&make, Some("t1")).is_some());
    assert!(t2.exec_rules.evaluate(&make, Some("t2")).is_none());
    assert!(t2.exec_rules.evaluate(&ls, Some("t2")).is_some());
    assert!(t2.exec_rules.evaluate(&ls, None).is_some());
    Ok(())
}

fn malformed(text: &str) -> (usize, String, String) {
    match RulesFile::parse(text, Path::new("/etc/spool/spool.rules")) {
        Err(e) => match &e {
            RulesFileError::Malformed { line, content, .. } => {
                (*line, content.clone(), e.to_string())
            }
            _ => panic!("expected Malformed, got {e:?}"),
        },
        Ok(rules) => panic!("expected Malformed, got {rules:?}"),
    }
}

#[test]
fn malformed_lines_name_file_line_and_content() {
    let (line, content, message) = malformed(
        "# ok\nprefix_rule(pattern=[\"a\"], decision=\"allow\")\n\nprefix_rule(pattern=[\"a\"], decision=\"maybe\")\n",
    );
    assert_eq!(line, 4);
    assert_eq!(content, "prefix_rule(pattern=[\"a\"], decision=\"maybe\")");
    assert_eq!(
        message,
        "/etc/spool/spool.rules:4: decision must be \"allow\" or \"deny\", not \"maybe\": prefix_rule(pattern=[\"a\"], decision=\"maybe\")"
    );

    for (bad, why) in [
        ("allow everything", "expected prefix_rule"),
        (
            "exec_rule(pattern=[\"a\"], decision=\"allow\")",
            "unknown rule",
        ),
        (
            "prefix_rule(pattern=[], decision=\"allow\")",
            "must not be empty",
        ),
        (
            "prefix_rule(pattern=[\"a\", 1], decision=\"allow\")",
            "list of strings",
        ),
        ("prefix_rule(pattern=[\"a\"])", "missing decision"),
        ("prefix_rule(decision=\"allow\")", "missing pattern"),
        (
            "prefix_rule(pattern=[\"a\"], decision=\"allow\", color=\"red\")",
            "unknown key color",
        ),
        (
            "prefix_rule(pattern=[\"a\"], pattern=[\"b\"], decision=\"allow\")",
            "given twice",
        ),
        (
            "prefix_rule(pattern=[\"a\"], decision=\"allow\"",
            "missing ')'",
        ),
        (
            "prefix_rule(pattern=[\"a\"], decision=\"allow\"  # note",
            "missing ')'",
        ),
        (
            "prefix_rule(pattern=[\"a\"], decision=\"allow\") trailing",
            "unexpected text",
        ),
        (
            "prefix_rule(pattern=[\"a\" decision=\"allow\")",
            "bad value for pattern",
        ),
        (
            "network_rule(host=\"\", decision=\"deny\")",
            "host must not be empty",
        ),
        (
            "network_rule(host=[\"a\"], decision=\"deny\")",
            "host must be a string",
        ),
        (
            "network_rule(host=\"a\", decision=\"deny\", thread=3)",
            "bad value for thread: expected a \"string\"",
        ),
    ] {
        let (line, content, message) = malformed(bad);
        assert_eq!((line, content.as_str()), (1, bad));
        assert!(message.contains(why), "{bad}: {message}");
        assert!(
            message.starts_with("/etc/spool/spool.rules:1: "),
            "{message}"
        );
    }
}

#[test]
fn invalid_rules_are_not_appended() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spool.rules");
    let err = RulesFile::append(
        &path,
        &Rule::Exec(ExecRule::new(vec![], RuleDecision::Allow)),
    )
    .unwrap_err();
    assert!(matches!(err, RulesFileError::InvalidRule(_)), "{err}");
    assert!(!path.exists());
}

#[test]
fn format_matches_documented_shape() {
    let rule = Rule::Network(
        NetworkRule::new("pypi.org", RuleDecision::Deny)
            .for_thread("0196")
            .with_note("2026-11-21T10:00:00Z"),
    );
    assert_eq!(
        format_rule(&rule),
        r#"network_rule(host="pypi.org", decision="deny", thread="0196")  # 2026-11-21T10:00:00Z"#
    );
}
