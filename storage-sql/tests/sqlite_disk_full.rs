//! SQLite on a full disk (a small tmpfs the test mounts; skipped, saying so, where mounting is not allowed):
//! writes fail with a 5xx, reads go on (now and then one fails with a 5xx too), writes resume when space returns,
//! and the database reopens intact.

use std::sync::Arc;

use apiserver::storage::Storage;
use apiserver::storage::testing::disk_full::{SmallFs, check_disk_full};
use apiserver_storage_sql::{SqlStorage, SqlStorageOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_disk_full() {
    let fs = match SmallFs::mount("4m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED: cannot make a small filesystem here: {why}");
            return;
        }
    };
    let report = check_disk_full(&fs, true, |dir| async move {
        let opts =
            SqlStorageOptions::with_url(format!("sqlite://{}", dir.join("state.db").display()));
        Arc::new(SqlStorage::open(&opts).await.expect("open sqlite")) as Arc<dyn Storage>
    })
    .await;
    eprintln!("sqlite disk full: {report:?}");
}
