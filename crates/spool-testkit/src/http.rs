//! Just enough HTTP/1.1 to read a request and write a streamed response.

use std::io;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// Requests larger than this are refused; tests never need more, and a
/// bound keeps a confused client from eating memory.
const MAX_BODY: usize = 64 * 1024 * 1024;
const MAX_HEADER_LINES: usize = 200;

/// One request as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, e.g. `/v1/responses`.
    pub path: String,
    /// In arrival order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, `Value::Null` when it is empty or not JSON.
    pub body: Value,
    pub raw_body: Vec<u8>,
}

impl RecordedRequest {
    /// The first header called `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.raw_body).into_owned()
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// Read one request. `Ok(None)` when the peer closed before sending any.
pub(crate) async fn read_request<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
) -> io::Result<Option<RecordedRequest>> {
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(invalid(format!("bad request line: {line:?}")));
    };
    let (method, path) = (method.to_owned(), path.to_owned());

    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            return Err(invalid("connection closed inside the headers"));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        if headers.len() >= MAX_HEADER_LINES {
            return Err(invalid("too many header lines"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(invalid(format!("bad header line: {line:?}")));
        };
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }

    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let raw_body = if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(reader).await?
    } else {
        let len = match find("content-length") {
            Some(v) => v
                .parse::<usize>()
                .map_err(|_| invalid(format!("bad content-length {v:?}")))?,
            None => 0,
        };
        if len > MAX_BODY {
            return Err(invalid(format!("body of {len} bytes is too large")));
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body).await?;
        body
    };
    let body = serde_json::from_slice(&raw_body).unwrap_or(Value::Null);
    Ok(Some(RecordedRequest {
        method,
        path,
        headers,
        body,
        raw_body,
    }))
}

async fn read_chunked<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        reader.read_line(&mut size_line).await?;
        let size_hex = size_line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| invalid(format!("bad chunk size {size_line:?}")))?;
        if body.len() + size > MAX_BODY {
            return Err(invalid("chunked body is too large"));
        }
        if size == 0 {
            // Trailers, then the empty line.
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).await?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf).await?;
    }
}

/// Status line and headers. Adds `Connection: close` and, unless the
/// caller gave a `Content-Length`, `Transfer-Encoding: chunked`. Returns
/// whether the body must be chunk-framed.
pub(crate) async fn write_head<W: AsyncWrite + Unpin>(
    writer: &mut W,
    status: u16,
    headers: &[(String, String)],
) -> io::Result<bool> {
    let has_length = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-length"));
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !has_length {
        head.push_str("transfer-encoding: chunked\r\n");
    }
    head.push_str("connection: close\r\n\r\n");
    writer.write_all(head.as_bytes()).await?;
    writer.flush().await?;
    Ok(!has_length)
}

/// One body chunk, framed if `chunked`, flushed at once so the client sees
/// it now and not when a buffer fills.
pub(crate) async fn write_chunk<W: AsyncWrite + Unpin>(
    writer: &mut W,
    chunked: bool,
    bytes: &[u8],
) -> io::Result<()> {
    if bytes.is_empty() {
        // An empty chunk would read as the end of the body.
        return Ok(());
    }
    if chunked {
        writer
            .write_all(format!("{:x}\r\n", bytes.len()).as_bytes())
            .await?;
        writer.write_all(bytes).await?;
        writer.write_all(b"\r\n").await?;
    } else {
        writer.write_all(bytes).await?;
    }
    writer.flush().await
}

/// The end of a body.
pub(crate) async fn write_end<W: AsyncWrite + Unpin>(
    writer: &mut W,
    chunked: bool,
) -> io::Result<()> {
    if chunked {
        writer.write_all(b"0\r\n\r\n").await?;
    }
    writer.flush().await?;
    writer.shutdown().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}
