//! The bench's Kubernetes side: its AnkkaFlows, `kubectl` calls, waits on their reconcile, and the
//! kwok node's pod capacity.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flow_testbed::{bed, kubectl};

use crate::{NODE, NS};

pub fn streamlet(partitions: i32, i: usize) -> String {
    format!("p{partitions}-s{i}")
}

/// An AnkkaFlow `name` of `n` streamlets at `replicas`, each with one inlet `in` on topic
/// `bench.p<partitions>` (all streamlets read the same topic, each in its own group).
pub fn pipeline_yaml(name: &str, partitions: i32, n: usize, replicas: i32, version: &str) -> String {
    let mut y = format!(
        "apiVersion: flow.ankka.thinkmorestupidless.com/v1alpha1\nkind: AnkkaFlow\nmetadata:\n  name: {name}\n  namespace: {NS}\n  labels:\n    flow.ankka.thinkmorestupidless.com/pipeline: {name}\nspec:\n  pipeline: {name}\n  version: \"{version}\"\n  protocolVersion: \"1.0\"\n  streamlets:\n"
    );
    for i in 0..n {
        y.push_str(&format!(
            "  - name: {s}\n    image: registry.example.com/bench:1\n    replicas: {replicas}\n    inlets:\n      in: input\n    descriptor:\n      name: bench\n      description: bench streamlet\n      config_parameters: []\n      inlets:\n      - name: in\n        contract:\n          fingerprint: nXhoFwNZSB7DKScFuZUtZ1gnAYkIxadumsXNHWwbLfM=\n          format: json\n          schema_name: cart-events.v1\n      outlets: []\n    builtin: false\n",
            s = streamlet(partitions, i)
        ));
    }
    y.push_str(&format!(
        "  topics:\n  - id: input\n    name: bench.p{partitions}\n    managed: false\n    cluster: shop\n    consumerConfig:\n      auto.offset.reset: earliest\n"
    ));
    y
}

/// One `kubectl apply -f` of `yaml` (any number of documents), server-side so that each object is
/// one PATCH.
pub fn apply(yaml: &str) {
    let path = std::env::temp_dir().join(format!("flow-bench-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("write yaml");
    kubectl_must(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=flow-bench",
        "-f",
        path.to_str().expect("utf-8 path"),
    ]);
    let _ = std::fs::remove_file(&path);
}

pub fn kubectl_must(args: &[&str]) -> String {
    let o = kubectl(args);
    assert!(o.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Polls (one `kubectl get aflow` per poll, every 20 ms) until every AnkkaFlow in the namespace has
/// `status.observedGeneration` equal to its generation; returns the number of polls.
pub fn wait_reconciled(timeout: Duration) -> usize {
    let end = Instant::now() + timeout;
    let mut polls = 0;
    loop {
        polls += 1;
        let out = kubectl_must(&[
            "-n",
            NS,
            "get",
            "aflow",
            "-o",
            "jsonpath={range .items[*]}{.metadata.generation} {.status.observedGeneration}{\"\\n\"}{end}",
        ]);
        let done = out.lines().all(|l| {
            let mut w = l.split_whitespace();
            matches!((w.next(), w.next()), (Some(g), Some(o)) if g == o)
        });
        if done {
            return polls;
        }
        assert!(Instant::now() < end, "AnkkaFlows not reconciled after {timeout:?}:\n{out}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls until AnkkaFlow `name` is reconciled and its `status.phase` is `Ready`.
pub fn wait_ready(name: &str, timeout: Duration) {
    let end = Instant::now() + timeout;
    loop {
        let out = kubectl_must(&[
            "-n",
            NS,
            "get",
            "aflow",
            name,
            "-o",
            "jsonpath={.metadata.generation} {.status.observedGeneration} {.status.phase}",
        ]);
        let w: Vec<&str> = out.split(' ').collect();
        if w.len() == 3 && w[0] == w[1] && w[2] == "Ready" {
            return;
        }
        assert!(Instant::now() < end, "{name} not Ready after {timeout:?}: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A `kubectl get aflow --watch` of the namespace: per resource its generation, observed generation
/// and phase, with the instant each change arrived. No polling, so no polling delay, whatever the
/// number of resources.
pub struct FlowWatch {
    pub child: Child,
    pub rx: mpsc::Receiver<(Instant, String)>,
}

impl FlowWatch {
    pub fn start() -> FlowWatch {
        let mut child = Command::new("kubectl")
            .args([
                "-n",
                NS,
                "get",
                "aflow",
                "--watch",
                "-o",
                "jsonpath={.metadata.name} {.metadata.generation} {.status.observedGeneration} {.status.phase}{\"\\n\"}",
            ])
            .env("KUBECONFIG", &bed().kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl --watch");
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        FlowWatch { child, rx }
    }

    /// Waits until `n` resources are all reconciled (observed generation = generation) and all
    /// Ready; returns the ms from `t` at which each first held.
    pub fn wait(&self, n: usize, t: Instant, timeout: Duration) -> (f64, f64) {
        let end = t + timeout;
        let mut state: HashMap<String, (bool, bool)> = HashMap::new();
        let mut reconciled = None;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let (at, line) = self.rx.recv_timeout(left).unwrap_or_else(|_| {
                let behind = state.values().filter(|(r, _)| !r).count();
                let not_ready = state.values().filter(|(_, r)| !r).count();
                panic!(
                    "after {timeout:?}: {} of {n} AnkkaFlows seen, {behind} not reconciled, {not_ready} not Ready",
                    state.len()
                )
            });
            let w: Vec<&str> = line.split(' ').collect();
            if w.len() < 4 || w[0].is_empty() {
                continue;
            }
            state.insert(w[0].to_string(), (w[1] == w[2], w[3] == "Ready"));
            if state.len() < n {
                continue;
            }
            let ms = at.duration_since(t).as_secs_f64() * 1000.0;
            if reconciled.is_none() && state.values().all(|(r, _)| *r) {
                reconciled = Some(ms);
            }
            if let Some(r) = reconciled
                && state.values().all(|(r, ready)| *r && *ready)
            {
                return (r, ms);
            }
        }
    }
}

impl Drop for FlowWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pods of the namespace in phase Running.
pub fn running_pods() -> usize {
    kubectl_must(&["-n", NS, "get", "pods", "--field-selector=status.phase=Running", "-o", "name"]).lines().count()
}

/// Waits until the namespace has no AnkkaFlow, Deployment, ReplicaSet or pod left.
pub fn wait_no_pods(timeout: Duration) {
    let end = Instant::now() + timeout;
    loop {
        let left =
            kubectl_must(&["-n", NS, "get", "ankkaflows,deployments,replicasets,pods", "-o", "name"]).lines().count();
        if left == 0 {
            return;
        }
        assert!(Instant::now() < end, "{left} AnkkaFlows, Deployments, ReplicaSets or pods left after {timeout:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The kwok node's pod capacity, raised to at least a number while this lives, then put back.
pub struct NodePods {
    pub restore: Option<String>,
}

impl NodePods {
    pub fn at_least(pods: usize) -> NodePods {
        let now = kubectl_must(&["get", "node", NODE, "-o", "jsonpath={.status.allocatable.pods}"]);
        let now = now.trim().to_string();
        if now.parse::<usize>().is_ok_and(|n| n >= pods) {
            return NodePods { restore: None };
        }
        eprintln!("raising the pod capacity of {NODE} from {now} to {pods} for the measurement");
        Self::set(&pods.to_string());
        NodePods { restore: Some(now) }
    }

    pub fn set(pods: &str) {
        let patch = format!(r#"{{"status":{{"capacity":{{"pods":"{pods}"}},"allocatable":{{"pods":"{pods}"}}}}}}"#);
        kubectl_must(&["patch", "node", NODE, "--subresource=status", "--type=merge", "-p", &patch]);
    }
}

impl Drop for NodePods {
    fn drop(&mut self) {
        if let Some(old) = self.restore.take() {
            eprintln!("putting the pod capacity of {NODE} back to {old}");
            let patch = format!(r#"{{"status":{{"capacity":{{"pods":"{old}"}},"allocatable":{{"pods":"{old}"}}}}}}"#);
            let _ = kubectl(&["patch", "node", NODE, "--subresource=status", "--type=merge", "-p", &patch]);
        }
    }
}
