//! `-c key=value` on `spool serve` / `spool app-server`, read as Codex's
//! `codex app-server -c` reads it, so that a tool which launches
//! `<binary> app-server -c model="…"` can be given `spool` as its binary.
//!
//! The value is a TOML value (`model="gpt-5"`, `approval_policy=never`:
//! a bare word that is not TOML is taken as a string, as Codex does). Keys
//! with a meaning in spool apply; every other key is ignored, and the
//! caller warns once naming them.

use anyhow::{Context, bail};

use crate::cli::AgentArgs;
use crate::config::{ConfigFile, WireApi};
use crate::provider_choice::{ProviderArgs, builtin};

/// What `-c` overrides reach.
pub struct Targets<'a> {
    pub provider: &'a mut ProviderArgs,
    pub config: &'a mut ConfigFile,
    pub agent: &'a mut AgentArgs,
}

/// What `-c` did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Keys applied (those `config/read` names: `model`, `model_provider`,
    /// `approval_policy`, `sandbox_mode`).
    pub applied: Vec<String>,
    /// Keys spool has no use for.
    pub ignored: Vec<String>,
}

/// Applies each `key=value`. A key spool knows with a value it cannot
/// take is an error.
pub fn apply(
    overrides: &[String],
    targets: Targets<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Applied> {
    let mut ignored = Vec::new();
    let mut applied = Vec::new();
    for raw in overrides {
        let (key, value) = raw
            .split_once('=')
            .with_context(|| format!("-c {raw}: expected key=value"))?;
        let key = key.trim();
        let value = parse_value(value.trim());
        let text = || -> anyhow::Result<String> {
            match &value {
                toml::Value::String(s) => Ok(s.clone()),
                other => bail!("-c {key}: expected a string, got {other}"),
            }
        };
        match key.split('.').collect::<Vec<_>>().as_slice() {
            // A flag given on the command line wins, as it does over
            // spool.toml.
            ["model"] => {
                let model = text()?;
                targets.provider.model.get_or_insert(model);
            }
            ["model_provider"] => {
                let provider = text()?;
                targets.provider.provider.get_or_insert(provider);
            }
            ["approval_policy"] => {
                targets.agent.approval_policy = text()?
                    .parse()
                    .map_err(|e| anyhow::anyhow!("-c approval_policy: {e}"))?;
            }
            ["sandbox_mode"] => {
                targets.agent.sandbox = text()?
                    .parse()
                    .map_err(|e| anyhow::anyhow!("-c sandbox_mode: {e}"))?;
            }
            ["model_providers", name, field @ ("base_url" | "wire_api")] => {
                let entry = match targets.config.providers.get_mut(*name) {
                    Some(entry) => entry,
                    None => {
                        let entry = builtin(name, env).with_context(|| {
                            format!(
                                "-c {key}: no provider `{name}` to change (define it in spool.toml)"
                            )
                        })?;
                        targets
                            .config
                            .providers
                            .entry((*name).to_owned())
                            .or_insert(entry)
                    }
                };
                let value = text()?;
                if *field == "base_url" {
                    entry.base_url = value;
                } else {
                    entry.wire_api = match value.as_str() {
                        "responses" => WireApi::Responses,
                        "chat" => WireApi::Chat,
                        other => bail!("-c {key}: `{other}` is not responses or chat"),
                    };
                }
            }
            _ => {
                ignored.push(key.to_owned());
                continue;
            }
        }
        applied.push(key.to_owned());
    }
    Ok(Applied { applied, ignored })
}

/// A TOML value, or the text itself when it is not one (`never`).
fn parse_value(raw: &str) -> toml::Value {
    format!("value = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut table| table.remove("value"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        agent: AgentArgs,
    }

    fn run(
        overrides: &[&str],
    ) -> anyhow::Result<(ProviderArgs, ConfigFile, AgentArgs, Vec<String>)> {
        let mut provider = ProviderArgs::default();
        let mut config = ConfigFile::default();
        let mut agent = Args::parse_from(["x"]).agent;
        let owned: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let applied = apply(
            &owned,
            Targets {
                provider: &mut provider,
                config: &mut config,
                agent: &mut agent,
            },
            &|_| None,
        )?;
        Ok((provider, config, agent, applied.ignored))
    }

    #[test]
    fn known_keys_apply_and_others_are_named() {
        let (provider, config, agent, ignored) = run(&[
            "model=\"gpt-5\"",
            "model_provider=local",
            "approval_policy=\"never\"",
            "sandbox_mode=read-only",
            "model_providers.local.base_url=\"http://127.0.0.1:9/v1\"",
            "model_providers.local.wire_api=\"chat\"",
            "features.web_search=true",
            "show_raw_agent_reasoning=true",
        ])
        .unwrap();
        assert_eq!(provider.model.as_deref(), Some("gpt-5"));
        assert_eq!(provider.provider.as_deref(), Some("local"));
        assert_eq!(agent.approval_policy, spool_protocol::AskForApproval::Never);
        assert_eq!(agent.sandbox, spool_protocol::SandboxMode::ReadOnly);
        let local = &config.providers["local"];
        assert_eq!(local.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(local.wire_api, WireApi::Chat);
        assert_eq!(ignored, ["features.web_search", "show_raw_agent_reasoning"]);
    }

    #[test]
    fn a_flag_given_on_the_command_line_wins() {
        let mut provider = ProviderArgs {
            model: Some("from-flag".to_owned()),
            ..ProviderArgs::default()
        };
        let mut config = ConfigFile::default();
        let mut agent = Args::parse_from(["x"]).agent;
        apply(
            &["model=from-c".to_owned()],
            Targets {
                provider: &mut provider,
                config: &mut config,
                agent: &mut agent,
            },
            &|_| None,
        )
        .unwrap();
        assert_eq!(provider.model.as_deref(), Some("from-flag"));
    }

    #[test]
    fn bad_values_of_known_keys_are_errors() {
        for bad in [
            "approval_policy=sometimes",
            "sandbox_mode=1",
            "model_providers.nobody.base_url=\"x\"",
            "model_providers.local.wire_api=\"grpc\"",
            "no-equals-sign",
        ] {
            assert!(run(&[bad]).is_err(), "{bad}");
        }
    }
}
