//! The `sluice+scrape` target's scraper for `cargo xtask bench mysql`: `/metrics` fetched every
//! second during its runs, as Prometheus would.

use std::time::Duration;

/// Fetches `/metrics` from `port` every second until dropped, as Prometheus would.
pub(crate) struct Scraper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Scraper {
    pub(crate) fn start(port: u16) -> Scraper {
        use std::io::{Read, Write};
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut scrapes = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(mut tcp) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                    let _ = tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n");
                    let mut body = Vec::new();
                    if tcp.read_to_end(&mut body).is_ok() && body.starts_with(b"HTTP/1.1 200") {
                        scrapes += 1;
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            scrapes
        });
        Scraper {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops scraping; how many scrapes succeeded.
    pub(crate) fn finish(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map_or(0, |t| t.join().unwrap_or(0))
    }
}
