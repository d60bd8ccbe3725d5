//! Guard rails for resets (docs/governance.md) on the test bed's API server, with the admission
//! policies of `deploy/governance.yaml` and `deploy/governance-stamps.yaml`, and users acting by
//! impersonation (`kubectl --as`, `flow --as`):
//!
//! - carol may edit the pipeline but not reset it: her `flow reset` is refused at admission, and so
//!   is the annotation written by hand;
//! - the requester's name is the API server's: a request naming someone else is refused where only
//!   the validating policy is installed (the fallback of clusters before 1.36), and stamped over
//!   once the mutating one is;
//! - with approval required in the namespace, alice's request waits without touching Kafka; alice
//!   may not approve her own; bob approves, and it runs; a denied request and an expired one end
//!   without touching Kafka; the status, `flow reset status -o json` and every event name the
//!   requester and the approver.

use std::process::Output;
use std::time::Duration;

use flow_testbed::cart::{DONE, GROUP, TOPIC};
use flow_testbed::*;

const NS: &str = "gov";
const REQUEST: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets";
const REQUESTED_BY: &str = "flow.ankka.thinkmorestupidless.com/reset-requested-by";

/// The governance policies and roles, removed again when dropped (they are cluster-wide).
struct Policies(Vec<&'static str>);

impl Policies {
    fn install(files: &[&'static str]) -> Policies {
        for f in files {
            kubectl_ok(&["apply", "-f", &bed().root.join(f).to_string_lossy()]);
        }
        Policies(files.to_vec())
    }

    fn add(&mut self, file: &'static str) {
        kubectl_ok(&["apply", "-f", &bed().root.join(file).to_string_lossy()]);
        self.0.push(file);
    }
}

impl Drop for Policies {
    fn drop(&mut self) {
        for f in self.0.iter().rev() {
            let _ = kubectl(&["delete", "--ignore-not-found", "-f", &bed().root.join(f).to_string_lossy()]);
        }
    }
}

/// `flow <args> --as <user>`.
fn flow_as(user: &str, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--as", user]);
    flow(&all)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The request id `flow reset` printed.
fn requested(o: &Output) -> String {
    assert!(o.status.success(), "flow reset: {}", show(o));
    let out = String::from_utf8_lossy(&o.stdout);
    out.trim_end().rsplit(' ').next().unwrap_or_default().to_string()
}

/// Waits until the request's phase is `phase`.
fn wait_phase(id: &str, phase: &str) -> serde_json::Value {
    wait_until(&format!("reset {id} {phase}"), Duration::from_secs(60), || {
        let s = reset_status(NS, "cart");
        (s["id"] == id && s["phase"] == phase).then_some(s)
    })
}

/// Role `pipeline-editor` (what an `edit`-like role gives on pipelines: read and write AnkkaFlows,
/// read pods), and each user's bindings: to it, and to the ClusterRoles named.
fn bind(users: &[(&str, &[&str])]) {
    kubectl_apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: pipeline-editor\n  namespace: {NS}\n\
         rules:\n  - apiGroups: [flow.ankka.thinkmorestupidless.com]\n    resources: [ankkaflows, ankkaflows/status]\n    \
         verbs: [get, list, watch, update, patch]\n  - apiGroups: [\"\"]\n    resources: [pods]\n    verbs: [get, list]\n"
    ));
    for (user, cluster_roles) in users {
        let binding = |name: &str, kind: &str, role: &str| {
            format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {name}\n  namespace: {NS}\n\
                 roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: {kind}\n  name: {role}\nsubjects:\n  - \
                 apiGroup: rbac.authorization.k8s.io\n    kind: User\n    name: {user}\n"
            )
        };
        kubectl_apply(&binding(&format!("{user}-editor"), "Role", "pipeline-editor"));
        for role in *cluster_roles {
            kubectl_apply(&binding(&format!("{user}-{role}"), "ClusterRole", role));
        }
    }
}

#[test]
fn who_may_reset_who_asked_and_who_approved() {
    // Serial: it installs deploy/governance*.yaml, whose admission policies act on every namespace's resets.
    let _serial = serial();
    let mut policies = Policies::install(&["deploy/governance.yaml"]);
    let mut op = cart_scenario(
        NS,
        0,
        &[
            ("FLOW_RESET_APPROVAL_NAMESPACES", NS),
            ("FLOW_LAG_INTERVAL_SECONDS", "1"),
            ("FLOW_METRICS_ADDRESS", "127.0.0.1:0"),
        ],
    );
    let metrics = metrics_address(&op);
    bind(&[("carol", &[]), ("alice", &["ankka-flow-reset", "ankka-flow-approve"]), ("bob", &["ankka-flow-approve"])]);
    let before = kafka::committed(GROUP, TOPIC, 3);

    // carol may edit the pipeline, not reset it: refused at admission, by the CLI and by hand.
    let o = flow_as("carol", &["reset", "cart", "-n", NS]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(
        stderr(&o).trim_end(),
        "reset failed: user carol may not request a reset of AnkkaFlow gov/cart: that needs the verb reset on \
         ankkaflows (the ClusterRole ankka-flow-reset grants it)",
        "{}",
        show(&o)
    );
    let by_hand = format!("{REQUEST}={{\"id\":\"0e5b1c2a-1111-4222-8333-444455556666\",\"streamlets\":[]}}");
    let o = kubectl(&["-n", NS, "annotate", "aflow", "cart", &by_hand, "--as", "carol"]);
    assert!(!o.status.success(), "carol wrote a request by hand");
    assert_eq!(annotation(NS, "cart", REQUEST), None);

    // Only the validating policy (a cluster before 1.36): a request naming another requester is
    // refused; flow names the user itself.
    let forged = format!("{REQUESTED_BY}=bob");
    let o = kubectl(&["-n", NS, "annotate", "aflow", "cart", &by_hand, &forged, "--as", "alice"]);
    assert!(!o.status.success(), "alice wrote a request naming bob");
    assert!(stderr(&o).contains("must name the user who writes the request, alice"), "{}", show(&o));

    // With the mutating policies the API server stamps the name, whatever the client says.
    policies.add("deploy/governance-stamps.yaml");
    let id = requested(&flow_as("alice", &["reset", "cart", "-n", NS]));
    assert_eq!(annotation(NS, "cart", REQUESTED_BY).as_deref(), Some("alice"));
    let o = kubectl(&["-n", NS, "annotate", "--overwrite", "aflow", "cart", &forged, "--as", "alice"]);
    assert!(!o.status.success(), "the requester's name changed without a request");

    // Approval required in the namespace: it waits, and Kafka is not touched.
    let s = wait_phase(&id, "AwaitingApproval");
    assert_eq!(s["requestedBy"], "alice");
    assert!(s["detail"].as_str().unwrap_or_default().contains("flow reset approve"), "{s}");
    let o = flow_as("alice", &["reset", "approve", &id, "-n", NS]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        stderr(&o).starts_with("reset approve failed: user alice requested this reset and may not approve it too"),
        "{}",
        show(&o)
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), before, "nothing moves before approval");
    assert_eq!(annotation(NS, "cart", DONE), None);

    // bob approves: it runs.
    let o = flow_as("bob", &["reset", "approve", &id, "-n", NS]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("reset {id} of 'cart' approved by bob\n"));
    wait_done(NS, "cart", &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), (0..3).map(|p| (p, Some(0))).collect());
    let record = flow(&["reset", "status", &id, "-n", NS, "-o", "json"]);
    assert!(record.status.success(), "{}", show(&record));
    let record: serde_json::Value = serde_json::from_slice(&record.stdout).expect("JSON");
    assert_eq!((record["phase"].as_str(), record["requestedBy"].as_str()), (Some("Done"), Some("alice")));
    assert_eq!(record["approval"], serde_json::json!({ "decision": "Approved", "by": "bob" }));
    assert_eq!(record["request"], serde_json::json!({ "id": id, "streamlets": [] }));
    assert!(record["requestedAt"].is_string() && record["finishedAt"].is_string(), "{record}");
    assert_eq!(record["groups"][0]["offsetsAfter"], serde_json::json!({ "0": 0, "1": 0, "2": 0 }));
    // Every event of the request names its requester.
    let events: serde_json::Value =
        serde_json::from_str(&kubectl_ok(&["-n", NS, "get", "events.events.k8s.io", "-o", "json"])).expect("JSON");
    let of_request: Vec<&serde_json::Value> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            ["ResetAwaitingApproval", "ResetApproved", "ResetOffsets"].contains(&e["reason"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(of_request.len(), 3, "{of_request:?}");
    for e in of_request {
        assert_eq!(e["metadata"]["annotations"][REQUESTED_BY], "alice", "{e}");
    }

    // /metrics counts requests by the kind of requester and decisions, never naming anyone.
    let body = http_get(&metrics, "/metrics").1;
    assert!(body.contains("ankka_flow_reset_requests_total{requester=\"user\"} 1\n"), "{body}");
    assert!(body.contains("ankka_flow_reset_decisions_total{decision=\"approved\"} 1\n"), "{body}");
    assert!(!body.contains("alice") && !body.contains("bob"), "{body}");

    // A denied request touches nothing.
    standin::read(GROUP, TOPIC, 60);
    let before = kafka::committed(GROUP, TOPIC, 3);
    let id = requested(&flow_as("alice", &["reset", "cart", "-n", NS]));
    wait_phase(&id, "AwaitingApproval");
    let o = flow_as("bob", &["reset", "deny", &id, "-n", NS]);
    assert!(o.status.success(), "{}", show(&o));
    let s = wait_phase(&id, "Denied");
    assert_eq!(s["approval"], serde_json::json!({ "decision": "Denied", "by": "bob" }));
    wait_done(NS, "cart", &id, Duration::from_secs(30));
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), before, "a denied request moved offsets");
    let body = http_get(&metrics, "/metrics").1;
    assert!(body.contains("ankka_flow_reset_requests_total{requester=\"user\"} 2\n"), "{body}");
    assert!(body.contains("ankka_flow_reset_decisions_total{decision=\"denied\"} 1\n"), "{body}");

    // Nobody decides in time: it expires, touching nothing (the operator looks again at its expiry,
    // without waiting for the resync).
    op.stop();
    op = Operator::start(
        &fresh_dir(NS),
        &[
            ("FLOW_WATCH_NAMESPACE", NS),
            ("FLOW_RESET_APPROVAL_NAMESPACES", NS),
            ("FLOW_RESET_APPROVAL_TIMEOUT_SECONDS", "2"),
        ],
    );
    // (--wait ends with exit code 3, as for a refusal)
    let o = flow_as("alice", &["reset", "cart", "-n", NS, "--wait", "--timeout", "60s"]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(stderr(&o).contains("was not approved in time and expired; nothing was reset"), "{}", show(&o));
    let s = reset_status(NS, "cart");
    assert_eq!((s["phase"].as_str(), s["approval"]["decision"].as_str()), (Some("Expired"), Some("Expired")));
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), before, "an expired request moved offsets");
    op.stop();
}
