//! The examples rendered byte for byte, every refusal, and the plan's order.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Container;
use serde_json::json;

use super::*;
use crate::blueprint::{DescriptorSource, GenerateInput, Source, VerifyInput, generate};
use crate::connection::Cluster;
use crate::names::{LABEL_MANAGED_BY, LABEL_NAME, LABEL_PIPELINE, LABEL_STREAMLET};
use crate::render::names::streamlet_labels;
use crate::render::secret::{CONF_KEY, DESCRIPTOR_KEY};
use crate::render::status::ObservedDeployment;
use crate::render::topics::LiveTopic;
use crate::render::workload::ANNOTATION_CONFIG_HASH;
use crate::resource::OnDelete;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{FIX}/{path}")).unwrap()
}

/// The resource `flow generate` writes for an example, as the API server returns it.
fn generated(example: &str) -> AnkkaFlow {
    let dir = format!("{FIX}/{example}/descriptors");
    let mut files: Vec<Source> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| Source::text(p.file_name().unwrap().to_string_lossy(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let input = GenerateInput {
        verify: VerifyInput {
            descriptors: DescriptorSource::Directory { dir: "descriptors".into(), files },
            blueprint: Source::text("blueprint.conf", fixture(&format!("{example}/blueprint.conf"))),
            confs: vec![Source::text("overrides.conf", fixture(&format!("{example}/overrides.conf")))],
            env: HashMap::new(),
        },
        images_file: Some(Source::text("images.conf", fixture(&format!("{example}/images.conf")))),
        images: vec![],
        pipeline: None,
        version: "0.3.1".into(),
        namespace: Some("shop".into()),
        delete_managed_topics: false,
    };
    let mut flow = generate(&input).unwrap().resource;
    flow.metadata.uid = Some("0c1d5d4e-uid".into());
    flow.metadata.generation = Some(2);
    flow
}

fn secret(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Cluster `name` whose Secret holds `kv` and allows namespace `shop`, as the examples' do.
fn cluster(name: &str, kv: &[(&str, &str)]) -> (String, Cluster) {
    let allowed = secret(&[(crate::connection::ANNOTATION_ALLOWED_NAMESPACES, "shop")]);
    (name.to_string(), Cluster::from_secret(name, &secret(kv), &allowed))
}

/// `kafka-cluster-shop` and `kafka-cluster-default` of the examples.
fn clusters() -> Clusters {
    BTreeMap::from([
        cluster(
            "shop",
            &[("bootstrap.servers", "kafka.kafka.svc:9092"), ("connection-config", "security.protocol=PLAINTEXT\n")],
        ),
        cluster("default", &[("bootstrap.servers", "kafka.kafka.svc:9092"), ("partitions", "3"), ("replicas", "1")]),
    ])
}

fn neo4j_secret(keys: &[&str], version: &str) -> BTreeMap<String, StageSecret> {
    BTreeMap::from([(
        "neo4j-shop".to_string(),
        StageSecret::Found { keys: keys.iter().map(|k| k.to_string()).collect(), resource_version: version.into() },
    )])
}

const SIDECAR: &str = "ghcr.io/thinkmorestupidless/ankka-flow-sidecar:0.3.1";

fn decide_with(flow: &AnkkaFlow, sidecar: Option<&str>, stage: &BTreeMap<String, StageSecret>) -> Decision {
    decide(&Inputs { flow, sidecar_image: sidecar, clusters: &clusters(), stage_secrets: stage }).unwrap()
}

fn valid(flow: &AnkkaFlow, stage: &BTreeMap<String, StageSecret>) -> ValidPipeline {
    match decide_with(flow, Some(SIDECAR), stage) {
        Decision::Apply(v) => *v,
        other => panic!("not valid: {other:?}"),
    }
}

fn refused(flow: &AnkkaFlow, sidecar: Option<&str>, stage: &BTreeMap<String, StageSecret>) -> Refusal {
    match decide_with(flow, sidecar, stage) {
        Decision::Refuse(r) => *r,
        other => panic!("not refused: {other:?}"),
    }
}

fn texts(r: &Refusal) -> Vec<String> {
    r.problems.iter().map(ToString::to_string).collect()
}

fn rendered<'a>(v: &'a ValidPipeline, name: &str) -> &'a RenderedStreamlet {
    v.streamlets().find(|s| s.name == name).unwrap()
}

fn string_data<'a>(s: &'a Secret, key: &str) -> &'a str {
    s.string_data.as_ref().unwrap()[key].as_str()
}

fn nothing() -> BTreeMap<String, StageSecret> {
    BTreeMap::new()
}

// ---------------------------------------------------------------- the cart example

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
                            "lifecycle": { "preStop": { "exec": { "command": ["sleep", "2"] } } }
                        },
                        {
                            "name": "process",
                            "image": "ghcr.io/example/cart-router:0.3.1",
                            "imagePullPolicy": "IfNotPresent",
                            "env": [{ "name": "FLOW_PROCESS_PORT", "value": "9010" }]
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

// ---------------------------------------------------------------- refusals

#[test]
fn without_a_sidecar_image_every_problem_is_reported_as_sidecar_image_missing() {
    let mut flow = generated("cart");
    let r = refused(&flow, None, &nothing());
    assert_eq!(texts(&r), ["no sidecar image is configured: set FLOW_SIDECAR_IMAGE on the operator"]);
    assert_eq!(r.reason, "SidecarImageMissing");
    assert_eq!(r.events.len(), 1);
    assert_eq!(
        (r.events[0].type_, r.events[0].reason.as_str(), r.events[0].note.as_str()),
        (
            EventType::Warning,
            "SidecarImageMissing",
            "no sidecar image is configured: set FLOW_SIDECAR_IMAGE on the operator"
        )
    );
    assert_eq!(r.status.phase.as_deref(), Some("Failed"));
    assert_eq!(r.status.observed_generation, Some(2));
    assert!(r.status.streamlets.is_empty() && r.status.topics.is_empty() && r.status.conditions.is_empty());
    assert_eq!(r.outcome(), ApplyOutcome::Refused { reason: "SidecarImageMissing".into() });

    flow.spec.streamlets[1].image = String::new();
    let r = refused(&flow, Some("  "), &nothing());
    assert_eq!(r.events.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(), ["SidecarImageMissing"; 2]);
    assert_eq!(
        r.status.detail,
        "no sidecar image is configured: set FLOW_SIDECAR_IMAGE on the operator; streamlet 'sink' has no image"
    );
    let r = refused(&flow, Some(SIDECAR), &nothing());
    assert_eq!(r.reason, "Refused");
    assert_eq!(r.events.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(), ["Refused"]);
}

#[test]
fn topic_resolution_failures_refuse() {
    let flow = generated("cart");
    let none = BTreeMap::new();
    let r = decide(&Inputs { flow: &flow, sidecar_image: Some(SIDECAR), clusters: &none, stage_secrets: &nothing() })
        .unwrap();
    let Decision::Refuse(r) = r else { panic!("not refused") };
    let r = *r;
    assert_eq!(
        texts(&r),
        [
            "topic 'cart-events' uses Kafka cluster 'shop', but there is no Secret 'kafka-cluster-shop'",
            "topic 'review-carts' uses Kafka cluster 'default', but there is no Secret 'kafka-cluster-default'",
            "topic 'valid-carts' uses Kafka cluster 'default', but there is no Secret 'kafka-cluster-default'",
        ]
    );
}

#[test]
fn descriptor_and_binding_refusals() {
    let base = generated("cart");
    let edit = |f: &dyn Fn(&mut AnkkaFlow)| {
        let mut flow = base.clone();
        f(&mut flow);
        texts(&refused(&flow, Some(SIDECAR), &nothing()))
    };
    fn router_of(flow: &mut AnkkaFlow) -> &mut StreamletSpec {
        flow.spec.streamlets.iter_mut().find(|s| s.name == "router").unwrap()
    }

    assert_eq!(edit(&|f| router_of(f).descriptor.clear()), ["streamlet 'router' has no descriptor"]);
    assert_eq!(
        edit(&|f| {
            router_of(f).descriptor.insert("inlets".into(), json!("in"));
        }),
        ["streamlet 'router': its descriptor does not parse: 'inlets' must be an array"]
    );
    assert_eq!(
        edit(&|f| {
            router_of(f).descriptor["inlets"][0]["contract"]["fingerprint"] = json!("AAAA");
        }),
        [
            "streamlet 'router': inlet 'in' fingerprint does not match schema name 'cart-events.v1' (was the descriptor edited by hand?)"
        ]
    );
    assert_eq!(
        edit(&|f| {
            router_of(f).inlets.clear();
        }),
        ["streamlet 'router': inlet 'in' is not bound to a topic"]
    );
    assert_eq!(
        edit(&|f| {
            let r = router_of(f);
            r.inlets.insert("side".into(), "cart-events".into());
            r.outlets.insert("in".into(), "valid-carts".into());
        }),
        [
            "streamlet 'router': binds inlet 'side', which the descriptor does not declare",
            "streamlet 'router': binds outlet 'in', which the descriptor does not declare",
        ]
    );
    assert_eq!(
        edit(&|f| {
            router_of(f).outlets.insert("review".into(), "nope".into());
        }),
        ["streamlet 'router': port 'review' names topic 'nope', which the resource does not declare"]
    );
    assert_eq!(
        edit(&|f| {
            router_of(f).image = " ".into();
        }),
        ["streamlet 'router' has no image"]
    );
    assert_eq!(
        edit(&|f| {
            let dup = f.spec.streamlets[0].clone();
            f.spec.streamlets.push(dup);
            let dup = f.spec.topics[0].clone();
            f.spec.topics.push(dup);
        }),
        ["topic 'cart-events' is declared 2 times", "streamlet 'router' is declared 2 times"]
    );
}

#[test]
fn names_that_cannot_fit_are_refused_before_anything_is_applied() {
    let mut flow = generated("cart");
    let pipeline = "p".repeat(40);
    let long = "s".repeat(50);
    flow.spec.pipeline = pipeline.clone();
    let router = flow.spec.streamlets.iter_mut().find(|s| s.name == "router").unwrap();
    router.name = long.clone();
    let r = refused(&flow, Some(SIDECAR), &nothing());
    assert_eq!(
        texts(&r),
        [format!(
            "streamlet '{long}': label app.kubernetes.io/name would be '{pipeline}-{long}', 91 characters, but a label value holds at most 63; shorten the pipeline id or the streamlet name"
        )]
    );
    assert_eq!(r.reason, "Refused");
}

/// Whatever passes the name check renders only names and label values Kubernetes accepts, and a
/// name one character longer is refused: the check covers what is rendered.
#[test]
fn the_name_check_covers_every_rendered_name() {
    fn label_value_ok(v: &str) -> bool {
        v.len() <= 63
            && (v.is_empty()
                || (v.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && v.ends_with(|c: char| c.is_ascii_alphanumeric())
                    && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))))
    }
    fn subdomain_ok(v: &str) -> bool {
        // RFC 1123 subdomain as Kubernetes checks it: no limit per dot-separated part, 253 in all
        v.len() <= 253
            && v.split('.').all(|p| {
                !p.is_empty()
                    && p.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && p.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    }
    fn check_meta(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, bad: &mut Vec<String>) {
        if let Some(n) = &m.name
            && !subdomain_ok(n)
        {
            bad.push(n.clone());
        }
        for v in m.labels.iter().flatten().map(|(_, v)| v) {
            if !label_value_ok(v) {
                bad.push(v.clone());
            }
        }
    }
    let pipeline = "p".repeat(40);
    for (len, fits) in [(22, true), (23, false)] {
        let mut flow = generated("graph");
        flow.spec.pipeline = pipeline.clone();
        let graph = flow.spec.streamlets.iter_mut().find(|s| s.name == "graph").unwrap();
        graph.name = "g".repeat(len);
        let stage = neo4j_secret(&["uri", "username", "password"], "1");
        // render even what does not fit, to see what Kubernetes would get
        let problems = crate::render::names::check(
            &flow.spec.pipeline,
            &flow
                .spec
                .streamlets
                .iter()
                .map(|s| NamedStreamlet { name: &s.name, stage_secret: stage_secret_name(s) })
                .collect::<Vec<_>>(),
        );
        assert_eq!(problems.is_empty(), fits);
        if !fits {
            assert!(matches!(decide_with(&flow, Some(SIDECAR), &stage), Decision::Refuse(_)));
            continue;
        }
        let v = valid(&flow, &stage);
        let plan = v.build(&observed(&BTreeMap::new(), &BTreeMap::new(), &BTreeSet::new()));
        let mut bad = Vec::new();
        check_meta(&plan.service_account.metadata, &mut bad);
        check_meta(&plan.role.metadata, &mut bad);
        check_meta(&plan.role_binding.metadata, &mut bad);
        for s in &plan.streamlets {
            check_meta(&s.rendered.secret.metadata, &mut bad);
            check_meta(&s.rendered.deployment.metadata, &mut bad);
            let spec = s.rendered.deployment.spec.as_ref().unwrap();
            check_meta(spec.template.metadata.as_ref().unwrap(), &mut bad);
            for v in spec.selector.match_labels.iter().flatten().map(|(_, v)| v) {
                if !label_value_ok(v) {
                    bad.push(v.clone());
                }
            }
            for vol in spec.template.spec.as_ref().unwrap().volumes.iter().flatten() {
                if let Some(name) = vol.secret.as_ref().and_then(|s| s.secret_name.as_ref())
                    && !subdomain_ok(name)
                {
                    bad.push(name.clone());
                }
            }
            let sa = spec.template.spec.as_ref().unwrap().service_account_name.as_deref().unwrap();
            assert_eq!(sa, plan.service_account.metadata.name.as_deref().unwrap());
        }
        assert!(bad.is_empty(), "{bad:?}");
    }
}

// ---------------------------------------------------------------- the plan

fn observed<'a>(
    topics: &'a BTreeMap<String, KafkaTopic>,
    deployments: &'a BTreeMap<String, ObservedDeployment>,
    secrets: &'a BTreeSet<String>,
) -> Observed<'a> {
    Observed { topics, deployments, secrets }
}

fn all_exist() -> BTreeMap<String, KafkaTopic> {
    let live =
        |p, r, c: &[(&str, &str)]| KafkaTopic::Exists(LiveTopic { partitions: p, replication: r, configs: secret(c) });
    BTreeMap::from([
        ("cart-events".to_string(), live(3, 1, &[])),
        ("review-carts".to_string(), live(3, 1, &[])),
        ("valid-carts".to_string(), live(12, 1, &[("retention.ms", "86400000")])),
    ])
}

fn settled(r: &RenderedStreamlet, replicas: i32) -> ObservedDeployment {
    ObservedDeployment {
        config_hash: Some(r.config_hash.clone()),
        process_image: r.process_image.clone(),
        generation: 5,
        observed_generation: 5,
        updated_replicas: replicas,
        ready_replicas: replicas,
    }
}

fn describe(actions: &[Action<'_>]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::Record(e) => format!("event {}: {}", e.reason, e.note),
            other => other.subject(),
        })
        .collect()
}

#[test]
fn a_first_reconcile_creates_topics_before_anything_else_in_order() {
    let mut flow = generated("cart");
    flow.spec.on_delete = Some(OnDelete { managed_topics: ManagedTopicsPolicy::Delete });
    let v = valid(&flow, &nothing());
    assert_eq!(v.pipeline(), "cart");
    assert_eq!(
        v.topics().iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["cart-events", "review-carts", "valid-carts"]
    );
    let topics = BTreeMap::from([
        ("cart-events".to_string(), KafkaTopic::Missing),
        ("review-carts".to_string(), KafkaTopic::Missing),
        ("valid-carts".to_string(), KafkaTopic::Missing),
    ]);
    let plan = v.build(&observed(&topics, &BTreeMap::new(), &BTreeSet::new()));
    assert_eq!(
        describe(&plan.actions()),
        [
            "finalizer 'flow.ankka.thinkmorestupidless.com/managed-topics'",
            "event TopicMissing: topic 'shop.cart-events.v1' is not managed by the pipeline and does not exist; its consumers will not become ready",
            "topic 'cart.review-carts'",
            "event TopicCreated: created topic 'cart.review-carts' with 3 partitions",
            "topic 'cart.valid-carts'",
            "event TopicCreated: created topic 'cart.valid-carts' with 12 partitions",
            "ServiceAccount 'flow-cart'",
            "Role 'flow-cart'",
            "RoleBinding 'flow-cart'",
            "Secret 'flow-cart-router'",
            "Deployment 'flow-cart-router'",
            "Secret 'flow-cart-sink'",
            "Deployment 'flow-cart-sink'",
        ]
    );
    assert_eq!(plan.actions()[0], Action::AddFinalizer);
    let Action::CreateTopic(created) = plan.actions()[4] else { panic!() };
    assert_eq!((created.partitions, created.replication), (12, 1));
    assert_eq!(created.config, secret(&[("retention.ms", "86400000")]));
    assert_eq!(plan.status.phase.as_deref(), Some("Degraded"));
    assert_eq!(
        plan.status.detail,
        "topic 'shop.cart-events.v1' does not exist; router: rolling out; sink: rolling out"
    );
    assert_eq!(
        plan.status.topics,
        [
            crate::resource::TopicStatus {
                id: "cart-events".into(),
                exists: false,
                detail: "topic 'shop.cart-events.v1' does not exist".into()
            },
            crate::resource::TopicStatus {
                id: "review-carts".into(),
                exists: true,
                detail: "created by the operator".into()
            },
            crate::resource::TopicStatus {
                id: "valid-carts".into(),
                exists: true,
                detail: "created by the operator".into()
            },
        ]
    );
    assert_eq!(plan.status.observed_generation, Some(2));
}

#[test]
fn a_settled_pipeline_is_ready_and_rolls_nothing() {
    let flow = generated("cart");
    let v = valid(&flow, &nothing());
    let deployments: BTreeMap<String, ObservedDeployment> =
        [("router", 3), ("sink", 1)].iter().map(|(n, r)| (n.to_string(), settled(rendered(&v, n), *r))).collect();
    let secrets: BTreeSet<String> = ["router".to_string(), "sink".to_string()].into();
    let topics = all_exist();
    let plan = v.build(&observed(&topics, &deployments, &secrets));
    assert_eq!(plan.finalizer, FinalizerChange::Keep);
    assert!(plan.actions().iter().all(|a| !matches!(a, Action::Record(_) | Action::CreateTopic(_))));
    assert_eq!(plan.status.phase.as_deref(), Some("Ready"));
    assert_eq!(plan.status.detail, "");
}

#[test]
fn a_changed_hash_or_image_rolls_the_streamlet_once_per_change() {
    let flow = generated("cart");
    let v = valid(&flow, &nothing());
    let mut old_hash = settled(rendered(&v, "router"), 3);
    old_hash.config_hash = Some("before".into());
    let mut old_image = settled(rendered(&v, "sink"), 1);
    old_image.process_image = Some("ghcr.io/example/cart-sink:0.3.0".into());
    let deployments = BTreeMap::from([("router".to_string(), old_hash), ("sink".to_string(), old_image)]);
    let topics = all_exist();
    let plan = v.build(&observed(&topics, &deployments, &BTreeSet::new()));
    let events: Vec<&Event> = plan.streamlets.iter().filter_map(|s| s.rolled.as_ref()).collect();
    assert_eq!(
        events.iter().map(|e| (e.reason.as_str(), e.note.as_str())).collect::<Vec<_>>(),
        [
            ("StreamletRolled", "streamlet 'router' rolls out: its image, descriptor or configuration changed"),
            ("StreamletRolled", "streamlet 'sink' rolls out: its image, descriptor or configuration changed"),
        ]
    );
    assert_eq!(events[0].type_, EventType::Normal);
    // the event follows its Deployment
    let order = describe(&plan.actions());
    let deployment = order.iter().position(|a| a == "Deployment 'flow-cart-router'").unwrap();
    assert!(order[deployment + 1].starts_with("event StreamletRolled: streamlet 'router'"));
    assert_eq!(plan.status.phase.as_deref(), Some("Pending"));
    // a later change is another roll, recorded as another event
    let mut edited = flow.clone();
    edited
        .spec
        .streamlets
        .iter_mut()
        .find(|s| s.name == "router")
        .unwrap()
        .config
        .insert("review-threshold".into(), json!(300));
    let v2 = valid(&edited, &nothing());
    let plan2 = v2.build(&observed(&topics, &deployments, &BTreeSet::new()));
    let again = plan2.streamlets[0].rolled.as_ref().unwrap();
    assert_eq!(again.note, events[0].note);
    assert_ne!(again.name_for("cart"), events[0].name_for("cart"));
}

#[test]
fn a_cluster_secret_edit_rolls_exactly_the_streamlets_that_use_it() {
    let flow = generated("cart");
    let before = valid(&flow, &nothing());
    let mut edited = clusters();
    edited.extend([cluster(
        "shop",
        &[
            ("bootstrap.servers", "kafka.kafka.svc:9092"),
            ("connection-config", "security.protocol=PLAINTEXT\n"),
            ("consumer-config", "fetch.min.bytes=1024\n"),
        ],
    )]);
    let after = match decide(&Inputs {
        flow: &flow,
        sidecar_image: Some(SIDECAR),
        clusters: &edited,
        stage_secrets: &nothing(),
    })
    .unwrap()
    {
        Decision::Apply(v) => *v,
        other => panic!("{other:?}"),
    };
    // router reads cart-events (cluster shop); sink reads valid-carts (cluster default)
    assert_ne!(rendered(&before, "router").config_hash, rendered(&after, "router").config_hash);
    assert_eq!(rendered(&before, "sink").config_hash, rendered(&after, "sink").config_hash);
    assert!(
        rendered(&after, "router")
            .streamlet_conf
            .contains(r#"consumer-config { "auto.offset.reset" = "earliest", "fetch.min.bytes" = "1024" }"#)
    );
}

#[test]
fn streamlets_no_longer_in_the_resource_are_removed() {
    let flow = generated("cart");
    let v = valid(&flow, &nothing());
    let mut deployments = BTreeMap::from([
        ("router".to_string(), settled(rendered(&v, "router"), 3)),
        ("sink".to_string(), settled(rendered(&v, "sink"), 1)),
        ("audit".to_string(), ObservedDeployment::default()),
    ]);
    deployments.insert("zeta".into(), ObservedDeployment::default());
    let secrets = BTreeSet::from(["audit".to_string(), "orphan".to_string()]);
    let topics = all_exist();
    let plan = v.build(&observed(&topics, &deployments, &secrets));
    let tail: Vec<String> =
        describe(&plan.actions()).into_iter().skip_while(|a| a != "Deployment 'flow-cart-sink'").skip(1).collect();
    assert_eq!(
        tail,
        [
            "Deployment 'flow-cart-audit'",
            "Secret 'flow-cart-audit'",
            "event StreamletRemoved: streamlet 'audit' is no longer in the pipeline",
            "Secret 'flow-cart-orphan'",
            "event StreamletRemoved: streamlet 'orphan' is no longer in the pipeline",
            "Deployment 'flow-cart-zeta'",
            "event StreamletRemoved: streamlet 'zeta' is no longer in the pipeline",
        ]
    );
    assert_eq!(plan.status.streamlets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["router", "sink"]);
}

#[test]
fn the_finalizer_is_present_only_with_delete() {
    let mut flow = generated("cart");
    let topics = all_exist();
    let (d, s) = (BTreeMap::new(), BTreeSet::new());
    let finalizer = |flow: &AnkkaFlow| valid(flow, &nothing()).build(&observed(&topics, &d, &s)).finalizer;
    assert_eq!(finalizer(&flow), FinalizerChange::Keep);
    flow.metadata.finalizers = Some(vec![FINALIZER.into()]);
    assert_eq!(finalizer(&flow), FinalizerChange::Remove);
    flow.spec.on_delete = Some(OnDelete { managed_topics: ManagedTopicsPolicy::Delete });
    assert_eq!(finalizer(&flow), FinalizerChange::Keep);
    flow.metadata.finalizers = None;
    assert_eq!(finalizer(&flow), FinalizerChange::Add);
    // a refused resource gets no finalizer either: nothing is applied
    assert!(matches!(decide_with(&flow, None, &nothing()), Decision::Refuse(_)));
}

#[test]
fn deletion_deletes_managed_topics_and_nothing_else() {
    let mut flow = generated("cart");
    flow.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-09-28T10:00:00Z".parse().unwrap()));
    // Keep, no finalizer: nothing to do
    let Decision::Delete(d) = decide_with(&flow, Some(SIDECAR), &nothing()) else { panic!() };
    assert_eq!(d, Deletion { delete_topics: vec![], unresolved: vec![], remove_finalizer: false });
    // Delete with the finalizer: the managed topics, sorted, then the finalizer; also when refused
    flow.spec.on_delete = Some(OnDelete { managed_topics: ManagedTopicsPolicy::Delete });
    flow.metadata.finalizers = Some(vec!["other".into(), FINALIZER.into()]);
    let Decision::Delete(d) = decide_with(&flow, None, &nothing()) else { panic!() };
    assert_eq!(
        d.delete_topics.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["cart.review-carts", "cart.valid-carts"]
    );
    assert!(d.remove_finalizer && d.unresolved.is_empty());
    // a managed topic that does not resolve is left, with why
    let none = BTreeMap::new();
    let Decision::Delete(d) =
        decide(&Inputs { flow: &flow, sidecar_image: Some(SIDECAR), clusters: &none, stage_secrets: &nothing() })
            .unwrap()
    else {
        panic!()
    };
    assert!(d.delete_topics.is_empty() && d.remove_finalizer);
    assert_eq!(
        d.unresolved,
        [
            "topic 'review-carts' uses Kafka cluster 'default', but there is no Secret 'kafka-cluster-default'",
            "topic 'valid-carts' uses Kafka cluster 'default', but there is no Secret 'kafka-cluster-default'",
        ]
    );
}

#[test]
fn an_incomplete_resource_is_an_error() {
    let mut flow = generated("cart");
    flow.metadata.uid = None;
    let err =
        decide(&Inputs { flow: &flow, sidecar_image: Some(SIDECAR), clusters: &clusters(), stage_secrets: &nothing() })
            .unwrap_err();
    assert_eq!(err.to_string(), "the resource has no uid");
}

#[test]
fn a_failed_apply_is_a_warning_event_and_the_applied_condition() {
    let v = valid(&generated("cart"), &nothing());
    let topics = all_exist();
    let (d, s) = (BTreeMap::new(), BTreeSet::new());
    let plan = v.build(&observed(&topics, &d, &s));
    let actions = plan.actions();
    let deployment = actions.iter().find(|a| matches!(a, Action::ApplyDeployment(_))).unwrap();
    let (event, outcome) =
        apply_failed(deployment, "exceeded quota: compute, requested: pods=1, used: pods=10, limited: pods=10");
    assert_eq!((event.type_, event.reason.as_str()), (EventType::Warning, "ApplyFailed"));
    assert_eq!(
        event.note,
        "could not apply Deployment 'flow-cart-router': exceeded quota: compute, requested: pods=1, used: pods=10, limited: pods=10"
    );
    assert_eq!(outcome, ApplyOutcome::Failed { message: event.note.clone() });
    let created = TopicCreation {
        id: "t".into(),
        name: "cart.t".into(),
        partitions: 1,
        replication: 1,
        config: BTreeMap::new(),
        event: event.clone(),
    };
    assert_eq!(
        apply_failed(&Action::CreateTopic(&created), "Broker: Policy violation").0.note,
        "could not create topic 'cart.t': Broker: Policy violation"
    );
    assert_eq!(
        apply_failed(&Action::DeleteSecret("flow-cart-x"), "forbidden").0.note,
        "could not delete Secret 'flow-cart-x': forbidden"
    );
    assert_eq!(
        apply_failed(&Action::AddFinalizer, "conflict").0.note,
        "could not add finalizer 'flow.ankka.thinkmorestupidless.com/managed-topics': conflict"
    );
}

#[test]
fn the_labels_and_names_come_from_one_place() {
    let v = valid(&generated("cart"), &nothing());
    let r = rendered(&v, "sink");
    let labels = r.deployment.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[LABEL_PIPELINE], "cart");
    assert_eq!(labels[LABEL_STREAMLET], "sink");
    assert_eq!(labels[LABEL_NAME], "cart-sink");
    assert_eq!(labels[LABEL_MANAGED_BY], "ankka-flow");
}
