//! The stand-in streamlet consumer (`flow-standin`): one-shot reads, a member that holds the group,
//! and a [`Container`] playing a pod's container.

use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::bed::{bed, bin, show, wait_until};

/// Reads `expect` records of `topic` as group `group`, commits and returns the JSON summary.
pub fn read(group: &str, topic: &str, expect: u64) -> serde_json::Value {
    let o = Command::new(bin("flow-standin"))
        .args(["--bootstrap-servers", &bed().kafka, "--group", group, "--topic", topic])
        .args(["--expect", &expect.to_string(), "--timeout", "60"])
        .output()
        .expect("flow-standin runs");
    assert!(o.status.success(), "flow-standin failed: {}", show(&o));
    serde_json::from_slice(&o.stdout).expect("flow-standin prints JSON")
}

/// The arguments that make `flow-standin` play streamlet `streamlet` of pipeline `pipeline` in
/// `ns`: it learns its inlet's topic, group, client id and connection from the streamlet's
/// rendered Secret, as the sidecar does.
pub fn playing(ns: &str, pipeline: &str, streamlet: &str) -> Vec<String> {
    ["--namespace", ns, "--pipeline", pipeline, "--streamlet", streamlet].map(String::from).to_vec()
}

/// Plays streamlet `streamlet` of `pipeline` in `ns` (see [`playing`]) until it read `expect`
/// records, commits and returns the JSON summary.
pub fn read_as_streamlet(ns: &str, pipeline: &str, streamlet: &str, expect: u64) -> serde_json::Value {
    let o = Command::new(bin("flow-standin"))
        .args(playing(ns, pipeline, streamlet))
        .args(["--expect", &expect.to_string(), "--timeout", "60"])
        .env("KUBECONFIG", &bed().kubeconfig)
        .output()
        .expect("flow-standin runs");
    assert!(o.status.success(), "flow-standin failed: {}", show(&o));
    serde_json::from_slice(&o.stdout).expect("flow-standin prints JSON")
}

/// Starts a stand-in that stays in the group until stopped.
pub fn hold(group: &str, topic: &str, extra: &[&str]) -> Child {
    Command::new(bin("flow-standin"))
        .args(["--bootstrap-servers", &bed().kafka, "--group", group, "--topic", topic, "--hold"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("flow-standin starts")
}

/// A stand-in process playing a pod's container (cases F1, F2): `flow-standin` with its stdout and
/// stderr captured line by line, so a test can wait for its progress lines (`flow-standin: ...`,
/// docs/testbed.md) and send it the signal the kubelet would. SIGTERM, then SIGKILL after 15 s, when
/// dropped.
pub struct Container {
    child: Child,
    err: std::sync::Arc<Mutex<Vec<String>>>,
    out: std::sync::Arc<Mutex<Vec<String>>>,
}

impl Container {
    /// Starts `flow-standin --group <group> --topic <topic> <extra...>` against the test bed.
    pub fn start(group: &str, topic: &str, extra: &[&str]) -> Container {
        let mut child = Command::new(bin("flow-standin"))
            .args(["--bootstrap-servers", &bed().kafka, "--group", group, "--topic", topic])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("flow-standin starts");
        let collect = |r: Box<dyn std::io::Read + Send>| {
            let lines = std::sync::Arc::new(Mutex::new(Vec::new()));
            let into = lines.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
                    into.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                }
            });
            lines
        };
        let err = collect(Box::new(child.stderr.take().expect("stderr")));
        let out = collect(Box::new(child.stdout.take().expect("stdout")));
        Container { child, err, out }
    }

    /// Its stderr so far.
    pub fn log(&self) -> Vec<String> {
        self.err.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits for a stderr line starting with `flow-standin: <prefix>` and returns the rest of it.
    pub fn wait_line(&self, prefix: &str, timeout: Duration) -> String {
        let want = format!("flow-standin: {prefix}");
        wait_until(&format!("the stand-in to print '{want}'"), timeout, || {
            self.log().iter().find_map(|l| l.strip_prefix(&want).map(str::to_string))
        })
    }

    /// Sends it SIGTERM, as the kubelet does to a pod's container when the pod is deleted.
    pub fn terminate(&self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
    }

    /// Waits until it exits; returns whether it succeeded and its JSON summary (`Null` if none).
    pub fn wait_exit(&mut self, timeout: Duration) -> (bool, serde_json::Value) {
        let status = wait_until("the stand-in to exit", timeout, || self.child.try_wait().ok().flatten());
        // The reader threads may still be draining the pipes.
        let summary = wait_until("the stand-in's summary", Duration::from_secs(5), || {
            let out = self.out.lock().unwrap_or_else(|p| p.into_inner()).clone();
            out.iter()
                .find_map(|l| serde_json::from_str(l).ok())
                .or_else(|| (!status.success()).then_some(serde_json::Value::Null))
        });
        (status.success(), summary)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        self.terminate();
        let end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < end {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
