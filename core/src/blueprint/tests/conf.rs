//! The messages about deploy-time (`--conf`) files.

use super::*;

#[test]
fn conf_files_merge_later_wins() {
    let g = gen_input(
        cart(&[
            "flow.streamlets.router { replicas = 3, config { review-threshold = 250 } }
             flow.topics.valid-carts { partitions = 12, topic { segment.ms = 1 } }",
            "flow.streamlets.router { replicas = 0 }
             flow.topics.valid-carts.topic { retention.ms = null }
             flow.topics.cart-events { consumer-config.flow.batch { max-records = 500, max-bytes = 4 MiB }, bootstrap.servers = \"k:9092\" }",
        ]),
        Some(&fixture("cart/images.conf")),
    );
    let r = generated(&g);
    let router = r.spec.streamlet("router").unwrap();
    assert_eq!(router.replicas, 0);
    assert_eq!(serde_json::Value::Object(router.config.clone()), json!({"review-threshold": 250}));
    let valid = r.spec.topic("valid-carts").unwrap();
    assert_eq!(valid.partitions, Some(12));
    assert_eq!(valid.topic_config, [("segment.ms".to_string(), "1".to_string())].into());
    let events = r.spec.topic("cart-events").unwrap();
    let b = events.batch.as_ref().unwrap();
    assert_eq!((b.max_records, b.max_bytes), (500, 4 * 1_048_576));
    assert_eq!(events.consumer_config, [("auto.offset.reset".to_string(), "earliest".to_string())].into());
    assert_eq!(events.bootstrap_servers.as_deref(), Some("k:9092"));
    assert_eq!(events.cluster.as_deref(), Some("shop"));
}

#[test]
fn conf_messages() {
    let cart_bp = fixture("cart/blueprint.conf");
    let p = |confs: &[&str]| problems(&cart_bp, confs);
    assert_eq!(p(&["a = {"]), ["--conf conf0.conf: ParseError at 1:6: expected }"]);
    assert_eq!(
        p(&["flow.topics { zz {}, aa { partitions = 1 } }\nflow.streamlets { zz {}, aa { replicas = 1 } }"]),
        [
            "overrides name unknown topic 'aa'",
            "overrides name unknown topic 'zz'",
            "overrides name unknown streamlet 'aa'",
            "overrides name unknown streamlet 'zz'",
        ]
    );
    assert_eq!(
        p(&["flow.streamlets.router.config { zeta = 1, alpha = 2, review-threshold = lots }"]),
        [
            "streamlet 'router': parameter 'alpha' is not declared",
            "streamlet 'router': parameter 'zeta' is not declared",
            "streamlet 'router': parameter 'review-threshold' = lots is not a integer",
        ]
    );
    assert_eq!(p(&["flow.streamlets.router.replicas = many"]), ["streamlet 'router': replicas must be a number"]);
    assert_eq!(p(&["flow.streamlets.router.replicas = 1.5"]), ["streamlet 'router': replicas must be a number"]);
    assert_eq!(p(&["flow.streamlets.router.replicas = -1"]), ["streamlet 'router': replicas must not be negative"]);
    assert_eq!(
        p(&[
            "flow.streamlets.router { image = x }\nflow.flows = 1\nflow.topics.valid-carts { partitions = 0, topic.name = x }"
        ]),
        [
            "overrides name unknown section 'flow.flows'",
            "overrides for topic 'valid-carts': partitions = 0 must be a whole number of at least 1",
            "streamlet 'router': 'image' is not a streamlet setting; a --conf file sets replicas, config and pod",
        ]
    );
    assert_eq!(
        p(&["flow.topics.cart-events { cluster = Bad, consumer-config.flow.batch.max-records = none }"]),
        [
            "overrides for topic 'cart-events': consumer-config.flow.batch.max-records = none must be a whole number of at least 1",
            "Invalid Kafka cluster name 'Bad'. Names must consist of lower case alphanumeric characters and may contain '-' except for at the start or end.",
        ]
    );
}

#[test]
fn parameter_without_default_or_value() {
    let mut i = cart(&[]);
    let DescriptorSource::Directory { files, .. } = &mut i.descriptors else { unreachable!() };
    files[0].text = Ok(fixture("cart/descriptors/cart-router.json").replace("\"default_value\": \"100\",\n", ""));
    assert_eq!(
        texts(&verify(&i).unwrap_err()),
        ["streamlet 'router': parameter 'review-threshold' has no default and no value"]
    );
}

#[test]
fn blueprint_only_keys_in_conf_are_noted() {
    let v = verify(&cart(&["flow.topics.cart-events { managed = true, topic.name = x, consumers = [] }"])).unwrap();
    assert_eq!(
        texts(&v.notes),
        [
            "note: --conf sets flow.topics.cart-events.consumers, which only the blueprint decides; the setting has no effect.",
            "note: --conf sets flow.topics.cart-events.managed, which only the blueprint decides; the setting has no effect.",
            "note: --conf sets flow.topics.cart-events.topic.name, which only the blueprint decides; the setting has no effect.",
        ]
    );
    assert!(!v.blueprint.topics.iter().any(|(id, t)| id.as_str() == "cart-events" && t.managed));
}

#[test]
fn env_substitutions_come_from_the_input() {
    let mut i = cart(&["flow.streamlets.router.replicas = ${REPLICAS}"]);
    i.env.insert("REPLICAS".into(), "4".into());
    assert_eq!(verify(&i).unwrap().deployment.streamlets.values().next().unwrap().replicas, 4);
}

#[test]
fn pod_settings_land_in_the_resource_as_written() {
    let g = gen_input(
        cart(&[
            "flow.pod {
               imagePullSecrets = [{ name = regcred }]
               labels { team = shop, version = 2, example.com/tier = gold }
               securityContext { runAsUser = 10001, fsGroup = 10001 }
               containers.sidecar.resources { requests { cpu = 50m, memory = 64Mi }, limits { cpu = 0.5, memory = 64Mi } }
               tolerations = [{ key = dedicated, operator = Equal, value = flow, effect = NoSchedule }]
             }
             flow.streamlets.router { replicas = 0, pod.containers.process.resources.limits { cpu = 1, memory = 1Gi } }",
        ]),
        Some(&fixture("cart/images.conf")),
    );
    let r = generated(&g);
    let pod = serde_json::to_value(r.spec.pod.as_ref().expect("spec.pod")).unwrap();
    assert_eq!(
        pod,
        json!({
            "labels": {"team": "shop", "version": "2", "example.com/tier": "gold"},
            "imagePullSecrets": [{"name": "regcred"}],
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "flow", "effect": "NoSchedule"}],
            "securityContext": {"runAsUser": 10001, "fsGroup": 10001},
            "containers": {"sidecar": {"resources": {
                "requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "0.5", "memory": "64Mi"}}}}
        })
    );
    let router = r.spec.streamlet("router").unwrap();
    assert_eq!(router.replicas, 0, "the seed's form keeps working beside pod settings");
    assert_eq!(
        serde_json::to_value(router.pod.as_ref().expect("router's pod")).unwrap(),
        json!({"containers": {"process": {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}}})
    );
    assert!(r.spec.streamlet("sink").unwrap().pod.is_none());
}

#[test]
fn pod_settings_messages_name_the_setting_as_written() {
    let cart_bp = fixture("cart/blueprint.conf");
    let p = |confs: &[&str]| problems(&cart_bp, confs);
    assert_eq!(
        p(&["flow.pod.securityContext.runAsUser = 0"]),
        [
            "flow.pod.securityContext.runAsUser: 0 is root, which Pod Security 'restricted' forbids: write a UID other than 0, or leave runAsUser out to run as the image's own user"
        ]
    );
    assert_eq!(
        p(&["flow.streamlets.router.pod.containers.sidecar.securityContext { privileged = true }"]),
        [
            "flow.streamlets.router.pod.containers.sidecar.securityContext.privileged: Pod Security 'restricted' forbids privileged containers: leave it out"
        ]
    );
    assert_eq!(
        p(&["flow.pod { hostNetwork = true }"]),
        [
            "flow.pod.hostNetwork: Pod Security 'restricted' forbids sharing the node's namespaces and files: leave it out"
        ]
    );
    assert_eq!(
        p(&["flow.pod { nodeSelektor { a = b } }"]),
        [
            "flow.pod.nodeSelektor: is not a setting here: write labels, annotations, imagePullSecrets, nodeSelector, tolerations, affinity, priorityClassName, securityContext, containers"
        ]
    );
    assert_eq!(
        p(&["flow.pod.securityContext.runAsUser = root"]),
        ["flow.pod.securityContext.runAsUser: is string \"root\", but must be a whole number"]
    );
    assert_eq!(
        p(&["flow.pod.affinity.nodeAffinity.requiredDuringScheduling = {}"]),
        [
            "flow.pod.affinity.nodeAffinity.requiredDuringScheduling: is not a field of the Kubernetes object written here"
        ]
    );
    assert_eq!(p(&["flow.pod = 3"]), ["overrides: 'flow.pod' must be an object"]);
    // A section that does not read hides no problem of the others.
    assert_eq!(
        p(&[
            "flow.pod.securityContext.runAsUser = 0\nflow.streamlets.router.pod.containers.sidecar.securityContext { privileged = true }"
        ]),
        [
            "flow.streamlets.router.pod.containers.sidecar.securityContext.privileged: Pod Security 'restricted' forbids privileged containers: leave it out",
            "flow.pod.securityContext.runAsUser: 0 is root, which Pod Security 'restricted' forbids: write a UID other than 0, or leave runAsUser out to run as the image's own user",
        ]
    );
    // Each section is read on its own; the defaults and a streamlet's own are checked together.
    assert_eq!(
        p(&[
            "flow.pod.containers.process.resources.requests.memory = 2Gi",
            "flow.streamlets.router.pod.containers.process.resources.limits.memory = 1Gi\nflow.streamlets.sink.pod.labels { app.kubernetes.io/managed-by = me }",
        ]),
        [
            "flow.streamlets.router.pod.containers.process.resources.requests.memory: 2Gi is more than its limit 1Gi (with the pipeline's defaults): a request may not exceed its limit",
            "flow.streamlets.sink.pod.labels.app.kubernetes.io/managed-by: 'app.kubernetes.io/managed-by' is the operator's own label, by which it finds the streamlet's pods: choose another key",
        ]
    );
}
