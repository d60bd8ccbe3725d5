//! `streamlet.conf`: the HOCON file the sidecar reads to learn its pipeline, its streamlet, the
//! parameters, and for each port the topic, consumer group, client id and Kafka settings.
//!
//! The shape is fixed byte for byte, because existing sidecars read it and because its text enters the
//! config hash (a byte that changes rolls the streamlet). Every string is JSON-quoted (a HOCON quoted
//! string is a JSON string); a properties block renders `{}` when empty, else
//! `{ "k" = "v", "k2" = "v2" }` with its keys sorted; ports are sorted by name; `config` is compact JSON
//! with its keys sorted at every level. docs/rendering.md shows a whole file.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::blueprint::descriptor::write_json_string;

/// Where a built-in stage finds the credentials of its Neo4j Secret (the Secret is mounted there).
pub const NEO4J_CREDENTIALS_DIR: &str = "/etc/flow/neo4j";

/// One inlet: what its consumer reads, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InletConf {
    /// Inlet name.
    pub name: String,
    /// Kafka topic name.
    pub topic: String,
    /// Consumer group, `<pipeline>.<streamlet>.<inlet>`.
    pub group: String,
    /// Kafka client id, the same string as the group.
    pub client_id: String,
    /// Brokers.
    pub bootstrap_servers: String,
    /// Properties of every client of the topic (Java client names).
    pub connection_config: BTreeMap<String, String>,
    /// Consumer properties (Java client names).
    pub consumer_config: BTreeMap<String, String>,
    /// Records per batch.
    pub max_records: i64,
    /// Bytes per batch.
    pub max_bytes: i64,
}

/// One outlet: what its producer writes, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutletConf {
    /// Outlet name.
    pub name: String,
    /// Kafka topic name.
    pub topic: String,
    /// Kafka client id, `<pipeline>.<streamlet>.<outlet>`.
    pub client_id: String,
    /// Brokers.
    pub bootstrap_servers: String,
    /// Properties of every client of the topic (Java client names).
    pub connection_config: BTreeMap<String, String>,
    /// Producer properties (Java client names).
    pub producer_config: BTreeMap<String, String>,
}

/// The stage a built-in streamlet runs inside the sidecar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageConf {
    /// The built-in's name (`neo4j-merge-sink`).
    pub name: String,
    /// Directory where its Neo4j Secret is mounted.
    pub credentials_dir: String,
}

/// Everything `streamlet.conf` says.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamletConf {
    /// Pipeline id.
    pub pipeline: String,
    /// Streamlet name.
    pub streamlet: String,
    /// The resolved, typed parameter values.
    pub config: Map<String, Value>,
    /// The stage, for a built-in streamlet only.
    pub stage: Option<StageConf>,
    /// Inlets, in any order (rendered sorted by name).
    pub inlets: Vec<InletConf>,
    /// Outlets, in any order (rendered sorted by name).
    pub outlets: Vec<OutletConf>,
}

impl StreamletConf {
    /// The file's text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# Rendered by the ankka-flow operator for {} of pipeline {}. Do not edit.",
            quote(&self.streamlet),
            quote(&self.pipeline)
        );
        out.push_str("flow {\n");
        let _ = writeln!(out, "  pipeline = {}", quote(&self.pipeline));
        let _ = writeln!(out, "  streamlet = {}", quote(&self.streamlet));
        out.push_str("  config = ");
        compact_sorted(&Value::Object(self.config.clone()), &mut out);
        out.push('\n');
        if let Some(stage) = &self.stage {
            out.push_str("  stage {\n");
            let _ = writeln!(out, "    name = {}", quote(&stage.name));
            let _ = writeln!(out, "    neo4j {{ credentials-dir = {} }}", quote(&stage.credentials_dir));
            out.push_str("  }\n");
        }
        let mut inlets: Vec<&InletConf> = self.inlets.iter().collect();
        inlets.sort_by(|a, b| a.name.cmp(&b.name));
        out.push_str("  inlets {\n");
        for i in inlets {
            let _ = writeln!(out, "    {} {{", quote(&i.name));
            let _ = writeln!(out, "      topic = {}", quote(&i.topic));
            let _ = writeln!(out, "      group = {}", quote(&i.group));
            let _ = writeln!(out, "      client-id = {}", quote(&i.client_id));
            let _ = writeln!(out, "      bootstrap.servers = {}", quote(&i.bootstrap_servers));
            let _ = writeln!(out, "      connection-config {}", block(&i.connection_config));
            let _ = writeln!(out, "      consumer-config {}", block(&i.consumer_config));
            let _ = writeln!(out, "      batch {{ max-records = {}, max-bytes = {} }}", i.max_records, i.max_bytes);
            out.push_str("    }\n");
        }
        out.push_str("  }\n");
        let mut outlets: Vec<&OutletConf> = self.outlets.iter().collect();
        outlets.sort_by(|a, b| a.name.cmp(&b.name));
        out.push_str("  outlets {\n");
        for o in outlets {
            let _ = writeln!(out, "    {} {{", quote(&o.name));
            let _ = writeln!(out, "      topic = {}", quote(&o.topic));
            let _ = writeln!(out, "      client-id = {}", quote(&o.client_id));
            let _ = writeln!(out, "      bootstrap.servers = {}", quote(&o.bootstrap_servers));
            let _ = writeln!(out, "      connection-config {}", block(&o.connection_config));
            let _ = writeln!(out, "      producer-config {}", block(&o.producer_config));
            out.push_str("    }\n");
        }
        out.push_str("  }\n");
        out.push_str("}\n");
        out
    }
}

/// `s` as a JSON (and HOCON) quoted string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_json_string(s, &mut out);
    out
}

/// A properties block: `{}`, or `{ "k" = "v", "k2" = "v2" }` with keys sorted.
fn block(map: &BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return "{}".into();
    }
    let entries: Vec<String> = map.iter().map(|(k, v)| format!("{} = {}", quote(k), quote(v))).collect();
    format!("{{ {} }}", entries.join(", "))
}

/// Compact JSON with object keys sorted at every level. Written here rather than with
/// `serde_json::to_string`, whose key order follows insertion when a crate in the build turns on
/// serde_json's `preserve_order` feature.
fn compact_sorted(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                compact_sorted(item, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            let mut entries: Vec<(&String, &Value)> = o.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(k, out);
                out.push(':');
                compact_sorted(v, out);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn blocks_quote_and_sort() {
        assert_eq!(block(&BTreeMap::new()), "{}");
        assert_eq!(block(&map(&[("b", "2"), ("a", "x\"y")])), r#"{ "a" = "x\"y", "b" = "2" }"#);
    }

    #[test]
    fn config_is_compact_sorted_json() {
        let v: Value = serde_json::json!({"z": [1, {"b": true, "a": null}], "a": "ä\n", "m": 2.5});
        let mut out = String::new();
        compact_sorted(&v, &mut out);
        assert_eq!(out, r#"{"a":"ä\n","m":2.5,"z":[1,{"a":null,"b":true}]}"#);
    }

    #[test]
    fn empty_port_sections_and_stage() {
        let conf = StreamletConf {
            pipeline: "p".into(),
            streamlet: "s".into(),
            config: Map::new(),
            stage: Some(StageConf { name: "neo4j-merge-sink".into(), credentials_dir: NEO4J_CREDENTIALS_DIR.into() }),
            inlets: vec![],
            outlets: vec![],
        };
        assert_eq!(
            conf.render(),
            "# Rendered by the ankka-flow operator for \"s\" of pipeline \"p\". Do not edit.\nflow {\n  pipeline = \"p\"\n  streamlet = \"s\"\n  config = {}\n  stage {\n    name = \"neo4j-merge-sink\"\n    neo4j { credentials-dir = \"/etc/flow/neo4j\" }\n  }\n  inlets {\n  }\n  outlets {\n  }\n}\n"
        );
    }
}

/// Values in `streamlet.conf` come from tenants (topic settings, parameters); whatever they hold,
/// the file must read back to exactly them, so that no value can add or change another key.
#[cfg(test)]
mod round_trip {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use crate::blueprint::tree;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z.]{1,12}",
            "\\PC{0,16}",
            Just("\" }\n      group = \"other\"".to_string()),
            Just("${HOME}\\n\\\"".to_string()),
            Just("\u{1}\t\r\u{7f}é€𝄞".to_string()),
        ]
    }

    proptest! {
        #[test]
        fn every_value_reads_back_as_written(
            props in proptest::collection::btree_map(text(), text(), 0..4),
            topic in text(),
            param in text(),
        ) {
            let conf = StreamletConf {
                pipeline: "p".into(),
                streamlet: "s".into(),
                config: Map::from_iter([("k".to_string(), Value::String(param.clone()))]),
                stage: None,
                inlets: vec![InletConf {
                    name: "in".into(),
                    topic: topic.clone(),
                    group: "p.s.in".into(),
                    client_id: "p.s.in".into(),
                    bootstrap_servers: "b:9092".into(),
                    connection_config: props.clone(),
                    consumer_config: BTreeMap::new(),
                    max_records: 1,
                    max_bytes: 2,
                }],
                outlets: vec![],
            };
            let root = tree::parse(&conf.render(), &HashMap::new()).map_err(|e| TestCaseError::fail(e.0))?;
            let inlet = root["flow"].as_object().unwrap()["inlets"].as_object().unwrap()["in"].as_object().unwrap();
            prop_assert_eq!(inlet["topic"].as_text(), Some(topic.as_str()));
            prop_assert_eq!(inlet["group"].as_text(), Some("p.s.in"));
            let read: BTreeMap<String, String> = inlet["connection-config"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_text().unwrap_or_default().to_string()))
                .collect();
            prop_assert_eq!(read, props);
            let config = root["flow"].as_object().unwrap()["config"].as_object().unwrap();
            prop_assert_eq!(config["k"].as_text(), Some(param.as_str()));
        }
    }
}
