//! One line describing this machine, written into model cards and benchmark output.

/// The CPU model and the number of threads available, e.g. "AMD EPYC 7B13, 2 threads available".
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    format!("{cpu}, {threads} threads available")
}

/// Bytes of main memory free now (Linux: `MemAvailable`); `None` where it cannot be read.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Whether process `pid` is known to have ended: `Some(true)` when it is gone, `Some(false)`
/// when it runs, `None` where liveness is not read (no /proc: nothing is then taken as gone).
pub fn process_gone(pid: u32) -> Option<bool> {
    if !std::path::Path::new("/proc/self").exists() {
        return None;
    }
    Some(!std::path::Path::new(&format!("/proc/{pid}")).exists())
}
