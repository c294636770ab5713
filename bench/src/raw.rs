//! The physical limit of each backend: the same number of writes of the same size at the same concurrency,
//! straight into etcd (a create-if-absent transaction, as the server's create), RocksDB (a synced put), SQLite or
//! Postgres (a single-row insert in its own transaction), each with the durability the server's backend uses.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apiserver_storage_etcd::etcd_client::{Compare, CompareOp, Txn, TxnOp};
use sqlx::ConnectOptions;

use crate::report::PhaseResult;
use crate::target::Service;

/// Runs `count` writes of `value` on `concurrency` workers against the service's backend, if it has one.
pub async fn baseline(
    service: &Service,
    count: usize,
    concurrency: usize,
    value: Vec<u8>,
) -> Option<Result<PhaseResult, String>> {
    let value = Arc::new(value);
    Some(match service {
        Service::None => return None,
        Service::Etcd(server) => etcd(server.url(), count, concurrency, value).await,
        Service::Rocksdb(dir) => rocksdb(dir.path(), count, concurrency, value).await,
        Service::Sqlite(dir) => {
            let path = dir.path().join("raw.db");
            sql(
                format!("sqlite://{}?mode=rwc", path.display()),
                "raw sqlite inserts",
                count,
                concurrency,
                value,
            )
            .await
        }
        Service::Postgres(url) => {
            sql(
                url.clone(),
                "raw postgres inserts",
                count,
                concurrency,
                value,
            )
            .await
        }
    })
}

async fn run<F, Fut>(name: &str, count: usize, concurrency: usize, write: F) -> PhaseResult
where
    F: Fn(usize) -> Fut + Clone,
    Fut: std::future::Future<Output = bool>,
{
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let workers = (0..concurrency.max(1)).map(|_| {
        let (next, write) = (next.clone(), write.clone());
        async move {
            let mut outcomes = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break outcomes;
                }
                let t = Instant::now();
                let ok = write(i).await;
                outcomes.push((t.elapsed(), if ok { 200 } else { 0 }));
            }
        }
    });
    let outcomes: Vec<(Duration, u16)> = futures::future::join_all(workers)
        .await
        .into_iter()
        .flatten()
        .collect();
    PhaseResult::from_outcomes(name, concurrency, start.elapsed(), &outcomes, 200)
}

/// Reads of the keys `etcd` wrote, one key per request (what a server's GET without the cache costs).
pub async fn etcd_gets(
    url: String,
    count: usize,
    keys: usize,
    concurrency: usize,
) -> Result<PhaseResult, String> {
    let client = apiserver_storage_etcd::etcd_client::Client::connect([url], None)
        .await
        .map_err(|e| e.to_string())?;
    Ok(run("raw etcd gets", count, concurrency, move |i| {
        let mut kv = client.kv_client();
        async move {
            let key = format!("/bench-raw/{}", i % keys.max(1));
            kv.get(key, None).await.is_ok_and(|r| !r.kvs().is_empty())
        }
    })
    .await)
}

async fn etcd(
    url: String,
    count: usize,
    concurrency: usize,
    value: Arc<Vec<u8>>,
) -> Result<PhaseResult, String> {
    let client = apiserver_storage_etcd::etcd_client::Client::connect([url], None)
        .await
        .map_err(|e| e.to_string())?;
    Ok(run("raw etcd txn creates", count, concurrency, move |i| {
        let (mut kv, value) = (client.kv_client(), value.clone());
        async move {
            let key = format!("/bench-raw/{i}");
            let txn = Txn::new()
                .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key.as_str(), value.as_slice(), None)]);
            kv.txn(txn).await.is_ok_and(|r| r.succeeded())
        }
    })
    .await)
}

async fn rocksdb(
    dir: &std::path::Path,
    count: usize,
    concurrency: usize,
    value: Arc<Vec<u8>>,
) -> Result<PhaseResult, String> {
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    let db = Arc::new(rocksdb::DB::open(&options, dir.join("raw")).map_err(|e| e.to_string())?);
    Ok(
        run("raw rocksdb synced puts", count, concurrency, move |i| {
            let (db, value) = (db.clone(), value.clone());
            async move {
                tokio::task::spawn_blocking(move || {
                    let mut sync = rocksdb::WriteOptions::default();
                    sync.set_sync(true);
                    db.put_opt(format!("/bench-raw/{i}"), value.as_slice(), &sync)
                        .is_ok()
                })
                .await
                .unwrap_or(false)
            }
        })
        .await,
    )
}

async fn sql(
    url: String,
    name: &str,
    count: usize,
    concurrency: usize,
    value: Arc<Vec<u8>>,
) -> Result<PhaseResult, String> {
    if url.starts_with("sqlite:") {
        let options: sqlx::sqlite::SqliteConnectOptions =
            url.parse().map_err(|e: sqlx::Error| e.to_string())?;
        let options = options
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
            .disable_statement_logging();
        // One writer, as SQLite allows.
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(|e| e.to_string())?;
        sqlx::query("CREATE TABLE IF NOT EXISTS bench_raw_kv (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, value BLOB NOT NULL)")
            .execute(&pool)
            .await
            .map_err(|e| e.to_string())?;
        Ok(run(name, count, concurrency, move |i| {
            let (pool, value) = (pool.clone(), value.clone());
            async move {
                sqlx::query("INSERT INTO bench_raw_kv (name, value) VALUES (?, ?)")
                    .bind(format!("/bench-raw/{i}"))
                    .bind(value.as_slice())
                    .execute(&pool)
                    .await
                    .is_ok()
            }
        })
        .await)
    } else {
        let options: sqlx::postgres::PgConnectOptions =
            url.parse().map_err(|e: sqlx::Error| e.to_string())?;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(concurrency.max(1) as u32)
            .connect_with(options.disable_statement_logging())
            .await
            .map_err(|e| e.to_string())?;
        sqlx::query("CREATE TABLE IF NOT EXISTS bench_raw_kv (id BIGSERIAL PRIMARY KEY, name TEXT COLLATE \"C\" NOT NULL, value BYTEA NOT NULL)")
            .execute(&pool)
            .await
            .map_err(|e| e.to_string())?;
        Ok(run(name, count, concurrency, move |i| {
            let (pool, value) = (pool.clone(), value.clone());
            async move {
                sqlx::query("INSERT INTO bench_raw_kv (name, value) VALUES ($1, $2)")
                    .bind(format!("/bench-raw/{i}"))
                    .bind(value.as_slice())
                    .execute(&pool)
                    .await
                    .is_ok()
            }
        })
        .await)
    }
}
