//! The patch parser. A hand-written line scanner: the grammar is a handful
//! of `***` markers, and a scanner gives exact line numbers and specific
//! "expected X, found Y" messages that a model can act on.

use super::{FileOp, Patch, PatchError, UpdateChunk};

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";
const EXPECTED_OP: &str =
    "'*** Add File:', '*** Update File:', '*** Delete File:' or '*** End Patch'";

/// Parses patch text as a model sends it. Accepted around the patch:
/// leading/trailing blank lines and whitespace, a heredoc wrapper
/// (`apply_patch <<'EOF'` … `EOF`) or a Markdown code fence, CRLF line
/// endings, and a missing final newline. Line numbers in errors count lines
/// of `text` as given (wrapper included), starting at 1.
pub fn parse_patch(text: &str) -> Result<Patch, PatchError> {
    let lines = unwrap(numbered_lines(text));
    Parser { lines, pos: 0 }.patch()
}

/// One input line: its 1-based number in the original text and its content
/// without the line terminator.
type Line<'a> = (usize, &'a str);

fn numbered_lines(text: &str) -> Vec<Line<'_>> {
    text.split('\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)))
        .collect()
}

/// Drops blank lines around the patch and a heredoc or code-fence wrapper.
fn unwrap(mut lines: Vec<Line<'_>>) -> Vec<Line<'_>> {
    trim_blank(&mut lines);
    let Some(&(_, first)) = lines.first() else {
        return lines;
    };
    let first = first.trim();
    if first.starts_with("***") {
        return lines;
    }
    // `cmd <<'EOF'`: the closing delimiter is optional (models forget it,
    // and a shell would have consumed it anyway); when present it goes too.
    let closing = if let Some(delim) = heredoc_delimiter(first) {
        Some(delim)
    } else if first.starts_with("```") {
        Some("```")
    } else {
        None
    };
    if let Some(closing) = closing {
        lines.remove(0);
        if lines.last().is_some_and(|(_, l)| l.trim() == closing) {
            lines.pop();
        }
        trim_blank(&mut lines);
    }
    lines
}

fn trim_blank(lines: &mut Vec<Line<'_>>) {
    while lines.last().is_some_and(|(_, l)| l.trim().is_empty()) {
        lines.pop();
    }
    let leading = lines
        .iter()
        .take_while(|(_, l)| l.trim().is_empty())
        .count();
    lines.drain(..leading);
}

/// The delimiter of `… <<EOF`, `<<'EOF'`, `<<"EOF"` or `<<-EOF`.
fn heredoc_delimiter(line: &str) -> Option<&str> {
    let rest = line.split_once("<<")?.1;
    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
    let word = match rest.chars().next()? {
        q @ ('\'' | '"') => rest[1..].split(q).next()?,
        _ => rest.split_whitespace().next()?,
    };
    (!word.is_empty()).then_some(word)
}

/// Shortens a quoted line so one bad line cannot flood an error message.
fn excerpt(line: &str) -> String {
    const MAX: usize = 80;
    match line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

/// `rest` of a marker line (`*** Add File: x` → `x`), if `line` is that marker.
fn marker<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    line.trim().strip_prefix(prefix).map(str::trim)
}

/// A chunk line before it is split into old and new lines.
enum Body<'a> {
    Context(&'a str),
    Remove(&'a str),
    Add(&'a str),
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.pos).copied()
    }

    /// Line number to blame when the input ran out.
    fn end_line(&self) -> usize {
        self.lines.last().map_or(1, |(n, _)| *n)
    }

    fn unexpected(line: Line<'_>, expected: impl Into<String>) -> PatchError {
        PatchError::Unexpected {
            line: line.0,
            expected: expected.into(),
            found: excerpt(line.1),
        }
    }

    fn path(line: Line<'_>, prefix: &'static str) -> Result<Option<String>, PatchError> {
        match marker(line.1, prefix) {
            None => Ok(None),
            Some("") => Err(PatchError::MissingPath {
                line: line.0,
                marker: prefix,
            }),
            Some(path) => Ok(Some(path.to_string())),
        }
    }

    fn patch(mut self) -> Result<Patch, PatchError> {
        match self.peek() {
            Some(line) if line.1.trim() == BEGIN => self.pos += 1,
            Some(line) => return Err(Self::unexpected(line, format!("'{BEGIN}'"))),
            None => {
                return Err(PatchError::UnexpectedEnd {
                    line: 1,
                    expected: format!("'{BEGIN}'"),
                });
            }
        }
        let mut ops = Vec::new();
        loop {
            let Some(line) = self.peek() else {
                return Err(PatchError::UnexpectedEnd {
                    line: self.end_line(),
                    expected: EXPECTED_OP.to_string(),
                });
            };
            self.pos += 1;
            if line.1.trim().is_empty() {
                continue;
            }
            if line.1.trim() == END {
                break;
            }
            if let Some(path) = Self::path(line, ADD)? {
                let contents = self.add_body(&path)?;
                ops.push(FileOp::Add { path, contents });
            } else if let Some(path) = Self::path(line, DELETE)? {
                ops.push(FileOp::Delete { path });
            } else if let Some(path) = Self::path(line, UPDATE)? {
                ops.push(self.update(line.0, path)?);
            } else {
                return Err(Self::unexpected(line, EXPECTED_OP));
            }
        }
        if let Some(line) = self.peek() {
            return Err(Self::unexpected(line, format!("nothing after '{END}'")));
        }
        if ops.is_empty() {
            return Err(PatchError::EmptyPatch);
        }
        Ok(Patch { ops })
    }

    /// The `+` lines of an added file. A blank line is an empty line of the
    /// file only if more `+` lines follow; blank lines before the next
    /// marker are just spacing between operations.
    fn add_body(&mut self, path: &str) -> Result<String, PatchError> {
        let mut contents = String::new();
        let mut blanks = 0;
        while let Some(line) = self.peek() {
            if let Some(text) = line.1.strip_prefix('+') {
                for _ in 0..blanks {
                    contents.push('\n');
                }
                blanks = 0;
                contents.push_str(text);
                contents.push('\n');
            } else if line.1.trim().is_empty() {
                blanks += 1;
            } else if line.1.trim_start().starts_with("***") {
                break;
            } else {
                return Err(Self::unexpected(
                    line,
                    format!("a line starting with '+' (contents of added file '{path}')"),
                ));
            }
            self.pos += 1;
        }
        Ok(contents)
    }

    fn update(&mut self, line: usize, path: String) -> Result<FileOp, PatchError> {
        let mut move_to = None;
        if let Some(next) = self.peek()
            && let Some(dest) = Self::path(next, MOVE)?
        {
            move_to = Some(dest);
            self.pos += 1;
        }
        let chunks = self.chunks(&path)?;
        if chunks.is_empty() && move_to.is_none() {
            return Err(PatchError::EmptyUpdate { line, path });
        }
        Ok(FileOp::Update {
            path,
            move_to,
            chunks,
        })
    }

    /// Chunks until the next `***` marker (other than `*** End of File`).
    /// The first chunk may omit its `@@` line.
    fn chunks(&mut self, path: &str) -> Result<Vec<UpdateChunk>, PatchError> {
        let mut chunks = Vec::new();
        // The chunk being filled: its `@@` header, first line, and body.
        let mut open: Option<(Option<String>, usize, Vec<Body<'a>>)> = None;
        while let Some(line) = self.peek() {
            let text = line.1;
            // Markers inside an update must start the line: ` ***x` is a
            // context line of a file that happens to contain `***x`.
            if text.trim_end() == END_OF_FILE {
                let Some((header, start, body)) = open.take() else {
                    return Err(Self::unexpected(
                        line,
                        "'@@' or a line starting with ' ', '-' or '+' before '*** End of File'",
                    ));
                };
                chunks.push(finish(path, header, start, body, true)?);
            } else if text.starts_with("***") {
                break;
            } else if let Some(rest) = text.strip_prefix("@@") {
                if let Some((header, start, body)) = open.take() {
                    chunks.push(finish(path, header, start, body, false)?);
                }
                open = Some((chunk_header(rest), line.0, Vec::new()));
            } else {
                let body = match text.chars().next() {
                    None => Body::Context(""),
                    Some(' ') => Body::Context(&text[1..]),
                    Some('-') => Body::Remove(&text[1..]),
                    Some('+') => Body::Add(&text[1..]),
                    Some(_) => {
                        return Err(Self::unexpected(
                            line,
                            "a chunk line starting with ' ', '-' or '+', '@@', or a '***' marker",
                        ));
                    }
                };
                match &mut open {
                    Some((_, _, lines)) => lines.push(body),
                    None if chunks.is_empty() => open = Some((None, line.0, vec![body])),
                    // After `*** End of File` the next chunk needs its `@@`.
                    None => return Err(Self::unexpected(line, "'@@' or a '***' marker")),
                }
            }
            self.pos += 1;
        }
        if let Some((header, start, body)) = open {
            chunks.push(finish(path, header, start, body, false)?);
        }
        Ok(chunks)
    }
}

/// The text after `@@`. A unified-diff range (`@@ -3,4 +3,5 @@ fn f`),
/// which models sometimes write out of habit, is dropped: the ranges are
/// not trusted, only what follows the closing `@@` is kept as the header.
fn chunk_header(rest: &str) -> Option<String> {
    let mut header = rest.trim();
    if let Some(after_minus) = header.strip_prefix('-')
        && let Some((ranges, tail)) = after_minus.split_once("@@")
        && ranges
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ',' | '+' | ' '))
    {
        header = tail.trim();
    }
    (!header.is_empty()).then(|| header.to_string())
}

fn finish(
    path: &str,
    header: Option<String>,
    line: usize,
    mut body: Vec<Body<'_>>,
    end_of_file: bool,
) -> Result<UpdateChunk, PatchError> {
    // Models often leave a blank line between a chunk and the next marker.
    // Read literally it is an empty context line that must exist in the
    // file; dropping it only makes the match less specific, so do that
    // (unless the chunk is anchored to the end of the file, where blank
    // lines are meaningful).
    if !end_of_file {
        while matches!(body.last(), Some(Body::Context(""))) {
            body.pop();
        }
    }
    if body.is_empty() {
        return Err(PatchError::EmptyChunk {
            line,
            path: path.to_string(),
        });
    }
    let mut old_lines = Vec::new();
    let mut new_lines = Vec::new();
    for b in body {
        match b {
            Body::Context(t) => {
                old_lines.push(t.to_string());
                new_lines.push(t.to_string());
            }
            Body::Remove(t) => old_lines.push(t.to_string()),
            Body::Add(t) => new_lines.push(t.to_string()),
        }
    }
    Ok(UpdateChunk {
        header,
        old_lines,
        new_lines,
        end_of_file,
        line,
    })
}

#[cfg(test)]
mod tests;
