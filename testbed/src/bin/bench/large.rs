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
use crate::measure::{broker_cpu_secs, max, median, min, ms_since};
use crate::op::Op;
use crate::resets::{reset_until_done, signed_ms, wait_pods};
use crate::{Args, Ctx, NS, PIPELINE, RECORDS, Stopped, floor};

/// Streamlets of the large pipeline; its groups are spread evenly over them, one inlet each.
const STREAMLETS: usize = 10;

/// What one large reset measured.
pub struct LargeRow {
    pub groups: usize,
    pub partitions: i32,
    /// From starting `flow reset` to the done annotation (median of the repetitions).
    pub to_done_ms: f64,
    /// From the watch's first sight of the request annotation to the done annotation, each repetition.
    pub request_ms: Vec<f64>,
    /// How the streamlets stopped before the request (`--stopped`).
    pub stopped: Stopped,
    /// Kafka's tool, every group in one call.
    pub tool_ms: f64,
    /// The floor over up to `--floor-connections` connected clients (median).
    pub floor_ms: f64,
    /// CPU seconds per reset, from starting `flow reset` to the done annotation (median): the
    /// operator's and the broker's.
    pub cpu: (f64, f64),
    /// CPU seconds per round of the floor (median): its client's and the broker's.
    pub floor_cpu: (f64, f64),
    pub before: usize,
    pub during: usize,
    pub after: usize,
    /// Changes the watch saw from the last repetition's request to its done annotation.
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

/// `--large-reps` resets of `groups` groups over `partitions` partitions, measured (time and CPU),
/// with Kafka's tool and the floor beside them.
pub fn large_reset(args: &Args, cx: &Ctx, op: &Op, groups: usize, partitions: i32) -> LargeRow {
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
    let mut last_request = request_of(&first);
    let mut during = before;
    let mut largest = first.clone();
    let (mut to_done, mut request_ms, mut cpu, mut writes) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for rep in 0..args.large_reps.max(1) {
        eprintln!("large reset {}: committing {groups} groups on {partitions} partitions", rep + 1);
        commit_all(&names, &topic, partitions);
        if args.stopped == Stopped::Before {
            std::thread::sleep(Duration::from_secs(2));
        }
        // Changes since the last reset (its catch-up) are not this one's.
        while let Ok((_, (size, v))) = rx.try_recv() {
            keep_largest(&mut during, &mut largest, size, &v);
            last_request = request_of(&v);
        }
        let old_request = last_request.clone();
        let mut requested: Option<Instant> = None;
        writes = 0;
        let (op_cpu, broker_cpu) = (op.cpu_secs(), broker_cpu_secs());
        let (t0, ms) = reset_until_done(
            &cx.flow_bin,
            &rx,
            |(_, v)| v["metadata"]["annotations"][ANNOTATION_RESET_DONE].as_str().map(str::to_string),
            |at, (size, v)| {
                keep_largest(&mut during, &mut largest, *size, v);
                writes += 1;
                last_request = request_of(v);
                if requested.is_none() && last_request != old_request {
                    requested = Some(at);
                }
            },
        );
        cpu.push((op.cpu_secs() - op_cpu, broker_cpu_secs() - broker_cpu));
        let from_request = requested.map_or(f64::NAN, |r| ms - signed_ms(r, t0));
        eprintln!("large reset {}: done after {ms:.0} ms ({from_request:.0} ms from the request)", rep + 1);
        to_done.push(ms);
        request_ms.push(from_request);
        check_reset(&names, &topic, partitions);
    }
    // The catch-up writes each group's lag into the status within a lag interval (10 s).
    eprintln!("large reset: waiting for the catch-up to be measured");
    let mut after = during;
    let end = Instant::now() + Duration::from_secs(25);
    while let Ok((_, (size, v))) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
        keep_largest(&mut during, &mut largest, size, &v);
        after = size;
    }
    // The largest object seen, to read what makes it so.
    let path = cx.out_dir.join(format!("large-{groups}x{partitions}-largest.json"));
    let _ = std::fs::write(&path, serde_json::to_string_pretty(&largest).unwrap_or_default());
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
        args.floor_reps.min(5),
        args.floor_connections,
    );
    check_reset(&names, &topic, partitions);
    let floor_ms = median(&floor.spread);
    eprintln!("large reset: floor over {} connections: {floor_ms:.0} ms", floor.clients);
    let medians = |v: &[(f64, f64)]| {
        (median(&v.iter().map(|c| c.0).collect::<Vec<_>>()), median(&v.iter().map(|c| c.1).collect::<Vec<_>>()))
    };
    LargeRow {
        groups,
        partitions,
        to_done_ms: median(&to_done),
        request_ms,
        stopped: args.stopped,
        tool_ms,
        floor_ms,
        cpu: medians(&cpu),
        floor_cpu: medians(&floor.spread_cpu),
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
         `flow reset` of every group of a pipeline whose inlets all read one topic, repeated (the groups set back \
         before each), beside Kafka's tool (every group in one call) and the floor on the same groups in the same \
         run. \"request to done\" runs from the watch's first sight of the request to the done annotation: the \
         median of the repetitions, with the fastest and slowest. CPU: seconds of CPU time from starting `flow \
         reset` to the done annotation, of the operator and of the broker (median per reset), and the same of a \
         round of the floor, its client and the broker. Size: the AnkkaFlow as JSON with its managed fields, as \
         `kubectl get -o json --show-managed-fields` prints it (what etcd stores is a little smaller); before the \
         first request, the largest any change showed, and after the last catch-up was written into the status; \
         changes seen: from the last request to its done annotation.\n\n\
         | groups | partitions | streamlets stopped | resets | `flow reset` to done (ms) | request to done (ms) | floor (ms) | request to done / floor | Kafka tool, all groups in one call (ms) | tool / request to done | CPU s, operator / broker | CPU s, floor's client / broker | KiB before | KiB during (max) | KiB after | changes seen |\n\
         |---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let request = median(&r.request_ms);
        t += &format!(
            "| {} | {} | {} | {} | {:.0} | {:.0} [{:.0}-{:.0}] | {:.0} | {:.1} | {:.0} | {:.1} | {:.2} / {:.2} | {:.2} / {:.2} | {} | {} | {} | {} |\n",
            r.groups,
            r.partitions,
            match r.stopped {
                Stopped::Never => "never ran",
                Stopped::Before => "long before",
                Stopped::Now => "just now",
            },
            r.request_ms.len(),
            r.to_done_ms,
            request,
            min(&r.request_ms),
            max(&r.request_ms),
            r.floor_ms,
            request / r.floor_ms,
            r.tool_ms,
            r.tool_ms / request,
            r.cpu.0,
            r.cpu.1,
            r.floor_cpu.0,
            r.floor_cpu.1,
            kib(r.before),
            kib(r.during),
            kib(r.after),
            r.writes
        );
    }
    t
}

/// Keeps `v` in `largest` when its size is the largest seen so far.
fn keep_largest(during: &mut usize, largest: &mut serde_json::Value, size: usize, v: &serde_json::Value) {
    if size > *during {
        *during = size;
        *largest = v.clone();
    }
}
