//! The examples `cart` and `graph` rendered byte for byte.

use super::*;

#[test]
fn the_cart_secrets_are_rendered_byte_for_byte() {
    let v = valid(&generated("cart"), &nothing());
    for name in ["router", "sink"] {
        let r = rendered(&v, name);
        assert_eq!(r.streamlet_conf, fixture(&format!("cart/rendered/{name}.streamlet.conf")), "{name}");
        assert_eq!(r.descriptor_json, fixture(&format!("cart/rendered/{name}.descriptor.json")), "{name}");
        assert_eq!(string_data(&r.secret, CONF_KEY), r.streamlet_conf);
        assert_eq!(string_data(&r.secret, DESCRIPTOR_KEY), r.descriptor_json);
        assert_eq!(r.config_hash, config_hash(&r.descriptor_json, &r.streamlet_conf, None));
        assert_eq!(
            r.deployment.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().annotations.as_ref().unwrap()
                [ANNOTATION_CONFIG_HASH],
            r.config_hash
        );
    }
    let s = &rendered(&v, "router").secret;
    assert_eq!(s.metadata.name.as_deref(), Some("flow-cart-router"));
    assert_eq!(s.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(s.type_.as_deref(), Some("Opaque"));
    assert_eq!(s.metadata.labels.as_ref(), Some(&streamlet_labels("cart", "router")));
    assert_eq!(s.string_data.as_ref().unwrap().len(), 2);
    assert!(s.data.is_none());
    let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("flow.ankka.thinkmorestupidless.com/v1alpha1", "AnkkaFlow", "cart", "0c1d5d4e-uid")
    );
    assert_eq!((owner.controller, owner.block_owner_deletion), (Some(true), Some(true)));
}

/// The rendered file reads as HOCON with the paths the sidecar looks up.
#[test]
fn the_rendered_streamlet_conf_reads_back_as_hocon() {
    use crate::blueprint::tree::{self, Node};
    let v = valid(&generated("cart"), &nothing());
    let root = tree::parse(&rendered(&v, "router").streamlet_conf, &HashMap::new()).unwrap();
    let at = |path: &[&str]| -> Node {
        let mut node = Node::Object(root.clone());
        for key in path {
            node = node.as_object().and_then(|o| o.get(*key)).cloned().unwrap_or_else(|| panic!("{path:?}"));
        }
        node
    };
    let text = |path: &[&str]| at(path).as_text().map(str::to_string).unwrap_or_else(|| panic!("{path:?}"));
    assert_eq!(text(&["flow", "pipeline"]), "cart");
    assert_eq!(text(&["flow", "streamlet"]), "router");
    assert_eq!(at(&["flow", "config", "review-threshold"]).render(), "250");
    let inlet = ["flow", "inlets", "in"];
    assert_eq!(text(&[&inlet[..], &["topic"]].concat()), "shop.cart-events.v1");
    assert_eq!(text(&[&inlet[..], &["group"]].concat()), "cart.router.in");
    assert_eq!(text(&[&inlet[..], &["client-id"]].concat()), "cart.router.in");
    assert_eq!(text(&[&inlet[..], &["bootstrap", "servers"]].concat()), "kafka.kafka.svc:9092");
    assert_eq!(text(&[&inlet[..], &["connection-config", "security.protocol"]].concat()), "PLAINTEXT");
    assert_eq!(text(&[&inlet[..], &["consumer-config", "auto.offset.reset"]].concat()), "earliest");
    assert_eq!(at(&[&inlet[..], &["batch", "max-records"]].concat()).render(), "100");
    assert_eq!(at(&[&inlet[..], &["batch", "max-bytes"]].concat()).render(), "1048576");
    assert_eq!(text(&["flow", "outlets", "valid", "client-id"]), "cart.router.valid");
    assert!(at(&["flow", "outlets", "review", "producer-config"]).as_object().unwrap().is_empty());
    let g = valid(&generated("graph"), &neo4j_secret(&["uri", "username", "password"], "1"));
    let root = tree::parse(&rendered(&g, "graph").streamlet_conf, &HashMap::new()).unwrap();
    let stage = root["flow"].as_object().unwrap()["stage"].as_object().unwrap();
    assert_eq!(stage["name"].as_text(), Some("neo4j-merge-sink"));
    assert_eq!(stage["neo4j"].as_object().unwrap()["credentials-dir"].as_text(), Some("/etc/flow/neo4j"));
    assert!(root["flow"].as_object().unwrap()["outlets"].as_object().unwrap().is_empty());
}

fn env_of(c: &Container) -> Vec<(String, String)> {
    c.env
        .iter()
        .flatten()
        .map(|e| {
            let v = e.value.clone().unwrap_or_else(|| {
                format!("fieldRef:{}", e.value_from.as_ref().unwrap().field_ref.as_ref().unwrap().field_path)
            });
            (e.name.clone(), v)
        })
        .collect()
}

fn pairs(kv: &[(&str, &str)]) -> Vec<(String, String)> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn the_cart_router_deployment_runs_the_sidecar_and_the_process() {
    let v = valid(&generated("cart"), &nothing());
    let r = rendered(&v, "router");
    // The whole Deployment as JSON, as the API server receives it.
    let got = serde_json::to_value(&r.deployment).unwrap();
    let restricted = json!({
        "allowPrivilegeEscalation": false,
        "capabilities": { "drop": ["ALL"] },
        "runAsNonRoot": true,
        "seccompProfile": { "type": "RuntimeDefault" }
    });
    let want = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "flow-cart-router",
            "namespace": "shop",
            "labels": {
                "app.kubernetes.io/managed-by": "ankka-flow",
                "app.kubernetes.io/name": "cart-router",
                "flow.ankka.thinkmorestupidless.com/pipeline": "cart",
                "flow.ankka.thinkmorestupidless.com/streamlet": "router"
            },
            "ownerReferences": [{
                "apiVersion": "flow.ankka.thinkmorestupidless.com/v1alpha1",
                "kind": "AnkkaFlow",
                "name": "cart",
                "uid": "0c1d5d4e-uid",
                "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "replicas": 3,
            "paused": false,
            "selector": { "matchLabels": {
                "flow.ankka.thinkmorestupidless.com/pipeline": "cart",
                "flow.ankka.thinkmorestupidless.com/streamlet": "router"
            }},
            "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxSurge": 1, "maxUnavailable": 0 } },
            "template": {
                "metadata": {
                    "labels": {
                        "app.kubernetes.io/managed-by": "ankka-flow",
                        "app.kubernetes.io/name": "cart-router",
                        "flow.ankka.thinkmorestupidless.com/pipeline": "cart",
                        "flow.ankka.thinkmorestupidless.com/streamlet": "router"
                    },
                    "annotations": {
                        "flow.ankka.thinkmorestupidless.com/config-hash": r.config_hash,
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": "2050"
                    }
                },
                "spec": {
                    "serviceAccountName": "flow-cart",
                    "automountServiceAccountToken": false,
                    "terminationGracePeriodSeconds": 30,
                    // Pod Security `restricted`, on the pod and on each container.
                    "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
                    "containers": [
                        {
                            "name": "sidecar",
                            "image": SIDECAR,
                            "imagePullPolicy": "IfNotPresent",
                            "env": [
                                { "name": "FLOW_PROCESS_ADDRESS", "value": "127.0.0.1:9010" },
                                { "name": "FLOW_CONFIG_DIR", "value": "/etc/flow/config" },
                                { "name": "FLOW_STATE_DIR", "value": "/tmp/flow" },
                                { "name": "FLOW_METRICS_PORT", "value": "2050" },
                                { "name": "FLOW_POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                                { "name": "FLOW_POD_NAMESPACE", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } }
                            ],
                            "ports": [{ "name": "metrics", "containerPort": 2050, "protocol": "TCP" }],
                            "volumeMounts": [
                                { "name": "config", "mountPath": "/etc/flow/config", "readOnly": true },
                                { "name": "api-token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true }
                            ],
                            "readinessProbe": { "exec": { "command": ["test", "-f", "/tmp/flow/ready"] }, "periodSeconds": 5 },
                            "livenessProbe": {
                                "exec": { "command": ["sh", "-c", "test $(( $(date +%s) - $(stat -c %Y /tmp/flow/alive) )) -lt 15"] },
                                "initialDelaySeconds": 20,
                                "periodSeconds": 10
                            },
                            "lifecycle": { "preStop": { "exec": { "command": ["sleep", "2"] } } },
                            "securityContext": restricted
                        },
                        {
                            "name": "process",
                            "image": "ghcr.io/example/cart-router:0.3.1",
                            "imagePullPolicy": "IfNotPresent",
                            "env": [{ "name": "FLOW_PROCESS_PORT", "value": "9010" }],
                            "securityContext": restricted
                        }
                    ],
                    "volumes": [
                        { "name": "config", "secret": { "secretName": "flow-cart-router" } },
                        { "name": "api-token", "projected": { "sources": [
                            { "serviceAccountToken": { "path": "token", "expirationSeconds": 3607 } },
                            { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
                            { "downwardAPI": { "items": [{ "path": "namespace", "fieldRef": { "fieldPath": "metadata.namespace" } }] } }
                        ]}}
                    ]
                }
            }
        }
    });
    assert_eq!(got, want, "{}", serde_json::to_string_pretty(&got).unwrap());
}

#[test]
fn the_pipeline_objects_let_its_pods_create_events_and_nothing_else() {
    let v = valid(&generated("cart"), &nothing());
    let plan = v.build(&observed(&BTreeMap::new(), &BTreeMap::new(), &BTreeSet::new()));
    let sa = serde_json::to_value(&plan.service_account).unwrap();
    let role = serde_json::to_value(&plan.role).unwrap();
    let binding = serde_json::to_value(&plan.role_binding).unwrap();
    let meta = |kind: &str, api: &str| {
        json!({
            "apiVersion": api, "kind": kind,
            "metadata": {
                "name": "flow-cart", "namespace": "shop",
                "labels": { "app.kubernetes.io/managed-by": "ankka-flow", "flow.ankka.thinkmorestupidless.com/pipeline": "cart" },
                "ownerReferences": [{ "apiVersion": "flow.ankka.thinkmorestupidless.com/v1alpha1", "kind": "AnkkaFlow",
                    "name": "cart", "uid": "0c1d5d4e-uid", "controller": true, "blockOwnerDeletion": true }]
            }
        })
    };
    let mut want_sa = meta("ServiceAccount", "v1");
    want_sa["automountServiceAccountToken"] = json!(false);
    assert_eq!(sa, want_sa);
    let mut want_role = meta("Role", "rbac.authorization.k8s.io/v1");
    want_role["rules"] = json!([{ "apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"] }]);
    assert_eq!(role, want_role);
    let mut want_binding = meta("RoleBinding", "rbac.authorization.k8s.io/v1");
    want_binding["roleRef"] = json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "flow-cart" });
    want_binding["subjects"] = json!([{ "kind": "ServiceAccount", "name": "flow-cart", "namespace": "shop" }]);
    assert_eq!(binding, want_binding);
}

// ---------------------------------------------------------------- the graph example (a built-in)

#[test]
fn the_graph_builtin_runs_in_the_sidecar_alone_with_its_secret_mounted() {
    let flow = generated("graph");
    let stage = neo4j_secret(&["uri", "username", "password"], "4711");
    assert_eq!(stage_secrets_to_read(&flow), BTreeSet::from(["neo4j-shop".to_string()]));
    let v = valid(&flow, &stage);
    for name in ["graph", "mapper"] {
        let r = rendered(&v, name);
        assert_eq!(r.streamlet_conf, fixture(&format!("graph/rendered/{name}.streamlet.conf")), "{name}");
        assert_eq!(r.descriptor_json, fixture(&format!("graph/rendered/{name}.descriptor.json")), "{name}");
    }
    let g = rendered(&v, "graph");
    assert_eq!(g.config_hash, config_hash(&g.descriptor_json, &g.streamlet_conf, Some("4711")));
    assert_eq!(g.process_image, None);
    let pod = g.deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pod.containers.len(), 1);
    let sidecar = &pod.containers[0];
    assert_eq!(sidecar.name, "sidecar");
    assert_eq!(
        env_of(sidecar),
        pairs(&[
            ("FLOW_CONFIG_DIR", "/etc/flow/config"),
            ("FLOW_STATE_DIR", "/tmp/flow"),
            ("FLOW_METRICS_PORT", "2050"),
            ("FLOW_POD_NAME", "fieldRef:metadata.name"),
            ("FLOW_POD_NAMESPACE", "fieldRef:metadata.namespace"),
        ])
    );
    let mounts = serde_json::to_value(&sidecar.volume_mounts).unwrap();
    assert_eq!(mounts[2], json!({ "name": "neo4j", "mountPath": "/etc/flow/neo4j", "readOnly": true }));
    let volumes = serde_json::to_value(&pod.volumes).unwrap();
    assert_eq!(volumes[2], json!({ "name": "neo4j", "secret": { "secretName": "neo4j-shop", "defaultMode": 288 } }));
    // a new version of the Neo4j Secret rolls the streamlet, nothing else does
    let v2 = valid(&flow, &neo4j_secret(&["uri", "username", "password", "database"], "4712"));
    assert_ne!(rendered(&v2, "graph").config_hash, g.config_hash);
    assert_eq!(rendered(&v2, "mapper").config_hash, rendered(&v, "mapper").config_hash);
    let mapper = rendered(&v, "mapper").deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(mapper.containers.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["sidecar", "process"]);
    assert_eq!(mapper.volumes.as_ref().unwrap().len(), 2);
}

#[test]
fn builtin_refusals() {
    let flow = generated("graph");
    assert_eq!(
        texts(&refused(&flow, Some(SIDECAR), &nothing())),
        ["streamlet 'graph' names Secret 'neo4j-shop', which does not exist in namespace 'shop'"]
    );
    assert_eq!(
        texts(&refused(&flow, Some(SIDECAR), &BTreeMap::from([("neo4j-shop".into(), StageSecret::Missing)]))),
        ["streamlet 'graph' names Secret 'neo4j-shop', which does not exist in namespace 'shop'"]
    );
    assert_eq!(
        texts(&refused(&flow, Some(SIDECAR), &neo4j_secret(&["username", "database"], "1"))),
        [
            "streamlet 'graph': Secret 'neo4j-shop' has no key 'uri'",
            "streamlet 'graph': Secret 'neo4j-shop' has no key 'password'",
        ]
    );
    let forbidden =
        BTreeMap::from([("neo4j-shop".to_string(), StageSecret::Unreadable("secrets is forbidden".into()))]);
    assert_eq!(
        texts(&refused(&flow, Some(SIDECAR), &forbidden)),
        ["streamlet 'graph': Secret 'neo4j-shop': could not be read: secrets is forbidden"]
    );

    let stage = neo4j_secret(&["uri", "username", "password"], "1");
    let mut no_secret = flow.clone();
    let graph = no_secret.spec.streamlets.iter_mut().find(|s| s.name == "graph").unwrap();
    graph.config.remove("secret");
    graph.image = "ghcr.io/example/graph:1".into();
    assert_eq!(
        texts(&refused(&no_secret, Some(SIDECAR), &stage)),
        [
            "streamlet 'graph' is built in and takes no image",
            "streamlet 'graph' is built in and names no Secret in its 'secret' parameter",
        ]
    );

    let mut unknown = flow.clone();
    let graph = unknown.spec.streamlets.iter_mut().find(|s| s.name == "graph").unwrap();
    graph.descriptor.insert("name".into(), json!("neo4j-merge-sink-2"));
    assert_eq!(
        texts(&refused(&unknown, Some(SIDECAR), &stage)),
        ["streamlet 'graph' names built-in 'neo4j-merge-sink-2', which this operator does not know"]
    );

    let mut bad_name = flow;
    let graph = bad_name.spec.streamlets.iter_mut().find(|s| s.name == "graph").unwrap();
    graph.config.insert("secret".into(), json!("Neo4j_Shop"));
    let stage = BTreeMap::from([(
        "Neo4j_Shop".to_string(),
        StageSecret::Found {
            keys: STAGE_SECRET_KEYS.iter().map(|k| k.to_string()).collect(),
            resource_version: "1".into(),
        },
    )]);
    assert_eq!(
        texts(&refused(&bad_name, Some(SIDECAR), &stage)),
        [
            "streamlet 'graph': 'secret' parameter 'Neo4j_Shop' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a letter or digit"
        ]
    );
}
