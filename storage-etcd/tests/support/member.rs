//! The command line of one etcd member on loopback, shared by the single etcd of `mod.rs` and the cluster of
//! `cluster.rs`: Debian's `etcd` (or `$ETCD_BIN`), none of the caller's `ETCD*` variables, warnings only.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The etcd binary tests start unless they ask for another: `$ETCD_BIN`, else `etcd` on `PATH` (Debian's 3.4).
pub fn default_binary() -> OsString {
    std::env::var_os("ETCD_BIN").unwrap_or_else(|| "etcd".into())
}

/// `bin` as member `name` of `initial_cluster` (`name=peer-url,...`), with its data in `data_dir`, serving clients
/// on `client` and peers on `peer`; the caller adds its own flags and starts it with [`spawn_logged`].
pub fn member_command(
    bin: &OsStr,
    name: &str,
    data_dir: &Path,
    client: &str,
    peer: &str,
    initial_cluster: &str,
) -> Command {
    let mut cmd = Command::new(bin);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ETCD") {
            cmd.env_remove(k);
        }
    }
    cmd.arg("--name")
        .arg(name)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--listen-client-urls")
        .arg(client)
        .arg("--advertise-client-urls")
        .arg(client)
        .arg("--listen-peer-urls")
        .arg(peer)
        .arg("--initial-advertise-peer-urls")
        .arg(peer)
        .arg("--initial-cluster")
        .arg(initial_cluster)
        .arg("--initial-cluster-state")
        .arg("new")
        .arg("--logger")
        .arg("zap")
        .arg("--log-level")
        .arg("warn");
    cmd
}

/// Starts `cmd` with its output appended to the file at `log`.
pub fn spawn_logged(mut cmd: Command, log: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("etcd log file");
    let bin = cmd.get_program().to_os_string();
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {bin:?} (Debian package etcd-server): {e}"))
}
