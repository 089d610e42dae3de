//! Where each setting `config/read` reports came from: a flag or `-c` on
//! the command line (Codex's `sessionFlags` layer), or a `spool.toml` (a
//! `user` layer naming the file). Settings spool chose itself are absent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use spool_protocol::{ConfigLayerMetadata, ConfigLayerSource};

use crate::config::ConfigFile;

/// What decides the origins of `spool serve`'s settings.
pub struct Sources<'a> {
    /// `spool.toml` files in the order they are layered (home, then the
    /// working directory's).
    pub files: Vec<PathBuf>,
    /// Settings (Codex's keys) a flag or `-c` set on the command line.
    pub on_command_line: &'a [&'a str],
    /// The provider chosen: its entry's `model` counts for `model`.
    pub provider: &'a str,
}

/// Setting → the layer that set it, for `model`, `model_provider`,
/// `approval_policy` and `sandbox_mode`.
pub fn origins(sources: &Sources<'_>) -> BTreeMap<String, ConfigLayerMetadata> {
    let layers: Vec<(PathBuf, ConfigFile)> = sources
        .files
        .iter()
        .filter_map(|file| Some((file.clone(), ConfigFile::load(file).ok()??)))
        .collect();
    // The last layer that sets it wins, as in `ConfigFile::load_layered`.
    let file_setting = |set: &dyn Fn(&ConfigFile) -> bool| {
        layers
            .iter()
            .rev()
            .find(|(_, config)| set(config))
            .map(|(file, _)| file.as_path())
    };
    let provider = sources.provider;
    let in_file: [(&str, Option<&Path>); 2] = [
        (
            "model",
            // The provider entry's model wins over the top-level one.
            file_setting(&|c| c.providers.get(provider).is_some_and(|p| p.model.is_some()))
                .or_else(|| file_setting(&|c| c.model.is_some())),
        ),
        ("model_provider", file_setting(&|c| c.provider.is_some())),
    ];
    let mut origins = BTreeMap::new();
    for key in ["model", "model_provider", "approval_policy", "sandbox_mode"] {
        let name = if sources.on_command_line.contains(&key) {
            Some(ConfigLayerSource::SessionFlags)
        } else {
            in_file
                .iter()
                .find(|(k, _)| *k == key)
                .and_then(|(_, file)| *file)
                .map(|file| ConfigLayerSource::User {
                    file: file.display().to_string(),
                })
        };
        if let Some(name) = name {
            let version = match &name {
                ConfigLayerSource::SessionFlags => "flags".to_owned(),
                ConfigLayerSource::User { file } => file.clone(),
            };
            origins.insert(key.to_owned(), ConfigLayerMetadata { name, version });
        }
    }
    origins
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_then_the_last_file_that_sets_it() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home.toml");
        let project = dir.path().join("project.toml");
        std::fs::write(&home, "provider = \"local\"\nmodel = \"m-home\"\n").unwrap();
        std::fs::write(
            &project,
            "[providers.local]\nbase_url = \"http://x/v1\"\nmodel = \"m-project\"\n",
        )
        .unwrap();
        let found = origins(&Sources {
            files: vec![
                home.clone(),
                project.clone(),
                dir.path().join("missing.toml"),
            ],
            on_command_line: &["approval_policy"],
            provider: "local",
        });
        let file_of = |key: &str| match &found[key].name {
            ConfigLayerSource::User { file } => file.clone(),
            other => panic!("{key}: {other:?}"),
        };
        assert_eq!(file_of("model"), project.display().to_string());
        assert_eq!(file_of("model_provider"), home.display().to_string());
        assert_eq!(
            found["approval_policy"].name,
            ConfigLayerSource::SessionFlags
        );
        assert!(!found.contains_key("sandbox_mode"), "spool's own default");
    }
}
