//! Each reset request is carried out exactly once, on the real test bed: across an operator crash
//! between the commit and the done write (case D1), for malformed requests (case D5), and when a
//! pending request is superseded with `flow reset --replace`.

use std::time::Duration;

use flow_testbed::cart::{DONE, GROUP, REQUEST, TOPIC};
use flow_testbed::*;

fn at(offset: i64) -> std::collections::BTreeMap<i32, Option<i64>> {
    (0..3).map(|p| (p, Some(offset))).collect()
}

fn request_id(o: &std::process::Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    out.trim_end().rsplit(' ').next().unwrap_or_default().to_string()
}

#[test]
fn a_crash_after_the_commit_never_rewinds_the_group_twice() {
    let _serial = serial();
    let ns = "shop-crash";
    let mut op = cart_scenario(ns, 0, &[("FLOW_FAULT_CRASH_AT", "after-commit")]);
    let id = request_id(&flow(&["reset", "cart", "-n", ns]));
    assert_eq!(op.wait_exit(Duration::from_secs(60)), Some(86), "the operator crashes at the fault point");
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), at(0), "the commit landed before the crash");
    assert_eq!(annotation(ns, "cart", DONE), None);

    // The streamlet reads everything again and commits: the group is back where it was before.
    standin::read(GROUP, TOPIC, 60);
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), at(20));

    // The restarted operator settles the request without committing again.
    let _op = Operator::start(&fresh_dir("shop-crash-restarted"), &[("FLOW_WATCH_NAMESPACE", ns)]);
    wait_until("done", Duration::from_secs(60), || {
        (annotation(ns, "cart", DONE).as_deref() == Some(id.as_str())).then_some(())
    });
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), at(20), "the group was not rewound a second time");
    assert_eq!(
        event_notes(ns, "ResetOffsets"),
        ["cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]
    );
}

#[test]
fn malformed_requests_are_refused_once_each_and_move_nothing() {
    let _serial = serial();
    let ns = "shop-malformed";
    let op = cart_scenario(ns, 0, &[]);
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
        kubectl_ok(&["-n", ns, "annotate", "--overwrite", "aflow", "cart", &format!("{REQUEST}={text}")]);
        let notes = wait_until("a ResetRefused event", Duration::from_secs(30), || {
            let n = event_notes(ns, "ResetRefused");
            (n.len() == i + 1).then_some(n)
        });
        assert!(
            notes.iter().any(|n| n.contains(why) && n.starts_with("reset request refused, nothing was reset")),
            "{why}: {notes:?}"
        );
        let phase = kubectl_ok(&["-n", ns, "get", "aflow", "cart", "-o", "jsonpath={.status.reset.phase}"]);
        assert_eq!(phase, "Refused");
    }
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(event_notes(ns, "ResetRefused").len(), bad.len(), "no endless retry, no repeated events");
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), at(20), "nothing moved");
    assert_eq!(annotation(ns, "cart", DONE), None);
    assert!(!op.log_text().contains("panicked"), "the operator did not crash");
    // A good request after them runs.
    let id = request_id(&flow(&["reset", "cart", "-n", ns]));
    wait_until("done", Duration::from_secs(60), || {
        (annotation(ns, "cart", DONE).as_deref() == Some(id.as_str())).then_some(())
    });
}

#[test]
fn a_pending_request_is_refused_unless_replaced_and_the_replaced_one_is_recorded() {
    let _serial = serial();
    let ns = "shop-replace";
    let _op = cart_scenario(ns, 0, &[]);
    // A consumer outside Kubernetes keeps the group busy, so the first request cannot finish.
    let mut stray = standin::hold(GROUP, TOPIC, &[]);
    wait_until("the stray consumer to join", Duration::from_secs(30), || {
        let d = std::process::Command::new(bed().root.join("testbed/kafka-tool"))
            .args(["consumer-groups", "--bootstrap-server", &bed().kafka, "--describe", "--group", GROUP, "--members"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&d.stdout).contains(GROUP).then_some(())
    });
    let first = request_id(&flow(&["reset", "cart", "-n", ns]));
    let refused = flow(&["reset", "cart", "-n", ns]);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        format!(
            "reset {first} of 'cart' is still pending; wait until it is done (kubectl -n {ns} get aflow cart -o wide shows it) \
             or supersede it with --replace\n"
        )
    );
    let second = request_id(&flow(&["reset", "cart", "-n", ns, "--replace"]));
    // The stray consumer leaves the group cleanly.
    let _ = std::process::Command::new("kill").args(["-TERM", &stray.id().to_string()]).status();
    let _ = stray.wait();
    wait_until("the second request done", Duration::from_secs(90), || {
        (annotation(ns, "cart", DONE).as_deref() == Some(second.as_str())).then_some(())
    });
    let superseded = event_notes(ns, "ResetSuperseded");
    assert_eq!(superseded.len(), 1, "{superseded:?}");
    assert!(
        superseded[0].starts_with(&format!("reset {first} was superseded by reset {second} before it finished")),
        "{superseded:?}"
    );
    let history = kubectl_ok(&["-n", ns, "get", "aflow", "cart", "-o", "jsonpath={.status.resetHistory}"]);
    let history: serde_json::Value = serde_json::from_str(&history).expect("history JSON");
    assert_eq!(history[0], serde_json::json!({"id": first, "phase": "Superseded"}));
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), at(0));
}
