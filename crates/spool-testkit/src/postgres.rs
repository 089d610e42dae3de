//! A database of its own on a real PostgreSQL server, for one test.
//!
//! The server is the one `scripts/postgres.sh start` runs (Debian's
//! PostgreSQL 15 on loopback; `scripts/test.sh` starts it and exports its
//! URL as [`URL_VAR`]). Every [`TestDatabase`] is a fresh database on it
//! with a name no other test process uses, dropped when the value is: tests
//! running in parallel never see each other's tables. Databases are made
//! and dropped with Debian's `psql`, which comes with the server.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable holding the server's URL, a superuser's
/// connection to its `postgres` database.
pub const URL_VAR: &str = "SPOOL_TEST_POSTGRES_URL";

/// A fresh, empty database; dropped (with any connection still on it)
/// when this is.
#[derive(Debug)]
pub struct TestDatabase {
    server: String,
    name: String,
    url: String,
}

impl TestDatabase {
    /// Creates a database on the server named by [`URL_VAR`].
    ///
    /// # Panics
    ///
    /// When [`URL_VAR`] is unset (the message says how to start a server)
    /// or the server refuses: a test that needs PostgreSQL cannot go on.
    pub fn create() -> TestDatabase {
        let server = std::env::var(URL_VAR).unwrap_or_else(|_| {
            panic!(
                "{URL_VAR} is not set: run the tests with scripts/test.sh, or start a server \
                 with scripts/postgres.sh start and export {URL_VAR}=<the URL it prints>"
            )
        });
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        let name = format!(
            "spool_test_{}_{}_{}",
            std::process::id(),
            nanos,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        psql(&server, &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|error| panic!("cannot create database {name}: {error}"));
        let url = with_database(&server, &name);
        TestDatabase { server, name, url }
    }

    /// A connection URL for this database (`postgres://…/NAME`).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs SQL on this database with `psql` and returns what it printed:
    /// unaligned, tuples only, one row a line, `|` between fields.
    pub fn query(&self, sql: &str) -> Result<String, String> {
        psql(&self.url, sql)
    }
}

/// [`TestDatabase::query`] on the database `url` names: one line per row,
/// columns separated by `|`.
pub fn query_at(url: &str, sql: &str) -> Result<String, String> {
    psql(url, sql)
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        if let Err(error) = psql(&self.server, &sql) {
            eprintln!("could not drop test database {}: {error}", self.name);
        }
    }
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

fn psql(url: &str, sql: &str) -> Result<String, String> {
    let output = Command::new("psql")
        .args(["--no-psqlrc", "--quiet", "--tuples-only", "--no-align"])
        .args([
            "--set",
            "ON_ERROR_STOP=1",
            "--dbname",
            url,
            "--command",
            sql,
        ])
        .output()
        .map_err(|e| format!("cannot run psql (install Debian's postgresql-client): {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn a_url_gets_the_database_named() {
        let server = "postgres://spool@127.0.0.1:8179/postgres";
        assert_eq!(
            with_database(server, "t1"),
            "postgres://spool@127.0.0.1:8179/t1"
        );
        assert_eq!(
            with_database("postgres://u@h:1/postgres?sslmode=disable", "t1"),
            "postgres://u@h:1/t1?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://u@h:1", "t1"),
            "postgres://u@h:1/t1"
        );
    }
}
