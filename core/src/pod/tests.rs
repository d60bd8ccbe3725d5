use std::collections::BTreeSet;

use serde_json::json;

use super::check::{POD_KEYS, POD_SECURITY_KEYS};
use super::*;

fn settings(v: serde_json::Value) -> PodSettings {
    serde_json::from_value(v).expect("pod settings")
}

/// The problems of `own` for a streamlet `s` (not built in) without pipeline defaults, as
/// `path: reason`.
fn problems_of(own: serde_json::Value) -> Vec<String> {
    let own = settings(own);
    check_pipeline(None, [("s", false, Some(&own))]).iter().map(|p| format!("{}: {}", p.path, p.reason)).collect()
}

fn keys(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_object().expect("an object").keys().cloned().collect()
}

#[test]
fn the_keys_named_in_messages_are_the_types_keys() {
    let full = settings(json!({
        "labels": {"a": "b"}, "annotations": {"a": "b"}, "imagePullSecrets": [{"name": "r"}],
        "nodeSelector": {"a": "b"}, "tolerations": [{"operator": "Exists"}], "affinity": {"nodeAffinity": {}},
        "priorityClassName": "p",
        "securityContext": {"runAsUser": 1, "runAsGroup": 1, "fsGroup": 1, "fsGroupChangePolicy": "Always",
                            "supplementalGroups": [1], "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": {"sidecar": {}}
    }));
    let v = serde_json::to_value(&full).expect("JSON");
    assert_eq!(keys(&v), POD_KEYS.iter().map(|k| k.to_string()).collect());
    assert_eq!(keys(&v["securityContext"]), POD_SECURITY_KEYS.iter().map(|k| k.to_string()).collect());
}

#[test]
fn a_streamlets_settings_are_laid_over_the_pipelines() {
    let defaults = settings(json!({
        "labels": {"team": "shop", "tier": "2"},
        "imagePullSecrets": [{"name": "a"}, {"name": "b"}],
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
        "securityContext": {"runAsUser": 1000, "fsGroup": 2000, "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}},
        "containers": {
            "sidecar": {"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}},
            "process": {"resources": {"limits": {"cpu": "1"}}}
        }
    }));
    let own = settings(json!({
        "labels": {"tier": "1"},
        "imagePullSecrets": [{"name": "c"}],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}},
        "securityContext": {"runAsUser": 1001, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": {"sidecar": {"resources": {"limits": {"memory": "256Mi"}}}}
    }));
    let m = serde_json::to_value(PodSettings::for_streamlet(Some(&defaults), Some(&own), false)).expect("JSON");
    assert_eq!(m["labels"], json!({"team": "shop", "tier": "1"}), "maps key by key");
    assert_eq!(m["imagePullSecrets"], json!([{"name": "c"}]), "lists replaced");
    assert_eq!(m["tolerations"], json!([{"key": "k", "operator": "Exists"}]), "kept when not set");
    assert!(m["affinity"]["nodeAffinity"].is_object() && m["affinity"]["podAntiAffinity"].is_object());
    assert_eq!(
        m["securityContext"],
        json!({"runAsUser": 1001, "fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}}),
        "a profile is replaced whole"
    );
    assert_eq!(
        m["containers"]["sidecar"]["resources"],
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}})
    );
    assert_eq!(m["containers"]["process"]["resources"], json!({"limits": {"cpu": "1"}}));
    // A built-in has no process container: the defaults' settings for one do not apply to it.
    let b = PodSettings::for_streamlet(Some(&defaults), None, true);
    assert!(b.container(true).is_none() && b.container(false).is_some());
}

#[test]
fn what_restricted_forbids_is_refused_with_what_to_write() {
    let p = problems_of(json!({"securityContext": {"runAsUser": 0}}));
    assert_eq!(
        p,
        [
            "securityContext.runAsUser: 0 is root, which Pod Security 'restricted' forbids: write a UID other than 0, or leave runAsUser out to run as the image's own user"
        ]
    );
    let p = problems_of(json!({"containers": {"process": {"securityContext": {"runAsUser": 0}}}}));
    assert!(p[0].starts_with("containers.process.securityContext.runAsUser: 0 is root"), "{p:?}");
    let p = problems_of(json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}));
    assert_eq!(
        p,
        [
            "securityContext.seccompProfile.type: Unconfined is forbidden by Pod Security 'restricted': write RuntimeDefault (the default) or Localhost"
        ]
    );
    let p = problems_of(json!({"securityContext": {"seccompProfile": {"type": "Localhost"}}}));
    assert!(p[0].starts_with("securityContext.seccompProfile.localhostProfile: type Localhost needs"), "{p:?}");
    // Group 0 is no root user: restricted allows it.
    assert!(problems_of(json!({"securityContext": {"runAsGroup": 0, "fsGroup": 0, "runAsUser": 10}})).is_empty());
    // What the operator fixes is not a setting at all; its message says why.
    assert_eq!(
        unknown_setting(&["securityContext".into(), "runAsNonRoot".into()]),
        "the operator always sets runAsNonRoot: true (Pod Security 'restricted'): leave it out"
    );
    assert!(
        unknown_setting(&["containers".into(), "sidecar".into(), "securityContext".into(), "privileged".into()])
            .contains("forbids privileged")
    );
    assert_eq!(
        unknown_setting(&["securityContext".into(), "runAsUsr".into()]),
        "is not a setting here: write runAsUser, runAsGroup, fsGroup, fsGroupChangePolicy, supplementalGroups, seccompProfile"
    );
}

#[test]
fn what_kubernetes_would_refuse_is_refused_before_anything_is_applied() {
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (
            json!({"labels": {"app.kubernetes.io/name": "x"}}),
            "labels.app.kubernetes.io/name: 'app.kubernetes.io/name' is the operator's own label",
        ),
        (
            json!({"labels": {"flow.ankka.thinkmorestupidless.com/team": "x"}}),
            "labels.flow.ankka.thinkmorestupidless.com/team: labels under flow.ankka.thinkmorestupidless.com/ are the operator's own",
        ),
        (json!({"labels": {"bad key": "x"}}), "labels.bad key: 'bad key' is not a label key"),
        (json!({"labels": {"team": "not ok"}}), "labels.team: 'not ok' is not a label value"),
        (
            json!({"annotations": {"prometheus.io/port": "9"}}),
            "annotations.prometheus.io/port: 'prometheus.io/port' is set by the operator",
        ),
        (
            json!({"imagePullSecrets": [{"name": "Reg_Cred"}]}),
            "imagePullSecrets[0].name: 'Reg_Cred' is not a Secret name",
        ),
        (json!({"nodeSelector": {"zone": "a b"}}), "nodeSelector.zone: 'a b' is not a label value"),
        (json!({"priorityClassName": "High"}), "priorityClassName: 'High' is not a PriorityClass name"),
        (
            json!({"tolerations": [{"operator": "Equal", "value": "x"}]}),
            "tolerations[0].operator: a toleration without a key must have operator Exists",
        ),
        (
            json!({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
            "tolerations[0].value: operator Exists takes no value",
        ),
        (
            json!({"tolerations": [{"key": "k", "operator": "Is"}]}),
            "tolerations[0].operator: 'Is' is not a toleration operator",
        ),
        (
            json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoRun"}]}),
            "tolerations[0].effect: 'NoRun' is not a taint effect",
        ),
        (
            json!({"tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}]}),
            "tolerations[0].tolerationSeconds: applies to effect NoExecute only",
        ),
        (
            json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}}}),
            "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: 0 is not a weight",
        ),
        (
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}),
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: needs at least one term",
        ),
        (
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Has"}]}]}}}}),
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: 'Has' is not an operator",
        ),
        (
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]}}}),
            "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: '' is not a topology key",
        ),
        (
            json!({"containers": {"sidecar": {"resources": {"limits": {"cpu": "lots"}}}}}),
            "containers.sidecar.resources.limits.cpu: 'lots' is not a Kubernetes quantity",
        ),
        (
            json!({"containers": {"sidecar": {"resources": {"requests": {"memory": "-1Gi"}}}}}),
            "containers.sidecar.resources.requests.memory: '-1Gi' is negative",
        ),
        (
            json!({"containers": {"sidecar": {"resources": {"requests": {"gpu": "1"}}}}}),
            "containers.sidecar.resources.requests.gpu: 'gpu' is not a resource a container can request",
        ),
        (
            json!({"containers": {"process": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}}}),
            "containers.process.resources.requests.cpu: 2 is more than its limit 1: a request may not exceed its limit",
        ),
        (
            json!({"containers": {"process": {"resources": {"requests": {"example.com/gpu": "1"}}}}}),
            "containers.process.resources.requests.example.com/gpu: example.com/gpu cannot be overcommitted: set limits.example.com/gpu too",
        ),
        (
            json!({"securityContext": {"fsGroupChangePolicy": "Sometimes"}}),
            "securityContext.fsGroupChangePolicy: 'Sometimes' is not a policy: write OnRootMismatch or Always",
        ),
        (
            json!({"securityContext": {"supplementalGroups": [-1]}}),
            "securityContext.supplementalGroups[0]: -1 is not a GID",
        ),
    ];
    for (own, want) in cases {
        let p = problems_of(own.clone());
        assert!(p.len() == 1 && p[0].starts_with(want), "{own}: {p:?}, not {want}");
    }
}

#[test]
fn settings_that_fit_pass_and_requests_meet_limits_across_the_defaults() {
    let fine = settings(json!({
        "labels": {"team": "shop", "example.com/tier": "gold"},
        "annotations": {"example.com/owner": "payments team", "prometheus.io/path": "/metrics"},
        "imagePullSecrets": [{"name": "regcred"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "flow", "effect": "NoSchedule"},
                        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
              "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}}}]}},
        "priorityClassName": "flow-high",
        "securityContext": {"runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001, "supplementalGroups": [5],
                            "fsGroupChangePolicy": "OnRootMismatch",
                            "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/flow.json"}},
        "containers": {
            "sidecar": {"resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}}},
            "process": {"resources": {"requests": {"cpu": "0.5", "hugepages-2Mi": "2Mi"}, "limits": {"cpu": "1", "hugepages-2Mi": "2Mi"}},
                        "securityContext": {"runAsUser": 10002}}
        }
    }));
    assert_eq!(check_pipeline(Some(&fine), [("s", false, None)]), []);
    // Each side fits; together the request is above the limit, reported for the streamlet.
    let defaults = settings(json!({"containers": {"process": {"resources": {"requests": {"cpu": "2"}}}}}));
    let own = settings(json!({"containers": {"process": {"resources": {"limits": {"cpu": "1"}}}}}));
    let p = check_pipeline(Some(&defaults), [("router", false, Some(&own))]);
    assert_eq!(
        p.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "streamlet 'router': pod.containers.process.resources.requests.cpu: 2 is more than its limit 1 (with the pipeline's defaults): a request may not exceed its limit"
        ]
    );
    // The pipeline's own problem is named once, as the pipeline's.
    let bad = settings(json!({"securityContext": {"runAsUser": 0}}));
    let p = check_pipeline(Some(&bad), [("a", false, None), ("b", false, None)]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].to_string().starts_with("spec.pod.securityContext.runAsUser: 0 is root"), "{}", p[0]);
}

#[test]
fn a_built_in_streamlet_names_no_process_container() {
    let own = settings(json!({"containers": {"process": {"resources": {"limits": {"cpu": "1"}}}}}));
    let p = check_pipeline(None, [("graph", true, Some(&own))]);
    assert_eq!(
        p.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "streamlet 'graph': pod.containers.process: a built-in streamlet runs inside the sidecar and has no process container: set containers.sidecar"
        ]
    );
    // From the pipeline's defaults, the process settings apply to the other streamlets only.
    assert_eq!(check_pipeline(Some(&own), [("graph", true, None)]), []);
}

#[test]
fn annotations_may_not_outgrow_what_kubernetes_holds() {
    let big = settings(json!({"annotations": {"example.com/big": "x".repeat(262_000)}}));
    let p = check_pipeline(None, [("s", false, Some(&big))]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].reason.contains("more than Kubernetes' 262144"), "{}", p[0]);
}
