//! Running statements, prepared once per connection.
//!
//! tokio-postgres prepares a statement given as text on every call (a
//! round trip of its own); [`Query`] runs it from a per-connection cache
//! instead. The pool's connections have deadpool's cache; the writer's own
//! connection has [`CachedClient`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

use super::PgError;

/// Parameters of a statement.
pub(super) type Params<'a> = [&'a (dyn ToSql + Sync)];

/// A connection (or a transaction on one) that runs cached statements.
pub(super) trait Query: Sync {
    fn statement(
        &self,
        sql: &'static str,
    ) -> impl Future<Output = Result<Statement, PgError>> + Send;

    fn query_prepared(
        &self,
        statement: &Statement,
        params: &Params<'_>,
    ) -> impl Future<Output = Result<Vec<Row>, PgError>> + Send;

    fn execute_prepared(
        &self,
        statement: &Statement,
        params: &Params<'_>,
    ) -> impl Future<Output = Result<u64, PgError>> + Send;

    fn rows(
        &self,
        sql: &'static str,
        params: &Params<'_>,
    ) -> impl Future<Output = Result<Vec<Row>, PgError>> + Send {
        async move {
            let statement = self.statement(sql).await?;
            self.query_prepared(&statement, params).await
        }
    }

    /// The first row, if any.
    fn opt_row(
        &self,
        sql: &'static str,
        params: &Params<'_>,
    ) -> impl Future<Output = Result<Option<Row>, PgError>> + Send {
        async move { Ok(self.rows(sql, params).await?.into_iter().next()) }
    }

    fn exec(
        &self,
        sql: &'static str,
        params: &Params<'_>,
    ) -> impl Future<Output = Result<u64, PgError>> + Send {
        async move {
            let statement = self.statement(sql).await?;
            self.execute_prepared(&statement, params).await
        }
    }
}

/// Implements [`Query`] for a type with deadpool's statement cache.
macro_rules! deadpool_query {
    ($($ty:ty),*) => {$(
        impl Query for $ty {
            async fn statement(&self, sql: &'static str) -> Result<Statement, PgError> {
                self.prepare_cached(sql).await
            }

            async fn query_prepared(
                &self,
                statement: &Statement,
                params: &Params<'_>,
            ) -> Result<Vec<Row>, PgError> {
                self.query(statement, params).await
            }

            async fn execute_prepared(
                &self,
                statement: &Statement,
                params: &Params<'_>,
            ) -> Result<u64, PgError> {
                self.execute(statement, params).await
            }
        }
    )*};
}
deadpool_query!(
    deadpool_postgres::Client,
    deadpool_postgres::Transaction<'_>
);

/// A connection of its own with a statement cache (the writer's).
pub(super) struct CachedClient {
    client: Client,
    statements: Mutex<HashMap<&'static str, Statement>>,
}

impl CachedClient {
    pub(super) fn new(client: Client) -> Self {
        CachedClient {
            client,
            statements: Mutex::new(HashMap::new()),
        }
    }

    /// The connection itself, for statements made elsewhere.
    pub(super) fn raw(&self) -> &Client {
        &self.client
    }

    /// Runs statements without parameters or results (`BEGIN`, `COMMIT`).
    pub(super) async fn simple(&self, sql: &str) -> Result<(), PgError> {
        self.client.batch_execute(sql).await
    }
}

impl Query for CachedClient {
    async fn statement(&self, sql: &'static str) -> Result<Statement, PgError> {
        let cached = self
            .statements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(sql)
            .cloned();
        if let Some(statement) = cached {
            return Ok(statement);
        }
        let statement = self.client.prepare(sql).await?;
        self.statements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(sql, statement.clone());
        Ok(statement)
    }

    async fn query_prepared(
        &self,
        statement: &Statement,
        params: &Params<'_>,
    ) -> Result<Vec<Row>, PgError> {
        self.client.query(statement, params).await
    }

    async fn execute_prepared(
        &self,
        statement: &Statement,
        params: &Params<'_>,
    ) -> Result<u64, PgError> {
        self.client.execute(statement, params).await
    }
}
