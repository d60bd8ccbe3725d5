//! The large reset: one `flow reset` of many groups over one topic of many partitions (200 groups
//! over 1,000 partitions by default), its time to the done annotation, and the size of the
//! AnkkaFlow, with its managed fields, before, during (the largest a watch saw) and after (once the
//! catch-up has been measured into the status).

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flow_core::names::ANNOTATION_RESET_DONE;
use flow_testbed::{bed, kafka, kubectl};

use crate::groups::{check_reset, commit_all};
use crate::k8s::{apply, wait_reconciled};
use crate::resets::reset_until_done;
use crate::{Ctx, NS, PIPELINE, RECORDS};

/// Streamlets of the large pipeline; its groups are spread evenly over them, one inlet each.
const STREAMLETS: usize = 10;

/// What one large reset measured.
pub struct LargeRow {
    pub groups: usize,
    pub partitions: i32,
    pub to_done_ms: f64,
    pub before: usize,
    pub during: usize,
    pub after: usize,
    pub writes: usize,
}

/// The large pipeline: [`STREAMLETS`] stopped streamlets whose inlets `i<j>` all read
/// `bench.p<partitions>`, `groups` inlets in all (groups `bench.l<s>.i<j>`).
fn large_yaml(partitions: i32, groups: usize) -> (String, Vec<String>) {
    flow_testbed::inlets_pipeline_yaml(NS, PIPELINE, &format!("bench.p{partitions}"), "shop", groups, STREAMLETS)
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
    large_yaml(partitions, groups).1
}

/// One reset of `groups` groups over `partitions` partitions, measured.
pub fn large_reset(cx: &Ctx, groups: usize, partitions: i32) -> LargeRow {
    let topic = format!("bench.p{partitions}");
    kafka::recreate_topic(&topic, partitions);
    kafka::produce(&topic, partitions, RECORDS);
    let (yaml, names) = large_yaml(partitions, groups);
    let _ = kubectl(&["-n", NS, "delete", "aflow", PIPELINE, "--ignore-not-found", "--wait=true", "--timeout=120s"]);
    apply(&yaml);
    wait_reconciled(Duration::from_secs(120));
    eprintln!("large reset: committing {groups} groups on {partitions} partitions");
    commit_all(&names, &topic, partitions);
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
    let (_, (before, _)) = rx.recv_timeout(Duration::from_secs(30)).expect("the watch's first object");
    let mut during = before;
    let mut writes = 0;
    let (_, to_done_ms) = reset_until_done(
        &cx.flow_bin,
        &rx,
        |(_, v)| v["metadata"]["annotations"][ANNOTATION_RESET_DONE].as_str().map(str::to_string),
        |_, (size, _)| {
            during = during.max(*size);
            writes += 1;
        },
    );
    eprintln!("large reset: done after {to_done_ms:.0} ms; waiting for the catch-up to be measured");
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
    LargeRow { groups, partitions, to_done_ms, before, during, after, writes }
}

/// The large reset as markdown.
pub fn render(rows: &[LargeRow]) -> String {
    let kib = |b: usize| format!("{:.1}", b as f64 / 1024.0);
    let mut t = String::from(
        "### Large reset: the resource stays small\n\n\
         One `flow reset` of every group of a pipeline whose inlets all read one topic. Size: the AnkkaFlow as JSON \
         with its managed fields, as `kubectl get -o json --show-managed-fields` prints it (what etcd stores is a \
         little smaller); before the request, the largest any change showed during it, and after the catch-up was \
         written into the status.\n\n\
         | groups | partitions | `flow reset` to done (ms) | KiB before | KiB during (max) | KiB after | changes seen |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        t += &format!(
            "| {} | {} | {:.0} | {} | {} | {} | {} |\n",
            r.groups,
            r.partitions,
            r.to_done_ms,
            kib(r.before),
            kib(r.during),
            kib(r.after),
            r.writes
        );
    }
    t
}
