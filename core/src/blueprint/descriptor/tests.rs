use serde_json::json;

use super::*;

const CART_ROUTER: &str = include_str!("../../../tests/fixtures/cart/descriptors/cart-router.json");
const SINK: &str = include_str!("../../../tests/fixtures/cart/descriptors/sink.json");
const MAPPER: &str = include_str!("../../../tests/fixtures/graph/descriptors/mapper.json");

fn problems(v: serde_json::Value) -> Vec<String> {
    match Descriptor::parse(&v.to_string()) {
        Ok(_) => vec![],
        Err(r) => r.problems.iter().map(ToString::to_string).collect(),
    }
}

fn port(name: &str, schema: &str) -> serde_json::Value {
    json!({"name": name, "contract": {"format": "json", "schema_name": schema, "fingerprint": fingerprint(schema)}})
}

fn with_streamlet(s: serde_json::Value) -> serde_json::Value {
    json!({"protocol_version": "1.0", "sdk": {"name": "t", "version": "0"}, "streamlet": s})
}

#[test]
fn fixtures_are_valid_and_canonical() {
    for text in [CART_ROUTER, SINK, MAPPER, BUILTIN_TEXTS[0]] {
        let d = Descriptor::parse(text).unwrap_or_else(|r| panic!("{:?}", r.problems));
        assert_eq!(d.canonical_json(), text);
    }
    let b = builtins();
    assert_eq!(b.len(), BUILTIN_TEXTS.len());
    assert_eq!(b[0].name().as_str(), "neo4j-merge-sink");
    assert_eq!(b[0].param("secret").map(|p| (p.ty, p.default.clone())), Some((ParamType::String, None)));
}

#[test]
fn verified_fingerprints() {
    assert_eq!(fingerprint("cart-events.v1"), "nXhoFwNZSB7DKScFuZUtZ1gnAYkIxadumsXNHWwbLfM=");
    assert_eq!(fingerprint("cart-events.v2"), "hogIPAqBWsUY/TIbsORekavFVqZg2iQTojucdOKEBPI=");
    assert_eq!(fingerprint("ankka.graph-delta.v1"), "/m1g0K1CRmTMgMek+Dhbceu1GNHdtD0Tx+vY4MhQ8KE=");
    assert_eq!(fingerprint("ankka.checkout-notice.v1"), "e0Cpauo32y7LOU2bHaYdQmq4QhXWvD/caczQKff53R0=");
}

#[test]
fn canonical_form_sorts_and_drops_defaults() {
    let d = Descriptor::parse(
        &with_streamlet(json!({
            "outlets": [port("b", "x"), port("a", "x")],
            "name": "n",
            "description": "",
            "inlets": [],
            "config_parameters": [
                {"key": "z", "type": "STRING", "description": "ü \"q\" \u{1}"},
                {"key": "a", "type": "INTEGER", "default_value": "1"}
            ]
        }))
        .to_string(),
    )
    .unwrap();
    let text = d.canonical_json();
    assert!(text.ends_with("}\n") && !text.ends_with("\n\n"));
    assert!(!text.contains("\"inlets\"") && !text.contains("\"description\": \"\""), "{text}");
    assert!(!text.contains("\"STRING\""), "{text}");
    assert!(text.contains(r#""description": "ü \"q\" \u0001""#), "{text}");
    let names: Vec<&str> = d.outlets().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(d.params()[0].key.as_str(), "a");
    assert!(text.find("\"a\"").unwrap() < text.find("\"b\"").unwrap());
}

#[test]
fn protocol_version_messages() {
    let mut v: serde_json::Value = serde_json::from_str(SINK).unwrap();
    for (pv, msg) in [
        ("1", "protocol version '1' is not MAJOR.MINOR"),
        ("1.0.0", "protocol version '1.0.0' is not MAJOR.MINOR"),
        ("1234567890.0", "protocol version '1234567890.0' is not MAJOR.MINOR"),
        ("2.0", "the SDK speaks protocol '2.0' and this sidecar speaks '1.0'; the major versions must match"),
        ("0.9", "the SDK speaks protocol '0.9' and this sidecar speaks '1.0'; the major versions must match"),
        ("1.1", "the SDK speaks protocol '1.1', later than this sidecar's '1.0'; upgrade the platform or pin the SDK"),
    ] {
        v["protocol_version"] = json!(pv);
        assert_eq!(problems(v.clone()), [msg]);
    }
    v.as_object_mut().unwrap().remove("protocol_version");
    assert_eq!(problems(v), ["protocol version '' is not MAJOR.MINOR"]);
}

#[test]
fn streamlet_and_port_messages() {
    assert_eq!(problems(json!({"protocol_version": "1.0"})), ["the descriptor names no streamlet"]);
    assert_eq!(
        problems(with_streamlet(json!({"name": "-bad"}))),
        ["streamlet name '-bad' must be 1-63 of [a-z0-9-], not starting or ending with '-'"]
    );
    assert_eq!(
        problems(with_streamlet(json!({"name": "n", "inlets": [port("In", "x")], "outlets": [port("9o", "x")]}))),
        ["inlet name 'In' must match [a-z][a-z0-9-]{0,62}", "outlet name '9o' must match [a-z][a-z0-9-]{0,62}"]
    );
    assert_eq!(
        problems(with_streamlet(
            json!({"name": "n", "inlets": [port("p", "x"), port("p", "x")], "outlets": [port("p", "x")]})
        )),
        ["port 'p' is declared 3 times"]
    );
    assert_eq!(
        problems(with_streamlet(json!({"name": "n", "inlets": [{"name": "in"}]}))),
        ["inlet 'in' has no contract"]
    );
    assert_eq!(
        problems(with_streamlet(json!({"name": "n", "outlets": [
            {"name": "o", "contract": {"format": "avro", "schema_name": "x", "fingerprint": fingerprint("x")}}
        ]}))),
        ["outlet 'o' uses format 'avro', which this version does not support"]
    );
    assert_eq!(
        problems(with_streamlet(json!({"name": "n", "inlets": [{"name": "in", "contract": {"format": "json"}}]}))),
        ["inlet 'in' has no schema name"]
    );
    assert_eq!(
        problems(with_streamlet(json!({"name": "n", "inlets": [
            {"name": "in", "contract": {"format": "json", "schema_name": "cart-events.v2", "fingerprint": fingerprint("cart-events.v1")}}
        ]}))),
        ["inlet 'in' fingerprint does not match schema name 'cart-events.v2' (was the descriptor edited by hand?)"]
    );
}

#[test]
fn parameter_messages() {
    let s = |params: serde_json::Value| problems(with_streamlet(json!({"name": "n", "config_parameters": params})));
    assert_eq!(s(json!([{"key": "Bad"}])), ["parameter key 'Bad' must match [a-z][a-z0-9-]*"]);
    assert_eq!(
        s(json!([{"key": "k", "type": "INTEGER", "default_value": "lots"}])),
        ["parameter 'k': 'lots' is not a integer"]
    );
    assert_eq!(
        s(json!([{"key": "k", "type": "MEMORY_SIZE", "default_value": "lots"}])),
        ["parameter 'k': 'lots' is not a memory size"]
    );
    assert_eq!(s(json!([{"key": "k"}, {"key": "k"}])), ["parameter 'k' is declared 2 times"]);
    assert_eq!(s(json!([{"key": "k", "type": "DATE"}])), ["unknown config parameter type 'DATE'"]);
    assert_eq!(s(json!([{"key": "k", "type": 3}])), ["'config_parameters[0].type' must be a string"]);
    // A missing type reads as STRING; an empty default as no default (proto3).
    let d = Descriptor::parse(
        &with_streamlet(json!({"name": "n", "config_parameters": [{"key": "k", "default_value": ""}]})).to_string(),
    )
    .unwrap();
    assert_eq!(d.params()[0].ty, ParamType::String);
    assert_eq!(d.params()[0].default, None);
}

#[test]
fn shape_messages() {
    assert_eq!(problems(json!([])), ["the descriptor must be an object"]);
    assert_eq!(problems(json!({"protocol_version": "1.0", "streamlet": 3})), ["'streamlet' must be an object"]);
    assert_eq!(
        problems(json!({"protocol_version": 1, "sdk": [], "streamlet": {"name": "n"}})),
        ["'protocol_version' must be a string", "protocol version '' is not MAJOR.MINOR", "'sdk' must be an object"]
    );
    assert_eq!(
        problems(with_streamlet(json!({"name": 5}))),
        [
            "'streamlet.name' must be a string",
            "streamlet name '' must be 1-63 of [a-z0-9-], not starting or ending with '-'"
        ]
    );
    assert_eq!(problems(with_streamlet(json!({"name": "n", "inlets": {}}))), ["'inlets' must be an array"]);
    assert_eq!(problems(with_streamlet(json!({"name": "n", "outlets": [1]}))), ["'outlets[0]' must be an object"]);
    assert_eq!(
        problems(with_streamlet(json!({"name": "n", "inlet": []}))),
        ["'streamlet.inlet' is not a descriptor field"]
    );
    let e = Descriptor::parse("{").unwrap_err();
    assert_eq!(e.name, None);
    assert!(e.problems[0].to_string().starts_with("is not JSON: "), "{:?}", e.problems);
}

#[test]
fn a_rejected_descriptor_still_names_its_streamlet() {
    let e =
        Descriptor::parse(&with_streamlet(json!({"name": "n", "inlets": [{"name": "in"}]})).to_string()).unwrap_err();
    assert_eq!(e.name.as_deref(), Some("n"));
}

#[test]
fn every_problem_of_a_file_is_reported() {
    let p = problems(json!({"protocol_version": "x", "streamlet": {"name": "N", "inlets": [{"name": "I"}],
        "config_parameters": [{"key": "k", "type": "BOOLEAN", "default_value": "maybe"}]}}));
    assert_eq!(p.len(), 5, "{p:?}");
}
