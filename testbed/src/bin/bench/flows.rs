//! The AnkkaFlows table: the operator's memory, CPU and reconcile time with many AnkkaFlows, and after
//! a restart.

use std::time::{Duration, Instant};

use crate::k8s::{FlowWatch, apply, kubectl_must, pipeline_yaml, running_pods, wait_no_pods};
use crate::measure::ms_since;
use crate::{Args, Ctx, NS};

/// One row of the AnkkaFlows table: `n` AnkkaFlows, each one streamlet at replicas 1 (a kwok pod).
pub fn flows_row(args: &Args, cx: &mut Ctx, n: usize) -> FlowsRow {
    let p = args.partitions.first().copied().unwrap_or(3);
    let docs = |version: &str| -> String {
        (0..n).map(|i| pipeline_yaml(&format!("bench-f{i}"), p, 1, 1, version)).collect::<Vec<_>>().join("---\n")
    };
    let mut op = cx.start_op(&format!("flows{n}"));
    std::thread::sleep(Duration::from_secs(3));
    let idle_rss = op.rss_kib();

    let watch = FlowWatch::start();
    let t = Instant::now();
    apply(&docs("1"));
    let apply_ms = ms_since(t);
    let (reconciled, ready) = watch.wait(n, t, Duration::from_secs(1200));
    drop(watch);
    let pods = running_pods();
    let cpu_to_ready = op.cpu_secs();
    eprintln!(
        "{n} flows: kubectl apply {apply_ms:.0} ms, all reconciled {reconciled:.0} ms, all Ready {ready:.0} ms, {pods} pods Running"
    );
    let reconciles = total(&op.counters("ankka_flow_reconciles_total", "outcome"));
    std::thread::sleep(Duration::from_secs(5));
    let cpu0 = op.cpu_secs();
    let sent0 = op.counters("ankka_flow_kafka_requests_total", "request");
    std::thread::sleep(Duration::from_secs(args.cpu_window));
    let cpu_window = op.cpu_secs() - cpu0;
    // What the Kafka clients sent over the window (no reset runs: the lag sampler alone), per lag
    // interval, by request type.
    let intervals = args.cpu_window as f64 / LAG_INTERVAL_SECONDS;
    let lag_requests: Vec<(String, f64)> = op
        .counters("ankka_flow_kafka_requests_total", "request")
        .into_iter()
        .map(|(request, n)| {
            let before = sent0.get(&request).copied().unwrap_or(0.0);
            (request, (n - before) / intervals)
        })
        .filter(|(_, n)| *n > 0.0)
        .collect();
    let (rss, hwm) = (op.rss_kib(), op.hwm_kib());
    eprintln!(
        "{n} flows: RSS {rss} KiB (peak {hwm} KiB), CPU {cpu_window:.2} s over {} s, Kafka requests per lag interval {lag_requests:?}",
        args.cpu_window
    );

    op.stop();
    // Bump every resource's generation while the operator is down, so that the restarted one has to
    // reconcile each of them again (the version is not in the Deployments: no pod changes).
    let t = Instant::now();
    apply(&docs("2"));
    let reapply_ms = ms_since(t);
    let watch = FlowWatch::start();
    let t = Instant::now();
    op = cx.start_op(&format!("flows{n}-restart"));
    let (restart_reconciled, restart_ready) = watch.wait(n, t, Duration::from_secs(1200));
    drop(watch);
    let restart_cpu = op.cpu_secs();
    let restart_reconciles = total(&op.counters("ankka_flow_reconciles_total", "outcome"));
    eprintln!(
        "{n} flows: restart, all reconciled {restart_reconciled:.0} ms, all Ready {restart_ready:.0} ms, {restart_reconciles:.0} reconciles"
    );
    // Read after as long a quiet time as the RSS with all Ready above (5 s and the CPU window), so
    // that the two compare: the Kafka calls' blocking threads, for one, end 10 s after their last call.
    std::thread::sleep(Duration::from_secs(5 + args.cpu_window));
    let (restart_rss, restart_hwm) = (op.rss_kib(), op.hwm_kib());
    op.stop();

    let t = Instant::now();
    // Not `--wait`: kubectl then waits for the resources one by one, which takes minutes for 1,000.
    kubectl_must(&["-n", NS, "delete", "aflow", "--all", "--wait=false"]);
    wait_no_pods(Duration::from_secs(900));
    let delete_ms = ms_since(t);
    eprintln!("{n} flows: deleted, pods gone after {delete_ms:.0} ms");
    FlowsRow {
        flows: n,
        pods,
        idle_rss,
        apply_ms,
        reconciled,
        ready,
        cpu_to_ready,
        rss,
        hwm,
        cpu_window,
        reapply_ms,
        restart_reconciled,
        restart_ready,
        restart_cpu,
        restart_rss,
        restart_hwm,
        delete_ms,
        reconciles,
        restart_reconciles,
        lag_requests,
    }
}

/// The operator's lag interval (its default, `FLOW_LAG_INTERVAL_SECONDS`), in seconds.
const LAG_INTERVAL_SECONDS: f64 = 10.0;

fn total(counts: &std::collections::BTreeMap<String, f64>) -> f64 {
    counts.values().sum()
}

/// One row of the AnkkaFlows table: `flows` pipelines, their pods, and what the operator took.
pub struct FlowsRow {
    pub flows: usize,
    pub pods: usize,
    pub idle_rss: u64,
    pub apply_ms: f64,
    pub reconciled: f64,
    pub ready: f64,
    pub cpu_to_ready: f64,
    pub rss: u64,
    pub hwm: u64,
    pub cpu_window: f64,
    pub reapply_ms: f64,
    pub restart_reconciled: f64,
    pub restart_ready: f64,
    pub restart_cpu: f64,
    pub restart_rss: u64,
    pub restart_hwm: u64,
    pub delete_ms: f64,
    /// Reconciles from the start until all were reconciled after the apply.
    pub reconciles: f64,
    /// Reconciles from the restart until all were reconciled.
    pub restart_reconciles: f64,
    /// Requests to the brokers per lag interval with all Ready, by request type.
    pub lag_requests: Vec<(String, f64)>,
}
