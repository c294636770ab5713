//! Replays every seed (`corpus/<target>/*`) and every past crash (`regressions/<target>/*`) through its target,
//! so the ordinary test run keeps fixed crashes fixed without AFL. Each file runs on a thread of its own with an
//! ordinary stack, so a stack overflow or a panic names the file.

use std::path::Path;

fn replay(dir: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut count = 0;
    for (name, target) in apiserver_fuzz::TARGETS {
        let Ok(entries) = std::fs::read_dir(root.join(name)) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .map(|e| e.expect("a directory entry").path())
            .collect();
        files.sort();
        for file in files {
            let data = std::fs::read(&file).expect("a readable input");
            let shown = file.display().to_string();
            let result = std::thread::Builder::new()
                .stack_size(8 * 1024 * 1024)
                .spawn(move || target(&data))
                .expect("a thread")
                .join();
            assert!(result.is_ok(), "{shown} crashes its target");
            count += 1;
        }
    }
    count
}

#[test]
fn corpus_seeds_pass() {
    assert!(replay("corpus") > 0, "the seed corpus is empty");
}

#[test]
fn crash_regressions_pass() {
    replay("regressions");
}

#[test]
fn every_target_has_seeds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, _) in apiserver_fuzz::TARGETS {
        let count = std::fs::read_dir(root.join(name)).map_or(0, |d| d.count());
        assert!(count > 0, "no seeds for {name}");
    }
}
