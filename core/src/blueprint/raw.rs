//! The shape of a blueprint (docs/blueprint.md) and of a topic's settings: HOCON tree to
//! typed fields, with a format problem for every key of the wrong type. What the fields mean
//! together is checked in `verify`.

use std::collections::BTreeMap;
use std::fmt;

use super::problems::Problem;
use super::tree::{self, Node, Object};

/// A blueprint whose keys all have the right types; nothing is cross-checked yet.
#[derive(Clone, Debug, PartialEq)]
pub struct RawBlueprint {
    /// `blueprint.name`.
    pub name: Option<String>,
    /// `blueprint.streamlets`: streamlet name → descriptor reference (a descriptor name or
    /// `builtin/<name>`), sorted by name.
    pub streamlets: BTreeMap<String, String>,
    /// `blueprint.topics`, sorted by id.
    pub topics: BTreeMap<String, RawTopic>,
}

/// One topic object of a blueprint.
#[derive(Clone, Debug, PartialEq)]
pub struct RawTopic {
    /// Port paths as written.
    pub producers: Vec<String>,
    /// Port paths as written.
    pub consumers: Vec<String>,
    /// `managed` (default true).
    pub managed: bool,
    /// `topic.name`.
    pub kafka_name: Option<String>,
    /// Every other setting, as a tree that `--conf` overrides are laid over.
    pub settings: Object,
}

/// A topic's settings that a `--conf` file may change too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicFields {
    /// `cluster`.
    pub cluster: Option<String>,
    /// `bootstrap.servers`.
    pub bootstrap_servers: Option<String>,
    /// `partitions`, at least 1.
    pub partitions: Option<i32>,
    /// `replicas`, at least 1.
    pub replicas: Option<i32>,
    /// `connection-config`, flattened.
    pub connection: BTreeMap<String, String>,
    /// `producer-config`, flattened.
    pub producer: BTreeMap<String, String>,
    /// `consumer-config`, flattened, without the platform's `flow.*` keys.
    pub consumer: BTreeMap<String, String>,
    /// `topic`, flattened, without `name`.
    pub topic: BTreeMap<String, String>,
    /// `consumer-config.flow.batch.max-records`.
    pub batch_max_records: Option<i64>,
    /// `consumer-config.flow.batch.max-bytes`, in bytes.
    pub batch_max_bytes: Option<i64>,
}

/// Why a key has the wrong type: displayed as `<key> <what>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    /// Dotted key, relative to the object read.
    pub key: String,
    /// What is wrong with it.
    pub what: String,
}

impl Reason {
    fn new(key: impl Into<String>, what: impl Into<String>) -> Reason {
        Reason { key: key.into(), what: what.into() }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.key, self.what)
    }
}

/// The keys of a topic object that only a blueprint sets.
pub const BLUEPRINT_ONLY: [&str; 4] = ["producers", "consumers", "managed", "topic.name"];

/// A topic object taken apart: the blueprint-only keys, the overridable settings (with
/// `bootstrap.servers` under that one key however it was written), and unknown keys.
pub struct SplitTopic<'a> {
    /// `producers`.
    pub producers: Option<&'a Node>,
    /// `consumers`.
    pub consumers: Option<&'a Node>,
    /// `managed`.
    pub managed: Option<&'a Node>,
    /// `topic.name`.
    pub kafka_name: Option<&'a Node>,
    /// The overridable settings.
    pub settings: Object,
    /// Keys that are no topic setting.
    pub unknown: Vec<Reason>,
}

const SETTINGS: [&str; 7] =
    ["cluster", "partitions", "replicas", "connection-config", "producer-config", "consumer-config", "topic"];

/// Takes a topic object apart (see [`SplitTopic`]).
pub fn split_topic(o: &Object) -> SplitTopic<'_> {
    let mut s = SplitTopic {
        producers: None,
        consumers: None,
        managed: None,
        kafka_name: None,
        settings: Object::new(),
        unknown: Vec::new(),
    };
    for (k, v) in o {
        match k.as_str() {
            "producers" => s.producers = Some(v),
            "consumers" => s.consumers = Some(v),
            "managed" => s.managed = Some(v),
            "bootstrap.servers" => {
                s.settings.insert(k.clone(), v.clone());
            }
            "bootstrap" => match v {
                Node::Object(b) => {
                    for (bk, bv) in b {
                        if bk == "servers" {
                            s.settings.insert("bootstrap.servers".into(), bv.clone());
                        } else {
                            s.unknown.push(Reason::new(format!("bootstrap.{bk}"), "is not a topic setting"));
                        }
                    }
                }
                _ => s.unknown.push(Reason::new("bootstrap", "is not a topic setting (bootstrap.servers is)")),
            },
            "topic" => match v {
                Node::Object(t) => {
                    let mut rest = t.clone();
                    if let Some(name) = t.get("name") {
                        s.kafka_name = Some(name);
                        rest.remove("name");
                    }
                    s.settings.insert(k.clone(), Node::Object(rest));
                }
                other => {
                    s.settings.insert(k.clone(), other.clone());
                }
            },
            key if SETTINGS.contains(&key) => {
                s.settings.insert(k.clone(), v.clone());
            }
            _ => s.unknown.push(Reason::new(k.clone(), "is not a topic setting")),
        }
    }
    s
}

/// Reads the overridable settings of a topic. `null` leaves a setting unset.
///
/// # Errors
/// One [`Reason`] per key of the wrong type; the fields hold what could be read.
pub fn read_topic_fields(settings: &Object) -> (TopicFields, Vec<Reason>) {
    let mut f = TopicFields::default();
    let mut reasons = Vec::new();
    for (k, v) in settings {
        if v.is_null() {
            continue;
        }
        match k.as_str() {
            "cluster" => f.cluster = text(v, k, &mut reasons),
            "bootstrap.servers" => f.bootstrap_servers = text(v, k, &mut reasons),
            "partitions" => f.partitions = count(v, k, &mut reasons),
            "replicas" => f.replicas = count(v, k, &mut reasons),
            "connection-config" => f.connection = properties(v, k, &mut reasons),
            "producer-config" => f.producer = properties(v, k, &mut reasons),
            "topic" => f.topic = properties(v, k, &mut reasons),
            "consumer-config" => {
                let all = properties(v, k, &mut reasons);
                for (pk, pv) in all {
                    match pk.as_str() {
                        "flow.batch.max-records" => match pv.trim().parse::<i64>() {
                            Ok(n) if n >= 1 => f.batch_max_records = Some(n),
                            _ => reasons.push(Reason::new(
                                format!("{k}.{pk}"),
                                format!("= {pv} must be a whole number of at least 1"),
                            )),
                        },
                        "flow.batch.max-bytes" => match tree::memory_size(pv.trim()) {
                            Some(n) if n >= 1 => f.batch_max_bytes = Some(n),
                            _ => reasons.push(Reason::new(
                                format!("{k}.{pk}"),
                                format!("= {pv} must be a memory size of at least 1 byte, such as 4 MiB"),
                            )),
                        },
                        other if other == "flow" || other.starts_with("flow.") => reasons.push(Reason::new(
                            format!("{k}.{pk}"),
                            "is not a platform setting; the platform reads flow.batch.max-records and flow.batch.max-bytes",
                        )),
                        _ => {
                            f.consumer.insert(pk, pv);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    (f, reasons)
}

/// A non-null scalar's text (HOCON lets numbers stand for strings).
fn text(v: &Node, key: &str, reasons: &mut Vec<Reason>) -> Option<String> {
    match v.as_text() {
        Some(t) => Some(t.to_string()),
        None => {
            reasons.push(Reason::new(key, "must be a string"));
            None
        }
    }
}

/// A whole number from 1 to `i32::MAX` (partitions, replicas).
fn count(v: &Node, key: &str, reasons: &mut Vec<Reason>) -> Option<i32> {
    match v.as_text().and_then(|t| t.trim().parse::<i32>().ok()) {
        Some(n) if n >= 1 => Some(n),
        _ => {
            reasons.push(Reason::new(key, format!("= {} must be a whole number of at least 1", v.render())));
            None
        }
    }
}

fn properties(v: &Node, key: &str, reasons: &mut Vec<Reason>) -> BTreeMap<String, String> {
    match v {
        Node::Object(o) => match tree::flatten(o) {
            Ok(p) => p,
            Err(e) => {
                reasons.push(Reason::new(format!("{key}.{}", e.key), "must be a value or a list of values"));
                BTreeMap::new()
            }
        },
        _ => {
            reasons.push(Reason::new(key, "must be an object"));
            BTreeMap::new()
        }
    }
}

/// A list of non-null scalars; `None` when the value is something else.
pub fn text_list(v: Option<&Node>) -> Option<Vec<String>> {
    match v {
        None => Some(Vec::new()),
        Some(n) if n.is_null() => Some(Vec::new()),
        Some(Node::Array(items)) => items.iter().map(|i| i.as_text().map(str::to_string)).collect(),
        Some(_) => None,
    }
}

/// Reads a blueprint document.
///
/// # Errors
/// Format problems (one per key of the wrong type, unknown key, or `blueprint.connections`), then
/// `blueprint.streamlets` missing or empty.
pub fn read_blueprint(root: &Object) -> Result<RawBlueprint, Vec<Problem>> {
    let bad = |reason: String| Problem::InvalidFormat(reason);
    let bp = match root.get("blueprint") {
        None => return Err(vec![Problem::StreamletsMissing]),
        Some(n) if n.is_null() => return Err(vec![Problem::StreamletsMissing]),
        Some(Node::Object(bp)) => bp,
        Some(_) => return Err(vec![bad("blueprint must be an object".into())]),
    };
    let mut problems = Vec::new();
    for k in bp.keys() {
        match k.as_str() {
            "name" | "streamlets" | "topics" => {}
            "connections" => problems.push(bad(
                "blueprint.connections is the legacy format, which this version does not read; connect ports with producers and consumers under blueprint.topics".into(),
            )),
            other => problems.push(bad(format!(
                "blueprint.{other} is not a blueprint key; the keys are name, streamlets and topics"
            ))),
        }
    }
    let name = match bp.get("name") {
        None => None,
        Some(n) if n.is_null() => None,
        Some(n) => match n.as_text() {
            Some(t) => Some(t.to_string()),
            None => {
                problems.push(bad("blueprint.name must be a string".into()));
                None
            }
        },
    };
    let mut streamlets = BTreeMap::new();
    let mut missing = false;
    let mut empty = false;
    match bp.get("streamlets") {
        None => missing = true,
        Some(n) if n.is_null() => missing = true,
        Some(Node::Object(o)) => {
            empty = o.is_empty();
            for (k, v) in o {
                match v.as_text() {
                    Some(t) => {
                        streamlets.insert(k.clone(), t.to_string());
                    }
                    None => problems.push(bad(format!(
                        "blueprint.streamlets.{k} must be a descriptor name or builtin/<name>, not {}",
                        v.render()
                    ))),
                }
            }
        }
        Some(_) => problems.push(bad("blueprint.streamlets must be an object".into())),
    }
    let mut topics = BTreeMap::new();
    match bp.get("topics") {
        None => {}
        Some(n) if n.is_null() => {}
        Some(Node::Object(o)) => {
            for (id, v) in o {
                let t = match v {
                    n if n.is_null() => continue,
                    Node::Object(t) => t,
                    _ => {
                        problems.push(bad(format!("blueprint.topics.{id} must be an object")));
                        continue;
                    }
                };
                let at = |r: &Reason| bad(format!("blueprint.topics.{id}.{r}"));
                let split = split_topic(t);
                problems.extend(split.unknown.iter().map(at));
                let producers = text_list(split.producers).unwrap_or_else(|| {
                    problems.push(at(&Reason::new("producers", "must be a list of port paths")));
                    Vec::new()
                });
                let consumers = text_list(split.consumers).unwrap_or_else(|| {
                    problems.push(at(&Reason::new("consumers", "must be a list of port paths")));
                    Vec::new()
                });
                let managed = match split.managed {
                    None => true,
                    Some(n) if n.is_null() => true,
                    Some(n) => match n.as_text() {
                        Some("true") => true,
                        Some("false") => false,
                        _ => {
                            problems.push(at(&Reason::new("managed", "must be true or false")));
                            true
                        }
                    },
                };
                let kafka_name = match split.kafka_name {
                    None => None,
                    Some(n) if n.is_null() => None,
                    Some(n) => match n.as_text() {
                        Some(s) => Some(s.to_string()),
                        None => {
                            problems.push(at(&Reason::new("topic.name", "must be a string")));
                            None
                        }
                    },
                };
                let (_, reasons) = read_topic_fields(&split.settings);
                problems.extend(reasons.iter().map(at));
                topics.insert(
                    id.clone(),
                    RawTopic { producers, consumers, managed, kafka_name, settings: split.settings },
                );
            }
        }
        Some(_) => problems.push(bad("blueprint.topics must be an object".into())),
    }
    if missing {
        problems.push(Problem::StreamletsMissing);
    } else if empty {
        problems.push(Problem::BlueprintEmpty);
    }
    if problems.is_empty() { Ok(RawBlueprint { name, streamlets, topics }) } else { Err(problems) }
}
