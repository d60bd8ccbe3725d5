//! A hostile tenant, on the test bed: someone who may write `AnkkaFlow`s in their own namespace and
//! tries to harm the operator or another team with what they write (docs/tenancy.md, "Threat
//! model"). One module per class of attack:
//!
//! - `clients`: settings of a topic that would reach the operator's own Kafka clients (signals, an
//!   in-process mock cluster, unbounded logging), keys padded to slip past the rules, and token
//!   endpoints that would make the operator an HTTP client at the tenant's command.
//! - `acls`: Kafka enforces tenancy. A tenant who reads its streamlet Secret holds its namespace's
//!   own credential, not the operator's, and Kafka's own tool gets nothing of another namespace's
//!   group with it; the operator works with exactly the ACLs docs/secured-kafka.md lists, and a
//!   missing one fails a reset at once, with nothing committed.
//! - `pods`: pod settings written by hand in the resource, past `flow verify`: what Pod Security
//!   `restricted` forbids is refused before anything is applied.
//! - `owners`: another team's topic declared managed and deleted with the tenant's resource, a
//!   forged claim of ownership, a resource or a topic created again, and topic names outside the
//!   namespace's prefixes; another spelling of the brokers or a forged resumed status against the
//!   shared-group rule; ten failing clusters beside a healthy reset (bulkheads).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow_testbed::*;

mod acls;
mod clients;
mod owners;
mod pods;

/// The namespace of the cluster Secrets.
const CLUSTERS: &str = "ankka-flow";
const ALLOWED: &str = "flow.ankka.thinkmorestupidless.com/allowed-namespaces";

/// An address from `testbed/tb env`.
fn env(key: &str) -> String {
    std::env::var(key)
        .unwrap_or_else(|_| panic!("{key} is not set: load the test bed's settings with `eval \"$(testbed/tb env)\"`"))
}

/// The text of file `name` of the test bed's Kafka PKI.
fn pki(name: &str) -> String {
    let path = std::path::Path::new(&env("FLOW_TESTBED_KAFKA_PKI")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Deletes the named cluster Secrets when dropped.
struct ClusterSecrets(Vec<String>);

impl Drop for ClusterSecrets {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = kubectl(&["-n", CLUSTERS, "delete", "secret", name, "--ignore-not-found"]);
        }
    }
}

/// Applies cluster Secret `kafka-cluster-<cluster>` (brokers `brokers`, `connection-config`
/// `config`), allowing namespace `ns`; deleted when the guard drops.
fn cluster_secret(cluster: &str, brokers: &str, config: &str, ns: &str) -> ClusterSecrets {
    let config: String = config.lines().map(|l| format!("    {l}\n")).collect();
    kubectl_apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: kafka-cluster-{cluster}\n  namespace: {CLUSTERS}\n  \
         annotations:\n    {ALLOWED}: \"{ns}\"\nstringData:\n  bootstrap.servers: \"{brokers}\"\n  \
         connection-config: |\n{config}"
    ));
    ClusterSecrets(vec![format!("kafka-cluster-{cluster}")])
}

/// Pipeline `pipeline` in `ns` from the real `flow generate`: streamlet `router` (the cart example's
/// descriptor, 0 replicas) reading unmanaged Kafka topic `kafka_topic`, whose other blueprint
/// settings are `topic` (HOCON lines of the topic object).
fn apply_router(ns: &str, pipeline: &str, kafka_topic: &str, topic: &str) {
    let dir = fresh_dir(&format!("hostile-{ns}-{pipeline}"));
    std::fs::create_dir_all(dir.join("flow")).expect("blueprint dir");
    std::fs::copy(bed().root.join("examples/cart/flow/cart-router.json"), dir.join("flow/cart-router.json"))
        .expect("descriptor");
    std::fs::write(
        dir.join("blueprint.conf"),
        format!(
            "blueprint {{\n  name = {pipeline}\n  streamlets {{ router = cart-router }}\n  topics {{\n    events {{\n      \
             managed = false\n      topic.name = \"{kafka_topic}\"\n      consumers = [router.in]\n{topic}\n    }}\n  \
             }}\n}}\n"
        ),
    )
    .expect("blueprint");
    std::fs::write(dir.join("stop.conf"), "flow.streamlets.router { replicas = 0 }\n").expect("conf");
    let o = Command::new(bin("flow"))
        .args(["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "stop.conf"])
        .args(["--image", "router=registry.example.com/cart-router:1.2", "-n", ns])
        .current_dir(&dir)
        .output()
        .expect("flow runs");
    assert!(o.status.success(), "flow generate: {}", show(&o));
    kubectl_apply(&String::from_utf8(o.stdout).expect("UTF-8"));
}

/// Replaces the settings block `block` (`connectionConfig`, ...) of the first topic of AnkkaFlow
/// `ns`/`name` with `settings`, as a tenant writing the resource by hand would (a JSON patch).
fn set_block(ns: &str, name: &str, block: &str, settings: &BTreeMap<&str, String>) {
    let patch = serde_json::json!([{ "op": "add", "path": format!("/spec/topics/0/{block}"), "value": settings }]);
    kubectl_ok(&["-n", ns, "patch", "aflow", name, "--type=json", "-p", &patch.to_string()]);
}

/// Notes of the events with `reason` about AnkkaFlow `name` in `ns`, sorted.
fn notes(ns: &str, name: &str, reason: &str) -> Vec<String> {
    let out = kubectl_ok(&["-n", ns, "get", "events.events.k8s.io", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("events JSON");
    let mut got: Vec<String> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == reason && e["regarding"]["kind"] == "AnkkaFlow" && e["regarding"]["name"] == name)
        .map(|e| e["note"].as_str().unwrap_or_default().to_string())
        .collect();
    got.sort();
    got
}

/// `status.phase` and `status.detail` of AnkkaFlow `name`.
fn phase(ns: &str, name: &str) -> (String, String) {
    let v = get_json(ns, "aflow", name);
    let text = |x: &serde_json::Value| x.as_str().unwrap_or_default().to_string();
    (text(&v["status"]["phase"]), text(&v["status"]["detail"]))
}

/// A line of `/proc/<pid>/status` (`Threads`, `VmRSS`), as a number.
fn proc_status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// An HTTP endpoint of the tenant's: it answers every request with `status` and `body`, and counts
/// the requests.
struct TenantEndpoint {
    url: String,
    requests: Arc<AtomicUsize>,
    received: Arc<Mutex<String>>,
}

impl TenantEndpoint {
    fn start(status: &'static str, body: &'static str) -> TenantEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let url = format!("http://{}/token", listener.local_addr().expect("its address"));
        let requests = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(Mutex::new(String::new()));
        let (count, keep) = (requests.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                count.fetch_add(1, Ordering::SeqCst);
                let mut stream = stream;
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 8192];
                let n = stream.read(&mut buf).unwrap_or(0);
                keep.lock().unwrap_or_else(|p| p.into_inner()).push_str(&String::from_utf8_lossy(&buf[..n]));
                let answer = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        TenantEndpoint { url, requests, received }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}
