//! Where spool keeps its files.

use std::path::{Path, PathBuf};

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

/// The scheme `store` starts with when it is a PostgreSQL URL (any case).
fn postgres_scheme(store: &str) -> Option<&str> {
    ["postgres://", "postgresql://"]
        .into_iter()
        .find_map(|scheme| {
            // `get`, not indexing: the cut may fall inside a character.
            store
                .get(..scheme.len())
                .filter(|start| start.eq_ignore_ascii_case(scheme))
        })
}

/// Where the store is: a SQLite file, or a PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Sqlite(PathBuf),
    /// A `postgres://` (or `postgresql://`) URL. Never printed whole: it
    /// may hold a password.
    Postgres(String),
}

/// The PostgreSQL URL `--store` gives, if it gives one (the scheme in the
/// case the connection library reads).
pub fn postgres_url(flag: Option<&Path>) -> Option<String> {
    let url = flag?.to_str()?;
    let scheme = postgres_scheme(url)?;
    Some(format!("postgres://{}", &url[scheme.len()..]))
}

/// The store: `--store` (or `SPOOL_STORE`), a file path or a PostgreSQL
/// URL, or `$SPOOL_HOME/spool.db`. Creates a file's folder.
pub fn store_location(flag: Option<PathBuf>) -> anyhow::Result<StoreLocation> {
    if let Some(url) = postgres_url(flag.as_deref()) {
        return Ok(StoreLocation::Postgres(url));
    }
    let path = match flag {
        Some(p) => p,
        None => spool_home()?.join("spool.db"),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(StoreLocation::Sqlite(path))
}

#[cfg(test)]
mod tests {
    use super::postgres_scheme;

    #[test]
    fn postgres_urls_are_told_from_file_paths() {
        assert_eq!(postgres_scheme("postgres://u@h/db"), Some("postgres://"));
        assert_eq!(
            postgres_scheme("PostgreSQL://u@h/db"),
            Some("PostgreSQL://")
        );
        assert_eq!(postgres_scheme("postgres.db"), None);
        assert_eq!(postgres_scheme("/var/lib/spool/spool.db"), None);
        // A multi-byte character across the cut is a path, not a panic.
        assert_eq!(postgres_scheme("postgres:/é.db"), None);
        assert_eq!(postgres_scheme("postgresql:/é"), None);
    }
}
