//! The reset's guards and its exactly-once rules, on the real test bed: the CLI's refusals change
//! nothing; the operator waits while a target runs and proceeds once it stops; an operator restarted
//! after done does not repeat the request; a `kubectl scale` of a streamlet's Deployment is reverted;
//! a restarted operator applies no object that is as it applied it, and an edited Secret is put back;
//! a stopping operator does not wait for a reset that retries.

use std::time::Duration;

use flow_testbed::*;

const DONE: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets-done";
const REQUEST: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets";

fn straggler_pod(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: router-straggler
  namespace: {ns}
  labels:
    flow.ankka.thinkmorestupidless.com/pipeline: {name}
    flow.ankka.thinkmorestupidless.com/streamlet: router
spec:
  containers: [{{name: process, image: registry.example.com/cart-router:1.2}}]
"
    )
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn all_at_end() -> std::collections::BTreeMap<i32, Option<i64>> {
    [(0, Some(20)), (1, Some(20)), (2, Some(20))].into()
}

#[test]
fn cli_refusals_change_nothing() {
    let _side_by_side = side_by_side();
    let ns = "shop-refusals";
    let cart = Cart::own("refusals");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let _op = cart.scenario(ns, 1, &[]);

    let cases: [(&[&str], String); 4] = [
        (&["reset", "nope", "-n", ns], format!("no pipeline 'nope' in namespace '{ns}'\n")),
        (
            &["reset", name, "--streamlet", "ghost", "-n", ns],
            "cannot reset offsets: no streamlet [ghost]\n".to_string(),
        ),
        (
            &["reset", name, "-n", ns],
            "cannot reset offsets while streamlets are running: [router] is not scaled to 0; [router] still has 1 pod(s). \
             Stop them first: set replicas: 0 for router (flow generate --conf with flow.streamlets.<name>.replicas = 0) \
             and apply, then wait for their pods to go.\n"
                .to_string(),
        ),
        (&["reset", name, "-n", "no-such-namespace"], format!("no pipeline '{name}' in namespace 'no-such-namespace'\n")),
    ];
    for (args, message) in cases {
        let o = flow(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr(&o), message, "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // A pod left while the resource already says 0: refused too. A bare pod with the streamlet's
    // labels stands in for one that is slow to go.
    kubectl_apply(&cart.yaml(ns, 0));
    wait_until("the Deployment's pod to go", Duration::from_secs(60), || {
        pipeline_pods(ns, name).is_empty().then_some(())
    });
    kubectl_apply(&straggler_pod(ns, name));
    wait_until("the straggler to run", Duration::from_secs(60), || {
        (running_pipeline_pods(ns, name) == 1).then_some(())
    });
    let o = flow(&["reset", name, "-n", ns]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(
            "cannot reset offsets while streamlets are running: [router] still has 1 pod(s). Stop them first"
        ),
        "{}",
        stderr(&o)
    );
    // Nothing was written or moved.
    assert_eq!(annotation(ns, name, REQUEST), None);
    assert_eq!(kafka::committed(group, topic, 3), all_at_end());

    // A usage error is exit code 2.
    assert_eq!(flow(&["reset"]).status.code(), Some(2));
    // An unreachable cluster is a clear refusal.
    let o = std::process::Command::new(bin("flow"))
        .args(["reset", name, "-n", ns])
        .env("KUBECONFIG", bed().root.join("testbed/tests/unreachable.kubeconfig"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("cannot reach Kubernetes: "), "{}", stderr(&o));
}

#[test]
fn operator_waits_while_a_target_runs_then_proceeds() {
    let _side_by_side = side_by_side();
    let ns = "shop-waits";
    let cart = Cart::own("waits");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let _op = cart.scenario(ns, 1, &[]);
    let id = "6f1d3a52-2c4e-4b8f-9d0a-7e5b1c2d3f40";
    // Written by hand, past the CLI's guards, while router runs.
    kubectl_ok(&[
        "-n",
        ns,
        "annotate",
        "aflow",
        name,
        &format!("{REQUEST}={{\"id\":\"{id}\",\"streamlets\":[\"router\"]}}"),
    ]);
    let waits = wait_until("the waits event", Duration::from_secs(30), || {
        let n = event_notes(ns, "ResetRefused");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(waits, [format!("reset {id} waits: router is not scaled to 0; router still has 1 pod(s)")]);
    std::thread::sleep(Duration::from_secs(6)); // more than one recheck
    assert_eq!(kafka::committed(group, topic, 3), all_at_end(), "nothing moves while router runs");
    assert_eq!(annotation(ns, name, DONE), None);
    assert_eq!(event_notes(ns, "ResetRefused").len(), 1, "the same wait is recorded once");

    kubectl_apply(&cart.yaml(ns, 0));
    wait_until("done", Duration::from_secs(60), || (annotation(ns, name, DONE).as_deref() == Some(id)).then_some(()));
    assert_eq!(kafka::committed(group, topic, 3), [(0, Some(0)), (1, Some(0)), (2, Some(0))].into());
    assert_eq!(event_notes(ns, "ResetOffsets"), [format!("{group}: 3 partition(s) of '{topic}' to earliest")]);
}

/// A reset whose Kafka cluster cannot be reached retries for `FLOW_RESET_RETRY_SECONDS` (300 s by
/// default). A SIGTERM meanwhile ends the operator at the reset's next wait for an attempt, with
/// nothing done, instead of after the retries (or after the pod's grace period, killed).
#[test]
fn a_stopping_operator_does_not_wait_for_a_reset_that_retries() {
    let _side_by_side = side_by_side();
    let (ns, name) = ("shop-stop-retrying", "retrying");
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    let mut op =
        Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS", "2")]);
    let (yaml, _) = inlets_pipeline_yaml(ns, name, "retrying.input", "shop", 1, 1);
    let yaml = yaml.replacen("    cluster: shop\n", "    bootstrapServers: 127.0.0.1:1\n", 1);
    assert!(yaml.contains("bootstrapServers: 127.0.0.1:1"), "{yaml}");
    kubectl_apply(&yaml);
    let o = flow(&["reset", name, "-n", ns]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Its group's first attempt failed, and it waits for the next one.
    let jsonpath = "jsonpath={.status.reset.groups[0].message}";
    let message = wait_until("the group's first failure", Duration::from_secs(60), || {
        let m = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", jsonpath]);
        (!m.trim().is_empty()).then_some(m)
    });
    eprintln!("the group's message: {message}");

    let ok = std::process::Command::new("kill").args(["-TERM", &op.pid().to_string()]).status();
    assert!(ok.is_ok_and(|s| s.success()), "kill -TERM");
    // Its next attempt is seconds away at most, its retries end minutes later.
    let code = op.wait_exit(Duration::from_secs(60));
    let log = op.log_text();
    assert_eq!(code, Some(0), "a clean stop: {log}");
    assert!(log.contains("the operator stops: the reset waits for its next attempt"), "{log}");
    assert_eq!(annotation(ns, name, DONE), None, "nothing done");
}

#[test]
fn a_restarted_operator_does_not_repeat_a_done_request() {
    let _side_by_side = side_by_side();
    let ns = "shop-restart";
    let cart = Cart::own("restart");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let ledger = fresh_dir(ns);
    let op = cart.scenario(ns, 0, &[]);
    let o = flow(&["reset", name, "-n", ns]);
    assert!(o.status.success(), "{}", stderr(&o));
    wait_until("done", Duration::from_secs(60), || annotation(ns, name, DONE));
    op.stop();
    // The streamlet reads everything again and commits, as it would after a restart.
    standin::read(group, topic, 60);
    assert_eq!(kafka::committed(group, topic, 3), all_at_end());

    // A new operator with the same ledger, then one with none at all: neither rewinds the group.
    for dir in [ledger, fresh_dir("shop-restart-empty")] {
        let op = Operator::start(&dir, &[("FLOW_WATCH_NAMESPACE", ns)]);
        wait_until(&format!("the operator to reconcile {name}"), Duration::from_secs(30), || {
            op.log_text().contains("reconciled").then_some(())
        });
        std::thread::sleep(Duration::from_secs(2));
        op.stop();
        assert_eq!(kafka::committed(group, topic, 3), all_at_end());
        assert_eq!(event_notes(ns, "ResetOffsets").len(), 1);
    }
}

#[test]
fn scaling_a_streamlet_deployment_by_hand_is_reverted() {
    let _side_by_side = side_by_side();
    let ns = "shop-scale";
    let cart = Cart::own("scale");
    let router = format!("flow-{}-router", cart.name);
    let name = cart.name.as_str();
    let _op = cart.scenario(ns, 1, &[]);
    kubectl_ok(&["-n", ns, "scale", "deployment", &router, "--replicas=3"]);
    wait_until("replicas back at 1", Duration::from_secs(30), || {
        let r = kubectl_ok(&["-n", ns, "get", "deployment", &router, "-o", "jsonpath={.spec.replicas}"]);
        (r == "1").then_some(())
    });
    wait_until("one pod", Duration::from_secs(60), || (pipeline_pods(ns, name).len() == 1).then_some(()));
}

/// The operator's count of reconciles that did `outcome` with the pipeline's objects.
fn object_applies(op: &Operator, outcome: &str) -> f64 {
    let prefix = format!("ankka_flow_object_applies_total{{outcome=\"{outcome}\"}} ");
    let body = http_get(&metrics_address(op), "/metrics").1;
    body.lines().find_map(|l| l.strip_prefix(prefix.as_str())?.parse().ok()).unwrap_or(0.0)
}

#[test]
fn objects_as_applied_are_left_alone_across_a_restart_and_hand_edits_are_undone() {
    let _side_by_side = side_by_side();
    let ns = "shop-applied";
    let cart = Cart::own("applied");
    let router = format!("flow-{}-router", cart.name);
    let name = cart.name.as_str();
    // Objects as last applied are applied again after this long at the latest.
    let env = [("FLOW_WATCH_NAMESPACE", ns), ("FLOW_OPERATOR_RESYNC_SECONDS", "60")];
    let op = cart.scenario(ns, 1, &env);
    kubectl_ok(&["-n", ns, "wait", "--for=condition=Ready", &format!("aflow/{name}"), "--timeout=60s"]);
    let applied = get_json(ns, "aflow", name)["status"]["applied"].clone();
    assert_eq!(applied["hash"].as_str().map(str::len), Some(64), "{applied}");
    let deployment = get_json(ns, "deployment", &router);
    assert_eq!(applied["deployments"]["router"]["generation"], deployment["metadata"]["generation"], "{applied}");
    assert_eq!(applied["deployments"]["router"]["uid"], deployment["metadata"]["uid"], "{applied}");
    op.stop();

    // A restarted operator finds every object as it applied it, and applies none.
    let op = Operator::start(&fresh_dir(&format!("{ns}-restart")), &env);
    wait_until("the restarted operator's reconcile", Duration::from_secs(30), || {
        (object_applies(&op, "unchanged") >= 1.0).then_some(())
    });
    assert_eq!(object_applies(&op, "applied"), 0.0);
    assert_eq!(get_json(ns, "aflow", name)["status"]["applied"], applied);

    // A Deployment scaled by hand is put back at once: its spec's generation rose.
    kubectl_ok(&["-n", ns, "scale", "deployment", &router, "--replicas=3"]);
    wait_until("replicas back at 1", Duration::from_secs(30), || {
        let r = kubectl_ok(&["-n", ns, "get", "deployment", &router, "-o", "jsonpath={.spec.replicas}"]);
        (r == "1").then_some(())
    });
    // So is a rollout paused by hand, which would hold back every config or image applied later.
    kubectl_ok(&["-n", ns, "rollout", "pause", "deployment", &router]);
    wait_until("the rollout resumed", Duration::from_secs(30), || {
        let p = kubectl_ok(&["-n", ns, "get", "deployment", &router, "-o", "jsonpath={.spec.paused}"]);
        (p != "true").then_some(())
    });
    // A streamlet Secret edited by hand (the operator does not watch Secrets) is put back once the
    // objects are applied again, within the interval.
    let conf = secret_file(ns, &router, "streamlet.conf");
    kubectl_ok(&[
        "-n",
        ns,
        "patch",
        "secret",
        &router,
        "--type=merge",
        "-p",
        r#"{"stringData":{"streamlet.conf":"edited by hand"}}"#,
    ]);
    assert_eq!(secret_file(ns, &router, "streamlet.conf"), "edited by hand");
    wait_until("the Secret put back", Duration::from_secs(90), || {
        (secret_file(ns, &router, "streamlet.conf") == conf).then_some(())
    });
    assert!(object_applies(&op, "applied") >= 3.0, "the scale, the pause and the interval's end each applied them");
}
