use super::*;

fn err(text: &str) -> String {
    parse_patch(text).unwrap_err().to_string()
}

#[test]
fn parses_all_operations() {
    let p = parse_patch(
        "*** Begin Patch\n*** Add File: a.txt\n+one\n+\n+two\n*** Delete File: b.txt\n\
         *** Update File: c.rs\n*** Move to: d.rs\n@@ fn main\n ctx\n-old\n+new\n\
         @@\n-x\n+y\n*** End of File\n*** End Patch",
    )
    .unwrap();
    assert_eq!(p.ops.len(), 3);
    assert_eq!(
        p.ops[0],
        FileOp::Add {
            path: "a.txt".into(),
            contents: "one\n\ntwo\n".into()
        }
    );
    assert_eq!(
        p.ops[1],
        FileOp::Delete {
            path: "b.txt".into()
        }
    );
    let FileOp::Update {
        path,
        move_to,
        chunks,
    } = &p.ops[2]
    else {
        panic!("not an update");
    };
    assert_eq!((path.as_str(), move_to.as_deref()), ("c.rs", Some("d.rs")));
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[0].header.as_deref(), Some("fn main"));
    assert_eq!(chunks[0].old_lines, ["ctx", "old"]);
    assert_eq!(chunks[0].new_lines, ["ctx", "new"]);
    assert_eq!(chunks[0].line, 9);
    assert!(!chunks[0].end_of_file);
    assert_eq!(chunks[1].header, None);
    assert!(chunks[1].end_of_file);
}

#[test]
fn first_chunk_may_omit_the_at_at_line() {
    let p = parse_patch("*** Begin Patch\n*** Update File: a\n-x\n+y\n*** End Patch\n").unwrap();
    let FileOp::Update { chunks, .. } = &p.ops[0] else {
        panic!()
    };
    assert_eq!(chunks[0].old_lines, ["x"]);
}

#[test]
fn tolerates_wrappers_whitespace_and_crlf() {
    let plain = parse_patch("*** Begin Patch\n*** Add File: a\n+x\n*** End Patch").unwrap();
    for text in [
        "\n\n  *** Begin Patch\n*** Add File: a\n+x\n*** End Patch  \n\n",
        "*** Begin Patch\r\n*** Add File: a\r\n+x\r\n*** End Patch\r\n",
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\nEOF\n",
        "apply_patch <<\"PATCH\"\n*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\nPATCH",
        "```\n*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n```",
    ] {
        assert_eq!(parse_patch(text).unwrap(), plain, "{text:?}");
    }
}

#[test]
fn unified_diff_ranges_after_at_at_are_not_a_header() {
    assert_eq!(chunk_header(" -3,4 +3,5 @@"), None);
    assert_eq!(chunk_header(" -3,4 +3,5 @@ fn f()"), Some("fn f()".into()));
    assert_eq!(chunk_header(" impl Foo"), Some("impl Foo".into()));
}

#[test]
fn trailing_blank_lines_of_a_chunk_are_spacing() {
    let p = parse_patch(
        "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n\n*** Delete File: b\n*** End Patch",
    )
    .unwrap();
    let FileOp::Update { chunks, .. } = &p.ops[0] else {
        panic!()
    };
    assert_eq!(chunks[0].old_lines, ["x"]);
}

#[test]
fn errors_name_the_line_and_what_was_expected() {
    assert_eq!(
        err("*** Begin Patch\n*** Add File: a\nfoo\n*** End Patch"),
        "line 3: expected a line starting with '+' (contents of added file 'a'), found 'foo'"
    );
    assert_eq!(
        err("*** Begin Patch\n*** Add File: a\n+x\nfoo"),
        "line 4: expected a line starting with '+' (contents of added file 'a'), found 'foo'"
    );
    assert_eq!(
        err("*** Begin Patch\n+x\nfoo"),
        format!("line 2: expected {EXPECTED_OP}, found '+x'")
    );
    assert_eq!(
        err("hello\n*** Begin Patch"),
        "line 1: expected '*** Begin Patch', found 'hello'"
    );
    assert_eq!(
        err("*** Begin Patch\n*** Add File: a\n+x\n"),
        format!("line 3: expected {EXPECTED_OP}, but the patch ended")
    );
    assert_eq!(
        err("*** Begin Patch\n*** Update File: a\n@@\n@@\n-x\n*** End Patch"),
        "line 3: update chunk for 'a' is empty (expected lines starting with ' ', '-' or '+' after '@@')"
    );
    assert_eq!(
        err("*** Begin Patch\n*** Update File: a\n*** End Patch"),
        "line 2: '*** Update File: a' has no changes (expected '@@' and lines starting with ' ', '-' or '+')"
    );
    assert_eq!(
        err("*** Begin Patch\n*** Update File: a\n@@\nfoo\n*** End Patch"),
        "line 4: expected a chunk line starting with ' ', '-' or '+', '@@', or a '***' marker, found 'foo'"
    );
    assert_eq!(
        err("*** Begin Patch\n*** Delete File:\n*** End Patch"),
        "line 2: '*** Delete File:' must be followed by a path"
    );
    assert_eq!(
        err("*** Begin Patch\n*** End Patch"),
        "the patch contains no file operations"
    );
    assert_eq!(
        err("*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore"),
        "line 4: expected nothing after '*** End Patch', found 'more'"
    );
    // Line numbers count the wrapper lines too.
    assert_eq!(
        err("\napply_patch <<'EOF'\n*** Begin Patch\n*** Bogus\nEOF"),
        format!("line 4: expected {EXPECTED_OP}, found '*** Bogus'")
    );
    assert_eq!(
        err(""),
        "line 1: expected '*** Begin Patch', but the patch ended"
    );
}

#[test]
fn move_without_chunks_is_a_rename() {
    let p =
        parse_patch("*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch").unwrap();
    assert_eq!(
        p.ops[0],
        FileOp::Update {
            path: "a".into(),
            move_to: Some("b".into()),
            chunks: vec![]
        }
    );
}
