//! The test bed's coordinates, the lock that serialises end-to-end tests, the workspace's binaries,
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

/// Serialises the end-to-end tests: they share one cluster and one broker, and reuse the example's
/// fixed topic and consumer group. Within a test binary by a mutex; across test binaries and `cargo
/// test` runs (several people on one test bed, several worktrees) by an exclusive lock on
/// `e2e.lock` in the test bed's run directory, which the OS drops when the process ends.
pub fn serial() -> Serial {
    static LOCK: Mutex<()> = Mutex::new(());
    let in_process = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let run = std::env::var_os("FLOW_TESTBED_RUN").map_or_else(|| bed().root.join("target/testbed"), PathBuf::from);
    let path = run.join("e2e.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    file.lock().unwrap_or_else(|e| panic!("cannot lock {}: {e}", path.display()));
    Serial { _across_processes: file, _in_process: in_process }
}

/// Held while a test runs; see [`serial`].
pub struct Serial {
    _across_processes: std::fs::File,
    _in_process: MutexGuard<'static, ()>,
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
