//! The fixtures of `core/tests/fixtures` verified and generated, and the built-in descriptors.

use super::*;

#[test]
fn cart_verifies_with_a_clean_stderr() {
    let v = verify(&cart(&[])).unwrap();
    assert_eq!(v.summary(), "verified: 2 streamlets, 3 topics");
    assert!(v.notes.is_empty(), "{:?}", v.notes);
}

#[test]
fn cart_generates_what_the_reference_expects() {
    let g = gen_input(cart(&[&fixture("cart/overrides.conf")]), Some(&fixture("cart/images.conf")));
    let r = generated(&g);
    assert_eq!(r.metadata.name.as_deref(), Some("cart"));
    assert_eq!(r.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(
        r.metadata.labels.clone().unwrap(),
        [
            ("app.kubernetes.io/managed-by".to_string(), "ankka-flow".to_string()),
            ("flow.ankka.thinkmorestupidless.com/pipeline".to_string(), "cart".to_string())
        ]
        .into()
    );
    let s = &r.spec;
    assert_eq!(s.pipeline, "cart");
    assert_eq!(s.version.as_deref(), Some("0.3.1"));
    assert_eq!(s.protocol_version.as_deref(), Some("1.0"));
    assert_eq!(s.on_delete.as_ref().unwrap().managed_topics, ManagedTopicsPolicy::Keep);
    let names: Vec<&str> = s.streamlets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["router", "sink"]);
    let router = s.streamlet("router").unwrap();
    assert_eq!(router.image, "ghcr.io/example/cart-router:0.3.1");
    assert_eq!(router.replicas, 3);
    assert!(!router.builtin);
    assert_eq!(router.inlets, [("in".to_string(), "cart-events".to_string())].into());
    assert_eq!(
        router.outlets,
        [("valid".to_string(), "valid-carts".to_string()), ("review".to_string(), "review-carts".to_string())].into()
    );
    assert_eq!(serde_json::Value::Object(router.config.clone()), json!({"review-threshold": 250}));
    let file: serde_json::Value = serde_json::from_str(&fixture("cart/descriptors/cart-router.json")).unwrap();
    assert_eq!(serde_json::Value::Object(router.descriptor.clone()), file["streamlet"]);
    let sink = s.streamlet("sink").unwrap();
    assert_eq!(sink.replicas, 1);
    assert_eq!(sink.image, "ghcr.io/example/cart-sink:0.3.1");
    assert!(sink.config.is_empty());

    let ids: Vec<&str> = s.topics.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["cart-events", "review-carts", "valid-carts"]);
    let events = s.topic("cart-events").unwrap();
    assert_eq!(events.name, "shop.cart-events.v1");
    assert!(!events.managed);
    assert_eq!(events.cluster.as_deref(), Some("shop"));
    assert_eq!(events.consumer_config, [("auto.offset.reset".to_string(), "earliest".to_string())].into());
    let valid = s.topic("valid-carts").unwrap();
    assert_eq!(valid.name, "cart.valid-carts");
    assert!(valid.managed);
    assert_eq!(valid.partitions, Some(12));
    assert_eq!(valid.replicas, Some(1));
    assert_eq!(valid.topic_config, [("retention.ms".to_string(), "86400000".to_string())].into());
    let review = s.topic("review-carts").unwrap();
    assert_eq!(review.name, "cart.review-carts");
    assert_eq!((review.partitions, review.replicas, review.cluster.as_deref()), (None, None, None));
    for t in &s.topics {
        let b = t.batch.as_ref().unwrap();
        assert_eq!((b.max_records, b.max_bytes), (100, 1_048_576));
    }
}

#[test]
fn cart_yaml_keeps_number_like_strings_quoted() {
    let g = gen_input(cart(&[]), Some(&fixture("cart/images.conf")));
    let yaml = to_yaml(&generate(&g).unwrap().resource).unwrap();
    for line in ["protocolVersion: '1.0'", "default_value: '100'", "retention.ms: '86400000'", "version: 0.3.1"] {
        let unquoted = line.replace('\'', "");
        assert!(yaml.contains(line) || yaml.contains(&line.replace('\'', "\"")) || line == unquoted, "{line}\n{yaml}");
    }
    assert!(yaml.starts_with("apiVersion: flow.ankka.thinkmorestupidless.com/v1alpha1\nkind: AnkkaFlow\n"), "{yaml}");
    assert!(!yaml.contains("status"), "{yaml}");
    // Whatever the quoting style, every reader gets strings back.
    let v: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(v["spec"]["protocolVersion"], json!("1.0"));
    assert_eq!(v["spec"]["version"], json!("0.3.1"));
    assert_eq!(v["spec"]["streamlets"][0]["descriptor"]["config_parameters"][0]["default_value"], json!("100"));
    assert_eq!(v["spec"]["streamlets"][0]["config"]["review-threshold"], json!(100));
}

#[test]
fn cart_generate_options() {
    let mut g = gen_input(cart(&[]), Some(&fixture("cart/images.conf")));
    g.delete_managed_topics = true;
    assert_eq!(generated(&g).spec.on_delete.unwrap().managed_topics, ManagedTopicsPolicy::Delete);
    g.pipeline = Some("cart-eu".into());
    let r = generated(&g);
    assert_eq!(r.spec.pipeline, "cart-eu");
    assert_eq!(r.spec.topic("valid-carts").unwrap().name, "cart-eu.valid-carts");
    assert_eq!(r.spec.topic("cart-events").unwrap().name, "shop.cart-events.v1");
    g.pipeline = Some("Cart_EU".into());
    assert_eq!(gen_problems(&g), ["pipeline id 'Cart_EU' must be 1-40 of [a-z0-9-], not starting or ending with '-'"]);
    g.pipeline = None;
    g.namespace = None;
    assert_eq!(generated(&g).metadata.namespace, None);
}

#[test]
fn cart_without_the_sink_image_is_refused() {
    let images = fixture("cart/images.conf").lines().filter(|l| !l.starts_with("sink")).collect::<Vec<_>>().join("\n");
    let g = gen_input(cart(&[]), Some(&images));
    assert_eq!(gen_problems(&g), ["Streamlet 'sink' has no image."]);
}

#[test]
fn graph_needs_its_secret() {
    let i = input("graph", &fixture("graph/blueprint.conf"), &[]);
    assert_eq!(texts(&verify(&i).unwrap_err()), ["streamlet 'graph': parameter 'secret' has no default and no value"]);
    let i = input("graph", &fixture("graph/blueprint.conf"), &[&fixture("graph/overrides.conf")]);
    let v = verify(&i).unwrap();
    assert_eq!(v.summary(), "verified: 2 streamlets, 2 topics");
    assert_eq!(
        texts(&v.notes),
        ["note: Topic 'graph-deltas' carries graph deltas and is compacted (cleanup.policy = compact)."]
    );
}

#[test]
fn graph_generates_a_builtin_and_a_compacted_topic() {
    let verify = input("graph", &fixture("graph/blueprint.conf"), &[&fixture("graph/overrides.conf")]);
    let mut g = gen_input(verify, Some(&fixture("graph/images.conf")));
    g.version = "0.1.0".into();
    let r = generated(&g);
    assert_eq!(r.spec.pipeline, "checkouts");
    let graph = r.spec.streamlet("graph").unwrap();
    assert!(graph.builtin);
    assert_eq!(graph.image, "");
    assert_eq!(
        serde_json::Value::Object(graph.config.clone()),
        json!({"secret": "neo4j-shop", "transaction-timeout": "30s"})
    );
    assert_eq!(graph.inlets, [("in".to_string(), "graph-deltas".to_string())].into());
    let builtin: serde_json::Value = serde_json::from_str(include_str!("../builtin/neo4j-merge-sink.json")).unwrap();
    assert_eq!(serde_json::Value::Object(graph.descriptor.clone()), builtin["streamlet"]);
    let mapper = r.spec.streamlet("mapper").unwrap();
    assert!(!mapper.builtin);
    assert_eq!(mapper.image, "ghcr.io/example/checkout-graph:0.1.0");
    let deltas = r.spec.topic("graph-deltas").unwrap();
    assert_eq!(deltas.name, "checkouts.graph-deltas");
    assert_eq!(deltas.topic_config, [("cleanup.policy".to_string(), "compact".to_string())].into());
    let checkouts = r.spec.topic("cart-checkouts").unwrap();
    assert!(!checkouts.managed);
    assert_eq!(checkouts.cluster.as_deref(), Some("default"));

    g.images = vec!["graph=ghcr.io/example/x:1".into()];
    assert_eq!(gen_problems(&g), ["Streamlet 'graph' is built in and takes no image."]);
}

#[test]
fn graph_with_an_unknown_builtin() {
    let bp = fixture("graph/blueprint.conf").replace("builtin/neo4j-merge-sink", "builtin/nope");
    let p = texts(&verify(&input("graph", &bp, &[&fixture("graph/overrides.conf")])).unwrap_err());
    assert_eq!(
        p,
        [
            "Streamlet 'graph' names built-in descriptor 'builtin/nope', which this version does not have; the built-ins are: neo4j-merge-sink."
        ]
    );
}
