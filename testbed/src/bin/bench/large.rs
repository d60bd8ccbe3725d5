//! The large reset: one `flow reset` of many groups over one topic of many partitions (200 groups
//! over 1,000 partitions by default), its time to the done annotation, and the size of the
//! AnkkaFlow, with its managed fields, before, during (the largest a watch saw) and after (once the
//! catch-up has been measured into the status). Beside it, in the same run and on the same groups,
//! Kafka's own tool (every group in one call) and the floor (`floor.rs`), so that the operator's time
//! reads against both; `--stopped before` runs the streamlets once and stops them first, the seed's path.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flow_core::names::{ANNOTATION_RESET, ANNOTATION_RESET_DONE};
use flow_testbed::{bed, kafka, kubectl};

use crate::groups::{check_reset, commit_all, kafka_tool_reset};
use crate::k8s::{apply, wait_reconciled};
use crate::measure::{median, ms_since};
use crate::resets::{reset_until_done, signed_ms, wait_pods};
use crate::{Args, Ctx, NS, PIPELINE, RECORDS, Stopped, floor};

/// Streamlets of the large pipeline; its groups are spread evenly over them, one inlet each.
const STREAMLETS: usize = 10;

/// What one large reset measured.
pub struct LargeRow {
    pub groups: usize,
    pub partitions: i32,
    pub to_done_ms: f64,
    /// From the watch's first sight of the request annotation to the done annotation.
    pub request_ms: f64,
    /// How the streamlets stopped before the request (`--stopped`).
    pub stopped: Stopped,
    /// Kafka's tool, every group in one call.
    pub tool_ms: f64,
    /// The floor over up to `--floor-connections` connected clients (median).
    pub floor_ms: f64,
    pub before: usize,
    pub during: usize,
    pub after: usize,
    pub writes: usize,
}

/// The large pipeline: [`STREAMLETS`] stopped streamlets whose inlets `i<j>` all read
/// `bench.p<partitions>`, `groups` inlets in all (groups `bench.l<s>.i<j>`).
fn large_yaml(partitions: i32, groups: usize, replicas: i32) -> (String, Vec<String>) {
    flow_testbed::inlets_pipeline_yaml_at(
        NS,
        PIPELINE,
        &format!("bench.p{partitions}"),
        "shop",
        groups,
        STREAMLETS,
        replicas,
    )
}

/// The `<groups>x<partitions>` of `--large`; panics on a malformed one.
pub fn sizes(specs: &[String]) -> Vec<(usize, i32)> {
    specs
        .iter()
        .map(|s| {
            let (g, p) = s.split_once('x').expect("--large <groups>x<partitions>, e.g. 200x1000");
            (g.parse().expect("groups"), p.parse().expect("partitions"))
        })
        .collect()
}

/// The groups of the large pipeline of `groups` groups.
pub fn group_names(partitions: i32, groups: usize) -> Vec<String> {
    large_yaml(partitions, groups, 0).1
}

/// One reset of `groups` groups over `partitions` partitions, measured, with Kafka's tool and the
/// floor beside it.
pub fn large_reset(args: &Args, cx: &Ctx, groups: usize, partitions: i32) -> LargeRow {
    let topic = format!("bench.p{partitions}");
    kafka::recreate_topic(&topic, partitions);
    kafka::produce(&topic, partitions, RECORDS);
    let _ = kubectl(&["-n", NS, "delete", "aflow", PIPELINE, "--ignore-not-found", "--wait=true", "--timeout=120s"]);
    let (yaml, names) = large_yaml(partitions, groups, 0);
    if args.stopped != Stopped::Never {
        // The seed's path: the streamlets ran (one kwok pod each) and stopped, their pods gone
        // more than the settle (1 s) before the request.
        let streamlets = groups.min(STREAMLETS);
        apply(&large_yaml(partitions, groups, 1).0);
        wait_reconciled(Duration::from_secs(120));
        wait_pods(|pods| pods == streamlets, "every streamlet's pod");
        apply(&yaml);
        wait_reconciled(Duration::from_secs(120));
        wait_pods(|pods| pods == 0, "no pod");
    } else {
        apply(&yaml);
        wait_reconciled(Duration::from_secs(120));
    }
    eprintln!("large reset: committing {groups} groups on {partitions} partitions");
    commit_all(&names, &topic, partitions);
    if args.stopped == Stopped::Before {
        std::thread::sleep(Duration::from_secs(2));
    }
    // The stored object as JSON, managed fields included, on every change.
    let mut watch: Child = Command::new("kubectl")
        .args(["-n", NS, "get", "aflow", PIPELINE, "--watch", "-o", "json", "--show-managed-fields"])
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl --watch");
    let (tx, rx) = mpsc::channel::<(Instant, (usize, serde_json::Value))>();
    let stdout = watch.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for v in serde_json::Deserializer::from_reader(stdout).into_iter::<serde_json::Value>() {
            let Ok(v) = v else { break };
            let size = serde_json::to_string(&v).map_or(0, |s| s.len());
            if tx.send((Instant::now(), (size, v))).is_err() {
                break;
            }
        }
    });
    let (_, (before, first)) = rx.recv_timeout(Duration::from_secs(30)).expect("the watch's first object");
    let request_of =
        |v: &serde_json::Value| v["metadata"]["annotations"][ANNOTATION_RESET].as_str().map(str::to_string);
    let old_request = request_of(&first);
    let mut during = before;
    let mut writes = 0;
    let mut requested: Option<Instant> = None;
    let (t0, to_done_ms) = reset_until_done(
        &cx.flow_bin,
        &rx,
        |(_, v)| v["metadata"]["annotations"][ANNOTATION_RESET_DONE].as_str().map(str::to_string),
        |at, (size, v)| {
            during = during.max(*size);
            writes += 1;
            if requested.is_none() && request_of(v) != old_request {
                requested = Some(at);
            }
        },
    );
    let request_ms = requested.map_or(f64::NAN, |r| to_done_ms - signed_ms(r, t0));
    eprintln!(
        "large reset: done after {to_done_ms:.0} ms ({request_ms:.0} ms from the request); waiting for the catch-up to be measured"
    );
    // The catch-up writes each group's lag into the status within a lag interval (10 s).
    let mut after = during;
    let end = Instant::now() + Duration::from_secs(25);
    while let Ok((_, (size, _))) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
        during = during.max(size);
        after = size;
        writes += 1;
    }
    let _ = watch.kill();
    let _ = watch.wait();
    check_reset(&names, &topic, partitions);
    // Kafka's tool on the same groups: every group in one call (one JVM).
    commit_all(&names, &topic, partitions);
    let t = Instant::now();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    kafka_tool_reset(&refs, &topic);
    let tool_ms = ms_since(t);
    check_reset(&names, &topic, partitions);
    eprintln!("large reset: Kafka's tool, all groups in one call: {tool_ms:.0} ms");
    // The floor: a few rounds only, each sets every group back first.
    let floor = floor::measure(
        &bed().kafka,
        &names,
        &topic,
        i64::from(RECORDS),
        args.floor_reps.min(3),
        args.floor_connections,
    );
    check_reset(&names, &topic, partitions);
    let floor_ms = median(&floor.spread);
    eprintln!("large reset: floor over {} connections: {floor_ms:.0} ms", floor.clients);
    LargeRow {
        groups,
        partitions,
        to_done_ms,
        request_ms,
        stopped: args.stopped,
        tool_ms,
        floor_ms,
        before,
        during,
        after,
        writes,
    }
}

/// The large reset as markdown.
pub fn render(rows: &[LargeRow]) -> String {
    let kib = |b: usize| format!("{:.1}", b as f64 / 1024.0);
    let mut t = String::from(
        "### Large reset: near the floor, and the resource stays small\n\n\
         One `flow reset` of every group of a pipeline whose inlets all read one topic, beside Kafka's tool (every \
         group in one call) and the floor on the same groups in the same run. \"request to done\" runs from the \
         watch's first sight of the request to the done annotation. Size: the AnkkaFlow as JSON with its managed \
         fields, as `kubectl get -o json --show-managed-fields` prints it (what etcd stores is a little smaller); \
         before the request, the largest any change showed during it, and after the catch-up was written into the \
         status.\n\n\
         | groups | partitions | streamlets stopped | `flow reset` to done (ms) | request to done (ms) | Kafka tool, all groups in one call (ms) | floor (ms) | request to done / floor | tool / request to done | KiB before | KiB during (max) | KiB after | changes seen |\n\
         |---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        t += &format!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {} | {} | {} | {} |\n",
            r.groups,
            r.partitions,
            match r.stopped {
                Stopped::Never => "never ran",
                Stopped::Before => "long before",
                Stopped::Now => "just now",
            },
            r.to_done_ms,
            r.request_ms,
            r.tool_ms,
            r.floor_ms,
            r.request_ms / r.floor_ms,
            r.tool_ms / r.request_ms,
            kib(r.before),
            kib(r.during),
            kib(r.after),
            r.writes
        );
    }
    t
}
