//! `<server> storage backup|restore|migrate`: the server's own command line opens the storage (the same flags
//! choose the backend and where it is), and [`transfer`](crate::storage::transfer) moves the objects.
//!
//! Only the binary's start function knows which backends it was built with, so a storage command runs it inside a
//! scope in which [`App::open`](super::App::open) hands the opened storage over here and stops, instead of
//! assembling a server.

use std::cell::RefCell;
use std::future::Future;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Arg, ArgAction, ArgMatches, Command};

use super::{StartError, Started};
use crate::storage::Storage;
use crate::storage::transfer::{self, Report};

/// A storage opened by a start function run under a storage command.
struct Opened {
    storage: Arc<dyn Storage>,
    prefix: String,
    backend: &'static str,
}

/// What a storage command asks of the start function it runs, and what it gets back.
struct Handoff {
    /// The command only reads this store.
    read_only: bool,
    opened: Option<Opened>,
}

tokio::task_local! {
    static HANDOFF: RefCell<Handoff>;
}

/// Whether [`App::open`](super::App::open) opens a store that is only read (a backup, a migration's source).
pub(super) fn reads_only() -> bool {
    HANDOFF
        .try_with(|handoff| handoff.borrow().read_only)
        .unwrap_or(false)
}

/// Called by [`App::open`](super::App::open) once the backend is open: under a storage command, keeps the storage
/// for it and returns true (the server is not to be assembled).
pub(super) fn hand_over(storage: &Arc<dyn Storage>, prefix: &str, backend: &'static str) -> bool {
    HANDOFF
        .try_with(|handoff| {
            handoff.borrow_mut().opened = Some(Opened {
                storage: storage.clone(),
                prefix: prefix.to_string(),
                backend,
            });
        })
        .is_ok()
}

/// The `storage` subcommand and its three commands.
pub(super) fn command() -> Command {
    Command::new("storage")
        .about(
            "Back up, restore or migrate the server's objects; the server's storage flags choose the backend",
        )
        .subcommand_required(true)
        .subcommand(
            Command::new("backup")
                .about("Write every object at one revision to a file (with a checksum), while the store may be in use")
                .arg(
                    Arg::new("to")
                        .long("to")
                        .value_name("FILE")
                        .required(true)
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("The backup file to write ('-' for stdout)"),
                ),
        )
        .subcommand(
            Command::new("restore")
                .about(
                    "Make the store hold exactly what a backup holds (checked first; run again to resume); \
                     resourceVersions continue above the backup's",
                )
                .arg(
                    Arg::new("from")
                        .long("from")
                        .value_name("FILE")
                        .required(true)
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("The backup file to read"),
                ),
        )
        .subcommand(
            Command::new("migrate")
                .about(
                    "Copy the store (the server's storage flags) into another backend at one revision, then, with \
                     --follow, apply its changes until SIGINT or SIGTERM; run again to resume",
                )
                .arg(
                    Arg::new("to")
                        .long("to")
                        .value_name("FLAGS")
                        .required(true)
                        .allow_hyphen_values(true)
                        .help(
                            "The target's storage flags, as one shell-quoted string, e.g. \
                             '--storage-backend=sqlite --data-dir=/var/lib/new'",
                        ),
                )
                .arg(
                    Arg::new("follow")
                        .long("follow")
                        .action(ArgAction::SetTrue)
                        .help(
                            "After the copy, apply the source's changes as they happen until SIGINT or SIGTERM, \
                             then copy what changed last and stop",
                        ),
                ),
        )
}

/// Runs a storage command: `top` holds the server's flags (the source's, or the store's), `sub` the command's.
pub(super) async fn run<O, E, F, Fut>(
    name: &str,
    top: &ArgMatches,
    sub: &ArgMatches,
    start: &F,
) -> ExitCode
where
    O: clap::Parser,
    E: std::fmt::Display,
    F: Fn(O) -> Fut,
    Fut: Future<Output = Result<Started, E>>,
{
    let progress = |message: &str| eprintln!("{name}: {message}");
    let result = async {
        let options = O::from_arg_matches(top).map_err(|e| e.to_string())?;
        let read_only = matches!(sub.subcommand_name(), Some("backup" | "migrate"));
        let opened = open(start, options, read_only).await?;
        match sub.subcommand() {
            Some(("backup", args)) => {
                let path = args.get_one::<PathBuf>("to").expect("required");
                progress(&format!(
                    "backing up {} on {}",
                    opened.prefix, opened.backend
                ));
                if path.as_os_str() == "-" {
                    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                    transfer::backup(opened.storage.as_ref(), &opened.prefix, &mut out)
                        .await
                        .map_err(|e| e.to_string())
                } else {
                    backup_to_file(&opened, path).await
                }
            }
            Some(("restore", args)) => {
                let path = args.get_one::<PathBuf>("from").expect("required");
                progress(&format!(
                    "restoring {} into {} on {}",
                    path.display(),
                    opened.prefix,
                    opened.backend
                ));
                let open_file = || std::fs::File::open(path).map(BufReader::new);
                transfer::restore(
                    opened.storage.as_ref(),
                    &opened.prefix,
                    open_file,
                    &progress,
                )
                .await
                .map_err(|e| e.to_string())
            }
            Some(("migrate", args)) => {
                let flags = args.get_one::<String>("to").expect("required");
                let words = shlex::split(flags)
                    .ok_or_else(|| format!("--to {flags:?}: unbalanced quotes"))?;
                let target_options =
                    O::try_parse_from(std::iter::once(name.to_string()).chain(words))
                        .map_err(|e| format!("--to: {e}"))?;
                let target = open(start, target_options, false).await?;
                progress(&format!(
                    "migrating {} on {} to {} on {}",
                    opened.prefix, opened.backend, target.prefix, target.backend
                ));
                transfer::migrate(
                    opened.storage.as_ref(),
                    &opened.prefix,
                    target.storage.as_ref(),
                    &target.prefix,
                    args.get_flag("follow"),
                    crate::server::wait_for_signal(),
                    &progress,
                )
                .await
                .map_err(|e| e.to_string())
            }
            _ => Err("storage: a command is required (backup, restore, migrate)".to_string()),
        }
    }
    .await;
    match result {
        Ok(report) => {
            summary(name, &report);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the start function until it has opened the storage (`read_only`: to read it only).
async fn open<O, E, F, Fut>(start: &F, options: O, read_only: bool) -> Result<Opened, String>
where
    E: std::fmt::Display,
    F: Fn(O) -> Fut,
    Fut: Future<Output = Result<Started, E>>,
{
    let (result, slot) = HANDOFF
        .scope(
            RefCell::new(Handoff {
                read_only,
                opened: None,
            }),
            async {
                let result = start(options).await;
                (result, HANDOFF.with(|h| h.borrow_mut().opened.take()))
            },
        )
        .await;
    match (slot, result) {
        (Some(opened), _) => Ok(opened),
        (None, Err(e)) => Err(e.to_string()),
        (None, Ok(_)) => Err(StartError::Storage(
            "the server started without opening its storage through App::open".into(),
        )
        .to_string()),
    }
}

/// Writes the backup next to `path` and renames it into place when complete, so that a file at `path` is always
/// a whole backup.
async fn backup_to_file(opened: &Opened, path: &PathBuf) -> Result<Report, String> {
    let partial = path.with_extension("partial");
    let file = create_private(&partial).map_err(|e| format!("{}: {e}", partial.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let report = transfer::backup(opened.storage.as_ref(), &opened.prefix, &mut out)
        .await
        .map_err(|e| e.to_string())?;
    let file = out.into_inner().map_err(|e| e.error().to_string())?;
    file.sync_all().map_err(|e| e.to_string())?;
    std::fs::rename(&partial, path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(report)
}

/// Creates (or truncates) `path` readable by its owner only (0600): a backup holds every object, Secrets too.
fn create_private(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let file = options.open(path)?;
        // A file left by an earlier run keeps its mode through `open`.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(file)
    }
    #[cfg(not(unix))]
    options.open(path)
}

/// The last line, on stderr as the progress lines (stdout may carry the backup).
fn summary(name: &str, report: &Report) {
    let line = format!(
        "{name}: {} objects ({} bytes, {:.0} bytes/s) at source revision {}; target revision {}; {} written, {} \
         deleted, {} events followed, in {:.1}s",
        report.objects,
        report.bytes,
        report.bytes_per_second(),
        report.source_revision,
        report.target_revision,
        report.written,
        report.deleted,
        report.events,
        report.elapsed.as_secs_f64()
    );
    eprintln!("{line}");
}
