//! A tenant who writes pod settings into the resource by hand, past `flow verify`: settings that Pod
//! Security `restricted` forbids or that would take over the operator's labels are refused by the
//! operator before anything is applied, and fields the resource does not have are refused by the
//! API server itself.

use std::time::Duration;

use flow_testbed::*;

#[test]
fn a_tenant_cannot_write_pod_settings_past_restricted() {
    let _lock = side_by_side(); // isolated: its own namespace; the refused pipeline touches no topic or group
    install_crd();
    install_cluster_secret();
    let ns = "flow-hostile-pods";
    restricted_namespace(ns);
    let _op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns)]);

    // A tenant who writes the resource by hand is refused by the operator, and nothing is applied.
    let mut flow: serde_json::Value =
        serde_saphyr::from_str(&cart_yaml_with(ns, &[]).expect("generate")).expect("YAML");
    flow["spec"]["pod"] = serde_json::json!({
        "securityContext": {"seccompProfile": {"type": "Unconfined"}},
        "labels": {"flow.ankka.thinkmorestupidless.com/streamlet": "other"}
    });
    kubectl_apply(&flow.to_string());
    wait_until("the pipeline to be Failed", Duration::from_secs(30), || {
        (kubectl_ok(&["-n", ns, "get", "aflow", "cart", "-o", "jsonpath={.status.phase}"]) == "Failed").then_some(())
    });
    let refused = event_notes(ns, "Refused");
    let want = [
        "spec.pod.labels.flow.ankka.thinkmorestupidless.com/streamlet: labels under flow.ankka.thinkmorestupidless.com/ are the operator's own: choose another key",
        "spec.pod.securityContext.seccompProfile.type: Unconfined is forbidden by Pod Security 'restricted': write RuntimeDefault (the default) or Localhost",
    ];
    for w in want {
        assert!(refused.iter().any(|n| n == w), "{w} not in {refused:?}");
    }
    let label = "flow.ankka.thinkmorestupidless.com/pipeline=cart";
    assert_eq!(kubectl_ok(&["-n", ns, "get", "deployments,secrets", "-l", label, "-o", "name"]), "", "nothing applied");
    // A field the resource does not have is refused by the API server itself (strict field
    // validation of the CRD's schema), before the operator sees it.
    flow["spec"]["pod"] = serde_json::json!({"securityContext": {"privileged": true}});
    let o = kubectl_with_stdin(&["apply", "-f", "-"], &flow.to_string());
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unknown field \"spec.pod.securityContext.privileged\""),
        "{}",
        show(&o)
    );
}
