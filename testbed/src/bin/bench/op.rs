//! The operator under measurement: the harness's [`Operator`] handle on the release binary, watching
//! the bench namespace, with its memory and CPU read from `/proc`.

use std::path::Path;
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use flow_testbed::{Operator, http_get, metrics_address};

use crate::NS;

/// The operator from `target/release`, watching the bench namespace; stopped when dropped.
pub struct Op {
    running: Option<Operator>,
    pid: u32,
}

impl Op {
    /// Starts the operator at `binary` with its ledger in `ledger`, and waits until it serves.
    pub fn start(binary: &Path, ledger: &Path) -> Op {
        let log = operator_log();
        let operator = Operator::start_binary(binary, ledger, &[("FLOW_WATCH_NAMESPACE", NS), ("RUST_LOG", &log)]);
        let op = Op { pid: operator.pid(), running: Some(operator) };
        op.wait_ready();
        op
    }

    /// The operator's log file.
    pub fn log(&self) -> &Path {
        self.running.as_ref().map_or(Path::new(""), |o| o.log.as_path())
    }

    fn wait_ready(&self) {
        let end = Instant::now() + Duration::from_secs(60);
        let log = self.log().to_path_buf();
        while !std::fs::read_to_string(&log).unwrap_or_default().contains("serving /metrics and /healthz") {
            assert!(Instant::now() < end, "the operator did not start; see {}", log.display());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn status_kib(&self, key: &str) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).expect("/proc status");
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{key} in /proc/<pid>/status"))
    }

    /// The operator's counters `name` (a Prometheus counter, `_total` included) from `/metrics`, by
    /// the value of their label `label`.
    pub fn counters(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let Some(op) = self.running.as_ref() else { return BTreeMap::new() };
        let (_, body) = http_get(&metrics_address(op), "/metrics");
        let prefix = format!("{name}{{{label}=\"");
        body.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(&prefix)?;
                let (value, after) = rest.split_once('"')?;
                Some((value.to_string(), after.rsplit(' ').next()?.parse().ok()?))
            })
            .collect()
    }

    /// Resident set size now.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// Peak resident set size since the process started.
    pub fn hwm_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// User plus system CPU seconds since the process started.
    pub fn cpu_secs(&self) -> f64 {
        crate::measure::cpu_secs_of(&self.pid.to_string()).expect("/proc/<pid>/stat of the operator")
    }

    /// Stops it (SIGTERM, so that it gives its Lease back) and waits.
    pub fn stop(&mut self) {
        if let Some(o) = self.running.take() {
            o.stop();
        }
    }
}

/// The operator's log filter: debug for the flow crates, and FLOW_BENCH_OPERATOR_LOG's directives
/// (for example `kube_client=debug` for every API call).
fn operator_log() -> String {
    let base = "info,flow_operator=debug,flow_adapters=debug,flow_core=debug";
    match std::env::var("FLOW_BENCH_OPERATOR_LOG") {
        Ok(more) if !more.is_empty() => format!("{base},{more}"),
        _ => base.to_string(),
    }
}
