//! The test bed's coordinates, the lock that keeps end-to-end tests apart, the workspace's binaries,
//! and waiting on a condition.

use std::path::PathBuf;
use std::process::Output;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// The test bed's coordinates.
#[derive(Debug)]
pub struct Bed {
    /// Kafka bootstrap servers.
    pub kafka: String,
    /// Kubeconfig path.
    pub kubeconfig: PathBuf,
    /// Repository root.
    pub root: PathBuf,
    /// Where the workspace's binaries are.
    pub bin_dir: PathBuf,
}

/// The test bed, from the environment; panics with what to do when it is not set up.
pub fn bed() -> &'static Bed {
    static BED: OnceLock<Bed> = OnceLock::new();
    BED.get_or_init(|| {
        let need = |k: &str| {
            std::env::var(k).unwrap_or_else(|_| {
                panic!("{k} is not set: start the test bed and load its settings with `testbed/tb up && eval \"$(testbed/tb env)\"`, or run `make test`")
            })
        };
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = std::env::var("CARGO_TARGET_DIR").map_or_else(|_| root.join("target"), PathBuf::from);
        let kafka = need("FLOW_TESTBED_KAFKA");
        group_coordinator_ready(&kafka);
        Bed { kafka, kubeconfig: PathBuf::from(need("KUBECONFIG")), bin_dir: target.join("debug"), root }
    })
}

/// Waits until the broker's group coordinator answers. On a fresh broker the first group request
/// creates and loads `__consumer_offsets`, and until then group calls answer "coordinator load in
/// progress"; tests must not mistake that for a result.
fn group_coordinator_ready(kafka: &str) {
    let group = "flow-testbed-warm-up";
    let c: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", kafka).set("group.id", group).create().expect("consumer");
    wait_until("the broker's group coordinator", Duration::from_secs(120), || {
        // An offset fetch goes through the coordinator, which creates and loads __consumer_offsets.
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(group, 0);
        c.committed_offsets(tpl, Duration::from_secs(5)).ok()?;
        c.fetch_group_list(Some(group), Duration::from_secs(5)).ok().map(|_| ())
    });
}

/// The end-to-end tests' lock, `e2e.lock` in the test bed's run directory, opened for locking. One
/// file for every test binary, `cargo test` run and worktree on the test bed; the OS drops a lock
/// when its process ends.
fn e2e_lock_file() -> std::fs::File {
    lock_file("e2e.lock")
}

/// A lock file `name` in the test bed's run directory, opened for locking.
fn lock_file(name: &str) -> std::fs::File {
    let run = std::env::var_os("FLOW_TESTBED_RUN").map_or_else(|| bed().root.join("target/testbed"), PathBuf::from);
    let path = run.join(name);
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()))
}

/// Runs an end-to-end test alone: no other end-to-end test runs beside it, in this process or any
/// other on the test bed. Within a test binary by a mutex; across test binaries and runs
/// (several worktrees, `tb restart-kafka`) by an exclusive lock on `e2e.lock`.
///
/// For every test that is not [isolated](side_by_side): one that uses the cart example (its fixed
/// topic `shop.cart-events.v1`, consumer group `cart.router.in` and managed topics `cart.*`), stops,
/// restarts or freezes a part of the test bed, changes a shared or cluster-scoped object, runs an
/// operator that watches every namespace, or reads what other tests change (every topic or group of
/// a broker, Kafka's ACLs).
pub fn serial() -> Serial {
    static LOCK: Mutex<()> = Mutex::new(());
    let in_process = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let file = e2e_lock_file();
    let asked = Instant::now();
    file.lock().unwrap_or_else(|e| panic!("cannot take e2e.lock: {e}"));
    report_wait("every other end-to-end test", asked);
    Serial { _across_processes: file, _in_process: in_process }
}

/// Held while a test runs alone; see [`serial`].
pub struct Serial {
    _across_processes: std::fs::File,
    _in_process: MutexGuard<'static, ()>,
}

/// Runs an isolated end-to-end test: beside other isolated tests (in this process or any other on
/// the test bed), never beside a [`serial`] one. A shared lock on `e2e.lock`, which the exclusive
/// lock of [`serial`] (and `tb restart-kafka`) waits for.
///
/// A test is isolated when everything it creates or changes is its own, so that no other test can
/// see it, and it reads nothing another test changes (docs/testbed.md, "Writing an end-to-end
/// test"):
/// - its own namespaces, named for it alone;
/// - its own topics and consumer groups (a pipeline named for it alone has groups of its own), on
///   the main broker;
/// - an operator started with `FLOW_WATCH_NAMESPACE` set to its own namespace (so it has a Lease of
///   its own and reconciles nothing of another test), or none;
/// - its own cluster Secrets in `ankka-flow` if it needs any (named for it, allowing its namespaces
///   only), and nothing else changed there or in the cluster beyond applying what every test applies
///   identically ([`crate::install_crd`], [`crate::install_cluster_secret`],
///   [`crate::install_operator_rights`]);
/// - no stop, restart or freeze of Kafka, the API server or etcd, no change of the kwok node, no
///   ACLs;
/// - no reading of what is not its own: every topic or group of the broker, every pod of the node,
///   another operator's metrics.
pub fn side_by_side() -> SideBySide {
    let file = e2e_lock_file();
    let asked = Instant::now();
    file.lock_shared().unwrap_or_else(|e| panic!("cannot take e2e.lock (shared): {e}"));
    report_wait("a test that runs alone", asked);
    SideBySide { _across_processes: file }
}

/// Runs an isolated end-to-end test that shares one thing with a few others, which it names
/// (`shared`: the auto-create broker, the example `chain`, a cluster Secret): beside every other
/// isolated test as [`side_by_side`] does, and one at a time with the others that name the same
/// thing, by an exclusive lock on `e2e-<shared>.lock` (across threads and processes alike). Its
/// nextest test group of one thread at a time (.config/nextest.toml) keeps a runner's threads from
/// waiting on that lock.
pub fn side_by_side_one_at_a_time(shared: &str) -> OneAtATime {
    let beside = side_by_side();
    let file = lock_file(&format!("e2e-{shared}.lock"));
    let asked = Instant::now();
    file.lock().unwrap_or_else(|e| panic!("cannot take e2e-{shared}.lock: {e}"));
    report_wait(&format!("another test of {shared}"), asked);
    OneAtATime { _shared: file, _beside: beside }
}

/// Held while a test of a shared thing runs; see [`side_by_side_one_at_a_time`].
pub struct OneAtATime {
    _shared: std::fs::File,
    _beside: SideBySide,
}

/// Says on stderr how long a test waited for `e2e.lock`, when it waited a second or more: a test's
/// time as the runner prints it includes that wait.
fn report_wait(what: &str, asked: Instant) {
    let waited = asked.elapsed();
    if waited >= Duration::from_secs(1) {
        eprintln!("e2e.lock: waited {:.1} s for {what} to finish", waited.as_secs_f64());
    }
}

/// Held while an isolated test runs; see [`side_by_side`].
pub struct SideBySide {
    _across_processes: std::fs::File,
}

/// Path of a workspace binary; panics when it was not built.
pub fn bin(name: &str) -> PathBuf {
    let p = bed().bin_dir.join(name);
    assert!(p.exists(), "{} is missing: run `cargo build --workspace --bins` first (make test does)", p.display());
    p
}

/// A finished command's exit code, stdout and stderr, for assertion messages.
pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Waits until `f` returns `Some`, polling every 200 ms; panics after `timeout` naming `what`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A fresh, empty directory under `target/e2e-ledgers/`.
pub fn fresh_dir(name: &str) -> PathBuf {
    let d = bed().root.join("target/e2e-ledgers").join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("ledger dir");
    d
}

/// Bootstrap servers of the test bed's broker pair, one KRaft cluster of two brokers
/// (`FLOW_TESTBED_KAFKA_PAIR`, from `testbed/tb env`; docs/testbed.md, "The broker pair"): node 1
/// (`127.0.0.1:19140`, also the cluster's controller), then node 2 (`127.0.0.1:19142`).
pub fn kafka_pair() -> String {
    std::env::var("FLOW_TESTBED_KAFKA_PAIR").unwrap_or_else(|_| {
        panic!(
            "FLOW_TESTBED_KAFKA_PAIR is not set: start the broker pair and load the test bed's settings with \
             `testbed/tb up kafka-pair && eval \"$(testbed/tb env)\"`"
        )
    })
}

/// Bootstrap address of the test bed's second broker, the one with `auto.create.topics.enable=true`
/// (`FLOW_TESTBED_KAFKA_AUTOCREATE`, from `testbed/tb env`; docs/testbed.md). A cluster of its own:
/// what exists on the main broker does not exist there.
pub fn kafka_autocreate() -> String {
    std::env::var("FLOW_TESTBED_KAFKA_AUTOCREATE").unwrap_or_else(|_| {
        panic!(
            "FLOW_TESTBED_KAFKA_AUTOCREATE is not set: start the test bed and load its settings with \
             `testbed/tb up && eval \"$(testbed/tb env)\"`"
        )
    })
}
