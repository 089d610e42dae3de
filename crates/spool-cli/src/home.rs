//! Where spool keeps its files.

use std::path::PathBuf;

use anyhow::Context;

/// `$SPOOL_HOME`, or `~/.spool`.
pub fn spool_home() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("SPOOL_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    let user_home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither SPOOL_HOME nor HOME is set; pass --store PATH")?;
    Ok(PathBuf::from(user_home).join(".spool"))
}

/// The store file: `--store`, or `$SPOOL_HOME/spool.db`. Creates its folder.
pub fn store_path(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    // A PostgreSQL URL would otherwise be taken for a file path and quietly
    // become a SQLite store in a folder called `postgres:`.
    if let Some(url) = flag.as_deref().and_then(|p| p.to_str())
        && ["postgres://", "postgresql://"].iter().any(|scheme| {
            url.len() >= scheme.len() && url[..scheme.len()].eq_ignore_ascii_case(scheme)
        })
    {
        anyhow::bail!(
            "--store {}://…: PostgreSQL stores cannot be used yet (this build has the \
             backend's connection, schema and leases, not its store: \
             docs/internals/replicas.md); give a SQLite file path",
            url.split("://").next().unwrap_or("postgres")
        );
    }
    let path = match flag {
        Some(p) => p,
        None => spool_home()?.join("spool.db"),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(path)
}
