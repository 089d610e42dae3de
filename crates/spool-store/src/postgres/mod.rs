//! The PostgreSQL backend (`docs/internals/replicas.md`): [`PgStore`],
//! every `Store` operation on one database that several servers share.
//! Connecting (a pool for reads, TLS by rustls with the platform's roots),
//! the schema and its migrations (`schema.rs`), the writers, one per lane
//! (`lane.rs`, `writer.rs`, `commit.rs`, `batch.rs`), leases and takeover
//! (`lease.rs`, `holder.rs`), notices between servers (`listen.rs`) and
//! forwarded requests (`commands.rs`).
mod batch;
mod catch_up;
mod codec;
mod commands;
mod commit;
mod conn;
mod handle;
mod holder;
mod lane;
mod lease;
mod linger;
mod listen;
mod llm_read;
mod pipeline;
mod query;
mod rank;
mod reads;
mod requests;
mod schema;
mod session;

mod store;
mod thread_ops;
mod writer;

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use rustls::ClientConfig;
use rustls_platform_verifier::BuilderVerifierExt;
use tokio_postgres::config::Host;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use self::commands::{ForwardReply, Forwarded};
pub use self::handle::PgStore;
pub use self::listen::RemoteCommit;
pub use self::schema::PG_SCHEMA_VERSION;
use crate::error::StoreError;

pub(crate) type PgError = tokio_postgres::Error;

/// Connections the pool keeps at most.
const POOL_SIZE: usize = 16;

/// A PostgreSQL database holding spool's tables, migrated to
/// [`PG_SCHEMA_VERSION`]. Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct PgDatabase {
    pool: Pool,
    name: Arc<str>,
    /// How to open a connection outside the pool (the writer's own).
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
}

impl std::fmt::Debug for PgDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDatabase")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PgDatabase {
    /// Connects to the database at `url` (`postgres://user[:password]@host[:port]/db`,
    /// or libpq's `key=value` form; `sslmode` as in libpq: `prefer` by
    /// default, `require` to refuse a server without TLS, `disable`) and
    /// migrates its schema. Server certificates are checked against the
    /// platform's roots.
    pub async fn connect(url: &str) -> Result<PgDatabase, StoreError> {
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e: PgError| StoreError::PgConnect {
                // The URL did not parse: say so without repeating it.
                database: "(unparsed URL)".to_owned(),
                reason: e.to_string(),
            })?;
        config.application_name("spool");
        let name: Arc<str> = described(&config).into();
        let connect_error = |reason: String| StoreError::PgConnect {
            database: name.to_string(),
            reason,
        };
        let tls = MakeRustlsConnect::new(tls_config().map_err(|e| connect_error(e.to_string()))?);
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| connect_error(e.to_string()))?;
        let mut client = pool
            .get()
            .await
            .map_err(|e| connect_error(pool_error(&e)))?;
        schema::migrate(&mut client, &name).await?;
        Ok(PgDatabase {
            pool,
            name,
            config,
            tls,
        })
    }

    /// What the database is called in messages: user, host, port and
    /// database name, never a password.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema version the database is at.
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        let client = self.client().await?;
        Ok(schema::schema_version(&**client).await?)
    }

    /// A connection of the pool.
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Client, StoreError> {
        self.pool.get().await.map_err(|e| StoreError::PgConnect {
            database: self.name.to_string(),
            reason: pool_error(&e),
        })
    }
}

/// TLS for connections that use it: rustls with ring, the platform's
/// roots, no client certificate.
fn tls_config() -> Result<ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_platform_verifier()?
        .with_no_client_auth())
}

/// A pool error as a sentence, with the database's own message when the
/// database answered.
fn pool_error(error: &deadpool_postgres::PoolError) -> String {
    match error {
        deadpool_postgres::PoolError::Backend(e) => match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => e.to_string(),
        },
        other => other.to_string(),
    }
}

/// `user@host:port/dbname` from a parsed configuration.
fn described(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("(default user)");
    let dbname = config.get_dbname().unwrap_or(user);
    format!("{user}@{host}:{port}/{dbname}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_named_without_its_password() {
        let config: tokio_postgres::Config = "postgres://spool:s3cret@db.example:6543/prod"
            .parse()
            .unwrap();
        let name = described(&config);
        assert_eq!(name, "spool@db.example:6543/prod");
        assert!(!name.contains("s3cret"));
    }
}
