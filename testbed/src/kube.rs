//! The Kubernetes side of the test bed, through the real `kubectl`: objects, pods, annotations,
//! events, and kubeconfigs for other users.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use flow_core::names::{ANNOTATION_RESET, ANNOTATION_RESET_DONE};

use crate::bed::{bed, show};

/// Runs `kubectl` (the test bed's, from PATH) against the test bed.
pub fn kubectl(args: &[&str]) -> Output {
    Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", &bed().kubeconfig)
        .output()
        .expect("kubectl runs (is the test bed's bin directory on PATH? `eval \"$(testbed/tb env)\"`)")
}

/// Runs `kubectl` and returns its stdout; panics on a non-zero exit.
pub fn kubectl_ok(args: &[&str]) -> String {
    let o = kubectl(args);
    assert!(o.status.success(), "kubectl {args:?} failed: {}", show(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `kubectl <args>` with `stdin` as its input; panics unless it succeeds; returns stdout.
pub fn kubectl_stdin(args: &[&str], stdin: &str) -> String {
    let o = kubectl_with_stdin(args, stdin);
    assert!(o.status.success(), "kubectl {args:?} failed: {}", show(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `kubectl <args>` with `stdin` as its input, whatever it answers.
pub fn kubectl_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write to kubectl");
    child.wait_with_output().expect("kubectl finishes")
}

/// Deletes `ns` if it exists, then creates it empty and labelled to enforce the Pod Security
/// Standard `restricted` (Kubernetes documentation, "Pod Security Admission").
pub fn restricted_namespace(ns: &str) {
    fresh_namespace(ns);
    kubectl_ok(&[
        "label",
        "namespace",
        ns,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    ]);
}

/// `kubectl apply -f -` of `yaml`.
pub fn kubectl_apply(yaml: &str) -> String {
    kubectl_stdin(&["apply", "-f", "-"], yaml)
}

/// Deletes `ns` if it exists (waiting until it is gone), then creates it empty.
pub fn fresh_namespace(ns: &str) {
    let o = kubectl(&["delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=120s"]);
    assert!(o.status.success(), "deleting namespace {ns}: {}", show(&o));
    kubectl_ok(&["create", "namespace", ns]);
}

/// Makes sure the CRD is installed and established.
pub fn install_crd() {
    // Forced: the test bed's CRD is this repository's, whoever applied it last (the chart's test hands
    // it to a Helm release for a while, and a failed run of that test can leave Helm owning fields).
    kubectl_ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        bed().root.join("deploy/crd.yaml").to_str().expect("utf-8 path"),
    ]);
    crd_established();
}

/// Waits until the AnkkaFlow CRD is established. Polled rather than `kubectl wait`: right after the
/// CRD is created it has no conditions yet, and `kubectl wait --for=condition=...` then fails at
/// once instead of waiting (on a fresh test bed).
pub fn crd_established() {
    crate::bed::wait_until("the AnkkaFlow CRD to be established", std::time::Duration::from_secs(60), || {
        let o = kubectl(&[
            "get",
            "crd/ankkaflows.flow.ankka.thinkmorestupidless.com",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
        ]);
        (o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "True").then_some(())
    });
}

/// Creates namespace `ns` unless it exists.
pub fn ensure_namespace(ns: &str) {
    let o = kubectl(&["create", "namespace", ns]);
    assert!(o.status.success() || String::from_utf8_lossy(&o.stderr).contains("AlreadyExists"), "{}", show(&o));
}

/// A kubeconfig like the test bed's admin one (same server, same CA) that logs in with bearer
/// `token` instead; written under `target/e2e-ledgers/` as `<name>.kubeconfig`.
pub fn kubeconfig_with_token(name: &str, token: &str) -> PathBuf {
    let admin = std::fs::read_to_string(&bed().kubeconfig).expect("the admin kubeconfig");
    let mut replaced = 0;
    let text: String = admin
        .lines()
        .map(|line| match line.trim_start().strip_prefix("token: ") {
            Some(_) => {
                replaced += 1;
                let indent = &line[..line.len() - line.trim_start().len()];
                format!("{indent}token: {token}\n")
            }
            None => format!("{line}\n"),
        })
        .collect();
    assert_eq!(replaced, 1, "the admin kubeconfig has one token line");
    let dir = bed().root.join("target/e2e-ledgers");
    std::fs::create_dir_all(&dir).expect("kubeconfig dir");
    let path = dir.join(format!("{name}-{}.kubeconfig", std::process::id()));
    std::fs::write(&path, text).expect("write the kubeconfig");
    path
}

/// Names of the pods `kubectl -n <ns> get pods -l flow.ankka.thinkmorestupidless.com/pipeline=<p>` lists.
pub fn pipeline_pods(ns: &str, pipeline: &str) -> Vec<String> {
    let label = format!("flow.ankka.thinkmorestupidless.com/pipeline={pipeline}");
    kubectl_ok(&["-n", ns, "get", "pods", "-l", &label, "-o", "name"]).lines().map(str::to_string).collect()
}

/// Names of the pods of `pipeline` in phase Running.
pub fn running_pipeline_pods(ns: &str, pipeline: &str) -> usize {
    let label = format!("flow.ankka.thinkmorestupidless.com/pipeline={pipeline}");
    kubectl_ok(&["-n", ns, "get", "pods", "-l", &label, "--field-selector=status.phase=Running", "-o", "name"])
        .lines()
        .count()
}

/// An annotation of AnkkaFlow `name`, if set.
pub fn annotation(ns: &str, name: &str, key: &str) -> Option<String> {
    let path = format!("jsonpath={{.metadata.annotations.{}}}", key.replace('.', "\\."));
    let v = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", &path]);
    (!v.is_empty()).then_some(v)
}

/// Notes of the events about AnkkaFlows in `ns` with `reason`, as `kubectl get events` shows them.
pub fn event_notes(ns: &str, reason: &str) -> Vec<String> {
    let selector = format!("involvedObject.kind=AnkkaFlow,reason={reason}");
    kubectl_ok(&[
        "-n",
        ns,
        "get",
        "events",
        "--field-selector",
        &selector,
        "-o",
        "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// The text under `key` of Secret `ns`/`name`, decoded, exactly as the API server holds it.
pub fn secret_file(ns: &str, name: &str, key: &str) -> String {
    let template = format!("{{{{index .data \"{key}\" | base64decode}}}}");
    kubectl_ok(&["-n", ns, "get", "secret", name, "-o", &format!("go-template={template}")])
}

/// The object `kind`/`name` of `ns` as JSON (`Null` when there is none).
pub fn get_json(ns: &str, kind: &str, name: &str) -> serde_json::Value {
    let o = kubectl(&["-n", ns, "get", kind, name, "-o", "json", "--ignore-not-found"]);
    assert!(o.status.success(), "kubectl get {kind} {name}: {}", show(&o));
    serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null)
}

/// The `status.reset` of AnkkaFlow `name` (`Null` when there is none).
pub fn reset_status(ns: &str, name: &str) -> serde_json::Value {
    let text = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.reset}"]);
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

/// Writes the request annotation `{"id":id,"streamlets":[...]}` on AnkkaFlow `name` by hand (past the
/// CLI's guards, as a user with kubectl can).
pub fn write_request(ns: &str, name: &str, id: &str, streamlets: &[&str]) {
    let text = serde_json::json!({"id": id, "streamlets": streamlets}).to_string();
    kubectl_ok(&["-n", ns, "annotate", "--overwrite", "aflow", name, &format!("{}={text}", ANNOTATION_RESET)]);
}

/// Takes the finalizers off pod `ns`/`name` when dropped, so that it (and its namespace) can go.
pub struct ReleasePod(pub String, pub String);

impl Drop for ReleasePod {
    fn drop(&mut self) {
        let _ = kubectl(&[
            "-n",
            &self.0,
            "patch",
            "pod",
            &self.1,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ]);
    }
}

/// Every version of AnkkaFlow `name` as `kubectl get -w -o json` streams them, from the version
/// current when it starts; stopped (killed) when dropped.
pub struct Versions {
    child: Child,
    text: Arc<Mutex<String>>,
}

impl Versions {
    pub fn watch(ns: &str, name: &str) -> Versions {
        let mut child = Command::new("kubectl")
            .args(["-n", ns, "get", "aflow", name, "-w", "-o", "json"])
            .env("KUBECONFIG", &bed().kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl get -w starts");
        let text = Arc::new(Mutex::new(String::new()));
        let into = text.clone();
        let mut out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 8192];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock().unwrap_or_else(|p| p.into_inner()).push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Versions { child, text }
    }

    /// The versions seen so far (a partly written last one is left out).
    pub fn seen(&self) -> Vec<serde_json::Value> {
        let text = self.text.lock().unwrap_or_else(|p| p.into_inner()).clone();
        serde_json::Deserializer::from_str(&text).into_iter::<serde_json::Value>().map_while(Result::ok).collect()
    }

    /// `(phase, detail)` of `status.reset` in every version about request `id`, in order.
    pub fn phases(&self, id: &str) -> Vec<(String, String)> {
        self.seen()
            .iter()
            .map(|v| &v["status"]["reset"])
            .filter(|r| r["id"] == id)
            .map(|r| (r["phase"].as_str().unwrap_or("").to_string(), r["detail"].as_str().unwrap_or("").to_string()))
            .collect()
    }
}

impl Versions {
    /// Waits until a version has the done annotation name request `id`, then returns every version
    /// seen that has it while its `status.reset` is not request `id` in `phase`. The done annotation
    /// alone reads as done, so a refusal's status must land first.
    pub fn done_without(&self, id: &str, phase: &str) -> Vec<serde_json::Value> {
        let done = |v: &serde_json::Value| v["metadata"]["annotations"][ANNOTATION_RESET_DONE] == id;
        crate::wait_until("the watch shows the done annotation", std::time::Duration::from_secs(10), || {
            self.seen().iter().any(done).then_some(())
        });
        let shown = |v: &serde_json::Value| v["status"]["reset"]["id"] == id && v["status"]["reset"]["phase"] == phase;
        self.seen().into_iter().filter(|v| done(v) && !shown(v)).collect()
    }
}

impl Drop for Versions {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
