//! `spool bench mcp`: what spool adds to one MCP tool call.
//!
//! The test server of `spool-mcp` (`spool-mcp-test-server`, built beside
//! `spool`) runs twice per transport, once over stdio (a child) and once
//! over streamable HTTP (a child serving on a loopback port): one copy
//! for spool's client, `McpConnection::call_tool` (progress routing,
//! cancellation on drop, errors, content kept as JSON), one for the floor,
//! a bare rmcp client (`().serve(transport)`, then `peer.call_tool`) on the
//! same transport. Both make the same sequential `echo` calls, warmed up
//! first, in turns (spool then the floor, then the other way round), so
//! that whatever the machine does meanwhile costs both alike. A call is
//! timed from its start to its answer in hand.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde::Serialize;
use serde_json::{Map, Value};
use spool_mcp::{McpConnection, McpServerConfig};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::args::BenchMcpArgs;
use super::report::{Machine, median, percentile, round};

/// Calls each path makes before the timed ones: connections, allocations
/// and caches settle.
const WARMUP: usize = 50;
const TEXT: &str = "ping";
/// Far above any call's time: a call this slow is a failure, not a figure.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const SERVER_BIN: &str = "spool-mcp-test-server";

#[derive(Debug, Serialize)]
struct Report {
    workload: &'static str,
    description: &'static str,
    calls: usize,
    warmup: usize,
    transports: Vec<TransportFigures>,
    machine: Machine,
}

#[derive(Debug, Serialize)]
struct TransportFigures {
    transport: &'static str,
    spool: Figures,
    floor: Figures,
    /// spool's median over the floor's, and the same of the p99s.
    median_ratio: f64,
    p99_ratio: f64,
}

/// One path's call times, in microseconds.
#[derive(Debug, Serialize)]
struct Figures {
    median_us: f64,
    p99_us: f64,
}

impl Figures {
    fn of(times: &[f64]) -> Figures {
        Figures {
            median_us: round(median(times), 1),
            p99_us: round(percentile(times, 0.99), 1),
        }
    }
}

pub async fn mcp(args: BenchMcpArgs) -> anyhow::Result<()> {
    let calls = args.calls as usize;
    let server = match args.server {
        Some(server) => server,
        None => beside_spool()?,
    };
    ensure!(
        server.is_file(),
        "{} is not built: `cargo build --release -p spool-mcp` builds it beside spool, or pass \
         --server PATH",
        server.display()
    );
    let machine = Machine::probe();
    if machine.build_profile == "debug" {
        eprintln!("warning: this is a debug build; use --release for numbers worth keeping");
    }
    let mut transports = Vec::new();
    for transport in [Kind::Stdio, Kind::Http] {
        eprintln!(
            "mcp {}: {WARMUP} warm-up and {calls} timed echo calls per path",
            transport.name()
        );
        let figures = compare(&server, transport, calls)
            .await
            .with_context(|| format!("over {}", transport.name()))?;
        transports.push(figures);
    }
    let report = Report {
        workload: "mcp_call",
        description: "sequential `echo` calls to the test MCP server: spool's \
                      McpConnection::call_tool against a bare rmcp client (the floor), each \
                      with a server of its own, in turns",
        calls,
        warmup: WARMUP,
        transports,
        machine,
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &report)?;
        writeln!(stdout)?;
    } else {
        write_table(&mut stdout, &report)?;
    }
    Ok(())
}

/// The test server where cargo builds it: beside this `spool`.
fn beside_spool() -> anyhow::Result<PathBuf> {
    let spool = std::env::current_exe().context("where is this spool")?;
    Ok(spool.with_file_name(SERVER_BIN))
}

fn write_table(out: &mut impl Write, report: &Report) -> std::io::Result<()> {
    writeln!(
        out,
        "{} echo calls per path, after {} warm-up calls (µs per call)",
        report.calls, report.warmup
    )?;
    writeln!(
        out,
        "{:<10} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "transport", "spool med", "floor med", "spool p99", "floor p99", "ratio med", "ratio p99"
    )?;
    for t in &report.transports {
        writeln!(
            out,
            "{:<10} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>11.2}x {:>9.2}x",
            t.transport,
            t.spool.median_us,
            t.floor.median_us,
            t.spool.p99_us,
            t.floor.p99_us,
            t.median_ratio,
            t.p99_ratio
        )?;
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Stdio,
    Http,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Stdio => "stdio",
            Kind::Http => "http",
        }
    }
}

/// Both paths over `kind`, each with a server of its own, timed in turns.
async fn compare(server: &Path, kind: Kind, calls: usize) -> anyhow::Result<TransportFigures> {
    // Killed when dropped (the HTTP servers; stdio children end with
    // their sessions).
    let mut children = Vec::new();
    let (spool, floor) = match kind {
        Kind::Stdio => {
            let config = McpServerConfig {
                command: Some(server.display().to_string()),
                enabled: true,
                ..McpServerConfig::default()
            };
            let spool = McpConnection::start("bench", &config, None).await?;
            let child = tokio::process::Command::new(server);
            let floor = ().serve(TokioChildProcess::new(child)?).await?;
            (spool, floor)
        }
        Kind::Http => {
            let (spool_url, child) = http_server(server).await?;
            children.push(child);
            let (floor_url, child) = http_server(server).await?;
            children.push(child);
            let config = McpServerConfig {
                url: Some(spool_url),
                enabled: true,
                ..McpServerConfig::default()
            };
            let spool = McpConnection::start("bench", &config, None).await?;
            // The same client spool makes (spool installed the crypto
            // provider starting its connection).
            let client = reqwest::Client::builder()
                .user_agent(concat!("spool/", env!("CARGO_PKG_VERSION")))
                .build()?;
            let transport = StreamableHttpClientTransport::with_client(
                client,
                StreamableHttpClientTransportConfig::with_uri(floor_url),
            );
            let floor = ().serve(transport).await?;
            (spool, floor)
        }
    };
    let mut arguments = Map::new();
    arguments.insert("text".to_owned(), Value::from(TEXT));

    for _ in 0..WARMUP {
        spool_call(&spool, &arguments).await?;
        floor_call(&floor, &arguments).await?;
    }
    let (mut spool_times, mut floor_times) = (Vec::with_capacity(calls), Vec::new());
    floor_times.reserve(calls);
    for i in 0..calls {
        // In turns, so that neither path always follows the other.
        if i % 2 == 0 {
            spool_times.push(spool_call(&spool, &arguments).await?);
            floor_times.push(floor_call(&floor, &arguments).await?);
        } else {
            floor_times.push(floor_call(&floor, &arguments).await?);
            spool_times.push(spool_call(&spool, &arguments).await?);
        }
    }
    spool.close().await;
    let _ = floor.cancel().await;
    drop(children);

    let (spool, floor) = (Figures::of(&spool_times), Figures::of(&floor_times));
    eprintln!(
        "    spool median {:.1} µs p99 {:.1} µs; floor median {:.1} µs p99 {:.1} µs",
        spool.median_us, spool.p99_us, floor.median_us, floor.p99_us
    );
    Ok(TransportFigures {
        transport: kind.name(),
        median_ratio: round(spool.median_us / floor.median_us, 3),
        p99_ratio: round(spool.p99_us / floor.p99_us, 3),
        spool,
        floor,
    })
}

/// One call through spool's client: its time in µs, the answer checked.
async fn spool_call(
    connection: &McpConnection,
    arguments: &Map<String, Value>,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    let result = connection
        .call_tool("echo", Some(arguments.clone()), CALL_TIMEOUT, &|_| {})
        .await?;
    let took = start.elapsed();
    ensure!(
        result.content.first().and_then(|c| c["text"].as_str()) == Some(TEXT),
        "spool's call answered {:?}",
        result.content
    );
    Ok(took.as_secs_f64() * 1e6)
}

/// One call through the bare rmcp client.
async fn floor_call(
    floor: &RunningService<RoleClient, ()>,
    arguments: &Map<String, Value>,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    let params = CallToolRequestParams::new("echo").with_arguments(arguments.clone());
    let result = tokio::time::timeout(CALL_TIMEOUT, floor.call_tool(params))
        .await
        .context("the floor's call timed out")??;
    let took = start.elapsed();
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str());
    ensure!(
        text == Some(TEXT),
        "the floor's call answered {:?}",
        result.content
    );
    Ok(took.as_secs_f64() * 1e6)
}

/// The test server serving over HTTP on a loopback port: its URL, and the
/// child (killed when dropped).
async fn http_server(server: &Path) -> anyhow::Result<(String, tokio::process::Child)> {
    let mut child = tokio::process::Command::new(server)
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", server.display()))?;
    let stdout = child.stdout.take().context("the server's stdout")?;
    let mut line = String::new();
    // The server prints this one line, then nothing: its stdout can close.
    BufReader::new(stdout).read_line(&mut line).await?;
    match line.trim().strip_prefix("listening on ") {
        Some(url) => Ok((url.to_owned(), child)),
        None => bail!("the test server did not say where it listens: {line:?}"),
    }
}
