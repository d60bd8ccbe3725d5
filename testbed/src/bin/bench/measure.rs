//! Measuring: elapsed times, medians and spreads, CPU time of processes, and the clocks the results
//! are stamped with.

use std::process::Command;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

pub fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

pub fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

pub fn utc_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M:%S"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Seconds since midnight UTC of a wall-clock time.
pub fn wall_secs_of_day(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() % 86_400.0)
}

/// Seconds since midnight UTC of a log timestamp such as `2026-11-29T17:14:01.584169Z`.
pub fn log_secs_of_day(ts: &str) -> Option<f64> {
    let time = ts.split_once('T')?.1.strip_suffix('Z')?;
    let mut f = time.split(':');
    let (h, m, s) = (f.next()?.parse::<f64>().ok()?, f.next()?.parse::<f64>().ok()?, f.next()?.parse::<f64>().ok()?);
    Some(h * 3600.0 + m * 60.0 + s)
}

/// User plus system CPU seconds process `pid` has used since it started (`/proc/<pid>/stat`, fields
/// 14 and 15 in clock ticks); `None` when it cannot be read.
pub fn cpu_secs_of(pid: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (in parentheses): state is field 3, utime 14, stime 15.
    let f: Vec<&str> = s.get(s.rfind(')')? + 2..)?.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / clock_ticks())
}

/// CPU seconds the test bed's Kafka broker (the one every bench topic is on) has used; NaN when its
/// pid file (`$FLOW_TESTBED_RUN/pids/kafka.pid`) or process cannot be read.
pub fn broker_cpu_secs() -> f64 {
    let pid = std::env::var("FLOW_TESTBED_RUN")
        .ok()
        .and_then(|run| std::fs::read_to_string(format!("{run}/pids/kafka.pid")).ok());
    pid.and_then(|p| cpu_secs_of(p.trim())).unwrap_or(f64::NAN)
}

/// CPU seconds this process has used.
pub fn own_cpu_secs() -> f64 {
    cpu_secs_of("self").unwrap_or(f64::NAN)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux).
pub fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}
