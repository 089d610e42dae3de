//! A small MCP server for spool's tests, on stdio: `echo` answers with its
//! text, `fail` answers with an error result, `sleep` waits, `env` reads
//! its environment, `progress` reports its steps before answering, `crash`
//! exits in the middle of its call (code 3, saying so on stderr), `ask`
//! asks the person their name (an elicitation) and greets them. With
//! `--list-changed`, `echo` says the server's tools changed before it
//! answers, and with `--grow` the tool `late` appears then too; with
//! `--cancel-file PATH`, a `sleep` the client cancels adds a
//! line to PATH. With
//! `--exit-at-start` it exits before answering anything, saying so on
//! stderr; with `--pid-file PATH` it writes its pid there first; with
//! `--mute` it never answers (and never exits by itself).
//!
//! With `--http ADDR` (`127.0.0.1:0`) it serves the same tools over
//! streamable HTTP at `/mcp` instead, and says where on stdout, one line:
//! `listening on http://127.0.0.1:PORT/mcp`; with `--require-token TOKEN`
//! too, a request without `Authorization: Bearer TOKEN` is answered 401.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    ProgressNotificationParam, RequestMetaObject, ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// What to answer with.
    text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EnvArgs {
    /// The variable to read.
    name: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct SleepArgs {
    /// Milliseconds to wait.
    ms: u64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AskArgs {
    /// What to ask the person (their name is the answer).
    question: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct ProgressArgs {
    /// How many progress notifications to send.
    steps: u32,
}

#[derive(Clone)]
struct TestServer {
    /// `echo` sends `notifications/tools/list_changed` first.
    list_changed: bool,
    /// `--grow`: `echo` also makes the tool `late` appear (it says the
    /// tools changed, and they did).
    grow: bool,
    grown: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Where a cancelled `sleep` says so.
    cancel_file: Option<std::path::PathBuf>,
}

#[tool_router]
impl TestServer {
    #[tool(
        description = "Answers with the text it is given",
        annotations(read_only_hint = true)
    )]
    async fn echo(
        &self,
        Parameters(EchoArgs { text }): Parameters<EchoArgs>,
        peer: Peer<RoleServer>,
    ) -> Result<String, ErrorData> {
        if self.grow {
            self.grown.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if self.list_changed || self.grow {
            peer.notify_tool_list_changed()
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        }
        Ok(text)
    }

    #[tool(description = "Always fails", annotations(destructive_hint = true))]
    fn fail(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::error(vec![ContentBlock::text(
            "this tool always fails",
        )]))
    }

    #[tool(description = "Answers with an environment variable's value, or `unset`")]
    fn env(&self, Parameters(EnvArgs { name }): Parameters<EnvArgs>) -> String {
        std::env::var(name).unwrap_or_else(|_| "unset".to_owned())
    }

    #[tool(description = "Waits, then answers")]
    async fn sleep(
        &self,
        Parameters(SleepArgs { ms }): Parameters<SleepArgs>,
        context: RequestContext<RoleServer>,
    ) -> String {
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => {
                format!("slept {ms} ms")
            }
            () = context.ct.cancelled() => {
                if let Some(path) = &self.cancel_file {
                    use std::io::Write;
                    let file = std::fs::OpenOptions::new().create(true).append(true).open(path);
                    let _ = file.and_then(|mut file| writeln!(file, "sleep cancelled"));
                }
                "cancelled".to_owned()
            }
        }
    }

    #[tool(description = "Reports `steps` steps of progress, then answers `done`")]
    async fn progress(
        &self,
        Parameters(ProgressArgs { steps }): Parameters<ProgressArgs>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> Result<String, ErrorData> {
        let token = meta
            .get_progress_token()
            .ok_or_else(|| ErrorData::invalid_params("no progress token", None))?;
        for step in 1..=steps {
            let update = ProgressNotificationParam::new(token.clone(), f64::from(step))
                .with_total(f64::from(steps))
                .with_message(format!("step {step}"));
            peer.notify_progress(update)
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        }
        Ok("done".to_owned())
    }

    #[tool(description = "Asks the person their name, then greets them")]
    async fn ask(
        &self,
        Parameters(AskArgs { question }): Parameters<AskArgs>,
        peer: Peer<RoleServer>,
    ) -> Result<String, ErrorData> {
        let internal = |e: String| ErrorData::internal_error(e, None);
        let schema = ElicitationSchema::builder()
            .required_string("name")
            .build()
            .map_err(|e| internal(e.to_owned()))?;
        let asked = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question,
            requested_schema: schema,
        };
        let answer = peer
            .create_elicitation(asked)
            .await
            .map_err(|e| internal(e.to_string()))?;
        let name = answer
            .content
            .as_ref()
            .and_then(|content| content.get("name"))
            .and_then(serde_json::Value::as_str);
        Ok(match (&answer.action, name) {
            (ElicitationAction::Accept, Some(name)) => format!("hello {name}"),
            (action, _) => {
                let action = serde_json::to_value(action).unwrap_or_default();
                format!("no answer: {}", action.as_str().unwrap_or("?"))
            }
        })
    }

    #[tool(description = "Offered only once `echo` was called under --grow")]
    fn late(&self) -> String {
        "late".to_owned()
    }

    #[tool(description = "Exits (code 3) in the middle of the call")]
    fn crash(&self) -> String {
        eprintln!("test server: crashing in the middle of a call, as asked");
        std::process::exit(3)
    }
}

impl TestServer {
    /// The tools offered now: `late` only once grown.
    fn router(&self) -> rmcp::handler::server::router::tool::ToolRouter<Self> {
        let mut router = Self::tool_router();
        if !self.grown.load(std::sync::atomic::Ordering::SeqCst) {
            router.disable_route("late");
        }
        router
    }
}

#[tool_handler(router = self.router())]
impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--pid-file") {
        let path = args.get(at + 1).ok_or("--pid-file PATH")?;
        std::fs::write(path, std::process::id().to_string())?;
    }
    if args.iter().any(|a| a == "--mute") {
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }
    if args.iter().any(|a| a == "--exit-at-start") {
        eprintln!("test server: exiting at start, as asked");
        std::process::exit(3);
    }
    let server = TestServer {
        list_changed: args.iter().any(|a| a == "--list-changed"),
        grow: args.iter().any(|a| a == "--grow"),
        grown: Default::default(),
        cancel_file: match args.iter().position(|a| a == "--cancel-file") {
            Some(at) => Some(args.get(at + 1).ok_or("--cancel-file PATH")?.into()),
            None => None,
        },
    };
    if let Some(at) = args.iter().position(|a| a == "--http") {
        let addr = args.get(at + 1).ok_or("--http ADDR")?;
        let token = match args.iter().position(|a| a == "--require-token") {
            Some(at) => Some(args.get(at + 1).ok_or("--require-token TOKEN")?.clone()),
            None => None,
        };
        return serve_http(server, addr, token).await;
    }
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// Serves `server`'s tools over streamable HTTP on `addr` until killed.
async fn serve_http(
    server: TestServer,
    addr: &str,
    token: Option<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let listener = tokio::net::TcpListener::bind(addr).await?;
    // Without TCP_NODELAY a response written in pieces (headers, then the
    // event stream's events) waits on the client's delayed ACK: tens of
    // milliseconds a call, which `spool bench mcp` would time instead of
    // the client.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    });
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        std::sync::Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let mut router = axum::Router::new().route_service("/mcp", service);
    if let Some(token) = token {
        let expected = format!("Bearer {token}");
        router = router.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let allowed = request
                    .headers()
                    .get(axum::http::header::AUTHORIZATION)
                    .is_some_and(|given| given.as_bytes() == expected.as_bytes());
                async move {
                    if allowed {
                        next.run(request).await
                    } else {
                        axum::response::IntoResponse::into_response(
                            axum::http::StatusCode::UNAUTHORIZED,
                        )
                    }
                }
            },
        ));
    }
    // The one line a test reads to learn the port.
    println!(
        "listening on http://{}/mcp",
        axum::serve::Listener::local_addr(&listener)?
    );
    axum::serve(listener, router).await?;
    Ok(())
}
