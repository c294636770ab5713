//! The AFL++ harness: `apiserver-fuzz TARGET` runs the target named TARGET (see `apiserver_fuzz::TARGETS`) on
//! each input AFL++ hands it, in persistent mode. Built by `scripts/fuzz.sh` with `cargo afl build --features afl`.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = apiserver_fuzz::target(&name) else {
        let names: Vec<&str> = apiserver_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!("usage: apiserver-fuzz TARGET, one of: {}", names.join(" "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| target(data));
}
