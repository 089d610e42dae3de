//! Which model provider a command uses: flags over `spool.toml` over the
//! environment, with the local model server as the last resort.

use anyhow::{Context, bail};

use crate::config::{ConfigFile, ProviderEntry, WireApi};

/// Where the local model server listens unless `SPOOL_LOCAL_MODEL_URL` says otherwise
/// (`scripts/local-model.sh` starts it there).
pub const LOCAL_MODEL_URL: &str = "http://127.0.0.1:8178/v1";
pub const LOCAL_MODEL_NAME: &str = "SmolLM2-135M-Instruct";
/// A 135M-parameter model drifts into other languages and loops without a
/// short, firm instruction (its built-in system prompt makes it worse).
const LOCAL_MODEL_INSTRUCTIONS: &str = "Answer in English, in one sentence.";
const LOCAL_MODEL_TEMPERATURE: f32 = 0.2;
/// The context window of one request to the local model server, in the
/// o200k_base tokens spool counts: each of the server's two slots gets
/// half of its `-c 4096` (`scripts/local-model.sh`), 2,048 tokens of the
/// model's own tokenizer, which makes about 1.2 of those per o200k_base
/// token on English text (measured: 772 against 650).
pub const LOCAL_MODEL_CONTEXT: usize = 1700;
const OPENAI_URL: &str = "https://api.openai.com/v1";
const OPENAI_DEFAULT_MODEL: &str = "gpt-5-mini";

/// The provider flags shared by every command that calls a model.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ProviderArgs {
    /// Provider name: one of `[providers.NAME]` in spool.toml, or the
    /// built-ins `openai` and `local`.
    #[arg(long, global = true)]
    pub provider: Option<String>,
    /// Model name sent to the provider.
    #[arg(long, global = true)]
    pub model: Option<String>,
    /// Overrides the provider's base URL (e.g. http://127.0.0.1:8178/v1).
    #[arg(long, global = true)]
    pub base_url: Option<String>,
    /// Overrides the provider's wire API.
    #[arg(long, global = true, value_enum)]
    pub wire_api: Option<WireApi>,
}

/// A provider with everything needed to call it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChosenProvider {
    pub name: String,
    pub base_url: String,
    pub wire_api: WireApi,
    pub api_key: Option<String>,
    /// The variable the key came from: a secret, kept from tool commands
    /// whatever its name.
    pub api_key_env: Option<String>,
    pub model: String,
    /// Default system instructions of the provider.
    pub instructions: Option<String>,
    pub temperature: Option<f32>,
    /// Chosen because nothing else was configured (the CLI says so).
    pub fell_back_to_local: bool,
    /// When to compact (a context window is known), else `None`.
    pub compaction: Option<spool_runtime::CompactionPolicy>,
}

/// The share of the window past which history is compacted, by default.
const DEFAULT_COMPACT_AT: f64 = 0.8;

/// Picks the provider. `env` reads environment variables (injectable for tests).
pub fn choose(
    args: &ProviderArgs,
    config: &ConfigFile,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<ChosenProvider> {
    let has_openai_key = env("OPENAI_API_KEY").is_some_and(|k| !k.is_empty());
    let (name, fell_back_to_local) = match (&args.provider, &config.provider) {
        (Some(n), _) | (None, Some(n)) => (n.clone(), false),
        (None, None) if has_openai_key => ("openai".to_owned(), false),
        (None, None) => ("local".to_owned(), true),
    };
    let entry = match config.providers.get(&name) {
        Some(entry) => entry.clone(),
        None => builtin(&name, env).with_context(|| {
            let known: Vec<&str> = config
                .providers
                .keys()
                .map(String::as_str)
                .chain(["openai", "local"])
                .collect();
            format!("unknown provider `{name}` (known: {})", known.join(", "))
        })?,
    };
    let api_key = match &entry.api_key_env {
        Some(var) => match env(var).filter(|k| !k.is_empty()) {
            Some(key) => Some(key),
            None => bail!("provider `{name}` reads its API key from ${var}, which is not set"),
        },
        None => None,
    };
    let model = args
        .model
        .clone()
        .or(entry.model.clone())
        .or(config.model.clone())
        .with_context(|| {
            format!("no model for provider `{name}`: pass --model or set `model` in spool.toml")
        })?;
    let compact_at = config.compact_at.unwrap_or(DEFAULT_COMPACT_AT);
    if !(compact_at > 0.0 && compact_at <= 1.0) {
        bail!("`compact_at` in spool.toml must be more than 0 and at most 1, not {compact_at}");
    }
    let context_window = entry.context_window.or(config.context_window);
    if context_window == Some(0) {
        bail!("`context_window` in spool.toml must be a number of tokens above 0");
    }
    let compaction = context_window.map(|context_window| spool_runtime::CompactionPolicy {
        context_window,
        compact_at,
    });
    Ok(ChosenProvider {
        compaction,
        base_url: args.base_url.clone().unwrap_or(entry.base_url),
        wire_api: args.wire_api.unwrap_or(entry.wire_api),
        api_key,
        api_key_env: entry.api_key_env.clone(),
        model,
        instructions: entry.instructions,
        temperature: entry.temperature,
        fell_back_to_local,
        name,
    })
}

/// The built-in providers (`openai`, `local`) as spool.toml would define
/// them.
pub(crate) fn builtin(name: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<ProviderEntry> {
    match name {
        "openai" => Some(ProviderEntry {
            base_url: OPENAI_URL.to_owned(),
            wire_api: WireApi::Responses,
            api_key_env: Some("OPENAI_API_KEY".to_owned()),
            model: Some(OPENAI_DEFAULT_MODEL.to_owned()),
            instructions: None,
            temperature: None,
            context_window: None,
        }),
        "local" => Some(ProviderEntry {
            base_url: env("SPOOL_LOCAL_MODEL_URL").unwrap_or_else(|| LOCAL_MODEL_URL.to_owned()),
            wire_api: WireApi::Responses,
            api_key_env: None,
            model: Some(LOCAL_MODEL_NAME.to_owned()),
            instructions: Some(LOCAL_MODEL_INSTRUCTIONS.to_owned()),
            temperature: Some(LOCAL_MODEL_TEMPERATURE),
            context_window: Some(LOCAL_MODEL_CONTEXT),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn env_with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn nothing_configured_falls_back_to_local() {
        let c = choose(
            &ProviderArgs::default(),
            &ConfigFile::default(),
            &env_with(&[]),
        )
        .unwrap();
        assert_eq!(c.name, "local");
        assert!(c.fell_back_to_local);
        assert_eq!(c.base_url, LOCAL_MODEL_URL);
        assert_eq!(c.api_key, None);
    }

    #[test]
    fn openai_key_selects_openai() {
        let c = choose(
            &ProviderArgs::default(),
            &ConfigFile::default(),
            &env_with(&[("OPENAI_API_KEY", "sk-1")]),
        )
        .unwrap();
        assert_eq!(c.name, "openai");
        assert_eq!(c.api_key.as_deref(), Some("sk-1"));
        assert!(!c.fell_back_to_local);
    }

    #[test]
    fn flags_override_config_and_missing_key_is_an_error() {
        let config = ConfigFile::parse(
            Path::new("spool.toml"),
            "provider = \"lab\"\n[providers.lab]\nbase_url = \"http://lab/v1\"\nwire_api = \"chat\"\napi_key_env = \"LAB_KEY\"\nmodel = \"m\"\n",
        )
        .unwrap();
        let err = choose(&ProviderArgs::default(), &config, &env_with(&[])).unwrap_err();
        assert!(err.to_string().contains("$LAB_KEY"), "{err}");
        let args = ProviderArgs {
            model: Some("other".into()),
            base_url: Some("http://x/v1".into()),
            wire_api: Some(WireApi::Responses),
            ..ProviderArgs::default()
        };
        let c = choose(&args, &config, &env_with(&[("LAB_KEY", "k")])).unwrap();
        assert_eq!(
            (c.name.as_str(), c.model.as_str(), c.base_url.as_str()),
            ("lab", "other", "http://x/v1")
        );
        assert_eq!(c.wire_api, WireApi::Responses);
    }

    #[test]
    fn compaction_comes_from_the_window_and_bad_values_are_refused() {
        let config = |text: &str| ConfigFile::parse(Path::new("spool.toml"), text).unwrap();
        let lab =
            "provider = \"lab\"\n[providers.lab]\nbase_url = \"http://lab/v1\"\nmodel = \"m\"\n";
        let none = choose(&ProviderArgs::default(), &config(lab), &env_with(&[])).unwrap();
        assert_eq!(none.compaction, None, "no window, no compaction");
        let set = config(&format!("compact_at = 0.5\ncontext_window = 1000\n{lab}"));
        let chosen = choose(&ProviderArgs::default(), &set, &env_with(&[])).unwrap();
        assert_eq!(chosen.compaction.unwrap().threshold(), 500);
        let local = choose(
            &ProviderArgs::default(),
            &ConfigFile::default(),
            &env_with(&[]),
        )
        .unwrap()
        .compaction
        .unwrap();
        assert_eq!(local.context_window, LOCAL_MODEL_CONTEXT);
        for bad in [
            "compact_at = 0.0\ncontext_window = 10\n",
            "compact_at = 1.5\n",
            "context_window = 0\n",
        ] {
            let err = choose(
                &ProviderArgs::default(),
                &config(&format!("{bad}{lab}")),
                &env_with(&[]),
            )
            .unwrap_err();
            assert!(err.to_string().contains("spool.toml"), "{bad}: {err}");
        }
    }

    #[test]
    fn unknown_provider_lists_known_ones() {
        let args = ProviderArgs {
            provider: Some("nope".into()),
            ..ProviderArgs::default()
        };
        let err = choose(&args, &ConfigFile::default(), &env_with(&[])).unwrap_err();
        assert!(err.to_string().contains("openai, local"), "{err}");
    }
}
