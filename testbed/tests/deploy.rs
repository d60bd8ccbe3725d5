//! The install manifests (deploy/) on the real test bed: the operator runs with exactly the rights
//! deploy/operator.yaml grants (least privilege), with those rights minus events (case E2), and
//! twice at once under leader election (case D3).
//!
//! The operator runs as a local process that logs in as the user the API server maps to its
//! ServiceAccount: `testbed/tb` puts fixed bearer tokens for
//! `system:serviceaccount:ankka-flow:ankka-flow-operator` (and `...-noevents`) in the test bed's
//! token file, so RBAC treats the process exactly as it would treat the operator's pod.

use std::time::{Duration, Instant};

use flow_testbed::*;

const OPERATOR_USER: &str = "system:serviceaccount:ankka-flow:ankka-flow-operator";
/// The fixed test token of the ServiceAccount of case E2, which gets no rights on events
/// (testbed/tb, `test_token_lines`).
const NOEVENTS_TOKEN: &str = "ankka-flow-operator-noevents-test-token";
const NOEVENTS_SA: &str = "ankka-flow-operator-noevents";
const EVENT_FAILED: &str = "could not record the event";

/// `kubectl auth can-i VERB RESOURCE [--subresource SUB] [-n NS]` as `user`; `resource` may end in
/// `/<subresource>`.
fn can(user: &str, verb: &str, resource: &str, ns: Option<&str>) -> bool {
    let (resource, sub) = resource.split_once('/').map_or((resource, None), |(r, s)| (r, Some(s)));
    let mut args = vec!["auth", "can-i", verb, resource, "--as", user];
    if let Some(sub) = sub {
        args.extend(["--subresource", sub]);
    }
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    let o = kubectl(&args);
    let answer = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(answer == "yes" || answer == "no", "kubectl {args:?}: {answer:?} {}", String::from_utf8_lossy(&o.stderr));
    answer == "yes"
}

/// Writes a reset request with the CLI and returns its id.
fn request_reset(ns: &str, name: &str) -> String {
    let out = flow(&["reset", name, "-n", ns]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout
        .strip_prefix(&format!("reset requested for '{name}': "))
        .and_then(|s| s.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("unexpected output: {stdout:?}"))
        .to_string()
}

/// Waits until the done annotation of `name` in `ns` is `id`.
fn wait_done_annotation(ns: &str, name: &str, id: &str, timeout: Duration) {
    wait_until(&format!("the done annotation {id}"), timeout, || {
        (annotation(ns, name, cart::DONE).as_deref() == Some(id)).then_some(())
    });
}

/// The group's committed offsets equal the log start of every partition.
fn assert_offsets_at_log_start(cart: &Cart) {
    let starts: std::collections::BTreeMap<i32, Option<i64>> =
        kafka::watermarks(&cart.topic).into_iter().map(|(p, (low, _))| (p, Some(low))).collect();
    assert_eq!(kafka::committed(&cart.group, &cart.topic, 3), starts);
}

fn count(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn the_shipped_rbac_is_enough_and_refuses_the_rest() {
    let _side_by_side = side_by_side();
    let ns = "shop-rbac";
    let cart = Cart::own("rbac");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    install_operator_rights();
    let kubeconfig = shipped_rights_kubeconfig();
    let kc = kubeconfig.to_str().expect("utf-8 path");

    // The pipeline at 1 replica: the restricted operator renders everything (server-side apply):
    // the streamlet's Secret and Deployment, and the pipeline's ServiceAccount, Role and
    // RoleBinding, which it may write because it holds the Role's one right itself.
    let op = cart.scenario(ns, 1, &[("KUBECONFIG", kc)]);
    let managed = kubectl_ok(&[
        "-n",
        ns,
        "get",
        "deployments,secrets,serviceaccounts,roles,rolebindings",
        "-l",
        "app.kubernetes.io/managed-by=ankka-flow",
        "-o",
        "name",
    ]);
    let mut kinds: Vec<&str> = managed.lines().collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            format!("deployment.apps/flow-{name}-router"),
            format!("role.rbac.authorization.k8s.io/flow-{name}"),
            format!("rolebinding.rbac.authorization.k8s.io/flow-{name}"),
            format!("secret/flow-{name}-router"),
            format!("serviceaccount/flow-{name}")
        ],
        "{managed}"
    );
    kubectl_ok(&["-n", ns, "wait", "--for=condition=Ready", &format!("aflow/{name}"), "--timeout=60s"]);
    // Stop it through the resource, then request the reset.
    kubectl_apply(&cart.yaml(ns, 0));
    wait_until("the pipeline's pods to go", Duration::from_secs(60), || {
        pipeline_pods(ns, name).is_empty().then_some(())
    });
    let id = request_reset(ns, name);

    let notes = wait_until("the ResetOffsets event", Duration::from_secs(60), || {
        let n = event_notes(ns, "ResetOffsets");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(notes, [format!("{group}: 3 partition(s) of '{topic}' to earliest")]);
    wait_done_annotation(ns, name, &id, Duration::from_secs(30));
    let reset = wait_until("status.reset to be Done", Duration::from_secs(30), || {
        let v = reset_status(ns, name);
        (v["phase"] == "Done").then_some(v)
    });
    assert_eq!(reset["id"], id.as_str());
    assert_offsets_at_log_start(&cart);

    // It held its Lease and was never refused anything.
    let log = op.log_text();
    assert!(log.contains("holding the lease"), "{log}");
    let refused = count(&log.to_lowercase(), "forbidden");
    assert_eq!(refused, 0, "the operator was refused something:\n{log}");
    drop(op);

    // What the shipped rights allow, and what they do not.
    let yes = [
        ("create", "deployments.apps", Some(ns)),
        ("patch", "ankkaflows.flow.ankka.thinkmorestupidless.com", Some("elsewhere")),
        ("patch", "ankkaflows.flow.ankka.thinkmorestupidless.com/status", Some(ns)),
        ("list", "pods", Some(ns)),
        // When each streamlet's last pod went: the reset's settle counts from it.
        ("watch", "pods", Some(ns)),
        ("create", "events.events.k8s.io", Some(ns)),
        ("list", "secrets", Some("ankka-flow")),
        ("watch", "secrets", Some("ankka-flow")),
        ("patch", "leases.coordination.k8s.io", Some("ankka-flow")),
        // The records of the topics the operator created, in its own namespace.
        ("get", "configmaps", Some("ankka-flow")),
        ("list", "configmaps", Some("ankka-flow")),
        ("create", "configmaps", Some("ankka-flow")),
        ("patch", "configmaps", Some("ankka-flow")),
        ("delete", "configmaps", Some("ankka-flow")),
        // The per-streamlet Secret, the per-pipeline ServiceAccount, Role and RoleBinding.
        ("create", "secrets", Some(ns)),
        ("patch", "secrets", Some(ns)),
        ("delete", "secrets", Some(ns)),
        ("get", "secrets", Some(ns)),
        ("create", "serviceaccounts", Some(ns)),
        ("patch", "serviceaccounts", Some(ns)),
        ("create", "roles.rbac.authorization.k8s.io", Some(ns)),
        ("patch", "roles.rbac.authorization.k8s.io", Some(ns)),
        ("create", "rolebindings.rbac.authorization.k8s.io", Some(ns)),
        ("patch", "rolebindings.rbac.authorization.k8s.io", Some(ns)),
    ];
    for (verb, resource, in_ns) in yes {
        assert!(
            can(OPERATOR_USER, verb, resource, in_ns),
            "the operator must be able to {verb} {resource} in {in_ns:?}"
        );
    }
    let no = [
        ("delete", "namespaces", None),
        ("list", "secrets", Some(ns)),
        ("watch", "secrets", Some(ns)),
        ("list", "secrets", Some("default")),
        ("update", "secrets", Some(ns)),
        ("delete", "serviceaccounts", Some(ns)),
        ("create", "serviceaccounts/token", Some(ns)),
        ("delete", "roles.rbac.authorization.k8s.io", Some(ns)),
        ("escalate", "roles.rbac.authorization.k8s.io", Some(ns)),
        ("bind", "roles.rbac.authorization.k8s.io", Some(ns)),
        ("bind", "clusterroles.rbac.authorization.k8s.io", None),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io", None),
        ("list", "configmaps", Some(ns)),
        ("get", "configmaps", Some(ns)),
        ("create", "configmaps", Some(ns)),
        ("patch", "configmaps", Some(ns)),
        ("update", "configmaps", Some("ankka-flow")),
        ("update", "pods", Some(ns)),
        ("create", "pods", Some(ns)),
        ("delete", "pods", Some(ns)),
        ("update", "deployments.apps", Some(ns)),
        ("delete", "ankkaflows.flow.ankka.thinkmorestupidless.com", Some(ns)),
        ("create", "ankkaflows.flow.ankka.thinkmorestupidless.com", Some(ns)),
        ("update", "ankkaflows.flow.ankka.thinkmorestupidless.com/status", Some(ns)),
        ("patch", "leases.coordination.k8s.io", Some(ns)),
        ("create", "events", Some(ns)),
        ("create", "clusterroles.rbac.authorization.k8s.io", None),
        ("patch", "customresourcedefinitions.apiextensions.k8s.io", None),
    ];
    for (verb, resource, in_ns) in no {
        assert!(
            !can(OPERATOR_USER, verb, resource, in_ns),
            "the operator must not be able to {verb} {resource} in {in_ns:?}"
        );
    }
}

/// Case E2: the shipped ClusterRole minus its events rule, bound to another ServiceAccount user.
fn install_noevents_rights() {
    let role = kubectl_ok(&["get", "clusterrole", "ankka-flow-operator", "-o", "json"]);
    let mut role: serde_json::Value = serde_json::from_str(&role).expect("the ClusterRole as JSON");
    let rules = role["rules"].as_array().expect("rules").clone();
    let kept: Vec<serde_json::Value> = rules
        .iter()
        .filter(|r| !r["apiGroups"].as_array().is_some_and(|g| g.iter().any(|g| g == "events.k8s.io")))
        .cloned()
        .collect();
    assert_eq!(kept.len() + 1, rules.len(), "the shipped ClusterRole has one events rule");
    role["rules"] = serde_json::Value::Array(kept);
    role["metadata"] = serde_json::json!({ "name": NOEVENTS_SA });
    kubectl_apply(&role.to_string());
    kubectl_apply(&format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {{name: {NOEVENTS_SA}, namespace: ankka-flow}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {NOEVENTS_SA}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {NOEVENTS_SA}}}
subjects: [{{kind: ServiceAccount, name: {NOEVENTS_SA}, namespace: ankka-flow}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {NOEVENTS_SA}, namespace: ankka-flow}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: ankka-flow-operator}}
subjects: [{{kind: ServiceAccount, name: {NOEVENTS_SA}, namespace: ankka-flow}}]
"#
    ));
}

#[test]
fn without_rights_on_events_the_reset_still_happens_once() {
    let _side_by_side = side_by_side();
    let ns = "shop-noevents";
    let cart = Cart::own("noevents");
    let name = cart.name.as_str();
    install_operator_rights();
    install_noevents_rights();
    let user = format!("system:serviceaccount:ankka-flow:{NOEVENTS_SA}");
    assert!(!can(&user, "create", "events.events.k8s.io", Some(ns)));
    assert!(can(&user, "create", "deployments.apps", Some(ns)));
    let kubeconfig = kubeconfig_with_token(NOEVENTS_SA, NOEVENTS_TOKEN);

    let mut op = cart.scenario(ns, 0, &[("KUBECONFIG", kubeconfig.to_str().expect("utf-8 path"))]);
    let id = request_reset(ns, name);
    wait_done_annotation(ns, name, &id, Duration::from_secs(60));
    let reset = wait_until("status.reset to be Done", Duration::from_secs(30), || {
        let v = reset_status(ns, name);
        (v["phase"] == "Done").then_some(v)
    });
    assert_eq!(reset["groups"][0]["outcome"], "Reset", "{reset}");
    assert_eq!(reset["groups"].as_array().map(Vec::len), Some(1), "{reset}");
    assert_offsets_at_log_start(&cart);
    assert!(event_notes(ns, "ResetOffsets").is_empty());

    // The reset's event that could not be recorded is logged once, the operator goes on, and it
    // does not loop on it: a few reconciles later the count has not grown.
    let reset_event_failed =
        |log: &str| log.lines().filter(|l| l.contains(EVENT_FAILED) && l.contains("reason=ResetOffsets")).count();
    let log = op.log_text();
    assert_eq!(reset_event_failed(&log), 1, "{log}");
    assert_eq!(count(&log, "reset request done"), 1, "{log}");
    kubectl_ok(&["-n", ns, "annotate", "aflow", name, "--overwrite", "touch=1"]);
    std::thread::sleep(Duration::from_secs(3));
    assert!(op.running(), "the operator must not stop:\n{}", op.log_text());
    let later = op.log_text();
    assert_eq!(reset_event_failed(&later), 1, "{later}");
    assert_eq!(count(&later, "reset request done"), 1, "{later}");
    // Without the events right, Kubernetes does not let the operator write the pipeline's Role,
    // which passes that right on to the sidecar: the resource says so.
    let applied = kubectl_ok(&[
        "-n",
        ns,
        "get",
        "aflow",
        name,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Applied\")].status} {.status.conditions[?(@.type==\"Applied\")].message}",
    ]);
    assert!(applied.starts_with(&format!("False could not apply Role 'flow-{name}': ")), "{applied}");
}

#[test]
fn two_operators_one_leader_and_a_quick_hand_over() {
    let _side_by_side = side_by_side();
    let ns = "shop-leader";
    let cart = Cart::own("leader");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    install_operator_rights();
    let kubeconfig = shipped_rights_kubeconfig();
    let kc = kubeconfig.to_str().expect("utf-8 path");
    // Both in the same Lease, as two pods of one Deployment are; a short term keeps the test quick.
    let lease = "ankka-flow-operator-d3";
    let _ = kubectl(&["-n", "ankka-flow", "delete", "lease", lease, "--ignore-not-found"]);
    let common = [("KUBECONFIG", kc), ("FLOW_LEASE_NAME", lease), ("FLOW_LEASE_DURATION_SECONDS", "6")];
    let env_a: Vec<(&str, &str)> = common.iter().copied().chain([("HOSTNAME", "operator-a")]).collect();
    let env_b: Vec<(&str, &str)> =
        common.iter().copied().chain([("HOSTNAME", "operator-b"), ("FLOW_WATCH_NAMESPACE", ns)]).collect();

    let a = cart.scenario(ns, 0, &env_a);
    let b = Operator::start(&fresh_dir("shop-leader-b"), &env_b);
    let holding = "holding the lease";
    wait_until("one operator to hold the lease", Duration::from_secs(30), || {
        (a.log_text().contains(holding) || b.log_text().contains(holding)).then_some(())
    });
    wait_until("both operators to have started", Duration::from_secs(30), || {
        (a.log_text().contains("waiting to hold the lease") && b.log_text().contains("waiting to hold the lease"))
            .then_some(())
    });
    let (leader, mut follower, leader_name, follower_name) = if a.log_text().contains(holding) {
        (a, b, "operator-a", "operator-b")
    } else {
        (b, a, "operator-b", "operator-a")
    };
    assert!(!follower.log_text().contains(holding), "both hold the lease:\n{}", follower.log_text());
    let holder = || kubectl_ok(&["-n", "ankka-flow", "get", "lease", lease, "-o", "jsonpath={.spec.holderIdentity}"]);
    assert_eq!(holder(), leader_name);

    // Both answer their probes, the waiting one too; only the holder says it leads.
    for (op, leads) in [(&leader, 1), (&follower, 0)] {
        let addr = metrics_address(op);
        assert_eq!(http_get(&addr, "/healthz"), (200, "ok\n".to_string()));
        let (code, body) = http_get(&addr, "/metrics");
        assert_eq!(code, 200);
        assert!(body.lines().any(|l| l == format!("ankka_flow_leader {leads}")), "{body}");
    }

    // A request: exactly one operator carries it out, once.
    let first = request_reset(ns, name);
    wait_done_annotation(ns, name, &first, Duration::from_secs(60));
    assert_eq!(event_notes(ns, "ResetOffsets"), [format!("{group}: 3 partition(s) of '{topic}' to earliest")]);
    assert_offsets_at_log_start(&cart);
    assert_eq!(count(&leader.log_text(), "reset request done"), 1, "{}", leader.log_text());
    assert_eq!(count(&follower.log_text(), "reset request done"), 0, "{}", follower.log_text());
    assert_eq!(count(&follower.log_text(), "ResetOffsets"), 0, "{}", follower.log_text());

    // The group reads again, so the next reset has something to do.
    standin::read(group, topic, 60);
    assert_eq!(kafka::committed(group, topic, 3), [(0, Some(20)), (1, Some(20)), (2, Some(20))].into());

    // SIGTERM to the leader: it gives the Lease back, and the other one takes over within a term.
    let leader_log = leader.log.clone();
    let stopped = Instant::now();
    leader.stop();
    let gone = std::fs::read_to_string(&leader_log).unwrap_or_default();
    assert!(gone.contains("released the lease"), "{gone}");
    wait_until("the other operator to hold the lease", Duration::from_secs(6 + 4), || {
        follower.log_text().contains(holding).then_some(())
    });
    let took = stopped.elapsed();
    assert!(took <= Duration::from_secs(6 + 2), "hand-over took {took:?}");
    assert_eq!(holder(), follower_name);

    // The next request is carried out by the new leader.
    let second = request_reset(ns, name);
    wait_done_annotation(ns, name, &second, Duration::from_secs(60));
    assert_offsets_at_log_start(&cart);
    let log = follower.log_text();
    assert_eq!(count(&log, "reset request done"), 1, "{log}");
    assert!(log.lines().any(|l| l.contains("reset request done") && l.contains(&second)), "{log}");
    assert_eq!(count(&log, "lost the lease"), 0, "{log}");
    eprintln!("deploy: hand-over after SIGTERM took {took:?}");

    // Someone else takes the Lease (as after a partition that outlasted a term): the holder notices
    // on its next reading and stops at once rather than reconcile alongside.
    let taken = Instant::now();
    kubectl_ok(&[
        "-n",
        "ankka-flow",
        "patch",
        "lease",
        lease,
        "--type=merge",
        "-p",
        r#"{"spec":{"holderIdentity":"intruder"}}"#,
    ]);
    let code = follower.wait_exit(Duration::from_secs(6));
    let noticed = taken.elapsed();
    assert_eq!(code, Some(1), "{}", follower.log_text());
    assert_eq!(count(&follower.log_text(), "lost the lease"), 1, "{}", follower.log_text());
    eprintln!("deploy: the holder stopped {noticed:?} after its Lease was taken");
}
