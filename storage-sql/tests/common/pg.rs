//! A throwaway Postgres 15 for the tests of one test binary: `initdb` into a temporary directory, `postgres` on
//! a free loopback port, stopped (and the directory removed) by a watchdog when the test process exits.
//!
//! Postgres refuses to run as root; when the tests run as root (CI) the server runs as the `postgres` system
//! user through `runuser`. Binaries: `$PG_BIN`, else `/usr/lib/postgresql/15/bin` (Debian's postgresql-15).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sqlx::Connection;

pub struct PgServer {
    pub port: u16,
    pub dir: PathBuf,
}

static SERVER: OnceLock<PgServer> = OnceLock::new();

/// The test Postgres, started on first use.
pub fn server() -> &'static PgServer {
    SERVER.get_or_init(start)
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A command run as the user Postgres runs as.
fn as_pg_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    l.local_addr().expect("local addr").port()
}

fn run(mut c: Command, what: &str) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn bin_dir() -> PathBuf {
    PathBuf::from(std::env::var("PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into()))
}

/// Starts the Postgres of `dir` (initialized) on `port` and waits until it accepts connections.
fn pg_ctl_start(bin: &Path, dir: &Path, port: u16) {
    let mut ctl = as_pg_user(&bin.join("pg_ctl"));
    ctl.arg("-D")
        .arg(dir.join("data"))
        .arg("-l")
        .arg(dir.join("postgres.log"))
        .arg("-w")
        .arg("-t")
        .arg("120")
        .arg("-o")
        .arg(format!(
            "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c max_connections=400 \
             -c fsync=off -c full_page_writes=off -c shared_buffers=64MB",
            dir.display()
        ))
        .arg("start")
        .stdout(Stdio::null());
    run(ctl, "pg_ctl start");
}

fn start() -> PgServer {
    let bin = bin_dir();
    assert!(
        bin.join("initdb").exists(),
        "Postgres 15 binaries not found in {} (install Debian's postgresql-15 or set PG_BIN)",
        bin.display()
    );
    let dir = tempfile::Builder::new()
        .prefix("apiserver-pg-")
        .tempdir()
        .expect("tempdir")
        .keep();
    let data = dir.join("data");
    if is_root() {
        run(
            {
                let mut c = Command::new("chown");
                c.args(["-R", "postgres:postgres"]).arg(&dir);
                c
            },
            "chown",
        );
    }
    let mut initdb = as_pg_user(&bin.join("initdb"));
    initdb.arg("-D").arg(&data).args([
        "-U",
        "postgres",
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-locale",
        "--no-sync",
    ]);
    run(initdb, "initdb");
    let port = free_port();
    pg_ctl_start(&bin, &dir, port);
    // Stop the server and remove its directory once this test process is gone, however it ends.
    let watchdog = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
         kill -QUIT $(head -1 {data}/postmaster.pid) 2>/dev/null; sleep 2; rm -rf {dir}",
        pid = std::process::id(),
        data = data.display(),
        dir = dir.display(),
    );
    // Deliberately never waited for: the watchdog must outlive this process.
    #[allow(clippy::zombie_processes)]
    Command::new("sh")
        .arg("-c")
        .arg(watchdog)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the Postgres watchdog");
    PgServer { port, dir }
}

impl PgServer {
    /// Stops Postgres at once (`pg_ctl stop -m immediate`: no checkpoint, connections cut, as a crash). For fault
    /// tests in a test binary of their own: every test of the binary shares this server.
    pub fn stop(&self) {
        let mut ctl = as_pg_user(&bin_dir().join("pg_ctl"));
        ctl.arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null());
        run(ctl, "pg_ctl stop");
    }

    /// Starts Postgres again after [`PgServer::stop`], on the same port and data.
    pub fn start_again(&self) {
        pg_ctl_start(&bin_dir(), &self.dir, self.port);
    }

    /// The URL of database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates an empty database and returns its URL.
    pub async fn fresh_database(&self) -> String {
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match sqlx::PgConnection::connect(&self.url("postgres")).await {
                Ok(mut c) => {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                        .execute(&mut c)
                        .await
                        .expect("create database");
                    let _ = c.close().await;
                    return self.url(&name);
                }
                Err(e) if Instant::now() < deadline => {
                    eprintln!("waiting for the test Postgres: {e}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => panic!("cannot reach the test Postgres: {e}"),
            }
        }
    }
}
