//! What the fault tests share: a pipeline of several stopped streamlets with input to reset, the
//! commits Kafka recorded for each group (read from `__consumer_offsets` itself), and the checks that
//! every fault test makes at its end.

use std::collections::BTreeMap;
use std::time::Duration;

use flow_testbed::cart::DONE;
use flow_testbed::*;

/// Partitions of each topic, and records in each partition.
pub const PARTITIONS: i32 = 3;
pub const RECORDS: u32 = 20;

/// A pipeline of stopped streamlets in a namespace of its own, each reading a topic of its own whose
/// group has read and committed everything (offsets 20/20/20).
pub struct Pipe {
    pub ns: String,
    pub pipeline: String,
    /// (group, topic) of each streamlet.
    pub groups: Vec<(String, String)>,
}

impl Pipe {
    /// Sets the pipeline up; no operator runs yet.
    pub fn new(ns: &str, pipeline: &str, streamlets: &[&str]) -> Pipe {
        install_crd();
        install_cluster_secret();
        fresh_namespace(ns);
        let mut groups = vec![];
        let mut specs = vec![];
        for s in streamlets {
            let topic = format!("faults.{pipeline}.{s}");
            let group = format!("{pipeline}.{s}.in");
            kafka::recreate_topic(&topic, PARTITIONS);
            kafka::produce(&topic, PARTITIONS, RECORDS);
            standin::read(&group, &topic, u64::from(RECORDS) * PARTITIONS as u64);
            groups.push((group, topic));
            specs.push((*s, groups.last().map(|(_, t)| t.clone()).unwrap_or_default(), 0));
        }
        let specs: Vec<(&str, &str, i32)> = specs.iter().map(|(s, t, n)| (*s, t.as_str(), *n)).collect();
        apply_own_pipeline(ns, pipeline, &specs);
        Pipe { ns: ns.into(), pipeline: pipeline.into(), groups }
    }

    /// Writes a reset request for every streamlet; returns its id.
    pub fn request(&self) -> String {
        let id = uuid();
        write_request(&self.ns, &self.pipeline, &id, &[]);
        id
    }

    /// Waits until the done annotation holds `id`.
    pub fn wait_done(&self, id: &str, timeout: Duration) {
        wait_until("the done annotation", timeout, || {
            (annotation(&self.ns, &self.pipeline, DONE).as_deref() == Some(id)).then_some(())
        });
    }

    /// The checks every fault test ends with, for a request `id` that must have reset every group:
    /// - one commit per group and request: Kafka recorded exactly one commit with the request's reset
    ///   marker on each partition of each group;
    /// - no false success: each group is at its log start offsets with the reset marker now, one
    ///   `ResetOffsets` event each, no `ResetOffsetsFailed`;
    /// - a status that says what happened: `Done`, every group `Reset`.
    pub fn assert_reset_once(&self, id: &str) {
        let all: Vec<&str> = self.groups.iter().map(|(g, _)| g.as_str()).collect();
        self.assert_reset_once_of(id, &all);
    }

    /// [`Pipe::assert_reset_once`] for a request of the groups `only` (by group name).
    pub fn assert_reset_once_of(&self, id: &str, only: &[&str]) {
        let marker = format!("ankka-flow/reset/{id}");
        let recorded = commits(&marker);
        let groups: Vec<&(String, String)> = self.groups.iter().filter(|(g, _)| only.contains(&g.as_str())).collect();
        assert_eq!(groups.len(), only.len(), "groups of the pipeline: {only:?}");
        for (group, topic) in &groups {
            let per_partition: Vec<usize> = (0..PARTITIONS)
                .map(|p| recorded.get(&(group.clone(), topic.clone(), p)).copied().unwrap_or(0))
                .collect();
            assert_eq!(per_partition, vec![1; PARTITIONS as usize], "{group}: reset commits of {id} per partition");
            let starts = kafka::watermarks(topic);
            for (p, pos) in groups::positions(group, topic, PARTITIONS) {
                assert_eq!(pos, Some((starts[&p].0, marker.clone())), "{group} partition {p} now");
            }
        }
        let reset = event_notes(&self.ns, "ResetOffsets");
        for (group, topic) in &groups {
            let note = format!("{group}: {PARTITIONS} partition(s) of '{topic}' to earliest");
            assert_eq!(reset.iter().filter(|n| **n == note).count(), 1, "{reset:?}");
        }
        assert_eq!(event_notes(&self.ns, "ResetOffsetsFailed"), Vec::<String>::new());
        // The status says Done just after the done annotation is written (docs/reset.md).
        let status = wait_until("the status to say Done", Duration::from_secs(30), || {
            let s = reset_status(&self.ns, &self.pipeline);
            (s["id"] == id && s["phase"] == "Done").then_some(s)
        });
        let listed = status["groups"].as_array().cloned().unwrap_or_default();
        assert_eq!(listed.len(), only.len(), "{status}");
        assert!(listed.iter().all(|g| g["outcome"] == "Reset"), "{status}");
        assert_eq!(annotation(&self.ns, &self.pipeline, DONE).as_deref(), Some(id), "the done annotation");
    }
}

impl Drop for Pipe {
    /// A test that passed removes its namespace (without waiting for it to go); one that failed
    /// leaves it to be looked at, and the next run's `fresh_namespace` removes it.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = kubectl(&["delete", "namespace", &self.ns, "--ignore-not-found", "--wait=false"]);
        }
    }
}

/// A fresh request id (a version 4 UUID made of the clock and the process, unique enough for tests).
pub fn uuid() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let n = nanos ^ (u128::from(std::process::id()) << 64);
    let hex = format!("{:032x}", n & ((1u128 << 122) - 1));
    format!("{}-{}-4{}-8{}-{}", &hex[..8], &hex[8..12], &hex[13..16], &hex[17..20], &hex[20..32])
}

/// How many commits Kafka recorded with commit metadata `metadata`, per (group, topic, partition):
/// every offset commit record of `__consumer_offsets`, from the start of its log.
pub fn commits(metadata: &str) -> BTreeMap<(String, String, i32), usize> {
    let mut out = BTreeMap::new();
    for (group, topic, partition, meta) in commit_log() {
        if meta == metadata {
            *out.entry((group, topic, partition)).or_default() += 1;
        }
    }
    out
}

/// The commit metadata Kafka recorded for `group` on partition `partition` of `topic`, in the order
/// it recorded them (one partition of `__consumer_offsets` holds a group's commits, in order).
pub fn commit_order(group: &str, topic: &str, partition: i32) -> Vec<String> {
    commit_log()
        .into_iter()
        .filter(|(g, t, p, _)| g == group && t == topic && *p == partition)
        .map(|(_, _, _, m)| m)
        .collect()
}

/// Every offset commit record of the main broker's `__consumer_offsets` (see
/// [`flow_testbed::offsets_log`]).
fn commit_log() -> Vec<(String, String, i32, String)> {
    flow_testbed::offsets_log::commits(&bed().kafka)
}

/// A TCP proxy in front of the test bed's API server, which a test can cut (every connection closed,
/// new ones refused) and restore, as an API server that restarts looks to its clients. TLS passes
/// through untouched: the server's certificate names 127.0.0.1, whatever the port. Written here
/// because the fault needs a switch in the test's hands, which no proxy library offers as plainly
/// as these few lines.
pub struct ApiProxy {
    /// A kubeconfig like the test bed's, through the proxy.
    pub kubeconfig: std::path::PathBuf,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl ApiProxy {
    /// Starts the proxy and writes its kubeconfig as `target/e2e-ledgers/<name>.kubeconfig`.
    pub fn start(name: &str) -> ApiProxy {
        use std::sync::atomic::Ordering;
        let config = std::fs::read_to_string(&bed().kubeconfig).expect("the test bed's kubeconfig");
        let upstream = config
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: https://"))
            .expect("a server in the kubeconfig")
            .to_string();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("address").port();
        let kubeconfig = bed().root.join("target/e2e-ledgers").join(format!("{name}.kubeconfig"));
        std::fs::create_dir_all(kubeconfig.parent().expect("a parent")).expect("dir");
        std::fs::write(&kubeconfig, config.replace(&upstream, &format!("127.0.0.1:{port}"))).expect("kubeconfig");
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, o) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if c.load(Ordering::SeqCst) {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect(&upstream) else { continue };
                for s in [&client, &server] {
                    if let Ok(s) = s.try_clone() {
                        o.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                    }
                }
                for (mut from, mut to) in
                    [(client.try_clone(), server.try_clone()), (server.try_clone(), client.try_clone())]
                        .into_iter()
                        .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        ApiProxy { kubeconfig, cut, open }
    }

    /// Closes every connection and refuses new ones until [`ApiProxy::restore`].
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for s in self.open.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}
