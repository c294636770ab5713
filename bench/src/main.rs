//! `apiserver-bench`: load phases against the pizza server on each backend, raw backend baselines, a table on
//! stdout and a JSON report. `--quick` finishes in under a minute.

use std::path::PathBuf;
use std::process::ExitCode;

use apiserver_bench::target::{Backend, default_server_binary};
use apiserver_bench::{Auth, Config, Mode, Sizes, run};
use apiserver_bench::{otlp, plot, scale, transfer};
use clap::{Parser, ValueEnum};

/// `--auth`: which authentication each backend runs with.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum AuthChoice {
    /// The server standalone, the load with its static admin token.
    Static,
    /// The server delegating to a real kube-apiserver + etcd on loopback ($KUBEBUILDER_ASSETS), the load as a
    /// ServiceAccount through warm TokenReview and SubjectAccessReview caches.
    Delegated,
    /// Both, one after the other on each backend, in the same run and table.
    Both,
    /// Delegated, then with a ValidatingAdmissionPolicy configured in the cluster, then with the policy and a
    /// validating webhook (what admission from the cluster costs), in the same run and table.
    Admission,
}

#[derive(Parser)]
#[command(
    name = "apiserver-bench",
    version,
    about = "Benchmarks the pizza server on each storage backend next to the raw backends"
)]
struct Cli {
    /// Backends to run the pizza server on.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Backend::Rocksdb, Backend::Memory, Backend::Sqlite, Backend::Postgres, Backend::Etcd])]
    backends: Vec<Backend>,
    /// Small sizes: finishes in under a minute.
    #[arg(long)]
    quick: bool,
    /// Run the server inside the harness instead of as a process (no CPU/memory figures).
    #[arg(long)]
    in_process: bool,
    /// The pizza-apiserver binary (default: next to this executable).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Measure a running server of the same API instead, reached through this kubeconfig.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// HTTP/1.1 instead of HTTP/2.
    #[arg(long)]
    http1: bool,
    /// Skip the raw backend baselines.
    #[arg(long)]
    no_raw: bool,
    /// Objects to create (overrides the size preset).
    #[arg(long)]
    objects: Option<usize>,
    /// Concurrent clients (overrides the size preset).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Requests of the GET phase (overrides the size preset).
    #[arg(long)]
    gets: Option<usize>,
    /// Requests of each LIST phase (overrides the size preset); the first few encode every item, later ones show
    /// the steady state.
    #[arg(long)]
    lists: Option<usize>,
    /// Watchers of the fan-out phase (overrides the size preset): each event is delivered to every one.
    #[arg(long)]
    watchers: Option<usize>,
    /// Authentication of the load: the static admin token, delegated to a core cluster, or both.
    #[arg(long, value_enum, default_value_t = AuthChoice::Static)]
    auth: AuthChoice,
    /// Also write the report as JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also draw the throughput and p99 of every phase and backend into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Run an OTLP/gRPC trace receiver on this loopback address for the run (for a server started with a
    /// `--tracing-config-file` pointing at it) and report how many spans it got.
    #[arg(long)]
    otlp_receiver: Option<std::net::SocketAddr>,
    /// Instead of the load phases: `storage restore` of this many pizzas into each persistent backend of
    /// `--backends`, then `storage migrate` between every ordered pair, with the bytes moved per second.
    #[arg(long, value_name = "OBJECTS")]
    transfer: Option<usize>,
    /// Instead of the load phases: grow one RocksDB store through the server to each of these sizes (e.g.
    /// `10000,100000,1000000`) and measure at each the server's start on it, its RSS, GETs spread over the store
    /// and `limit=500` pages (`--gets` and `--lists` size the reads, `--concurrency` the creates).
    #[arg(long, value_name = "OBJECTS,...", value_delimiter = ',')]
    scale: Vec<usize>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut sizes = if cli.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    if let Some(n) = cli.objects {
        sizes.objects = n;
    }
    if let Some(c) = cli.concurrency {
        sizes.concurrency = c;
    }
    if let Some(n) = cli.lists {
        sizes.lists = n;
    }
    if let Some(n) = cli.gets {
        sizes.gets = n;
    }
    if let Some(n) = cli.watchers {
        sizes.watchers = n;
    }
    let mode = if let Some(kubeconfig) = cli.kubeconfig {
        Mode::Remote(kubeconfig)
    } else if cli.in_process {
        Mode::InProcess
    } else {
        match cli.server_bin.or_else(default_server_binary) {
            Some(binary) => Mode::Process(binary),
            None => {
                eprintln!(
                    "apiserver-bench: no pizza-apiserver binary next to this one; build it (cargo build -p pizza-apiserver, same profile), pass --server-bin, or use --in-process"
                );
                return ExitCode::FAILURE;
            }
        }
    };
    if let Some(objects) = cli.transfer {
        let Mode::Process(binary) = &mode else {
            eprintln!(
                "apiserver-bench: --transfer runs the server binary's storage commands: no --in-process or --kubeconfig"
            );
            return ExitCode::FAILURE;
        };
        return match transfer::run(binary, &cli.backends, objects).await {
            Ok(results) => {
                println!("{}", transfer::table(&results));
                write_json(cli.out.as_deref(), &results)
            }
            Err(e) => {
                eprintln!("apiserver-bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if !cli.scale.is_empty() {
        let Mode::Process(binary) = &mode else {
            eprintln!(
                "apiserver-bench: --scale restarts the server binary on its store: no --in-process or --kubeconfig"
            );
            return ExitCode::FAILURE;
        };
        return match scale::run(binary, &cli.scale, &sizes).await {
            Ok(steps) => {
                println!("{}", scale::table(&steps));
                write_json(cli.out.as_deref(), &steps)
            }
            Err(e) => {
                eprintln!("apiserver-bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let config = Config {
        backends: cli.backends,
        mode,
        sizes,
        http1: cli.http1,
        no_raw: cli.no_raw,
        auth: match cli.auth {
            AuthChoice::Static => vec![Auth::Static],
            AuthChoice::Delegated => vec![Auth::Delegated],
            AuthChoice::Both => vec![Auth::Static, Auth::Delegated],
            AuthChoice::Admission => vec![Auth::Delegated, Auth::Policy, Auth::Admission],
        },
    };
    let receiver = match cli.otlp_receiver {
        Some(address) if address.ip().is_loopback() => match otlp::start(address).await {
            Ok(receiver) => Some(receiver),
            Err(e) => {
                eprintln!("apiserver-bench: OTLP receiver on {address}: {e}");
                return ExitCode::FAILURE;
            }
        },
        Some(address) => {
            eprintln!("apiserver-bench: --otlp-receiver must be a loopback address, got {address}");
            return ExitCode::FAILURE;
        }
        None => None,
    };
    let report = match run(&config).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("apiserver-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", report.table());
    if let Some(receiver) = receiver {
        println!("OTLP receiver: {} spans", receiver.spans());
    }
    if let Some(path) = &cli.plot
        && let Err(e) = plot::write_svg(&report, path)
    {
        eprintln!("apiserver-bench: --plot {e}");
        return ExitCode::FAILURE;
    }
    write_json(cli.out.as_deref(), &report)
}

/// `--out`: the report as JSON, when asked for.
fn write_json(out: Option<&std::path::Path>, report: &impl serde::Serialize) -> ExitCode {
    let Some(path) = out else {
        return ExitCode::SUCCESS;
    };
    let json = serde_json::to_vec_pretty(report).unwrap_or_default();
    match std::fs::write(path, json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("apiserver-bench: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
