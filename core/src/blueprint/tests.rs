//! The fixtures of `core/tests/fixtures` and every message of `flow verify` and `flow generate`
//! (docs/cli.md, "Messages of verify and generate").

use std::collections::HashMap;

use serde_json::json;

use super::*;
use crate::resource::{AnkkaFlow, ManagedTopicsPolicy};

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{FIX}/{path}")).unwrap()
}

fn descriptors(example: &str) -> DescriptorSource {
    let dir = format!("{FIX}/{example}/descriptors");
    let mut files: Vec<Source> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| Source::text(p.file_name().unwrap().to_string_lossy(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    DescriptorSource::Directory { dir: "descriptors".into(), files }
}

fn input(example: &str, blueprint: &str, confs: &[&str]) -> VerifyInput {
    VerifyInput {
        descriptors: descriptors(example),
        blueprint: Source::text("blueprint.conf", blueprint),
        confs: confs.iter().enumerate().map(|(i, c)| Source::text(format!("conf{i}.conf"), *c)).collect(),
        env: HashMap::new(),
    }
}

fn cart(confs: &[&str]) -> VerifyInput {
    input("cart", &fixture("cart/blueprint.conf"), confs)
}

fn gen_input(verify: VerifyInput, images: Option<&str>) -> GenerateInput {
    GenerateInput {
        verify,
        images_file: images.map(|t| Source::text("images.conf", t)),
        images: vec![],
        pipeline: None,
        version: "0.3.1".into(),
        namespace: Some("shop".into()),
        delete_managed_topics: false,
    }
}

fn texts<T: ToString>(items: &[T]) -> Vec<String> {
    items.iter().map(ToString::to_string).collect()
}

/// Problems of verifying `blueprint` with the cart descriptors and `confs`.
fn problems(blueprint: &str, confs: &[&str]) -> Vec<String> {
    match verify(&input("cart", blueprint, confs)) {
        Ok(v) => panic!("verified: {}", v.summary()),
        Err(p) => texts(&p),
    }
}

fn notes(blueprint: &str, confs: &[&str]) -> Vec<String> {
    match verify(&input("cart", blueprint, confs)) {
        Ok(v) => texts(&v.notes),
        Err(p) => panic!("{p:?}"),
    }
}

fn generated(g: &GenerateInput) -> AnkkaFlow {
    let out = generate(g).unwrap_or_else(|p| panic!("{:?}", texts(&p)));
    let yaml = to_yaml(&out.resource).unwrap();
    let back: AnkkaFlow = serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&out.resource).unwrap(),
        "YAML round trip\n{yaml}"
    );
    back
}

fn gen_problems(g: &GenerateInput) -> Vec<String> {
    match generate(g) {
        Ok(_) => panic!("generated"),
        Err(p) => texts(&p),
    }
}

// ---------------------------------------------------------------- fixtures

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
    let builtin: serde_json::Value = serde_json::from_str(include_str!("builtin/neo4j-merge-sink.json")).unwrap();
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

// ---------------------------------------------------------------- descriptors

#[test]
fn descriptor_directory_messages() {
    let mut i = cart(&[]);
    i.descriptors = DescriptorSource::NotADirectory("nope".into());
    // The streamlets are not also reported: their descriptors are unknown for a reason already given.
    assert_eq!(texts(&verify(&i).unwrap_err()), ["descriptors: 'nope' is not a directory"]);
    i.descriptors = DescriptorSource::Directory { dir: "empty".into(), files: vec![] };
    assert_eq!(texts(&verify(&i).unwrap_err()), ["descriptors: 'empty' holds no *.json files"]);
}

#[test]
fn descriptor_file_problems_come_first_with_the_file_name() {
    let mut i = cart(&[]);
    let DescriptorSource::Directory { files, .. } = &mut i.descriptors else { unreachable!() };
    files.push(Source::text("a-broken.json", "{\"protocol_version\": \"2.0\", \"streamlet\": {\"name\": \"sink\"}}"));
    files.push(Source { name: "b.json".into(), text: Err(SourceError::Unreadable("permission denied".into())) });
    i.blueprint = Source::text("blueprint.conf", fixture("cart/blueprint.conf").replace("cart-router", "nope"));
    assert_eq!(
        texts(&verify(&i).unwrap_err()),
        [
            "descriptor a-broken.json: the SDK speaks protocol '2.0' and this sidecar speaks '1.0'; the major versions must match",
            "descriptor b.json: permission denied",
            "2 descriptors declare streamlet 'sink'",
            "Streamlet 'router' names descriptor 'nope', which no descriptor declares.",
        ]
    );
}

#[test]
fn builtins_need_no_descriptor_directory() {
    let bp = "blueprint.streamlets.g = builtin/neo4j-merge-sink
              blueprint.topics.d { managed = false, cluster = c, consumers = [g.in] }";
    let mut i = input("cart", bp, &["flow.streamlets.g.config.secret = s"]);
    i.descriptors = DescriptorSource::NotGiven;
    let v = verify(&i).unwrap();
    assert_eq!(v.summary(), "verified: 1 streamlets, 1 topics");
    assert_eq!(
        texts(&v.notes),
        ["note: Topic 'd' carries graph deltas and is not managed; whether it is compacted is its owner's."]
    );
    i.blueprint = Source::text("b.conf", "blueprint.streamlets.r = cart-router");
    assert_eq!(
        texts(&verify(&i).unwrap_err()),
        ["Streamlet 'r' names descriptor 'cart-router', which no descriptor declares."]
    );
}

// ---------------------------------------------------------------- blueprint

const ROUTER_SINK: &str = "blueprint.streamlets { router = cart-router, sink = sink }\n";

fn bp(topics: &str) -> String {
    format!("{ROUTER_SINK}blueprint.topics {{ {topics} }}")
}

const WIRED: &str = "in { managed = false, cluster = shop, consumers = [router.in] }
    v { producers = [router.valid], consumers = [sink.in] }
    r { producers = [router.review] }";

#[test]
fn blueprint_file_messages() {
    let mut i = cart(&[]);
    i.blueprint = Source { name: "bp".into(), text: Err(SourceError::NotAFile) };
    assert_eq!(texts(&verify(&i).unwrap_err()), ["blueprint: 'bp' is not a file"]);
    assert_eq!(
        problems("blueprint {", &[]),
        ["The blueprint file has an invalid format:\n ParseError at 1:12: expected }"]
    );
    assert_eq!(
        problems("blueprint.name = cart", &[]),
        ["The blueprint.streamlets section is missing in the blueprint file."]
    );
    assert_eq!(problems("other = 1", &[]), ["The blueprint.streamlets section is missing in the blueprint file."]);
    assert_eq!(problems("blueprint.streamlets {}", &[]), ["The application blueprint is empty."]);
    let p = problems(&format!("{ROUTER_SINK}blueprint.connections {{ a = b }}"), &[]);
    assert_eq!(p.len(), 1);
    assert!(
        p[0].starts_with("The blueprint file has an invalid format:\n blueprint.connections is the legacy format"),
        "{p:?}"
    );
}

#[test]
fn wrong_key_types_are_format_errors() {
    let p = problems(
        &bp("t { producers = router.valid, managed = maybe, partitions = six, replicas = 0, consumer-config = 3,
                 topic.name = { a = 1 }, partiton = 2 }"),
        &[],
    );
    let reasons: Vec<&str> =
        p.iter().map(|m| m.strip_prefix("The blueprint file has an invalid format:\n ").unwrap()).collect();
    assert_eq!(
        reasons,
        [
            "blueprint.topics.t.partiton is not a topic setting",
            "blueprint.topics.t.producers must be a list of port paths",
            "blueprint.topics.t.managed must be true or false",
            "blueprint.topics.t.topic.name must be a string",
            "blueprint.topics.t.consumer-config must be an object",
            "blueprint.topics.t.partitions = six must be a whole number of at least 1",
            "blueprint.topics.t.replicas = 0 must be a whole number of at least 1",
        ]
    );
    let p = problems("blueprint { streamlets { a = [x] }, name = {}, topcs {} }", &[]);
    assert_eq!(p.len(), 3, "{p:?}");
}

#[test]
fn streamlet_messages() {
    assert_eq!(
        problems(
            &format!("blueprint.streamlets {{ Router = cart-router, sink = sinc }}\nblueprint.topics {{ {WIRED} }}"),
            &[]
        ),
        [
            "Invalid streamlet name 'Router'. Names must consist of lower case alphanumeric characters and may contain '-' except for at the start or end.",
            "Streamlet 'sink' names descriptor 'sinc', which no descriptor declares.",
            "'router.in' does not point to a known streamlet inlet or outlet.",
            "'router.review' does not point to a known streamlet inlet or outlet.",
            "'router.valid' does not point to a known streamlet inlet or outlet.",
            "Inlet Router.in is not connected.",
        ]
    );
}

#[test]
fn port_path_messages() {
    assert_eq!(
        problems(
            &bp(&format!("{WIRED}\n x {{ producers = [router, \".router.valid\", router.nope, ghost.out] }}")),
            &[]
        ),
        [
            "'router' is not a valid path to an outlet or an inlet.",
            "'.router.valid' is not a valid path to an outlet or an inlet.",
            "'router.nope' does not point to a known streamlet inlet or outlet, please try router.in or router.review or router.valid.",
            "'ghost.out' does not point to a known streamlet inlet or outlet.",
        ]
    );
}

#[test]
fn producer_and_consumer_kinds() {
    assert_eq!(
        problems(
            &bp("in { consumers = [router.in], producers = [sink.in] }
                      v { producers = [router.valid, router.review], consumers = [router.valid, sink.in] }"),
            &[]
        ),
        [
            "'sink.in' is not a valid producer for topic 'in', must be an outlet.",
            "'router.valid' is not a valid consumer for topic 'v', must be an inlet.",
        ]
    );
}

#[test]
fn contracts_must_match() {
    let mut i = cart(&[]);
    let DescriptorSource::Directory { files, .. } = &mut i.descriptors else { unreachable!() };
    let v2 = fixture("cart/descriptors/sink.json")
        .replace("cart-events.v1", "cart-events.v2")
        .replace("nXhoFwNZSB7DKScFuZUtZ1gnAYkIxadumsXNHWwbLfM=", "hogIPAqBWsUY/TIbsORekavFVqZg2iQTojucdOKEBPI=")
        .replace("\"sink\"", "\"sink-v2\"");
    files.push(Source::text("sink-v2.json", v2));
    i.blueprint = Source::text(
        "b.conf",
        format!(
            "blueprint.streamlets {{ router = cart-router, sink = sink, new = sink-v2 }}\nblueprint.topics {{ {WIRED}
             w {{ producers = [router.valid], consumers = [new.in] }} }}"
        ),
    );
    assert_eq!(
        texts(&verify(&i).unwrap_err()),
        [
            "'new.in' (json cart-events.v2) is not compatible with 'router.valid' (json cart-events.v1).",
            "'router.valid' is bound to more than one topic: v,w.",
        ]
    );
}

#[test]
fn inlets_must_be_connected_and_outlets_only_noted() {
    assert_eq!(
        problems(&bp("v { producers = [router.valid], consumers = [sink.in] }"), &[]),
        ["Inlet router.in is not connected."]
    );
    assert_eq!(
        problems(&bp("r { producers = [router.review] }"), &[]),
        ["Inlets (router.in,sink.in) are not connected."]
    );
    assert_eq!(
        notes(
            &bp(
                "in { managed = false, cluster = c, consumers = [router.in] }, v { producers = [router.valid], consumers = [sink.in] }"
            ),
            &[]
        ),
        ["note: Outlet router.review is not connected."]
    );
    assert_eq!(
        notes(
            &bp(
                "in { managed = false, cluster = c, consumers = [router.in] }, v { consumers = [sink.in], bootstrap.servers = \"k:9092\", managed = false }"
            ),
            &[]
        ),
        ["note: Outlets (router.review,router.valid) are not connected."]
    );
}

#[test]
fn unmanaged_topic_messages() {
    assert_eq!(
        problems(&bp("in { managed = false, consumers = [router.in] }
                      v { managed = false, cluster = c, producers = [router.valid, \" router.review \"], consumers = [sink.in] }"), &[]),
        [
            "Topic 'in' is not managed and names no bootstrap.servers or cluster.",
            "Topic 'v' is not managed but has producers router.valid, router.review; the platform only reads topics it does not own.",
        ]
    );
    // Our choice (docs/blueprint.md, "Choices we made"): --conf may give an unmanaged topic its brokers.
    let topics = "in { managed = false, consumers = [router.in] }, v { producers = [router.valid, router.review], consumers = [sink.in] }";
    assert_eq!(notes(&bp(topics), &["flow.topics.in.bootstrap.servers = \"k:9092\""]), Vec::<String>::new());
    assert_eq!(notes(&bp(topics), &["flow.topics.in { cluster = shop }"]), Vec::<String>::new());
}

#[test]
fn kafka_and_cluster_names() {
    let long = "x".repeat(250);
    assert_eq!(
        problems(
            &bp(&format!(
                "in {{ managed = false, cluster = Shop_1, consumers = [router.in], topic.name = \"a b\" }}
                      {long} {{ producers = [router.valid, router.review], consumers = [sink.in] }}"
            )),
            &[]
        ),
        [
            "'a b' is not a valid topic name, must match '[a-zA-Z0-9\\._\\-]', max 249 characters.",
            "Invalid Kafka cluster name 'Shop_1'. Names must consist of lower case alphanumeric characters and may contain '-' except for at the start or end.",
            &format!("'{long}' is not a valid topic name, must match '[a-zA-Z0-9\\._\\-]', max 249 characters."),
        ]
    );
}

#[test]
fn topics_without_ports_are_dropped() {
    let v = verify(&input("cart", &bp(&format!("{WIRED}\n unused {{ topic.name = \"not valid\" }}")), &[])).unwrap();
    assert_eq!(v.summary(), "verified: 2 streamlets, 3 topics");
}

#[test]
fn one_pass_reports_every_kind_of_problem_in_order() {
    let mut i = input(
        "cart",
        "blueprint.streamlets { router = cart-router, sink = nope }
         blueprint.topics.r { producers = [router.valid] }",
        &["flow.streamlets.ghost.replicas = 1", "{"],
    );
    let DescriptorSource::Directory { files, .. } = &mut i.descriptors else { unreachable!() };
    files.insert(0, Source::text("0.json", "[]"));
    let p = texts(&verify(&i).unwrap_err());
    assert_eq!(p[0], "descriptor 0.json: the descriptor must be an object");
    assert_eq!(p[1], "Streamlet 'sink' names descriptor 'nope', which no descriptor declares.");
    assert_eq!(p[2], "Inlet router.in is not connected.");
    assert!(p[3].starts_with("--conf conf1.conf: "), "{p:?}");
    assert_eq!(p.len(), 4, "{p:?}");
}

// ---------------------------------------------------------------- --conf

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
            "streamlet 'router': 'image' is not a streamlet setting; a --conf file sets replicas and config",
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

// ---------------------------------------------------------------- images, pipeline

#[test]
fn image_messages() {
    let mut g = gen_input(cart(&[]), Some("router = \"r:1\""));
    g.images = vec!["sink=s:1".into(), "router=r:2".into()];
    let r = generated(&g);
    assert_eq!(r.spec.streamlet("router").unwrap().image, "r:2", "--image wins over --images");
    g.images = vec!["sink".into(), "=x".into(), "sink=".into()];
    assert_eq!(
        gen_problems(&g),
        [
            "--image 'sink' is not name=reference",
            "--image '=x' is not name=reference",
            "--image 'sink=' is not name=reference",
            "Streamlet 'sink' has no image.",
        ]
    );
    g.images = vec!["sink=a=b".into()];
    assert_eq!(
        gen_problems(&g),
        ["Streamlet 'sink' has image 'a=b', which is not an image reference: invalid reference format."],
        "split at the first ="
    );
    g.images = vec![];
    g.images_file = Some(Source::text("images.conf", "router = {"));
    assert_eq!(gen_problems(&g), ["images: ParseError at 1:11: expected }"]);
    g.images_file = Some(Source::text("images.conf", "router = [1]\nextra = x"));
    assert_eq!(gen_problems(&g), ["images: 'router' must be an image reference, not [1]"]);
}

#[test]
fn an_image_for_a_streamlet_the_blueprint_lacks_is_refused() {
    let mut g = gen_input(cart(&[]), Some("router = \"r:1\"\nsink = \"s:1\"\nelsewhere = \"e:1\""));
    assert!(generate(&g).is_ok(), "an images file may name streamlets of other blueprints");
    g.images = vec!["routr=registry.example.com/cart-router:1.2".into(), "sink=s:2".into()];
    assert_eq!(
        gen_problems(&g),
        ["--image 'routr=registry.example.com/cart-router:1.2' names streamlet 'routr', which the blueprint \
             does not have; the streamlets that take an image are: router, sink."]
    );
}

#[test]
fn malformed_image_references_are_refused() {
    let good = [
        "r:1",
        "registry.example.com/cart-router:1.2",
        "localhost:5000/shop/router",
        "ghcr.io/acme/router@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "Registry.Example.com:443/acme/router:V1.2",
    ];
    for r in good {
        assert_eq!(images::reference_problem(r), None, "{r}");
    }
    let bad = [
        ("registry.example.com/Cart-Router:1.2", "repository name must be lowercase"),
        ("router:1.2:3", "invalid reference format"),
        ("router:", "invalid reference format"),
        ("router with space", "invalid reference format"),
        ("router@sha256:abc", "invalid reference format"),
        ("router@sha256:0123456789abcdef0123456789abcdef", "invalid checksum digest length"),
        ("-router", "invalid reference format"),
    ];
    for (r, why) in bad {
        assert_eq!(images::reference_problem(r).as_deref(), Some(why), "{r}");
    }
    let mut g = gen_input(cart(&[]), Some("router = \"Router:1\"\nsink = \"s:1\""));
    g.images = vec!["sink=sink:1:2".into()];
    assert_eq!(
        gen_problems(&g),
        [
            "Streamlet 'router' has image 'Router:1', which is not an image reference: repository name must be \
             lowercase.",
            "Streamlet 'sink' has image 'sink:1:2', which is not an image reference: invalid reference format.",
        ]
    );
}

#[test]
fn pipeline_id_defaults() {
    let mut g = gen_input(
        input("cart", &fixture("cart/blueprint.conf").replace("name = cart", ""), &[]),
        Some(&fixture("cart/images.conf")),
    );
    g.verify.blueprint.name = "some/dir/shop-eu.blueprint.conf".into();
    assert_eq!(generated(&g).spec.pipeline, "shop-eu");
    g.verify.blueprint.name = "some/dir/Shop.conf".into();
    assert_eq!(gen_problems(&g), ["pipeline id 'Shop' must be 1-40 of [a-z0-9-], not starting or ending with '-'"]);
}

#[test]
fn generate_collects_verify_and_its_own_problems() {
    let mut g = gen_input(
        input("cart", &fixture("cart/blueprint.conf").replace("name = cart", "name = Cart"), &["flow.streamlets.x {}"]),
        None,
    );
    g.namespace = Some("Shop".into());
    assert_eq!(
        gen_problems(&g),
        [
            "overrides name unknown streamlet 'x'",
            "Streamlet 'router' has no image.",
            "Streamlet 'sink' has no image.",
            "pipeline id 'Cart' must be 1-40 of [a-z0-9-], not starting or ending with '-'",
            "namespace 'Shop' is not a Kubernetes namespace name: 1-63 of [a-z0-9-], not starting or ending with '-'",
        ]
    );
}

#[test]
fn long_managed_topic_names_are_refused_at_generate() {
    let id = "t".repeat(245);
    let bp = fixture("cart/blueprint.conf").replace("review-carts", &id);
    assert!(verify(&input("cart", &bp, &[])).is_ok(), "the id alone is fine");
    let g = gen_input(input("cart", &bp, &[]), Some(&fixture("cart/images.conf")));
    assert_eq!(
        gen_problems(&g),
        [format!("'cart.{id}' is not a valid topic name, must match '[a-zA-Z0-9\\._\\-]', max 249 characters.")]
    );
}

#[test]
fn names_the_operator_could_not_render_are_refused_by_verify_and_generate() {
    let pipeline = "p".repeat(40);
    let streamlet = "s".repeat(50);
    let bp = fixture("cart/blueprint.conf")
        .replace("name = cart", &format!("name = {pipeline}"))
        .replace("router = cart-router", &format!("{streamlet} = cart-router"))
        .replace("router.", &format!("{streamlet}."));
    let want = format!(
        "streamlet '{streamlet}': label app.kubernetes.io/name would be '{pipeline}-{streamlet}', 91 characters, \
         but a label value holds at most 63; shorten the pipeline id or the streamlet name"
    );
    assert_eq!(texts(&verify(&input("cart", &bp, &[])).unwrap_err()), std::slice::from_ref(&want));
    let images = fixture("cart/images.conf").replace("router", &streamlet);
    let mut g = gen_input(input("cart", &bp, &[]), Some(&images));
    assert_eq!(gen_problems(&g), [want]);
    // generate checks the pipeline it writes: a short --pipeline fits
    g.pipeline = Some("cart".into());
    assert_eq!(generated(&g).spec.pipeline, "cart");
    // verify checks the pipeline generate would take without --pipeline; an invalid one is
    // generate's to refuse
    let invalid = bp.replace(&format!("name = {pipeline}"), "name = Not_An_Id");
    assert!(verify(&input("cart", &invalid, &[])).is_ok());
    // the built-in's Secret name is checked too
    let verify_graph =
        input("graph", &fixture("graph/blueprint.conf"), &["flow.streamlets.graph { config { secret = Neo4j_Shop } }"]);
    assert_eq!(
        texts(&verify(&verify_graph).unwrap_err()),
        [
            "streamlet 'graph': 'secret' parameter 'Neo4j_Shop' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a letter or digit"
        ]
    );
}

#[test]
fn delta_topic_notes() {
    let graph = |topic_settings: &str, managed: bool| {
        let bp = format!(
            "blueprint.streamlets {{ mapper = mapper, graph = builtin/neo4j-merge-sink }}
             blueprint.topics {{ in {{ managed = false, cluster = default, consumers = [mapper.in] }}
               d {{ producers = [mapper.deltas], consumers = [graph.in], managed = {managed}, cluster = c {topic_settings} }} }}"
        );
        let v = verify(&input("graph", &bp, &[&fixture("graph/overrides.conf")])).unwrap_or_else(|p| panic!("{p:?}"));
        texts(&v.notes)
    };
    assert_eq!(
        graph(", topic { cleanup.policy = compact }", true),
        ["note: Topic 'd' carries graph deltas and is compacted (cleanup.policy = compact)."]
    );
    assert_eq!(
        graph(", topic { cleanup.policy = \"compact,delete\" }", true),
        [
            "note: Topic 'd' carries graph deltas and sets cleanup.policy = compact,delete; records older than its retention are gone from a rebuild."
        ]
    );
    assert_eq!(
        graph(", topic { cleanup.policy = delete }", true),
        [
            "note: Topic 'd' carries graph deltas and sets cleanup.policy = delete; it will not hold the whole graph and cannot be relied on to rebuild it."
        ]
    );
    // An unmanaged topic with a producer is refused, so this one only has the graph's inlet.
    let bp = "blueprint.streamlets { graph = builtin/neo4j-merge-sink }
              blueprint.topics.d { managed = false, cluster = c, consumers = [graph.in] }";
    let v = verify(&input("graph", bp, &[&fixture("graph/overrides.conf")])).unwrap();
    assert_eq!(
        texts(&v.notes),
        ["note: Topic 'd' carries graph deltas and is not managed; whether it is compacted is its owner's."]
    );
}

#[test]
fn delete_policy_is_kept_when_set() {
    let bp = "blueprint.streamlets { mapper = mapper, graph = builtin/neo4j-merge-sink }
              blueprint.topics { in { managed = false, cluster = default, consumers = [mapper.in] }
                d { producers = [mapper.deltas], consumers = [graph.in], topic { cleanup.policy = delete } } }";
    let mut g = gen_input(input("graph", bp, &[&fixture("graph/overrides.conf")]), Some(&fixture("graph/images.conf")));
    g.version = "x".into();
    let r = generated(&g);
    assert_eq!(r.spec.topic("d").unwrap().topic_config, [("cleanup.policy".to_string(), "delete".to_string())].into());
}

#[test]
fn user_text_never_breaks_a_problem_over_lines() {
    let p = problems(&format!("{ROUTER_SINK}blueprint.topics {{ \"a\\nb\" {{ producers = [\"x\\ty.z\"] }} }}"), &[]);
    assert_eq!(p[0], "'x\\ty.z' does not point to a known streamlet inlet or outlet.");
    let p = problems(&format!("{ROUTER_SINK}blueprint.topics {{ \"a\\nb\" = 1 }}"), &[]);
    assert_eq!(p, ["The blueprint file has an invalid format:\n blueprint.topics.a\\nb must be an object"]);
}
