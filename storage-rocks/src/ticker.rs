//! A background thread that runs one task at a fixed interval until stopped: the compactor of a database this
//! process owns, the follower of one it does not.

use std::sync::Mutex;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

pub(crate) struct Ticker {
    stop: Mutex<Option<mpsc::Sender<()>>>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl Ticker {
    /// Starts thread `name`, calling `tick` every `interval` (the first time one interval after the start).
    pub(crate) fn spawn(
        name: &str,
        interval: Duration,
        mut tick: impl FnMut() + Send + 'static,
    ) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    tick();
                }
            })?;
        Ok(Ticker {
            stop: Mutex::new(Some(stop)),
            handle: Mutex::new(Some(handle)),
        })
    }

    /// Stops the thread and waits for it.
    pub(crate) fn stop(&self) {
        drop(self.stop.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(h) = self.handle.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
    }
}
