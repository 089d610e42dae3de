//! Locating update chunks in a file and producing its new contents.
//!
//! Models reproduce context imperfectly, mostly in whitespace, so each
//! search runs in passes of decreasing strictness (exact, then ignoring
//! trailing whitespace, then ignoring leading and trailing whitespace) and
//! the strictest pass that finds the lines anywhere wins. Chunks are located
//! in order, each after the previous one, so an ambiguous context resolves
//! to the occurrence the model was walking through.

use super::diff::common_lines;
use super::{PatchError, UpdateChunk};

/// The line comparisons, strictest first.
const PASSES: [fn(&str, &str) -> bool; 3] = [
    |a, b| a == b,
    |a, b| a.trim_end() == b.trim_end(),
    |a, b| a.trim() == b.trim(),
];

/// A file split into lines, remembering how to join them back.
struct Lines {
    lines: Vec<String>,
    /// The file uses CRLF (judged by its first line break); new lines get
    /// CRLF too so an edit does not mix line endings.
    crlf: bool,
    /// The file ends with a line break (an empty file counts as yes, so
    /// lines added to it get one).
    trailing_newline: bool,
}

impl Lines {
    fn split(content: &str) -> Lines {
        let crlf = content
            .find('\n')
            .is_some_and(|i| content[..i].ends_with('\r'));
        let trailing_newline = content.is_empty() || content.ends_with('\n');
        let body = content.strip_suffix('\n').unwrap_or(content);
        let lines = if content.is_empty() {
            Vec::new()
        } else {
            body.split('\n')
                .map(|l| {
                    let l = if crlf {
                        l.strip_suffix('\r').unwrap_or(l)
                    } else {
                        l
                    };
                    l.to_string()
                })
                .collect()
        };
        Lines {
            lines,
            crlf,
            trailing_newline,
        }
    }

    fn join(&self, lines: &[&str]) -> String {
        let sep = if self.crlf { "\r\n" } else { "\n" };
        let mut out = lines.join(sep);
        if !lines.is_empty() && self.trailing_newline {
            out.push_str(sep);
        }
        out
    }
}

/// Applies `chunks` to `content`. `path` (as the patch wrote it) is only
/// used in error messages.
pub(crate) fn apply_chunks(
    path: &str,
    content: &str,
    chunks: &[UpdateChunk],
) -> Result<String, PatchError> {
    let file = Lines::split(content);
    let lines = &file.lines;
    // (first line replaced, how many, replacement), in file order.
    let mut replacements: Vec<(usize, usize, Vec<&str>)> = Vec::new();
    let mut cursor = 0;
    for chunk in chunks {
        if let Some(header) = &chunk.header {
            let at =
                find_header(lines, header, cursor).ok_or_else(|| PatchError::HeaderNotFound {
                    path: path.to_string(),
                    line: chunk.line,
                    header: header.clone(),
                    after: if cursor > 0 {
                        " after the previous chunk"
                    } else {
                        ""
                    },
                })?;
            cursor = at + 1;
        }
        let (old, new) = (&chunk.old_lines[..], &chunk.new_lines[..]);
        if old.is_empty() {
            // Pure insertion: right after the header, else at the end.
            let at = if chunk.header.is_some() && !chunk.end_of_file {
                cursor
            } else {
                lines.len()
            };
            replacements.push((at, 0, new.iter().map(String::as_str).collect()));
            cursor = at;
            continue;
        }
        let found = find(lines, old, cursor, chunk.end_of_file).map(|at| (at, old, new));
        // A trailing empty context line often stands for the file's final
        // newline, which is not a line here; retry without it.
        let found = found.or_else(|| {
            let old = old.strip_suffix(&[String::new()])?;
            let new = new.strip_suffix(&[String::new()]).unwrap_or(new);
            let at = find(lines, old, cursor, chunk.end_of_file)?;
            Some((at, old, new))
        });
        let Some((at, old, new)) = found else {
            return Err(not_found(path, lines, chunk, cursor));
        };
        replacements.push((at, old.len(), keep_file_context(&lines[at..], old, new)));
        cursor = at + old.len();
    }

    let mut out: Vec<&str> = Vec::with_capacity(lines.len());
    let mut pos = 0;
    for (at, len, new) in replacements {
        out.extend(lines[pos..at].iter().map(String::as_str));
        out.extend(new);
        pos = at + len;
    }
    out.extend(lines[pos..].iter().map(String::as_str));
    Ok(file.join(&out))
}

/// The replacement for a chunk matched at `file[0..old.len()]`: `new`,
/// except that lines the chunk kept unchanged (context) are taken from the
/// file. After a whitespace-lenient match the model's copy of a context
/// line may differ from the file in whitespace, and rewriting lines the
/// model did not mean to change would be a silent edit.
fn keep_file_context<'a>(file: &'a [String], old: &[String], new: &'a [String]) -> Vec<&'a str> {
    let mut out: Vec<&str> = new.iter().map(String::as_str).collect();
    if file.iter().zip(old).any(|(f, o)| f != o) {
        let old: Vec<&str> = old.iter().map(String::as_str).collect();
        for (i, j) in common_lines(&old, &out.clone()) {
            out[j] = &file[i];
        }
    }
    out
}

/// The first line at or after `from` matching `header`. Besides the usual
/// passes, a line merely containing the header counts: models write
/// `@@ fn parse` for `pub fn parse(text: &str) {`.
fn find_header(lines: &[String], header: &str, from: usize) -> Option<usize> {
    let contains = |line: &str, h: &str| line.contains(h.trim());
    PASSES
        .iter()
        .chain(std::iter::once(&(contains as fn(&str, &str) -> bool)))
        .find_map(|eq| (from..lines.len()).find(|&i| eq(&lines[i], header)))
}

/// Where `pattern` starts at or after `from` (only at the very end of the
/// file if `at_end`), using the strictest pass that finds it.
fn find(lines: &[String], pattern: &[String], from: usize, at_end: bool) -> Option<usize> {
    let last = lines.len().checked_sub(pattern.len())?;
    if from > last {
        return None;
    }
    let starts = if at_end { last..=last } else { from..=last };
    PASSES.iter().find_map(|eq| {
        starts
            .clone()
            .find(|&s| pattern.iter().zip(&lines[s..]).all(|(p, l)| eq(l, p)))
    })
}

/// Builds the "context not found" error, naming the first chunk line that
/// could not be matched where the chunk matched best: the longest run of
/// its leading lines found (leniently) anywhere in the search range.
fn not_found(path: &str, lines: &[String], chunk: &UpdateChunk, from: usize) -> PatchError {
    let old = &chunk.old_lines;
    let lenient = PASSES[2];
    let matched_prefix = |s: usize| {
        old.iter()
            .zip(lines.get(s..).unwrap_or_default())
            .take_while(|(p, l)| lenient(l, p))
            .count()
    };
    let best = if chunk.end_of_file {
        lines.len().checked_sub(old.len()).map_or(0, matched_prefix)
    } else {
        (from..lines.len()).map(matched_prefix).max().unwrap_or(0)
    };
    PatchError::ContextNotFound {
        path: path.to_string(),
        line: chunk.line,
        expected: old[best.min(old.len() - 1)].clone(),
        where_: if chunk.end_of_file {
            " at the end of the file"
        } else if from > 0 {
            " after the previous chunk"
        } else {
            ""
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(header: Option<&str>, old: &[&str], new: &[&str], eof: bool) -> UpdateChunk {
        UpdateChunk {
            header: header.map(str::to_string),
            old_lines: old.iter().map(|s| s.to_string()).collect(),
            new_lines: new.iter().map(|s| s.to_string()).collect(),
            end_of_file: eof,
            line: 7,
        }
    }

    #[test]
    fn replaces_in_order_after_headers() {
        let src = "fn a() {\n    x\n}\nfn b() {\n    x\n}\n";
        let out = apply_chunks(
            "f.rs",
            src,
            &[chunk(Some("fn b"), &["    x"], &["    y"], false)],
        )
        .unwrap();
        assert_eq!(out, "fn a() {\n    x\n}\nfn b() {\n    y\n}\n");
        // Two identical chunks hit successive occurrences.
        let c = chunk(None, &["    x"], &["    z"], false);
        let out = apply_chunks("f.rs", src, &[c.clone(), c]).unwrap();
        assert_eq!(out, "fn a() {\n    z\n}\nfn b() {\n    z\n}\n");
    }

    #[test]
    fn exact_match_beats_an_earlier_lenient_one() {
        let src = "x  \nx\n";
        let out = apply_chunks("f", src, &[chunk(None, &["x"], &["y"], false)]).unwrap();
        assert_eq!(out, "x  \ny\n");
    }

    #[test]
    fn whitespace_lenient_passes() {
        let src = "  keep\n\tindented  \nend\n";
        let out = apply_chunks(
            "f",
            src,
            &[chunk(None, &["indented", "end"], &["new", "end"], false)],
        )
        .unwrap();
        assert_eq!(out, "  keep\nnew\nend\n");
    }

    #[test]
    fn lenient_matches_keep_the_files_context_lines() {
        let src = "if x {  \n\tfoo();\n}\n";
        let out = apply_chunks(
            "f",
            src,
            &[chunk(
                None,
                &["if x {", "    foo();", "}"],
                &["if x {", "    bar();", "}"],
                false,
            )],
        )
        .unwrap();
        assert_eq!(out, "if x {  \n    bar();\n}\n");
    }

    #[test]
    fn end_of_file_anchors_and_insertion() {
        let src = "a\nb\na\n";
        let out = apply_chunks("f", src, &[chunk(None, &["a"], &["c"], true)]).unwrap();
        assert_eq!(out, "a\nb\nc\n");
        let err = apply_chunks("f", src, &[chunk(None, &["b"], &["c"], true)]).unwrap_err();
        assert!(err.to_string().contains("at the end of the file"), "{err}");
        let out = apply_chunks("f", src, &[chunk(None, &[], &["z"], false)]).unwrap();
        assert_eq!(out, "a\nb\na\nz\n");
        let out = apply_chunks("f", src, &[chunk(Some("b"), &[], &["z"], false)]).unwrap();
        assert_eq!(out, "a\nb\nz\na\n");
    }

    #[test]
    fn preserves_crlf_and_missing_final_newline() {
        let out = apply_chunks(
            "f",
            "a\r\nb\r\n",
            &[chunk(None, &["b"], &["c", "d"], false)],
        )
        .unwrap();
        assert_eq!(out, "a\r\nc\r\nd\r\n");
        let out = apply_chunks("f", "a\nb", &[chunk(None, &["b"], &["c"], false)]).unwrap();
        assert_eq!(out, "a\nc");
        let out = apply_chunks("f", "", &[chunk(None, &[], &["x"], false)]).unwrap();
        assert_eq!(out, "x\n");
    }

    #[test]
    fn trailing_empty_context_stands_for_the_final_newline() {
        let out =
            apply_chunks("f", "a\nb\n", &[chunk(None, &["b", ""], &["c", ""], false)]).unwrap();
        assert_eq!(out, "a\nc\n");
    }

    #[test]
    fn errors_name_the_first_line_that_failed() {
        let src = "one\ntwo\nthree\n";
        let err = apply_chunks(
            "f.txt",
            src,
            &[chunk(None, &["two", "four"], &["x"], false)],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "'f.txt': the chunk at patch line 7 does not match the file; first context line not found: 'four'"
        );
        let err =
            apply_chunks("f.txt", src, &[chunk(Some("zzz"), &["two"], &["x"], false)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "'f.txt': the chunk at patch line 7 names '@@ zzz', but no such line was found"
        );
        // The second chunk is searched only after the first.
        let err = apply_chunks(
            "f.txt",
            src,
            &[
                chunk(None, &["three"], &["3"], false),
                chunk(None, &["one"], &["1"], false),
            ],
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("after the previous chunk"),
            "{err}"
        );
    }
}
