//! A batch's `events` and `items` rows, inserted [`ROWS`] to a statement.
//!
//! A statement of one row costs SQLite its setup and teardown besides the
//! row (opening a cursor on each b-tree it writes, resetting the statement
//! and its bindings), a large share of a small row. A 100-item `add_items`
//! writes 102 `events` rows and 100 `items` rows: a statement of [`ROWS`]
//! rows pays that once per [`ROWS`] rows, and binds the thread's id once
//! (`?1`, shared by every row). What is left over goes a row at a time,
//! through the same text written for one row.

use std::sync::OnceLock;

use rusqlite::{Connection, Statement};

use crate::error::StoreError;

/// Rows one multi-row statement inserts.
pub(super) const ROWS: usize = 32;

/// An `INSERT` of rows whose first column is the thread's id; its text for
/// [`ROWS`] rows and for one is made the first time it is needed.
pub(super) struct MultiRow {
    /// Up to `VALUES`, the thread's id the first column named.
    head: &'static str,
    /// Columns of a row after the thread's id.
    columns: usize,
    /// After the rows: an `ON CONFLICT` clause, or nothing.
    tail: &'static str,
    many: OnceLock<String>,
    one: OnceLock<String>,
}

impl MultiRow {
    pub(super) const fn new(head: &'static str, columns: usize, tail: &'static str) -> MultiRow {
        MultiRow {
            head,
            columns,
            tail,
            many: OnceLock::new(),
            one: OnceLock::new(),
        }
    }

    fn many(&self) -> &str {
        self.many
            .get_or_init(|| sql(self.head, self.columns, self.tail, ROWS))
    }

    fn one(&self) -> &str {
        self.one
            .get_or_init(|| sql(self.head, self.columns, self.tail, 1))
    }
}

/// The text of an `INSERT` of `rows` rows: `head` (up to `VALUES`, the
/// thread's id the first column named), the rows, `tail` (an `ON
/// CONFLICT` clause, or nothing). Row `r`'s columns after the thread's id
/// are `?(2 + r * columns)` on.
pub(super) fn sql(head: &str, columns: usize, tail: &str, rows: usize) -> String {
    let mut sql = String::from(head);
    for row in 0..rows {
        let first = 2 + row * columns;
        sql.push_str(if row == 0 { " (?1" } else { ", (?1" });
        for column in first..first + columns {
            sql.push_str(&format!(", ?{column}"));
        }
        sql.push(')');
    }
    sql.push_str(tail);
    sql
}

/// Inserts `rows` in order, as the thread `thread_id`'s; `bind` binds one
/// row's columns after the thread's id, the first at the index given.
pub(super) fn insert<R>(
    conn: &Connection,
    statement: &MultiRow,
    thread_id: &str,
    rows: &[R],
    bind: impl Fn(&mut Statement<'_>, usize, &R) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let run = |stmt: &mut Statement<'_>, rows: &[R]| -> Result<(), StoreError> {
        stmt.raw_bind_parameter(1, thread_id)?;
        for (index, row) in rows.iter().enumerate() {
            bind(stmt, 2 + index * statement.columns, row)?;
        }
        stmt.raw_execute()?;
        Ok(())
    };
    let mut chunks = rows.chunks_exact(ROWS);
    if rows.len() >= ROWS {
        let mut stmt = conn.prepare_cached(statement.many())?;
        for chunk in &mut chunks {
            run(&mut stmt, chunk)?;
        }
    }
    if !chunks.remainder().is_empty() {
        let mut stmt = conn.prepare_cached(statement.one())?;
        for row in chunks.remainder() {
            run(&mut stmt, std::slice::from_ref(row))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_binds_the_thread_then_its_own_columns() {
        assert_eq!(
            sql(
                "INSERT INTO t (a, b, c) VALUES",
                2,
                " ON CONFLICT DO NOTHING",
                2
            ),
            "INSERT INTO t (a, b, c) VALUES (?1, ?2, ?3), (?1, ?4, ?5) ON CONFLICT DO NOTHING"
        );
    }

    #[test]
    fn rows_go_many_then_one_at_a_time_in_order() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (thread TEXT, n INTEGER, pos INTEGER PRIMARY KEY)")
            .unwrap();
        let statement = MultiRow::new("INSERT INTO t (thread, n) VALUES", 1, "");
        let rows: Vec<i64> = (0..2 * ROWS as i64 + 5).collect();
        insert(&conn, &statement, "th", &rows, |stmt, first, n| {
            stmt.raw_bind_parameter(first, *n)?;
            Ok(())
        })
        .unwrap();
        let mut stmt = conn
            .prepare("SELECT thread, n FROM t ORDER BY pos")
            .unwrap();
        let stored: Vec<(String, i64)> = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let expected: Vec<(String, i64)> = rows.iter().map(|n| ("th".to_owned(), *n)).collect();
        assert_eq!(stored, expected);
    }
}
