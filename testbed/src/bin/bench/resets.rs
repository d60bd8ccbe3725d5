//! The reset table's rows: `flow reset` to done against Kafka's tool and the floor, and the timeline
//! of one reset.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use flow_core::names::{ANNOTATION_RESET, ANNOTATION_RESET_DONE};
use flow_testbed::bed;

use crate::groups::{check_reset, commit_all, kafka_tool_reset};
use crate::k8s::{apply, kubectl_must, pipeline_yaml, streamlet, wait_reconciled};
use crate::measure::{log_secs_of_day, max, median, min, ms_since, wall_secs_of_day};
use crate::op::Op;
use crate::{Args, Ctx, NS, PIPELINE, RECORDS, Stopped, floor};

/// One row of the reset table: `n` groups over `p` partitions, `flow reset` against Kafka's tool.
pub fn reset_row(args: &Args, cx: &Ctx, n: usize, p: i32) -> ResetRow {
    let topic = format!("bench.p{p}");
    let groups: Vec<String> = (0..n).map(|i| format!("{PIPELINE}.{}.in", streamlet(p, i))).collect();
    match args.stopped {
        Stopped::Never => {
            apply(&pipeline_yaml(PIPELINE, p, n, 0, "1"));
            wait_reconciled(Duration::from_secs(120));
        }
        Stopped::Before => {
            run_then_stop(p, n);
            // More than the operator's settle (1 s) since the pods went.
            std::thread::sleep(Duration::from_secs(2));
        }
        Stopped::Now => {}
    }
    let (mut flow_ms, mut request_ms) = (Vec::new(), Vec::new());
    for r in 0..args.reps {
        commit_all(&groups, &topic, p);
        if args.stopped == Stopped::Now {
            run_then_stop(p, n);
        }
        let (ms, from_request) = flow_reset(&cx.flow_bin);
        check_reset(&groups, &topic, p);
        eprintln!(
            "flow reset: {n} group(s), {p} partition(s), rep {r}: {ms:.0} ms ({from_request:.0} ms from the request annotation)"
        );
        flow_ms.push(ms);
        request_ms.push(from_request);
    }
    let loop_reps = if n <= args.loop_reps_max_groups { args.reps } else { 1 };
    let mut loop_ms = Vec::new();
    for r in 0..loop_reps {
        commit_all(&groups, &topic, p);
        let t = Instant::now();
        for g in &groups {
            kafka_tool_reset(&[g.as_str()], &topic);
        }
        let ms = ms_since(t);
        check_reset(&groups, &topic, p);
        eprintln!("kafka tool per group: {n} group(s), {p} partition(s), rep {r}: {ms:.0} ms");
        loop_ms.push(ms);
    }
    let mut all_ms = Vec::new();
    for r in 0..args.reps {
        commit_all(&groups, &topic, p);
        let t = Instant::now();
        let names: Vec<&str> = groups.iter().map(String::as_str).collect();
        kafka_tool_reset(&names, &topic);
        let ms = ms_since(t);
        check_reset(&groups, &topic, p);
        eprintln!("kafka tool all groups: {n} group(s), {p} partition(s), rep {r}: {ms:.0} ms");
        all_ms.push(ms);
    }
    let floor =
        floor::measure(&bed().kafka, &groups, &topic, i64::from(RECORDS), args.floor_reps, args.floor_connections);
    check_reset(&groups, &topic, p);
    eprintln!(
        "floor: {n} group(s), {p} partition(s): new client {:.1} ms, one connection {:.1} ms, {} connections {:.1} ms (medians of {})",
        floor.cold,
        median(&floor.one),
        floor.clients,
        median(&floor.spread),
        floor.spread.len()
    );
    ResetRow {
        groups: n,
        partitions: p,
        flow: median(&flow_ms),
        flow_min: flow_ms.iter().copied().fold(f64::INFINITY, f64::min),
        flow_max: flow_ms.iter().copied().fold(0.0, f64::max),
        flow_reps: flow_ms.len(),
        request: median(&request_ms),
        request_min: min(&request_ms),
        request_max: max(&request_ms),
        per_group: median(&loop_ms),
        per_group_reps: loop_ms.len(),
        all: median(&all_ms),
        all_min: min(&all_ms),
        all_max: max(&all_ms),
        floor,
    }
}

/// The bench pipeline's `n` streamlets run (one kwok pod each) and are stopped again: returns once
/// their pods are gone, as the seed's page waits before `flow reset`.
fn run_then_stop(p: i32, n: usize) {
    apply(&pipeline_yaml(PIPELINE, p, n, 1, "1"));
    wait_reconciled(Duration::from_secs(120));
    wait_pods(|pods| pods == n, "every streamlet's pod");
    apply(&pipeline_yaml(PIPELINE, p, n, 0, "1"));
    wait_reconciled(Duration::from_secs(120));
    wait_pods(|pods| pods == 0, "no pod");
}

/// Polls the bench namespace's pods (every 20 ms) until their number satisfies `ok`.
pub fn wait_pods(ok: impl Fn(usize) -> bool, what: &str) {
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        let pods = kubectl_must(&["-n", NS, "get", "pods", "-o", "name"]).lines().count();
        if ok(pods) {
            return;
        }
        assert!(Instant::now() < end, "{what} within 120 s ({pods} pods)");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many lines of the operator's log a trace keeps: a reset logs about 7 lines per group at
/// debug level (367 for 50 groups over 500 partitions), so this keeps a 200-group reset whole.
const TRACE_LOG_LINES: usize = 2000;

/// One more `flow reset` of `n` groups over `p` partitions, with the resource's changes as a watch
/// sees them and the operator's log lines of that window, as markdown.
pub fn trace_reset(cx: &Ctx, op: &Op, n: usize, p: i32) -> String {
    let topic = format!("bench.p{p}");
    let groups: Vec<String> = (0..n).map(|i| format!("{PIPELINE}.{}.in", streamlet(p, i))).collect();
    commit_all(&groups, &topic, p);
    // The resource as JSON on every change; parsed on a thread, with the instant each one arrived.
    let mut watch: Child = Command::new("kubectl")
        .args(["-n", NS, "get", "aflow", PIPELINE, "--watch", "-o", "json"])
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl --watch");
    let (tx, rx) = mpsc::channel::<(Instant, serde_json::Value)>();
    let stdout = watch.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for v in serde_json::Deserializer::from_reader(stdout).into_iter::<serde_json::Value>() {
            let Ok(v) = v else { break };
            if tx.send((Instant::now(), v)).is_err() {
                break;
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("the watch's first object");
    let log_before = std::fs::read_to_string(op.log()).unwrap_or_default().len();
    let wall0 = wall_secs_of_day(SystemTime::now());
    let mut seen: Vec<(Instant, serde_json::Value)> = Vec::new();
    let (t0, ms) = reset_until_done(
        &cx.flow_bin,
        &rx,
        |v| v["metadata"]["annotations"][ANNOTATION_RESET_DONE].as_str().map(str::to_string),
        |at, v| seen.push((at, v.clone())),
    );
    // The operator goes on after the done annotation (final status, events, the catch-up follower);
    // give it a moment so the timeline shows that too.
    let end = Instant::now() + Duration::from_secs(3);
    while let Ok((at, v)) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
        seen.push((at, v));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    check_reset(&groups, &topic, p);
    // How big the resource is that every status write carries, at the end.
    let size = |v: &serde_json::Value| serde_json::to_string(v).map_or(0, |s| s.len()) as f64 / 1024.0;
    let last = seen.last().map(|(_, v)| v.clone()).unwrap_or_default();
    let sizes = format!(
        "At the end the resource is {:.0} KiB of JSON: `status.reset` {:.0} KiB, `metadata.managedFields` {:.0} KiB, `spec` {:.0} KiB.",
        size(&last),
        size(&last["status"]["reset"]),
        size(&last["metadata"]["managedFields"]),
        size(&last["spec"])
    );
    let mut md = format!(
        "### Timeline of one `flow reset`, {n} groups over {p} partitions ({ms:.0} ms to the done annotation)\n\n{sizes}\n\n\
         Every change of the resource that a `kubectl get --watch -o json` saw, in ms from starting `flow reset`: \
         the id in the request annotation, the reset's phase, how many groups had each outcome in `status.reset.groups`, \
         and the id in the done annotation.\n\n\
         | ms | request annotation | reset phase | groups by outcome | done annotation |\n|---:|---|---|---|---|\n"
    );
    for (at, v) in &seen {
        let reset = &v["status"]["reset"];
        let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
        for g in reset["groups"].as_array().into_iter().flatten() {
            *outcomes.entry(g["outcome"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        }
        let outcomes = outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
        let done = v["metadata"]["annotations"][ANNOTATION_RESET_DONE].as_str().unwrap_or("");
        let request = v["metadata"]["annotations"][ANNOTATION_RESET]
            .as_str()
            .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
            .and_then(|r| r["id"].as_str().map(str::to_string))
            .unwrap_or_default();
        md.push_str(&format!(
            "| {:.0} | {} | {} | {} | {} |\n",
            signed_ms(*at, t0),
            request.get(..8).unwrap_or(&request),
            reset["phase"].as_str().unwrap_or(""),
            outcomes,
            done.get(..8).unwrap_or(done)
        ));
    }
    let log = std::fs::read_to_string(op.log()).unwrap_or_default();
    let window = log.get(log_before..).unwrap_or_default();
    let reconciled = "flow_operator::controller: reconciled";
    let lines: Vec<String> = window
        .lines()
        .filter(|l| !l.contains(reconciled))
        .map(|l| match l.split_once(' ').and_then(|(ts, rest)| Some((log_secs_of_day(ts)?, rest))) {
            Some((s, rest)) => format!("{:>7.0} ms {}", (s - wall0) * 1000.0, rest.trim_start()),
            None => l.to_string(),
        })
        .collect();
    md.push_str(&format!(
        "\nThe operator's log of that window ({} lines, without the {} `reconciled` lines), in ms from starting `flow reset`:\n\n```text\n",
        lines.len(),
        window.matches(reconciled).count()
    ));
    for l in lines.iter().take(TRACE_LOG_LINES) {
        md.push_str(l);
        md.push('\n');
    }
    if lines.len() > TRACE_LOG_LINES {
        md.push_str(&format!("... {} more lines in the log\n", lines.len() - TRACE_LOG_LINES));
    }
    md.push_str("```\n");
    let path = cx.out_dir.join(format!("trace-{n}g-{p}p.md"));
    std::fs::write(&path, &md).expect("write the trace");
    eprintln!("trace written to {}", path.display());
    md
}

pub fn signed_ms(at: Instant, t0: Instant) -> f64 {
    if at >= t0 {
        at.duration_since(t0).as_secs_f64() * 1000.0
    } else {
        -(t0.duration_since(at).as_secs_f64() * 1000.0)
    }
}

/// Runs `flow reset`, then waits (a `kubectl --watch` of the resource, so no polling delay) until
/// the done annotation holds the request's id; returns the milliseconds from starting `flow reset`,
/// and from the watch's first sight of the new request annotation.
pub fn flow_reset(flow_bin: &Path) -> (f64, f64) {
    let path = format!(
        "jsonpath={{.metadata.annotations.{}}}{{\" done=\"}}{{.metadata.annotations.{}}}{{\"\\n\"}}",
        ANNOTATION_RESET.replace('.', "\\."),
        ANNOTATION_RESET_DONE.replace('.', "\\.")
    );
    let mut watch: Child = Command::new("kubectl")
        .args(["-n", NS, "get", "aflow", PIPELINE, "--watch", "-o", &path])
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl --watch");
    let (tx, rx) = mpsc::channel::<(Instant, String)>();
    let stdout = watch.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    // The first line is the current state: the watch is established.
    let (_, first) = rx.recv_timeout(Duration::from_secs(30)).expect("the watch's first line");
    // kubectl pads a tab in a watch's output, so the two annotations are told apart by a marker.
    let request_of = |line: &str| line.split_once(" done=").map_or(line, |(r, _)| r).to_string();
    let before = request_of(&first);
    let mut requested: Option<Instant> = None;
    let (t, ms) = reset_until_done(
        flow_bin,
        &rx,
        |line| line.split_once(" done=").map(|(_, d)| d.trim().to_string()),
        |at, line| {
            if requested.is_none() && request_of(line) != before {
                requested = Some(at);
            }
        },
    );
    let _ = watch.kill();
    let _ = watch.wait();
    let from_request = requested.map_or(f64::NAN, |r| ms - r.duration_since(t).as_secs_f64() * 1000.0);
    (ms, from_request)
}

/// Starts `flow reset`, then reads `rx` (a watch of the resource) until `done_of` an item is the
/// request's id, passing every item to `each`; returns the instant the CLI was started and the ms
/// from then to the item that showed the done annotation.
pub fn reset_until_done<T>(
    flow_bin: &Path,
    rx: &mpsc::Receiver<(Instant, T)>,
    done_of: impl Fn(&T) -> Option<String>,
    mut each: impl FnMut(Instant, &T),
) -> (Instant, f64) {
    let t = Instant::now();
    let o = Command::new(flow_bin).args(["reset", PIPELINE, "-n", NS]).output().expect("flow runs");
    assert!(o.status.success(), "flow reset failed: {}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let id = stdout.split_whitespace().last().expect("the request id").to_string();
    let end = t + Duration::from_secs(600);
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let (at, item) = rx.recv_timeout(left).expect("the done annotation within 600 s");
        each(at, &item);
        if done_of(&item).is_some_and(|d| d == id) {
            return (t, at.duration_since(t).as_secs_f64() * 1000.0);
        }
    }
}

/// One row of the reset table: `groups` groups over `partitions` partitions, medians and spreads in ms.
pub struct ResetRow {
    pub groups: usize,
    pub partitions: i32,
    pub flow: f64,
    pub flow_min: f64,
    pub flow_max: f64,
    pub flow_reps: usize,
    /// From the watch's first sight of the request annotation to the done annotation.
    pub request: f64,
    pub request_min: f64,
    pub request_max: f64,
    pub per_group: f64,
    pub per_group_reps: usize,
    pub all: f64,
    pub all_min: f64,
    pub all_max: f64,
    pub floor: floor::Floor,
}
