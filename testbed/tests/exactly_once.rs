//! Each reset request is carried out exactly once, on the real test bed: across an operator crash
//! between the commit and the done write (case D1), for malformed requests (case D5), when a
//! pending request is superseded with `flow reset --replace`, and when the resource is deleted and
//! created again with the same request.

use std::time::Duration;

use flow_testbed::cart::{DONE, REQUEST};
use flow_testbed::*;

fn at(offset: i64) -> std::collections::BTreeMap<i32, Option<i64>> {
    (0..3).map(|p| (p, Some(offset))).collect()
}

fn request_id(o: &std::process::Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    out.trim_end().rsplit(' ').next().unwrap_or_default().to_string()
}

/// The operator crashes right after a group's commit, before the done write; the streamlet then reads
/// `records` records and commits; a restarted operator finishes the request. Returns the committed
/// offsets the streamlet left, and the request id.
fn crash_after_commit_then_read(
    cart: &Cart,
    ns: &str,
    records: u64,
) -> (std::collections::BTreeMap<i32, Option<i64>>, String) {
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let mut op = cart.scenario(ns, 0, &[("FLOW_FAULT_CRASH_AT", "after-commit")]);
    let id = request_id(&flow(&["reset", name, "-n", ns]));
    assert_eq!(op.wait_exit(Duration::from_secs(60)), Some(86), "the operator crashes at the fault point");
    assert_eq!(kafka::committed(group, topic, 3), at(0), "the commit landed before the crash");
    assert_eq!(annotation(ns, name, DONE), None);

    standin::read(group, topic, records);
    let progress = kafka::committed(group, topic, 3);

    let _op = Operator::start(&fresh_dir(&format!("{ns}-restarted")), &[("FLOW_WATCH_NAMESPACE", ns)]);
    wait_until("done", Duration::from_secs(60), || {
        (annotation(ns, name, DONE).as_deref() == Some(id.as_str())).then_some(())
    });
    assert_eq!(kafka::committed(group, topic, 3), progress, "the group was not rewound a second time");
    (progress, id)
}

#[test]
fn a_crash_after_the_commit_never_rewinds_the_group_twice() {
    let _side_by_side = side_by_side();
    let ns = "shop-crash";
    let cart = Cart::own("crash");
    // The streamlet read half its input again: some partition is behind where the group was before,
    // so the consumer started from the reset, which therefore landed.
    let (progress, _) = crash_after_commit_then_read(&cart, ns, 30);
    assert!(progress.values().any(|o| o.is_some_and(|o| o < 20)), "{progress:?}");
    assert_eq!(
        event_notes(ns, "ResetOffsets"),
        [format!("{}: 3 partition(s) of '{}' to earliest", cart.group, cart.topic)]
    );
    assert!(event_notes(ns, "ResetOffsetsFailed").is_empty());
}

#[test]
fn a_crash_after_the_commit_then_a_full_reread_is_neither_redone_nor_claimed() {
    let _side_by_side = side_by_side();
    let ns = "shop-crash-full";
    let cart = Cart::own("crash-full");
    // Case D1: the streamlet read everything again and is back where it was. Kafka cannot tell this
    // from a reset that never landed and a streamlet that resumed: nothing is redone, and the group is
    // reported as uncertain rather than as a success.
    let (progress, _) = crash_after_commit_then_read(&cart, ns, 60);
    assert_eq!(progress, at(20));
    assert!(event_notes(ns, "ResetOffsets").is_empty());
    let failed = event_notes(ns, "ResetOffsetsFailed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].starts_with(&format!("{}: cannot tell whether the reset landed", cart.group)), "{failed:?}");
}

#[test]
fn malformed_requests_are_refused_once_each_and_move_nothing() {
    let _side_by_side = side_by_side();
    let ns = "shop-malformed";
    let cart = Cart::own("malformed");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let op = cart.scenario(ns, 0, &[]);
    let many: Vec<String> = (0..2000).map(|i| format!("\"s{i}\"")).collect();
    let bad = [
        ("not json".to_string(), "it is not a reset request"),
        (r#"{"streamlets":["router"]}"#.to_string(), "missing field `id`"),
        (r#"{"id":"4a1f0c2e-8a7b-4c55-9a3e-0d6f2b1c9e77","extra":true}"#.to_string(), "unknown field `extra`"),
        (r#"{"id":"u1","streamlets":["router"]}"#.to_string(), "its id 'u1' is not a UUID"),
        (
            format!(r#"{{"id":"4a1f0c2e-8a7b-4c55-9a3e-0d6f2b1c9e77","streamlets":[{}]}}"#, many.join(",")),
            "names 2000 streamlets",
        ),
    ];
    for (i, (text, why)) in bad.iter().enumerate() {
        kubectl_ok(&["-n", ns, "annotate", "--overwrite", "aflow", name, &format!("{REQUEST}={text}")]);
        let notes = wait_until("a ResetRefused event", Duration::from_secs(30), || {
            let n = event_notes(ns, "ResetRefused");
            (n.len() == i + 1).then_some(n)
        });
        assert!(
            notes.iter().any(|n| n.contains(why) && n.starts_with("reset request refused, nothing was reset")),
            "{why}: {notes:?}"
        );
        let phase = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.reset.phase}"]);
        assert_eq!(phase, "Refused");
    }
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(event_notes(ns, "ResetRefused").len(), bad.len(), "no endless retry, no repeated events");
    assert_eq!(kafka::committed(group, topic, 3), at(20), "nothing moved");
    assert_eq!(annotation(ns, name, DONE), None);
    assert!(!op.log_text().contains("panicked"), "the operator did not crash");
    // A good request after them runs.
    let id = request_id(&flow(&["reset", name, "-n", ns]));
    wait_until("done", Duration::from_secs(60), || {
        (annotation(ns, name, DONE).as_deref() == Some(id.as_str())).then_some(())
    });
}

#[test]
fn a_pending_request_is_refused_unless_replaced_and_the_replaced_one_is_recorded() {
    let _side_by_side = side_by_side();
    let ns = "shop-replace";
    let cart = Cart::own("replace");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let _op = cart.scenario(ns, 0, &[]);
    // A consumer outside Kubernetes keeps the group busy, so the first request cannot finish.
    let mut stray = standin::hold(group, topic, &[]);
    wait_until("the stray consumer to join", Duration::from_secs(30), || (kafka::members(group) > 0).then_some(()));
    let first = request_id(&flow(&["reset", name, "-n", ns]));
    let refused = flow(&["reset", name, "-n", ns]);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        format!(
            "reset {first} of '{name}' is still pending; wait until it is done (kubectl -n {ns} get aflow {name} -o wide shows it) \
             or supersede it with --replace\n"
        )
    );
    // The operator has taken the first request up (it retries while the group is busy).
    wait_until("the operator to work on the first request", Duration::from_secs(30), || {
        let id = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.reset.id}"]);
        (id == first).then_some(())
    });
    let second = request_id(&flow(&["reset", name, "-n", ns, "--replace"]));
    // The stray consumer leaves the group cleanly.
    let _ = std::process::Command::new("kill").args(["-TERM", &stray.id().to_string()]).status();
    let _ = stray.wait();
    wait_until("the second request done", Duration::from_secs(90), || {
        (annotation(ns, name, DONE).as_deref() == Some(second.as_str())).then_some(())
    });
    let superseded = event_notes(ns, "ResetSuperseded");
    assert_eq!(superseded.len(), 1, "{superseded:?}");
    assert!(
        superseded[0].starts_with(&format!("reset {first} was superseded by reset {second} before it finished")),
        "{superseded:?}"
    );
    let history = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.resetHistory}"]);
    let history: serde_json::Value = serde_json::from_str(&history).expect("history JSON");
    assert_eq!(history[0], serde_json::json!({"id": first, "phase": "Superseded"}));
    assert_eq!(kafka::committed(group, topic, 3), at(0));
}

#[test]
fn a_request_written_while_another_finishes_survives_and_runs_next() {
    // Case D4: the operator is stopped right before it writes u4's done annotation; meanwhile the user
    // writes u5. The done write touches only its own key, so u5 survives and is carried out next.
    let _side_by_side = side_by_side();
    let ns = "shop-next";
    let cart = Cart::own("next");
    let name = cart.name.as_str();
    let mut op = cart.scenario(ns, 0, &[("FLOW_FAULT_CRASH_AT", "before-done")]);
    let u4 = request_id(&flow(&["reset", name, "-n", ns]));
    assert_eq!(op.wait_exit(Duration::from_secs(60)), Some(86), "the operator stops before the done write");
    let u5 = "5a5a5a5a-0000-4000-8000-000000000005";
    kubectl_ok(&["-n", ns, "annotate", "--overwrite", "aflow", name, &format!("{REQUEST}={{\"id\":\"{u5}\"}}")]);

    let _op = Operator::start(&fresh_dir(&format!("{ns}-restarted")), &[("FLOW_WATCH_NAMESPACE", ns)]);
    wait_until("u5 done", Duration::from_secs(60), || {
        (annotation(ns, name, DONE).as_deref() == Some(u5)).then_some(())
    });
    assert_eq!(annotation(ns, name, REQUEST), Some(format!("{{\"id\":\"{u5}\"}}")), "u5's request is untouched");
    // u4 had finished every group before the stop: it is kept in the history as done, not superseded.
    let history = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.resetHistory}"]);
    let history: serde_json::Value = serde_json::from_str(&history).expect("history JSON");
    assert_eq!(history[0], serde_json::json!({"id": u4, "phase": "Done"}));
    assert!(event_notes(ns, "ResetSuperseded").is_empty());
    // Who owns what: the operator's field manager holds the done annotation only, never the request.
    let managed = kubectl_ok(&["-n", ns, "get", "aflow", name, "--show-managed-fields", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&managed).expect("JSON");
    let operator_fields: Vec<String> = v["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["manager"] == "ankka-flow-operator" && m["subresource"].is_null())
        .map(|m| m["fieldsV1"].to_string())
        .collect();
    assert!(
        operator_fields.iter().all(|f| !f.contains("reset-offsets\\\"") && !f.contains("f:spec")),
        "{operator_fields:?}"
    );
    assert!(operator_fields.iter().any(|f| f.contains("reset-offsets-done")), "{operator_fields:?}");
}

#[test]
fn a_resource_created_again_with_a_done_request_does_not_reset_its_groups_again() {
    // A request belongs to its object (docs/reset.md): the resource is deleted once its request is
    // done, the streamlet has read since, and the same manifest, request annotation included, creates
    // it again (a new uid). The new object refuses the old request and marks it done; the group keeps
    // the streamlet's progress.
    let _side_by_side = side_by_side();
    let ns = "shop-recreated";
    let cart = Cart::own("recreated");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let _op = cart.scenario(ns, 0, &[]);
    let id = request_id(&flow(&["reset", name, "-n", ns]));
    wait_until("done", Duration::from_secs(60), || {
        (annotation(ns, name, DONE).as_deref() == Some(id.as_str())).then_some(())
    });
    assert_eq!(kafka::committed(group, topic, 3), at(0));
    standin::read(group, topic, 30);
    let progress = kafka::committed(group, topic, 3);
    assert_ne!(progress, at(0), "the streamlet read since the reset");

    let stored: serde_json::Value =
        serde_json::from_str(&kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "json"])).expect("JSON");
    let old_uid = stored["metadata"]["uid"].as_str().expect("a uid").to_string();
    let request = stored["metadata"]["annotations"][REQUEST].clone();
    let manifest = serde_json::json!({
        "apiVersion": stored["apiVersion"],
        "kind": stored["kind"],
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": stored["metadata"]["labels"],
            "annotations": { REQUEST: request },
        },
        "spec": stored["spec"],
    });
    kubectl_ok(&["-n", ns, "delete", "aflow", name, "--wait=true", "--timeout=60s"]);
    kubectl_stdin(&["create", "-f", "-"], &manifest.to_string());
    let new_uid = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.metadata.uid}"]);
    assert_ne!(new_uid, old_uid);

    wait_until("the old request refused and marked done on the new object", Duration::from_secs(60), || {
        (annotation(ns, name, DONE).as_deref() == Some(id.as_str())).then_some(())
    });
    let reset: serde_json::Value =
        serde_json::from_str(&kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.reset}"]))
            .expect("status.reset JSON");
    assert_eq!((reset["id"].as_str(), reset["phase"].as_str()), (Some(id.as_str()), Some("Refused")), "{reset}");
    assert_eq!(reset["uid"].as_str(), Some(new_uid.as_str()), "{reset}");
    assert!(reset["groups"].as_array().is_none_or(Vec::is_empty), "nothing of the old object's progress: {reset}");
    let refused = event_notes(ns, "ResetRefused");
    assert!(
        refused.iter().any(|n| n.starts_with(&format!("reset {id} refused: it was taken up for an earlier AnkkaFlow"))
            && n.contains(&old_uid)),
        "{refused:?}"
    );
    assert_eq!(kafka::committed(group, topic, 3), progress, "the group was not reset a second time");
    assert_eq!(event_notes(ns, "ResetOffsets").len(), 1, "one reset, for the first object");
}
