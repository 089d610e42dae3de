//! The minimal WebSocket JSON-RPC client `spool bench server` measures
//! with (spool-cli has no WebSocket client library).

use std::time::Instant;

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::server::WAIT;

/// A minimal JSON-RPC client over a WebSocket: text frames in and out.
pub(super) struct Client {
    reader: BufReader<TcpStream>,
    next_id: u64,
}

impl Client {
    pub(super) async fn connect(addr: &str) -> anyhow::Result<Client> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let head = format!(
            "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await?;
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).await?;
        ensure!(
            status.starts_with("HTTP/1.1 101"),
            "the upgrade was refused: {status}"
        );
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        Ok(Client { reader, next_id: 1 })
    }

    /// Sends a request; returns its id.
    pub(super) async fn send_request(
        &mut self,
        method: &str,
        params: Value,
    ) -> anyhow::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let payload = message.to_string().into_bytes();
        let mask = [0x12u8, 0x34, 0x56, 0x78];
        let mut frame = vec![0x81];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n <= 0xffff => {
                frame.push(0x80 | 126);
                frame.extend((n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend((n as u64).to_be_bytes());
            }
        }
        frame.extend(mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.reader.get_mut().write_all(&frame).await?;
        Ok(id)
    }

    /// The next text frame (pings and pongs skipped).
    pub(super) async fn next_frame(&mut self) -> anyhow::Result<String> {
        tokio::time::timeout(WAIT, self.read_frame())
            .await
            .context("no message from the server in time")?
    }

    pub(super) async fn read_frame(&mut self) -> anyhow::Result<String> {
        let mut text = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.reader.read_exact(&mut head).await?;
            let fin = head[0] & 0x80 != 0;
            let opcode = head[0] & 0x0f;
            let mut len = u64::from(head[1] & 0x7f);
            if len == 126 {
                let mut b = [0u8; 2];
                self.reader.read_exact(&mut b).await?;
                len = u64::from(u16::from_be_bytes(b));
            } else if len == 127 {
                let mut b = [0u8; 8];
                self.reader.read_exact(&mut b).await?;
                len = u64::from_be_bytes(b);
            }
            let mut payload = vec![0u8; usize::try_from(len)?];
            self.reader.read_exact(&mut payload).await?;
            match opcode {
                0x1 | 0x0 => {
                    text.extend(payload);
                    if fin {
                        return Ok(String::from_utf8(text)?);
                    }
                }
                0x8 => bail!("the server closed the connection"),
                _ => {} // ping, pong
            }
        }
    }

    /// A request and its reply (notifications before it are dropped), and
    /// the instant its frame arrived (before it was parsed).
    pub(super) async fn call_timed(
        &mut self,
        method: &str,
        params: Value,
    ) -> anyhow::Result<(Value, Instant)> {
        let id = self.send_request(method, params).await?;
        loop {
            let frame = self.next_frame().await?;
            let at = Instant::now();
            let message: Value = serde_json::from_str(&frame)?;
            if message.get("method").is_none() && message["id"] == json!(id) {
                if let Some(error) = message.get("error") {
                    bail!("{method} failed: {error}");
                }
                return Ok((message, at));
            }
        }
    }

    pub(super) async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        Ok(self.call_timed(method, params).await?.0)
    }

    /// `thread/start` with the server's defaults; the new thread's id.
    pub(super) async fn start_thread(&mut self) -> anyhow::Result<String> {
        let reply = self.call("thread/start", json!({})).await?;
        reply["result"]["thread"]["id"]
            .as_str()
            .map(str::to_owned)
            .context("thread/start returned no thread id")
    }
}
