//! A fresh PostgreSQL database for one run of a store workload, on the
//! server `spool bench store --store postgres://…` names, dropped after.

use tokio_postgres::NoTls;

/// A database of its own; [`FreshDatabase::drop_now`] removes it.
pub struct FreshDatabase {
    admin: tokio_postgres::Client,
    name: String,
    url: String,
}

impl FreshDatabase {
    /// Creates a database on the server of `url` (whose own database the
    /// connection that creates it uses). The bench's own connection is
    /// plain (a local server); the store's uses the URL's TLS settings.
    pub async fn create(url: &str) -> anyhow::Result<FreshDatabase> {
        let (admin, connection) = tokio_postgres::connect(url, NoTls).await?;
        tokio::spawn(connection);
        let name = format!("spool_bench_{}", uuid_suffix());
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await?;
        let url = with_database(url, &name);
        Ok(FreshDatabase { admin, name, url })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Drops the database (with any connection still on it).
    pub async fn drop_now(self) -> anyhow::Result<()> {
        self.admin
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .await?;
        Ok(())
    }
}

/// Sixteen hex digits no other run of this process uses.
fn uuid_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "{:x}_{:x}",
        std::process::id(),
        nanos ^ NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `url` with its database (the last path segment) replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_end = base.find("://").map_or(0, |scheme| scheme + 3);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_of_a_url_is_replaced() {
        assert_eq!(
            with_database("postgres://u@h:1/postgres", "b"),
            "postgres://u@h:1/b"
        );
        assert_eq!(
            with_database("postgres://u@h:1/x?sslmode=disable", "b"),
            "postgres://u@h:1/b?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h:1", "b"), "postgres://u@h:1/b");
    }
}
