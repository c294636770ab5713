//! The database handle and every SQL statement the backends run, for both dialects.
//!
//! Most statements are the same text on SQLite and Postgres (`$n` parameters work on both); the few that differ
//! (lateral joins, the write path) have one version per dialect. Rows are decoded by position with checked
//! conversions: nothing read from the database is trusted to be in range.

use std::str::FromStr;
use std::time::Duration;

use apiserver_storage::{Change, StorageError, StoredObject};
use bytes::Bytes;
use sqlx::Row;

use crate::options::SqlStorageOptions;
#[cfg(feature = "sqlite")]
use crate::options::SqliteSynchronous;
use crate::schema::{self, Migration};

/// How long a statement may wait for a connection, and SQLite for the file lock held by another process.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which database a store runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite, one file, one process writing at a time.
    Sqlite,
    /// Postgres, possibly shared by several server processes.
    Postgres,
}

/// The connection pools of a store.
#[derive(Clone, Debug)]
pub(crate) enum Db {
    /// One writer connection (writes queue in process instead of spinning on the file lock) and a pool of
    /// readers (WAL lets them read while the writer writes).
    #[cfg(feature = "sqlite")]
    Sqlite {
        writer: sqlx::SqlitePool,
        reader: sqlx::SqlitePool,
    },
    #[cfg(feature = "postgres")]
    Postgres { pool: sqlx::PgPool },
}

/// The statements whose text differs between dialects.
struct Dialected {
    /// Walk up to `$4` keys in `[$1, $2)` (`$1` inclusive) and read each one's latest row at revision `$3`.
    scan_incl: &'static str,
    /// The same with `$1` exclusive.
    scan_excl: &'static str,
    /// Count live keys in `($1, $2)` at revision `$3` and sum their value sizes (`$1` inclusive / exclusive).
    count_incl: &'static str,
    count_excl: &'static str,
}

macro_rules! walk {
    ($op:literal, $one:literal, $counter:literal) => {
        concat!(
            "WITH RECURSIVE keys(name",
            $counter,
            ") AS (SELECT (SELECT l.name FROM apiserver_log l WHERE l.name ",
            $op,
            " $1 AND l.name < $2 ORDER BY l.name LIMIT 1)",
            $one,
            " UNION ALL SELECT (SELECT l.name FROM apiserver_log l WHERE l.name > k.name AND l.name < $2 \
             ORDER BY l.name LIMIT 1)",
        )
    };
}

#[cfg(feature = "sqlite")]
macro_rules! latest_sqlite {
    () => {
        "apiserver_log l ON l.revision = (SELECT x.revision FROM apiserver_log x WHERE x.name = k.name \
         AND x.revision <= $3 ORDER BY x.revision DESC LIMIT 1)"
    };
}

#[cfg(feature = "postgres")]
macro_rules! latest_pg {
    () => {
        "LATERAL (SELECT x.revision, x.deleted, x.value FROM apiserver_log x WHERE x.name = k.name \
         AND x.revision <= $3 ORDER BY x.revision DESC LIMIT 1) l ON TRUE"
    };
}

macro_rules! scan {
    ($op:literal, $latest:expr) => {
        concat!(
            walk!($op, ", CAST(1 AS BIGINT)", ", n"),
            ", k.n + 1 FROM keys k WHERE k.name IS NOT NULL AND k.n < $4) \
             SELECT k.name, l.revision, l.deleted, l.value FROM keys k LEFT JOIN ",
            $latest,
            " WHERE k.name IS NOT NULL ORDER BY k.name"
        )
    };
}

macro_rules! count {
    ($op:literal, $latest:expr) => {
        concat!(
            walk!($op, "", ""),
            " FROM keys k WHERE k.name IS NOT NULL) \
             SELECT COUNT(l.revision), COALESCE(SUM(length(l.value)), 0) FROM keys k JOIN ",
            $latest,
            " WHERE k.name IS NOT NULL AND NOT l.deleted"
        )
    };
}

#[cfg(feature = "sqlite")]
static SQLITE_SQL: Dialected = Dialected {
    scan_incl: scan!(">=", latest_sqlite!()),
    scan_excl: scan!(">", latest_sqlite!()),
    count_incl: count!(">=", latest_sqlite!()),
    count_excl: count!(">", latest_sqlite!()),
};

#[cfg(feature = "postgres")]
static PG_SQL: Dialected = Dialected {
    scan_incl: scan!(">=", latest_pg!()),
    scan_excl: scan!(">", latest_pg!()),
    count_incl: count!(">=", latest_pg!()),
    count_excl: count!(">", latest_pg!()),
};

const META: &str = "SELECT revision, compacted, compact_cursor FROM apiserver_meta WHERE id = 1";
const LATEST: &str = "SELECT m.revision, l.revision, l.deleted, l.value FROM apiserver_meta m LEFT JOIN \
     (SELECT x.revision, x.deleted, x.value FROM apiserver_log x WHERE x.name = $1 \
     ORDER BY x.revision DESC LIMIT 1) l ON TRUE WHERE m.id = 1";
const AT: &str = "SELECT revision, deleted, value FROM apiserver_log WHERE name = $1 AND revision <= $2 \
     ORDER BY revision DESC LIMIT 1";
const LOG: &str = "SELECT revision, name, deleted, value, old_value FROM apiserver_log \
     WHERE revision > $1 AND revision <= $2 ORDER BY revision LIMIT $3";
const LOG_RANGE: &str = "SELECT revision, name, deleted, value, old_value FROM apiserver_log \
     WHERE revision > $1 AND revision <= $2 AND name >= $3 AND name < $4 ORDER BY revision";
/// Revisions are gap-free only between bumps: a bump leaves revisions no row has, which readers take as nothing
/// written then.
const BUMP_REVISION: &str =
    "UPDATE apiserver_meta SET revision = $1 WHERE id = 1 AND revision < $1";
const SET_COMPACTED: &str =
    "UPDATE apiserver_meta SET compacted = $1 WHERE id = 1 AND compacted < $1";
const DELETE_SUPERSEDED: &str = "DELETE FROM apiserver_log WHERE revision IN (SELECT prev_revision \
     FROM apiserver_log WHERE revision > $1 AND revision <= $2 AND prev_revision <> 0)";
const DELETE_TOMBSTONES: &str =
    "DELETE FROM apiserver_log WHERE revision > $1 AND revision <= $2 AND deleted";
const SET_CURSOR: &str =
    "UPDATE apiserver_meta SET compact_cursor = $1 WHERE id = 1 AND compact_cursor < $1";
const COUNT_ROWS: &str = "SELECT COUNT(*) FROM apiserver_log";
const NEXT_ROW: &str = "SELECT MIN(revision) FROM apiserver_log WHERE revision > $1";

/// Runs `$body` with `$pool` bound to the read pool and `$sql` to the dialect's statements.
macro_rules! with_reader {
    ($db:expr, |$pool:ident, $sql:ident| $body:expr) => {
        match $db {
            #[cfg(feature = "sqlite")]
            Db::Sqlite { reader: $pool, .. } => {
                #[allow(unused_variables)]
                let $sql = &SQLITE_SQL;
                $body
            }
            #[cfg(feature = "postgres")]
            Db::Postgres { pool: $pool } => {
                #[allow(unused_variables)]
                let $sql = &PG_SQL;
                $body
            }
        }
    };
}

/// The meta row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The current revision.
    pub revision: u64,
    /// Reads before this revision are refused.
    pub compacted: u64,
    /// Rows up to this revision have been physically compacted.
    pub compact_cursor: u64,
}

/// The latest row of one key (at some revision).
#[derive(Clone, Debug)]
pub(crate) struct KeyRow {
    pub revision: u64,
    pub deleted: bool,
    pub value: Bytes,
}

impl KeyRow {
    /// The live object, or `None` for a tombstone.
    pub fn live(self, key: &str) -> Option<StoredObject> {
        (!self.deleted).then(|| StoredObject {
            key: key.to_string(),
            value: self.value,
            revision: self.revision,
        })
    }
}

/// What a conditional write did.
pub(crate) enum WriteOutcome {
    /// Appended at `revision`; `prev` is the value it replaced (the deleted value for a delete).
    Written { revision: u64, prev: Option<Bytes> },
    /// The key was not in the expected state; this is what is there now (`None`: absent or deleted).
    Conflict(Option<StoredObject>),
}

/// The expected state of a key for a conditional write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Absent (never written, or deleted).
    Absent,
    /// Live at exactly this revision.
    Revision(u64),
}

/// A lower bound of a key walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum From {
    Inclusive(String),
    Exclusive(String),
}

impl From {
    /// `start` as a bound. Keys never contain NUL (and Postgres text cannot), so `"a\0..."` is "after `a`".
    pub fn at(start: &str) -> Self {
        match start.find('\0') {
            Some(i) => From::Exclusive(start[..i].to_string()),
            None => From::Inclusive(start.to_string()),
        }
    }
}

pub(crate) fn db_err(e: sqlx::Error) -> StorageError {
    match e {
        sqlx::Error::PoolTimedOut => StorageError::Timeout {
            key: String::new(),
            message: "timed out waiting for a database connection".into(),
        },
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => StorageError::Unreachable {
            key: String::new(),
            message: e.to_string(),
        },
        e => StorageError::Internal(format!("database error: {e}")),
    }
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

fn corrupt(what: &str) -> StorageError {
    StorageError::Internal(format!("database returned an invalid {what}"))
}

/// A revision from the database (never negative).
pub(crate) fn rev_of(v: i64) -> Result<u64, StorageError> {
    u64::try_from(v).map_err(|_| corrupt("revision"))
}

/// A revision for the database; revisions beyond i64 cannot exist there.
pub(crate) fn rev_arg(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn get<'r, T, R>(row: &'r R, i: usize) -> Result<T, StorageError>
where
    R: Row,
    T: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    row.try_get::<T, usize>(i)
        .map_err(|e| StorageError::Internal(format!("cannot decode a database row: {e}")))
}

fn key_row<R>(row: &R, at: usize) -> Result<Option<KeyRow>, StorageError>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<bool>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<Vec<u8>>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let revision: Option<i64> = get(row, at)?;
    let Some(revision) = revision else {
        return Ok(None);
    };
    let deleted: Option<bool> = get(row, at + 1)?;
    let value: Option<Vec<u8>> = get(row, at + 2)?;
    Ok(Some(KeyRow {
        revision: rev_of(revision)?,
        deleted: deleted.ok_or_else(|| corrupt("row"))?,
        value: Bytes::from(value.unwrap_or_default()),
    }))
}

fn log_row<R>(row: &R) -> Result<Change, StorageError>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<Vec<u8>>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let deleted: bool = get(row, 2)?;
    let value: Vec<u8> = get(row, 3)?;
    let old: Option<Vec<u8>> = get(row, 4)?;
    Ok(Change {
        revision: rev_of(get(row, 0)?)?,
        key: get(row, 1)?,
        value: (!deleted).then(|| Bytes::from(value)),
        prev: old.map(Bytes::from),
        prev_revision: 0,
    })
}

fn meta_row<R>(row: &R) -> Result<Meta, StorageError>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(Meta {
        revision: rev_of(get(row, 0)?)?,
        compacted: rev_of(get(row, 1)?)?,
        compact_cursor: rev_of(get(row, 2)?)?,
    })
}

impl Db {
    /// Opens `url` (`sqlite://PATH` or `postgres://...`) and brings its schema up to date.
    pub async fn connect(url: &str, opts: &SqlStorageOptions) -> Result<Db, StorageError> {
        let bad_url = |e: sqlx::Error| StorageError::Invalid(format!("invalid storage URL: {e}"));
        if url.starts_with("sqlite:") {
            #[cfg(feature = "sqlite")]
            {
                use sqlx::sqlite::{
                    SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions,
                };
                let sync = match opts.sqlite_synchronous {
                    SqliteSynchronous::Full => sqlx::sqlite::SqliteSynchronous::Full,
                    SqliteSynchronous::Normal => sqlx::sqlite::SqliteSynchronous::Normal,
                    SqliteSynchronous::Off => sqlx::sqlite::SqliteSynchronous::Off,
                };
                let base = SqliteConnectOptions::from_str(url)
                    .map_err(bad_url)?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(sync)
                    .busy_timeout(ACQUIRE_TIMEOUT)
                    // After a checkpoint, cut the WAL back to 64 MiB so steady churn cannot grow it forever.
                    .pragma("journal_size_limit", "67108864");
                if let Some(dir) = base.get_filename().parent()
                    && !dir.as_os_str().is_empty()
                {
                    std::fs::create_dir_all(dir).map_err(|e| StorageError::Unreachable {
                        key: String::new(),
                        message: format!("cannot create {}: {e}", dir.display()),
                    })?;
                }
                // `auto_vacuum` is set by the writer only: the pragma writes the database header in a write
                // transaction, so a reader connection opened with it failed on a full disk (and queued behind
                // writes). The writer's connection is the first, so a new database is created with it.
                let writer = SqlitePoolOptions::new()
                    .max_connections(1)
                    .min_connections(1)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_with(base.clone().auto_vacuum(SqliteAutoVacuum::Incremental))
                    .await
                    .map_err(db_err)?;
                migrate_sqlite(&writer).await?;
                let reader = SqlitePoolOptions::new()
                    .max_connections(opts.max_connections.max(1))
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_with(base)
                    .await
                    .map_err(db_err)?;
                return Ok(Db::Sqlite { writer, reader });
            }
            #[cfg(not(feature = "sqlite"))]
            return Err(StorageError::Invalid(
                "this build has no SQLite support (cargo feature `sqlite`)".into(),
            ));
        }
        if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            #[cfg(feature = "postgres")]
            {
                use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
                let o = PgConnectOptions::from_str(url)
                    .map_err(bad_url)?
                    .application_name("apiserver-storage-sql");
                let pool = PgPoolOptions::new()
                    .max_connections(opts.max_connections.max(2))
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect_with(o)
                    .await
                    .map_err(db_err)?;
                migrate_postgres(&pool).await?;
                return Ok(Db::Postgres { pool });
            }
            #[cfg(not(feature = "postgres"))]
            return Err(StorageError::Invalid(
                "this build has no Postgres support (cargo feature `postgres`)".into(),
            ));
        }
        Err(StorageError::Invalid(format!(
            "invalid storage URL {url:?}: expected sqlite://PATH or postgres://..."
        )))
    }

    pub fn dialect(&self) -> Dialect {
        match self {
            #[cfg(feature = "sqlite")]
            Db::Sqlite { .. } => Dialect::Sqlite,
            #[cfg(feature = "postgres")]
            Db::Postgres { .. } => Dialect::Postgres,
        }
    }

    pub async fn meta(&self) -> Result<Meta, StorageError> {
        with_reader!(self, |pool, _sql| {
            let row = sqlx::query(META).fetch_one(pool).await.map_err(db_err)?;
            meta_row(&row)
        })
    }

    /// The latest row of `key` and the current revision, read together.
    pub async fn latest(&self, key: &str) -> Result<(Option<KeyRow>, u64), StorageError> {
        with_reader!(self, |pool, _sql| {
            let row = sqlx::query(LATEST)
                .bind(key)
                .fetch_one(pool)
                .await
                .map_err(db_err)?;
            Ok((key_row(&row, 1)?, rev_of(get(&row, 0)?)?))
        })
    }

    /// The latest row of `key` at revision `rev`.
    pub async fn at(&self, key: &str, rev: u64) -> Result<Option<KeyRow>, StorageError> {
        with_reader!(self, |pool, _sql| {
            let row = sqlx::query(AT)
                .bind(key)
                .bind(rev_arg(rev))
                .fetch_optional(pool)
                .await
                .map_err(db_err)?;
            match row {
                Some(r) => key_row(&r, 0),
                None => Ok(None),
            }
        })
    }

    /// Walks up to `n` keys from `from` below `end`, each with its latest row at `rev` (`None`: not yet written
    /// at `rev`).
    pub async fn scan(
        &self,
        from: &From,
        end: &str,
        rev: u64,
        n: usize,
    ) -> Result<Vec<(String, Option<KeyRow>)>, StorageError> {
        let (start, incl) = match from {
            From::Inclusive(s) => (s.as_str(), true),
            From::Exclusive(s) => (s.as_str(), false),
        };
        with_reader!(self, |pool, sql| {
            let q = if incl { sql.scan_incl } else { sql.scan_excl };
            let rows = sqlx::query(q)
                .bind(start)
                .bind(end)
                .bind(rev_arg(rev))
                .bind(i64::try_from(n).unwrap_or(i64::MAX))
                .fetch_all(pool)
                .await
                .map_err(db_err)?;
            rows.iter()
                .map(|r| Ok((get::<String, _>(r, 0)?, key_row(r, 1)?)))
                .collect()
        })
    }

    /// Live keys from `from` below `end` at `rev`, and the total size of their values.
    pub async fn count(
        &self,
        from: &From,
        end: &str,
        rev: u64,
    ) -> Result<(u64, u64), StorageError> {
        let (start, incl) = match from {
            From::Inclusive(s) => (s.as_str(), true),
            From::Exclusive(s) => (s.as_str(), false),
        };
        with_reader!(self, |pool, sql| {
            let q = if incl { sql.count_incl } else { sql.count_excl };
            let row = sqlx::query(q)
                .bind(start)
                .bind(end)
                .bind(rev_arg(rev))
                .fetch_one(pool)
                .await
                .map_err(db_err)?;
            let n: i64 = get(&row, 0)?;
            let size: i64 = get(&row, 1)?;
            Ok((rev_of(n)?, rev_of(size)?))
        })
    }

    /// Up to `limit` log rows in `(after, upto]`, in revision order.
    pub async fn log(
        &self,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<Vec<Change>, StorageError> {
        with_reader!(self, |pool, _sql| {
            let rows = sqlx::query(LOG)
                .bind(rev_arg(after))
                .bind(rev_arg(upto))
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .fetch_all(pool)
                .await
                .map_err(db_err)?;
            rows.iter().map(log_row).collect()
        })
    }

    /// Log rows in `(after, upto]` of keys in `[start, end)`, in revision order.
    pub async fn log_range(
        &self,
        after: u64,
        upto: u64,
        start: &str,
        end: &str,
    ) -> Result<Vec<Change>, StorageError> {
        with_reader!(self, |pool, _sql| {
            let rows = sqlx::query(LOG_RANGE)
                .bind(rev_arg(after))
                .bind(rev_arg(upto))
                .bind(start)
                .bind(end)
                .fetch_all(pool)
                .await
                .map_err(db_err)?;
            rows.iter().map(log_row).collect()
        })
    }

    /// The first revision after `after` that has a row (`None`: none has): compaction skips the revisions a
    /// bump left without rows instead of walking them batch by batch.
    pub async fn next_row(&self, after: u64) -> Result<Option<u64>, StorageError> {
        with_reader!(self, |pool, _sql| {
            let n: Option<i64> = sqlx::query_scalar(NEXT_ROW)
                .bind(rev_arg(after))
                .fetch_one(pool)
                .await
                .map_err(db_err)?;
            n.map(rev_of).transpose()
        })
    }

    /// How many rows the log holds (live, superseded and tombstones), for tests and metrics.
    pub async fn row_count(&self) -> Result<u64, StorageError> {
        with_reader!(self, |pool, _sql| {
            let n: i64 = sqlx::query_scalar(COUNT_ROWS)
                .fetch_one(pool)
                .await
                .map_err(db_err)?;
            rev_of(n)
        })
    }

    /// Appends a write of `key` if it is in the `expect`ed state: `value` for a create or update, `None` for a
    /// delete.
    pub async fn write(
        &self,
        key: &str,
        expect: Expect,
        value: Option<&Bytes>,
    ) -> Result<WriteOutcome, StorageError> {
        let expected = match expect {
            Expect::Absent => 0,
            Expect::Revision(r) => rev_arg(r),
        };
        let res = match self {
            #[cfg(feature = "sqlite")]
            Db::Sqlite { writer, .. } => sqlite_write(writer, key, expected, value).await,
            #[cfg(feature = "postgres")]
            Db::Postgres { pool } => pg_write(pool, key, expected, value).await,
        };
        match res {
            Ok(o) => Ok(o),
            // The unique (name, prev_revision) index caught a writer that raced us: report what is there now.
            Err(e) if is_unique_violation(&e) => {
                let (row, _) = self.latest(key).await?;
                Ok(WriteOutcome::Conflict(row.and_then(|r| r.live(key))))
            }
            Err(e) => Err(db_err(e)),
        }
    }

    /// Moves the current revision up to `rev` (nothing when it is there already). The UPDATE takes the meta row's
    /// lock, so it waits for writers in flight and the next one continues above `rev`.
    pub async fn bump_revision(&self, rev: u64) -> Result<(), StorageError> {
        let rev = i64::try_from(rev).map_err(|_| {
            StorageError::Invalid(format!("revision {rev} is beyond a SQL store's (2^63-1)"))
        })?;
        match self {
            #[cfg(feature = "sqlite")]
            Db::Sqlite { writer, .. } => {
                sqlx::query(BUMP_REVISION)
                    .bind(rev)
                    .execute(writer)
                    .await
                    .map_err(db_err)?;
            }
            #[cfg(feature = "postgres")]
            Db::Postgres { pool } => {
                sqlx::query(BUMP_REVISION)
                    .bind(rev)
                    .execute(pool)
                    .await
                    .map_err(db_err)?;
            }
        }
        Ok(())
    }

    /// Marks everything before `rev` as compacted (reads before it fail from now on).
    pub async fn set_compacted(&self, rev: u64) -> Result<(), StorageError> {
        match self {
            #[cfg(feature = "sqlite")]
            Db::Sqlite { writer, .. } => {
                sqlx::query(SET_COMPACTED)
                    .bind(rev_arg(rev))
                    .execute(writer)
                    .await
                    .map_err(db_err)?;
            }
            #[cfg(feature = "postgres")]
            Db::Postgres { pool } => {
                sqlx::query(SET_COMPACTED)
                    .bind(rev_arg(rev))
                    .execute(pool)
                    .await
                    .map_err(db_err)?;
            }
        }
        Ok(())
    }

    /// Physically removes the rows that revisions `(lo, hi]` made obsolete (superseded values and tombstones),
    /// in one short transaction. Returns how many rows went.
    pub async fn compact_batch(&self, lo: u64, hi: u64) -> Result<u64, StorageError> {
        macro_rules! batch {
            ($tx:expr) => {{
                let mut tx = $tx;
                let a = sqlx::query(DELETE_SUPERSEDED)
                    .bind(rev_arg(lo))
                    .bind(rev_arg(hi))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_err)?
                    .rows_affected();
                let b = sqlx::query(DELETE_TOMBSTONES)
                    .bind(rev_arg(lo))
                    .bind(rev_arg(hi))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_err)?
                    .rows_affected();
                sqlx::query(SET_CURSOR)
                    .bind(rev_arg(hi))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_err)?;
                tx.commit().await.map_err(db_err)?;
                Ok(a + b)
            }};
        }
        match self {
            #[cfg(feature = "sqlite")]
            Db::Sqlite { writer, .. } => {
                batch!(writer.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?)
            }
            #[cfg(feature = "postgres")]
            Db::Postgres { pool } => batch!(pool.begin().await.map_err(db_err)?),
        }
    }

    /// Gives space back after a compaction: on SQLite, checkpoints and truncates the WAL and releases free pages;
    /// on Postgres, nothing (autovacuum does it).
    pub async fn reclaim(&self) -> Result<(), StorageError> {
        #[cfg(feature = "sqlite")]
        #[allow(irrefutable_let_patterns)]
        if let Db::Sqlite { writer, .. } = self {
            sqlx::query("PRAGMA incremental_vacuum")
                .execute(writer)
                .await
                .map_err(db_err)?;
            // Fails softly (busy) while readers hold old snapshots; the next compaction tries again.
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(writer)
                .await
                .map_err(db_err)?;
        }
        Ok(())
    }

    /// Checks that a statement round-trips.
    pub async fn ping(&self) -> Result<(), StorageError> {
        with_reader!(self, |pool, _sql| {
            sqlx::query("SELECT 1")
                .execute(pool)
                .await
                .map(|_| ())
                .map_err(db_err)
        })
    }

    #[cfg(feature = "postgres")]
    pub fn pg_pool(&self) -> Option<&sqlx::PgPool> {
        match self {
            Db::Postgres { pool } => Some(pool),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

#[cfg(feature = "sqlite")]
async fn sqlite_write(
    writer: &sqlx::SqlitePool,
    key: &str,
    expected: i64,
    value: Option<&Bytes>,
) -> Result<WriteOutcome, sqlx::Error> {
    let mut conn = writer.acquire().await?;
    let written = sqlite_write_on(&mut conn, key, expected, value).await;
    if written.is_err() {
        // A statement or commit that failed (a full disk, say) can leave the connection inside its transaction,
        // where every later BEGIN fails: the pool opens a new one for the next write instead.
        conn.close_on_drop();
    }
    written
}

#[cfg(feature = "sqlite")]
async fn sqlite_write_on(
    conn: &mut sqlx::SqliteConnection,
    key: &str,
    expected: i64,
    value: Option<&Bytes>,
) -> Result<WriteOutcome, sqlx::Error> {
    // IMMEDIATE takes the write lock now, so the read below is current and no other writer (in any process)
    // can commit between it and our insert.
    let mut tx = sqlx::Connection::begin_with(conn, "BEGIN IMMEDIATE").await?;
    let cur = sqlx::query(
        "SELECT revision, deleted, value FROM apiserver_log WHERE name = $1 ORDER BY revision DESC LIMIT 1",
    )
    .bind(key)
    .fetch_optional(&mut *tx)
    .await?;
    let cur = match cur {
        Some(r) => key_row(&r, 0).map_err(|e| sqlx::Error::Protocol(e.to_string()))?,
        None => None,
    };
    let live = cur.as_ref().is_some_and(|c| !c.deleted);
    let ok = match expected {
        0 => !live && value.is_some(),
        n => live && cur.as_ref().is_some_and(|c| rev_arg(c.revision) == n),
    };
    if !ok {
        tx.rollback().await?;
        return Ok(WriteOutcome::Conflict(cur.and_then(|c| c.live(key))));
    }
    let rev: i64 = sqlx::query_scalar(
        "UPDATE apiserver_meta SET revision = revision + 1 WHERE id = 1 RETURNING revision",
    )
    .fetch_one(&mut *tx)
    .await?;
    let prev = cur.as_ref().filter(|c| !c.deleted).map(|c| c.value.clone());
    sqlx::query(
        "INSERT INTO apiserver_log (revision, name, created, deleted, prev_revision, value, old_value) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(rev)
    .bind(key)
    .bind(!live)
    .bind(value.is_none())
    .bind(cur.as_ref().map_or(0, |c| rev_arg(c.revision)))
    .bind(value.map_or(&[][..], |v| &v[..]))
    .bind(prev.as_deref())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(WriteOutcome::Written {
        revision: u64::try_from(rev)
            .map_err(|_| sqlx::Error::Protocol("negative revision".into()))?,
        prev,
    })
}

#[cfg(feature = "postgres")]
async fn pg_write(
    pool: &sqlx::PgPool,
    key: &str,
    expected: i64,
    value: Option<&Bytes>,
) -> Result<WriteOutcome, sqlx::Error> {
    let row = sqlx::query(
        "SELECT o_written, o_revision, o_cur_revision, o_cur_deleted, o_cur_value \
         FROM apiserver_write($1, $2, $3, $4)",
    )
    .bind(key)
    .bind(expected)
    .bind(value.is_none())
    .bind(value.map_or(&[][..], |v| &v[..]))
    .fetch_one(pool)
    .await?;
    let proto = |e: StorageError| sqlx::Error::Protocol(e.to_string());
    let written: bool = get(&row, 0).map_err(proto)?;
    let cur = key_row(&row, 2).map_err(proto)?;
    if written {
        let rev: i64 = get(&row, 1).map_err(proto)?;
        Ok(WriteOutcome::Written {
            revision: rev_of(rev).map_err(proto)?,
            prev: cur.filter(|c| !c.deleted).map(|c| c.value),
        })
    } else {
        Ok(WriteOutcome::Conflict(cur.and_then(|c| c.live(key))))
    }
}

#[cfg(feature = "sqlite")]
async fn migrate_sqlite(writer: &sqlx::SqlitePool) -> Result<(), StorageError> {
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    sqlx::query(schema::VERSION_TABLE_SQLITE)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let have: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM apiserver_schema_version")
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    for m in pending(schema::SQLITE, have.unwrap_or(0))? {
        for s in m.statements {
            sqlx::query(*s).execute(&mut *tx).await.map_err(db_err)?;
        }
        sqlx::query("INSERT INTO apiserver_schema_version (version, description) VALUES ($1, $2)")
            .bind(m.version)
            .bind(m.description)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tracing::info!(version = m.version, "sqlite schema migrated");
    }
    tx.commit().await.map_err(db_err)
}

#[cfg(feature = "postgres")]
async fn migrate_postgres(pool: &sqlx::PgPool) -> Result<(), StorageError> {
    let mut tx = pool.begin().await.map_err(db_err)?;
    // Replicas starting together migrate one at a time.
    sqlx::query("SELECT pg_advisory_xact_lock(7152023001)")
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    sqlx::query(schema::VERSION_TABLE_POSTGRES)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let have: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM apiserver_schema_version")
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    for m in pending(schema::POSTGRES, have.unwrap_or(0))? {
        for s in m.statements {
            sqlx::raw_sql(*s).execute(&mut *tx).await.map_err(db_err)?;
        }
        sqlx::query("INSERT INTO apiserver_schema_version (version, description) VALUES ($1, $2)")
            .bind(m.version)
            .bind(m.description)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tracing::info!(version = m.version, "postgres schema migrated");
    }
    tx.commit().await.map_err(db_err)
}

/// The migrations after version `have`; a database newer than this build is refused rather than misread.
fn pending(all: &'static [Migration], have: i64) -> Result<&'static [Migration], StorageError> {
    let latest = all.last().map_or(0, |m| m.version);
    if have > latest {
        return Err(StorageError::Internal(format!(
            "database schema version {have} is newer than this server understands ({latest})"
        )));
    }
    let i = all.partition_point(|m| m.version <= have);
    Ok(&all[i..])
}
