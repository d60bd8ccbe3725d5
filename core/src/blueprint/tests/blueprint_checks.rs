//! The messages about the blueprint itself.

use super::*;

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
