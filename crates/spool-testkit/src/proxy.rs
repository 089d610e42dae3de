//! A forwarding proxy that records what the upstream server was sent.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::StreamExt;
use serde_json::json;
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::http::{RecordedRequest, read_request, write_chunk, write_end, write_head};

/// Headers that describe one hop's connection or framing, not the message;
/// each side of the proxy sets its own.
const HOP_BY_HOP: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "content-length",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    // So the upstream answers uncompressed and the recorded stream is
    // readable; reqwest here is built without decompression.
    "accept-encoding",
];

/// Forwards every request to an upstream server, path unchanged, and
/// streams the response back chunk by chunk (no buffering, so SSE timing is
/// preserved). Records each request. Stops when dropped.
#[derive(Debug)]
pub struct RecordingProxy {
    addr: SocketAddr,
    /// The upstream base's path, e.g. `/v1`, kept in [`RecordingProxy::url`].
    base_path: String,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
    accept: JoinHandle<()>,
}

impl RecordingProxy {
    /// Proxy to `upstream_base`, e.g. `http://127.0.0.1:18080/v1`.
    pub async fn start(upstream_base: &str) -> io::Result<Self> {
        let upstream = reqwest::Url::parse(upstream_base).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad upstream URL {upstream_base:?}: {e}"),
            )
        })?;
        let origin = upstream.origin().ascii_serialization();
        let base_path = upstream.path().trim_end_matches('/').to_owned();
        // reqwest is built without a default crypto provider; installing
        // ring twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| io::Error::other(format!("could not build the HTTP client: {e}")))?;

        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let accept_requests = requests.clone();
        let accept = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let requests = accept_requests.clone();
                let client = client.clone();
                let origin = origin.clone();
                tokio::spawn(async move {
                    if let Err(e) = forward(socket, client, origin, requests).await {
                        eprintln!("RecordingProxy: connection ended: {e}");
                    }
                });
            }
        });
        Ok(RecordingProxy {
            addr,
            base_path,
            requests,
            accept,
        })
    }

    /// The proxy's base URL: `http://127.0.0.1:PORT` plus the upstream's
    /// base path, to configure a provider with.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.base_path)
    }

    /// Every request forwarded (or attempted) so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).clone()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn lock(requests: &Mutex<Vec<RecordedRequest>>) -> MutexGuard<'_, Vec<RecordedRequest>> {
    requests.lock().unwrap_or_else(|p| p.into_inner())
}

async fn forward(
    socket: TcpStream,
    client: reqwest::Client,
    origin: String,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
) -> io::Result<()> {
    let mut reader = BufReader::new(socket);
    let Some(request) = read_request(&mut reader).await? else {
        return Ok(());
    };
    // Recorded before forwarding, so a failing upstream still leaves a trace.
    lock(&requests).push(request.clone());
    let mut socket = reader.into_inner();

    let method = reqwest::Method::from_bytes(request.method.as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let mut upstream = client.request(method, format!("{origin}{}", request.path));
    for (name, value) in &request.headers {
        if !is_hop_by_hop(name) {
            upstream = upstream.header(name, value);
        }
    }
    let response = match upstream.body(request.raw_body).send().await {
        Ok(response) => response,
        Err(e) => {
            let body = json!({"error": {"message": format!("RecordingProxy: upstream {origin} failed: {e}")}});
            let headers = [("content-type".to_owned(), "application/json".to_owned())];
            let chunked = write_head(&mut socket, 502, &headers).await?;
            write_chunk(&mut socket, chunked, body.to_string().as_bytes()).await?;
            return write_end(&mut socket, chunked).await;
        }
    };
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter(|(name, _)| !is_hop_by_hop(name.as_str()))
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let chunked = write_head(&mut socket, response.status().as_u16(), &headers).await?;
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => write_chunk(&mut socket, chunked, &bytes).await?,
            // The upstream broke mid-body: break ours the same way rather
            // than end it cleanly, so the client sees what happened.
            Err(_) => return Ok(()),
        }
    }
    write_end(&mut socket, chunked).await
}

fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}
