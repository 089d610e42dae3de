//! Connections over a byte stream (stdio): one JSON message per line, a
//! line too long read only as far as needed to refuse it.

use std::sync::Arc;

use futures_util::{sink, stream};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use super::{MAX_MESSAGE_BYTES, serve_messages};
use crate::hub::Hub;

/// Serves one connection over a byte stream with one JSON message per line
/// (stdio) until its input ends.
pub async fn serve_lines<R, W>(hub: Arc<Hub>, reader: R, writer: W)
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let incoming = stream::unfold(reader, |mut reader| async move {
        match read_line(&mut reader).await {
            Ok(Some(line)) => Some((line, reader)),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "reading a connection failed");
                None
            }
        }
    });
    let outgoing = sink::unfold(writer, |writer, outgoing: Outgoing| {
        write_line(writer, outgoing)
    });
    serve_messages(hub, incoming, outgoing).await;
}

/// What a connection writes: a message, or, last, why it is closed.
pub enum Outgoing {
    Message(String),
    Close(String),
}

/// Writes one message as a line; a close has no line of its own (a byte
/// stream has no close frame): it is logged, and the writer ends.
pub async fn write_line<W: AsyncWrite + Unpin>(
    mut writer: W,
    outgoing: Outgoing,
) -> std::io::Result<W> {
    match outgoing {
        Outgoing::Message(line) => {
            writer.write_all(line.as_bytes()).await?;
            writer.write_all(b"\n").await?;
            writer.flush().await?;
            Ok(writer)
        }
        Outgoing::Close(reason) => {
            tracing::error!(%reason, "closing the connection");
            Err(std::io::Error::other(reason))
        }
    }
}

/// One line without its end of line; of a line longer than
/// [`MAX_MESSAGE_BYTES`] only the first `MAX_MESSAGE_BYTES + 1` bytes are
/// kept (the rest is read and dropped), so the message is refused as too
/// large without being held whole.
async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Option<String>> {
    let mut line = CappedLine::new(MAX_MESSAGE_BYTES);
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            break;
        }
        let (used, done) = line.take(buffer);
        reader.consume(used);
        if done {
            break;
        }
    }
    Ok(line.finish())
}

/// [`read_line`] for a blocking reader (standard input, read on a thread
/// of its own).
pub(crate) fn read_line_blocking<R: std::io::BufRead>(
    reader: &mut R,
) -> std::io::Result<Option<String>> {
    read_line_blocking_capped(reader, MAX_MESSAGE_BYTES)
}

/// [`read_line_blocking`] with its cap as a parameter, so the fuzz target
/// can use a small one.
pub(crate) fn read_line_blocking_capped<R: std::io::BufRead>(
    reader: &mut R,
    cap: usize,
) -> std::io::Result<Option<String>> {
    let mut line = CappedLine::new(cap);
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        let (used, done) = line.take(buffer);
        reader.consume(used);
        if done {
            break;
        }
    }
    Ok(line.finish())
}

/// One line as it is read: at most `cap + 1` bytes of it are kept
/// (`cap` is [`MAX_MESSAGE_BYTES`]), and bytes that are not UTF-8 become
/// U+FFFD when it is finished (a client's bad byte spoils its message, not
/// the connection).
struct CappedLine {
    bytes: Vec<u8>,
    read_any: bool,
    cap: usize,
    /// Bytes of the line were dropped (it is longer than `cap + 1`).
    truncated: bool,
}

impl CappedLine {
    fn new(cap: usize) -> Self {
        CappedLine {
            bytes: Vec::new(),
            read_any: false,
            cap,
            truncated: false,
        }
    }

    /// Takes from `buffer` up to the end of the line; returns how many
    /// bytes were used and whether the line ended.
    fn take(&mut self, buffer: &[u8]) -> (usize, bool) {
        self.read_any = true;
        let (part, used, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(end) => (&buffer[..end], end + 1, true),
            None => (buffer, buffer.len(), false),
        };
        let room = self.cap.saturating_add(1).saturating_sub(self.bytes.len());
        self.truncated |= part.len() > room;
        self.bytes.extend_from_slice(&part[..part.len().min(room)]);
        (used, done)
    }

    /// The line (`None` at the end of the input).
    fn finish(mut self) -> Option<String> {
        if !self.read_any {
            return None;
        }
        // Only the `\r` of a line's own CRLF goes. In a truncated line the
        // last byte kept is not its end: dropping a `\r` there would make
        // an over-long line exactly `cap` bytes, and it would be taken as a
        // (cut) message instead of refused (found by fuzzing:
        // `fuzz/`, target `jsonrpc_line`).
        if !self.truncated && self.bytes.last() == Some(&b'\r') {
            self.bytes.pop();
        }
        Some(String::from_utf8_lossy(&self.bytes).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufReader, Cursor};

    use super::*;

    /// Every line `read_line_blocking_capped` reads from `input`, in reads
    /// of at most `buffer` bytes.
    fn lines(input: &[u8], cap: usize, buffer: usize) -> Vec<String> {
        let mut reader = BufReader::with_capacity(buffer, Cursor::new(input));
        let mut out = Vec::new();
        while let Some(line) = read_line_blocking_capped(&mut reader, cap).unwrap() {
            out.push(line);
        }
        out
    }

    /// Regression (found by the `jsonrpc_line` fuzz target): a line longer
    /// than the cap whose byte just past the cap is `\r` lost that `\r`, as
    /// if it ended a CRLF, and came back exactly `cap` bytes long: taken
    /// as a (cut) message instead of refused as too large.
    #[tokio::test]
    async fn an_over_long_line_with_a_cr_past_the_cap_stays_over_the_cap() {
        // The fuzzer's input: cap 0, reads of 1 byte, the line "\r\0".
        assert_eq!(lines(b"\r\0", 0, 1), ["\r"]);
        assert_eq!(lines(b"abc\rdef\n", 3, 2), ["abc\r"]);
        // At the real cap, through both readers: a message padded to the
        // limit, then `\r` and more on the same line.
        let mut line = vec![b' '; MAX_MESSAGE_BYTES];
        line[..2].copy_from_slice(b"{}");
        line.extend_from_slice(b"\rX\n");
        let blocking = read_line_blocking(&mut &line[..]).unwrap().unwrap();
        assert_eq!(blocking.len(), MAX_MESSAGE_BYTES + 1);
        let stream = read_line(&mut &line[..]).await.unwrap().unwrap();
        assert_eq!(stream.len(), MAX_MESSAGE_BYTES + 1);
    }

    #[test]
    fn lines_lose_their_crlf_and_keep_the_cap() {
        assert_eq!(lines(b"ab\r\ncd\r\n\r\nx", 2, 1), ["ab", "cd", "", "x"]);
        // Exactly `cap` bytes before a CRLF: whole, within the cap.
        assert_eq!(lines(b"abc\r\n", 3, 4), ["abc"]);
        // Longer: the first `cap + 1` bytes, so it is refused.
        assert_eq!(lines(b"abcd\r\nok\n", 3, 64), ["abcd", "ok"]);
        // A byte that is not UTF-8 spoils only its line.
        assert_eq!(lines(b"a\xffb\nc\n", 8, 2), ["a\u{fffd}b", "c"]);
    }
}
