//! A real `flow-operator` process started for a test, and what it serves over HTTP.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bed::{bed, bin, wait_until};
use crate::kube::ensure_namespace;

/// The sidecar image the test operator renders (kwok runs no containers, so it is never pulled).
pub const SIDECAR_IMAGE: &str = "ghcr.io/thinkmorestupidless/ankka-flow-sidecar:0.1.0";

/// A running `flow-operator`, stopped when dropped (SIGTERM, so that it gives its Lease back; SIGKILL
/// if it is still there 10 s later). Its log goes to `target/e2e-logs/`.
pub struct Operator {
    child: Child,
    /// The log file.
    pub log: PathBuf,
}

impl Operator {
    /// Starts the operator with a ledger in `ledger_dir` and extra environment `env`.
    ///
    /// `env` overrides every default below, `KUBECONFIG` included (the test bed's admin by default),
    /// and [`SIDECAR_IMAGE`] as `FLOW_SIDECAR_IMAGE` (an empty value leaves it unset).
    /// Leader election stays on. Unless `env` names them, the Lease is `ankka-flow-operator-<ns>`
    /// and the instance (`HOSTNAME`, the identity in the Lease) `flow-operator-<ns>-<test pid>`, where
    /// `<ns>` is `FLOW_WATCH_NAMESPACE`: each test namespace has a Lease of its own, so an operator a
    /// previous test left holding one never delays the next test; an operator restarted within a
    /// test (after a crash point) takes its own Lease back at once; and operators of two test runs
    /// never share an identity.
    pub fn start(ledger_dir: &Path, env: &[(&str, &str)]) -> Operator {
        Operator::start_binary(&bin("flow-operator"), ledger_dir, env)
    }

    /// [`Operator::start`] of the operator binary at `binary` (the benchmark runs a release build).
    pub fn start_binary(binary: &Path, ledger_dir: &Path, env: &[(&str, &str)]) -> Operator {
        let logs = bed().root.join("target/e2e-logs");
        std::fs::create_dir_all(&logs).expect("log dir");
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let log = logs.join(format!("operator-{}-{n}.log", std::process::id()));
        let file = std::fs::File::create(&log).expect("log file");
        let mut cmd = Command::new(binary);
        cmd.env("KUBECONFIG", &bed().kubeconfig)
            .env("FLOW_LEDGER_DIR", ledger_dir)
            .env("FLOW_SIDECAR_IMAGE", SIDECAR_IMAGE)
            .env("FLOW_KAFKA_CLUSTERS_NAMESPACE", "ankka-flow")
            .env("FLOW_LOG_FORMAT", "text")
            .env("RUST_LOG", "info,flow_operator=debug")
            // Any free port: several operators run at once (other tests, a second instance).
            .env("FLOW_METRICS_ADDRESS", "127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(file);
        let given = |k: &str| env.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let scope = given("FLOW_WATCH_NAMESPACE").unwrap_or("all");
        cmd.env("FLOW_LEASE_NAME", format!("ankka-flow-operator-{scope}"))
            .env("HOSTNAME", format!("flow-operator-{scope}-{}", std::process::id()));
        if given("FLOW_OPERATOR_NAMESPACE").is_none() {
            ensure_namespace("ankka-flow");
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        Operator { child: cmd.spawn().expect("flow-operator starts"), log }
    }

    /// The operator's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the process to exit by itself (a crash point), returning its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        wait_until("the operator to exit", timeout, || self.child.try_wait().ok().flatten()).code()
    }

    /// Stops it with SIGTERM and waits.
    pub fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = wait_until("the operator to stop", Duration::from_secs(20), || self.child.try_wait().ok().flatten());
    }

    /// The process id (to send it a signal, such as SIGSTOP).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if !self.running() {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if !self.running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address the operator serves `/metrics` and `/healthz` on, from its start-up log line (start it
/// with `FLOW_METRICS_ADDRESS=127.0.0.1:0` to get a free port).
pub fn metrics_address(op: &Operator) -> String {
    wait_until("the operator's metrics address", Duration::from_secs(30), || {
        let log = op.log_text();
        let line = log.lines().find(|l| l.contains("serving /metrics and /healthz"))?;
        let at = line.find("address=")? + "address=".len();
        Some(line[at..].split_whitespace().next()?.trim_matches('"').to_string())
    })
}

/// `GET path` over plain HTTP/1.0 from `addr`: the status code and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the operator's endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("response");
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

/// Sum of `ankka_flow_consumer_group_lag` series of consumer group `group` in a Prometheus text body
/// (one per namespace the group is an inlet's of), with the number of series.
pub fn lag_in_metrics(body: &str, group: &str) -> (i64, usize) {
    let needle = format!("consumergroup=\"{group}\"");
    body.lines()
        .filter(|l| l.starts_with("ankka_flow_consumer_group_lag{") && l.contains(&needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .fold((0, 0), |(sum, n), v| (sum + v, n + 1))
}

/// The value of the one series of `name` for consumer group `group` in a Prometheus text body;
/// `None` when there is none or more than one.
pub fn group_series(body: &str, name: &str, group: &str) -> Option<f64> {
    let (prefix, needle) = (format!("{name}{{"), format!("consumergroup=\"{group}\""));
    let mut values = body
        .lines()
        .filter(|l| l.starts_with(&prefix) && l.contains(&needle))
        .map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN));
    let value = values.next()?;
    values.next().is_none().then_some(value)
}
