//! Every refusal, and the check that every rendered name fits.

use super::*;

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
    let r = decide(&Inputs {
        flow: &flow,
        sidecar_image: Some(SIDECAR),
        clusters: &none,
        token_endpoints: &Default::default(),
        stage_secrets: &nothing(),
    })
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
fn kafka_topic_names_kafka_would_refuse_are_refused_before_kafka_is_asked() {
    let base = generated("cart");
    let edit = |f: &dyn Fn(&mut AnkkaFlow)| {
        let mut flow = base.clone();
        f(&mut flow);
        texts(&refused(&flow, Some(SIDECAR), &nothing()))
    };
    // The rule and the words of `flow verify` (`crate::blueprint::names::KafkaTopicName`).
    assert_eq!(
        edit(&|f| {
            f.spec.topics[0].name = "nu.cärt-événements".into();
        }),
        ["'nu.cärt-événements' is not a valid topic name, must match '[a-zA-Z0-9\\._\\-]', max 249 characters."]
    );
    assert_eq!(
        edit(&|f| {
            f.spec.topics[0].name = "..".into();
            f.spec.topics[1].name = "x".repeat(250);
        })
        .len(),
        2
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
        let problems = crate::names::objects::check(
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

#[test]
fn pod_settings_outside_restricted_refuse_and_settings_that_fit_are_rendered() {
    let mut flow = generated("cart");
    flow.spec.pod = Some(serde_json::from_value(json!({"securityContext": {"runAsUser": 0}})).unwrap());
    flow.spec.streamlets[0].pod = Some(
        serde_json::from_value(json!({"labels": {"flow.ankka.thinkmorestupidless.com/streamlet": "other"}})).unwrap(),
    );
    let r = refused(&flow, Some(SIDECAR), &nothing());
    assert_eq!(
        texts(&r),
        [
            "spec.pod.securityContext.runAsUser: 0 is root, which Pod Security 'restricted' forbids: write a UID other than 0, or leave runAsUser out to run as the image's own user",
            "streamlet 'router': pod.labels.flow.ankka.thinkmorestupidless.com/streamlet: labels under flow.ankka.thinkmorestupidless.com/ are the operator's own: choose another key",
        ]
    );
    assert_eq!(r.reason, "Refused");

    // Settings that fit: the pipeline's and the streamlet's, on the pod and its containers, beside
    // what restricted asks, which they cannot take away.
    flow.spec.pod = Some(
        serde_json::from_value(json!({
            "labels": {"team": "shop"},
            "annotations": {"example.com/owner": "payments"},
            "imagePullSecrets": [{"name": "regcred"}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "priorityClassName": "flow-high",
            "securityContext": {"runAsUser": 10001, "fsGroup": 10001},
            "containers": {"sidecar": {"resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}}
        }))
        .unwrap(),
    );
    flow.spec.streamlets[0].pod = Some(
        serde_json::from_value(json!({"containers": {"process": {
            "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}},
            "securityContext": {"runAsUser": 10002}
        }}}))
        .unwrap(),
    );
    assert_eq!(flow.spec.streamlets[0].name, "router");
    let v = valid(&flow, &nothing());
    let router = v.streamlets().find(|s| s.name == "router").unwrap();
    let d = serde_json::to_value(&router.deployment).unwrap();
    let template = &d["spec"]["template"];
    assert_eq!(template["metadata"]["labels"]["team"], "shop");
    assert_eq!(template["metadata"]["labels"]["flow.ankka.thinkmorestupidless.com/streamlet"], "router");
    assert_eq!(template["metadata"]["annotations"]["example.com/owner"], "payments");
    assert_eq!(template["metadata"]["annotations"]["prometheus.io/port"], "2050");
    let pod = &template["spec"];
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "regcred"}]));
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert_eq!(pod["priorityClassName"], "flow-high");
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 10001, "fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    let (sidecar, process) = (&pod["containers"][0], &pod["containers"][1]);
    assert_eq!(sidecar["resources"], json!({"limits": {"cpu": "500m", "memory": "128Mi"}}));
    assert_eq!(process["resources"], json!({"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}));
    assert_eq!(process["securityContext"]["runAsUser"], 10002);
    for c in [sidecar, process] {
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["capabilities"], json!({"drop": ["ALL"]}));
        assert_eq!(c["securityContext"]["runAsNonRoot"], true);
    }
    // The other streamlet gets the pipeline's settings alone.
    let sink = v.streamlets().find(|s| s.name == "sink").unwrap();
    let sink = serde_json::to_value(&sink.deployment).unwrap();
    assert!(sink["spec"]["template"]["spec"]["containers"][1]["resources"].is_null());
}

#[test]
fn managed_topics_outside_the_namespaces_prefixes_are_refused_before_anything_is_applied() {
    use crate::connection::{ANNOTATION_NAMESPACE_TOPIC_PREFIXES, ANNOTATION_TOPIC_PREFIXES};
    let flow = generated("cart");
    // `kafka-cluster-default` (the managed topics' cluster) with prefix annotations `annotations`.
    let with = |annotations: &[(&str, &str)]| -> Decision {
        let mut clusters = clusters();
        let mut all = secret(&[(crate::connection::ANNOTATION_ALLOWED_NAMESPACES, "shop")]);
        all.extend(secret(annotations));
        let data = secret(&[("bootstrap.servers", "kafka.kafka.svc:9092"), ("partitions", "3"), ("replicas", "1")]);
        clusters.insert("default".into(), Cluster::from_secret("default", &data, &all));
        decide(&Inputs {
            flow: &flow,
            sidecar_image: Some(SIDECAR),
            clusters: &clusters,
            token_endpoints: &Default::default(),
            stage_secrets: &nothing(),
        })
        .unwrap()
    };
    let problems = |d: Decision| match d {
        Decision::Refuse(r) => texts(&r),
        other => panic!("not refused: {other:?}"),
    };
    // Every namespace's topics start with its name: `cart.*` is not `shop.*`. The unmanaged input
    // (another cluster, and only read) is not concerned.
    assert_eq!(
        problems(with(&[(ANNOTATION_TOPIC_PREFIXES, "{namespace}.")])),
        [
            "managed topic 'review-carts' is Kafka topic 'cart.review-carts', which namespace 'shop' may not create on \
             Kafka cluster 'default': Secret 'kafka-cluster-default' allows it names starting with 'shop.'",
            "managed topic 'valid-carts' is Kafka topic 'cart.valid-carts', which namespace 'shop' may not create on \
             Kafka cluster 'default': Secret 'kafka-cluster-default' allows it names starting with 'shop.'",
        ]
    );
    let Decision::Refuse(r) = with(&[(ANNOTATION_TOPIC_PREFIXES, "{namespace}.")]) else { panic!() };
    assert!(matches!(&r.problems[0], Problem::Topic(p) if p.kind() == "TopicNameNotAllowed"));
    // The namespace's own annotation takes the place of every namespace's.
    let own = format!("{ANNOTATION_NAMESPACE_TOPIC_PREFIXES}shop");
    assert!(matches!(
        with(&[(ANNOTATION_TOPIC_PREFIXES, "{namespace}."), (&own, "orders., cart.")]),
        Decision::Apply(_)
    ));
    assert!(matches!(with(&[(ANNOTATION_TOPIC_PREFIXES, "nobody."), (&own, "*")]), Decision::Apply(_)));
    assert!(matches!(with(&[]), Decision::Apply(_)));
    let other_ns = format!("{ANNOTATION_NAMESPACE_TOPIC_PREFIXES}elsewhere");
    assert!(matches!(with(&[(&other_ns, "elsewhere.")]), Decision::Apply(_)), "another namespace's rule");
    assert_eq!(
        problems(with(&[(&own, "orders. review.")]))[0],
        "managed topic 'review-carts' is Kafka topic 'cart.review-carts', which namespace 'shop' may not create on \
         Kafka cluster 'default': Secret 'kafka-cluster-default' allows it names starting with 'orders.' or 'review.'"
    );
    assert!(
        problems(with(&[(&own, "")]))[0].ends_with("Secret 'kafka-cluster-default' allows it no managed topics there")
    );
    // An entry that cannot start a topic name is the Secret's problem, reported to the namespaces it allows.
    assert_eq!(
        problems(with(&[(ANNOTATION_TOPIC_PREFIXES, "cart/ shop.")])),
        [
            "Secret 'kafka-cluster-default': annotation 'flow.ankka.thinkmorestupidless.com/topic-prefixes' lists 'cart/', \
             which is not the start of a Kafka topic name: list prefixes of ASCII letters, digits, '.', '_' and '-' (with \
             '{namespace}' for the namespace's name), or '*' for any name"
        ]
    );
}
