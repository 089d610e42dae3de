//! The `spool` binary.

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod alloc;
mod cli;
mod commands;
mod config;
mod home;
mod origins;
mod overrides;
mod provider_choice;
mod render;

use std::process::ExitCode;

use std::io::IsTerminal;

use clap::{CommandFactory, FromArgMatches};
use spool_store::postgres::PgStore;
use spool_store::{AnyStore, SqliteStore, StoreOptions};

use crate::cli::{Cli, Command, ThreadsCommand};

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    alloc::configure();
    let on_command_line = set_on_command_line(&matches);
    // Before anything starts a thread: confining a process needs it
    // single-threaded.
    if let Command::SandboxExec(args) = cli.command {
        return commands::sandbox_exec::run(args);
    }
    alloc::start_purger();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(cli, &on_command_line)) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        // `spool threads events ID | head` is not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the chain of causes, outermost first.
            let reason: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("error: {}", reason.join(": ").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}

/// The settings `config/read` names (Codex's keys) that a flag on the
/// command line set, for `serve` (and `trace`, which runs it).
fn set_on_command_line(matches: &clap::ArgMatches) -> Vec<&'static str> {
    let Some(serve) = matches
        .subcommand_matches("serve")
        .or_else(|| matches.subcommand_matches("trace"))
    else {
        return Vec::new();
    };
    [
        ("model", "model"),
        ("provider", "model_provider"),
        ("approval_policy", "approval_policy"),
        ("sandbox", "sandbox_mode"),
    ]
    .into_iter()
    .filter(|(id, _)| {
        [matches, serve].iter().any(|m| {
            m.try_get_raw(id).is_ok_and(|v| v.is_some())
                && m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
        })
    })
    .map(|(_, key)| key)
    .collect()
}

async fn dispatch(cli: Cli, on_command_line: &[&'static str]) -> anyhow::Result<i32> {
    // Opened only by the commands that use it: benchmarks make their own.
    // The one place that names a backend; every command takes an AnyStore.
    let open_store = async || -> anyhow::Result<AnyStore> {
        let options = StoreOptions {
            accept_data_loss: cli.accept_data_loss,
            ..StoreOptions::default()
        };
        match home::store_location(cli.store.clone())? {
            home::StoreLocation::Sqlite(path) => SqliteStore::open(&path, options)
                .map(AnyStore::from)
                .map_err(|e| anyhow::anyhow!("cannot open the store {}: {e}", path.display())),
            // The error names the database without its password.
            home::StoreLocation::Postgres(url) => PgStore::open(&url, options)
                .await
                .map(AnyStore::from)
                .map_err(|e| anyhow::anyhow!("cannot open the store: {e}")),
        }
    };
    // spool.toml, home then project.
    let load_config = || -> anyhow::Result<config::ConfigFile> {
        Ok(config::ConfigFile::load_layered(
            &home::spool_home()?,
            &std::env::current_dir()?,
        )?)
    };
    // The model provider from flags, spool.toml and the environment.
    let choose_provider =
        |config: &config::ConfigFile| -> anyhow::Result<provider_choice::ChosenProvider> {
            provider_choice::choose(&cli.provider, config, &|k| std::env::var(k).ok())
        };
    if !cli.config_overrides.is_empty()
        && !matches!(cli.command, Command::Serve(_) | Command::Trace(_))
    {
        anyhow::bail!(
            "-c/--config applies to `spool serve` (`spool app-server`) and `spool trace` only"
        );
    }
    let serving = Serving {
        provider: &cli.provider,
        config_overrides: &cli.config_overrides,
        on_command_line,
    };
    match cli.command {
        Command::Run(args) => {
            let config = load_config()?;
            let (store, chosen) = (open_store().await?, choose_provider(&config)?);
            let mcp = commands::mcp::toolbox(&config.mcp_servers);
            commands::run::run(store, chosen, args, mcp).await
        }
        Command::Serve(args) => {
            let store = open_store().await?;
            serving
                .serve(store, args, commands::serve::Launch::default())
                .await
        }
        Command::Trace(args) => {
            let store = open_store().await?;
            let launch = commands::trace::prepare(&store, &args).await?;
            serving.serve(store, args.serve_args(), launch).await
        }
        Command::Resume(args) => {
            let config = load_config()?;
            let (store, chosen) = (open_store().await?, choose_provider(&config)?);
            let mcp = commands::mcp::toolbox(&config.mcp_servers);
            commands::run::resume(store, chosen, args, mcp).await
        }
        Command::Threads(ThreadsCommand::List { limit, json }) => {
            commands::threads::list(&open_store().await?, limit, json).await?;
            Ok(0)
        }
        Command::Threads(ThreadsCommand::Show {
            id,
            view,
            tokens,
            json,
        }) => {
            commands::threads::show(&open_store().await?, &id, view.view(), tokens, json).await?;
            Ok(0)
        }
        Command::Threads(ThreadsCommand::Events { id, after }) => {
            commands::threads::events(&open_store().await?, &id, after).await?;
            Ok(0)
        }
        Command::Mcp(cli::McpCommand::List { json }) => {
            commands::mcp::list(&load_config()?, json).await
        }
        Command::Bench(mut command) => {
            // `--store postgres://…` puts the store's workloads there too,
            // and the server's two-server workload.
            match &mut command {
                spool_bench::BenchCommand::Store(args) => {
                    args.postgres = home::postgres_url(cli.store.as_deref());
                }
                spool_bench::BenchCommand::Server(args) => {
                    args.postgres = home::postgres_url(cli.store.as_deref());
                }
                _ => {}
            }
            spool_bench::run(command).await?;
            Ok(0)
        }
        Command::SandboxExec(_) => unreachable!("handled before the runtime starts"),
    }
}

/// What `spool serve` (and `spool trace`, which runs the same server) takes
/// from the command line besides its own arguments.
struct Serving<'a> {
    provider: &'a provider_choice::ProviderArgs,
    config_overrides: &'a [String],
    on_command_line: &'a [&'static str],
}

impl Serving<'_> {
    /// Loads spool.toml, applies `-c` overrides, chooses the provider,
    /// sets up MCP servers, and runs the server until it is told to stop.
    async fn serve(
        &self,
        store: AnyStore,
        mut args: cli::ServeArgs,
        launch: commands::serve::Launch,
    ) -> anyhow::Result<i32> {
        let mut config =
            config::ConfigFile::load_layered(&home::spool_home()?, &std::env::current_dir()?)?;
        let mut provider = self.provider.clone();
        let env = |k: &str| std::env::var(k).ok();
        let applied = overrides::apply(
            self.config_overrides,
            overrides::Targets {
                provider: &mut provider,
                config: &mut config,
                agent: &mut args.agent,
            },
            &env,
        )?;
        if !applied.ignored.is_empty() {
            eprintln!(
                "spool serve: ignoring -c keys spool has no use for: {}",
                applied.ignored.join(", ")
            );
        }
        let chosen = provider_choice::choose(&provider, &config, &env)?;
        let mut set: Vec<&str> = self.on_command_line.to_vec();
        set.extend(applied.applied.iter().map(String::as_str));
        let origins = origins::origins(&origins::Sources {
            files: config::ConfigFile::layer_files(&home::spool_home()?, &std::env::current_dir()?),
            on_command_line: &set,
            provider: &chosen.name,
        });
        let mcp = commands::mcp::serve_setup(&config.mcp_servers)?;
        commands::serve::serve(
            store,
            chosen,
            config.requirements,
            args,
            origins,
            mcp,
            launch,
        )
        .await
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Logs go to stderr, filtered by `SPOOL_LOG` (e.g. `SPOOL_LOG=debug`); warnings by default.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPOOL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal: a log file or a test
        // reading stderr gets plain text.
        .with_ansi(std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal())
        .try_init();
}
