//! Is anything still running? Cases F1 and F3 of docs/field-cases.md.

use std::time::Duration;

use flow_testbed::cart::DONE;
use flow_testbed::*;

use crate::world::*;

/// F3: pods of the streamlet left in phase Failed or Succeeded do not block a reset (they cannot run
/// any more); a Running one does, counted alone, until it goes.
#[test]
fn f3_failed_and_succeeded_pods_do_not_block_a_reset_running_ones_do() {
    let case = Case::new("case-f3");
    let (ns, p, topic) = (case.ns, case.ns, "case.f3-events");
    let g = case.topic(topic, 3, 20).group_at("router", topic, 3, 20);
    case.apply(&[s("router", topic, 0)]);

    // Two leftovers, driven to Failed and Succeeded through the status subresource.
    for (name, phase) in [("router-failed", "Failed"), ("router-succeeded", "Succeeded")] {
        kubectl_apply(&bare_pod(ns, p, name));
        wait_until("the pod Running", Duration::from_secs(60), || (pod_phase(ns, name) == "Running").then_some(()));
        let patch = format!("{{\"status\":{{\"phase\":\"{phase}\"}}}}");
        kubectl_ok(&["-n", ns, "patch", "pod", name, "--subresource=status", "--type=merge", "-p", &patch]);
        wait_until("the phase", Duration::from_secs(30), || (pod_phase(ns, name) == phase).then_some(()));
    }
    let id = flow_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 0));
    assert_eq!(notes(ns, p, "ResetRefused"), Vec::<String>::new(), "finished pods never made it wait");
    assert_eq!(pod_phase(ns, "router-failed"), "Failed", "kwok left the phase alone");
    assert_eq!(pod_phase(ns, "router-succeeded"), "Succeeded");

    // A Running pod next to them blocks, counted alone.
    groups::commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    kubectl_apply(&bare_pod(ns, p, "router-running"));
    wait_until("the pod Running", Duration::from_secs(60), || {
        (pod_phase(ns, "router-running") == "Running").then_some(())
    });
    let o = flow(&["reset", p, "-n", ns]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "cannot reset offsets while streamlets are running: [router] still has 1 pod(s). Stop them first: set replicas: 0 \
         for router (flow generate --conf with flow.streamlets.<name>.replicas = 0) and apply, then wait for their pods to go.\n"
    );
    let id2 = "f3000000-0000-4000-8000-000000000003";
    write_request(ns, p, id2, &[]);
    let waits = wait_until("the waits event", Duration::from_secs(30), || {
        let n = notes(ns, p, "ResetRefused");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(waits, [format!("reset {id2} waits: router still has 1 pod(s)")]);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 20), "nothing moves while a pod runs");
    kubectl_ok(&["-n", ns, "delete", "pod", "router-running", "--wait=true", "--timeout=60s"]);
    wait_done(ns, p, id2, Duration::from_secs(60));
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 0));
    assert_eq!(notes(ns, p, "ResetOffsets").len(), 2);
}

/// F1 (its first half): a pod that is Terminating (deletionTimestamp set, kept by a finalizer, long
/// grace period) still counts: the CLI refuses, the operator waits and moves nothing; once the pod is
/// gone, the reset happens. (The second half, a consumer committing right after the reset, cannot be
/// placed deterministically.)
#[test]
fn f1_a_terminating_pod_blocks_the_reset_until_it_is_gone() {
    let case = Case::new("case-f1");
    let (ns, p, topic) = (case.ns, case.ns, "case.f1-events");
    let g = case.topic(topic, 3, 20).group_at("router", topic, 3, 20);
    case.apply(&[s("router", topic, 0)]);

    let pod = bare_pod(ns, p, "router-stopping")
        .replace("  restartPolicy: Never\n", "  restartPolicy: Never\n  terminationGracePeriodSeconds: 600\n");
    let pod = pod.replace("  labels:\n", "  finalizers: [case.example.com/hold]\n  labels:\n");
    kubectl_apply(&pod);
    let _release = ReleasePod(ns.to_string(), "router-stopping".to_string());
    wait_until("the pod Running", Duration::from_secs(60), || {
        (pod_phase(ns, "router-stopping") == "Running").then_some(())
    });
    kubectl_ok(&["-n", ns, "delete", "pod", "router-stopping", "--wait=false"]);
    wait_until("the pod Terminating", Duration::from_secs(30), || {
        let t =
            kubectl_ok(&["-n", ns, "get", "pod", "router-stopping", "-o", "jsonpath={.metadata.deletionTimestamp}"]);
        (!t.is_empty()).then_some(())
    });

    let o = flow(&["reset", p, "-n", ns]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .starts_with("cannot reset offsets while streamlets are running: [router] still has 1 pod(s)."),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let id = "f1000000-0000-4000-8000-000000000001";
    write_request(ns, p, id, &[]);
    let waits = wait_until("the waits event", Duration::from_secs(30), || {
        let n = notes(ns, p, "ResetRefused");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(waits, [format!("reset {id} waits: router still has 1 pod(s)")]);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 20), "nothing moves while a pod is stopping");
    assert_eq!(annotation(ns, p, DONE), None);

    kubectl_ok(&[
        "-n",
        ns,
        "patch",
        "pod",
        "router-stopping",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    wait_done(ns, p, id, Duration::from_secs(60));
    assert!(pipeline_pods(ns, p).is_empty());
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 0));
    assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
}
