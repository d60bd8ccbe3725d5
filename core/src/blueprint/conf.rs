//! Deploy-time configuration: `--conf` files laid over a verified blueprint (docs/blueprint.md,
//! "Deploy-time configuration").
//!
//! The files are merged first (later wins, objects key by key); then `flow.topics.<id>` is laid
//! over each topic's settings and `flow.streamlets.<name>` gives each streamlet its replicas and
//! parameter values.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::names::{ClusterName, StreamletName, TopicId};
use super::problems::{Note, Problem};
use super::raw::{BLUEPRINT_ONLY, Reason, TopicFields, read_topic_fields, split_topic};
use super::tree::{self, Node, Object};
use super::typed;
use super::verify::VerifiedBlueprint;
use crate::pod::{self, PodSettings};

/// One `flow.topics.<id>` section.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicOverride {
    /// The settings it changes (blueprint-only keys removed), to lay over the blueprint's.
    pub settings: Object,
    /// Keys of the wrong type or unknown.
    pub reasons: Vec<Reason>,
    /// Blueprint-only keys it tried to set.
    pub ignored: Vec<String>,
    /// The section was not an object.
    pub not_object: bool,
}

/// The `flow` section of the merged `--conf` files.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// `flow.topics`, by id.
    pub topics: BTreeMap<String, TopicOverride>,
    /// `flow.streamlets`, by name, unread.
    pub streamlets: BTreeMap<String, Node>,
    /// `flow.pod`, the pod settings of every streamlet, unread.
    pub pod: Option<Node>,
    /// Problems of the sections' own shape.
    pub shape: Vec<Problem>,
}

/// Reads the `flow` section of merged `--conf` files. Keys outside `flow` are the files' own (for
/// substitutions, say) and are left alone.
pub fn read_overrides(merged: &Object) -> Overrides {
    let mut o = Overrides::default();
    let flow = match merged.get("flow") {
        None => return o,
        Some(n) if n.is_null() => return o,
        Some(Node::Object(f)) => f,
        Some(_) => {
            o.shape.push(Problem::OverridesNotObject("flow".into()));
            return o;
        }
    };
    for (k, v) in flow {
        match (k.as_str(), v) {
            (_, n) if n.is_null() => {}
            ("topics", Node::Object(topics)) => {
                for (id, t) in topics {
                    if t.is_null() {
                        continue;
                    }
                    let Node::Object(t) = t else {
                        o.topics.insert(id.clone(), TopicOverride { not_object: true, ..TopicOverride::default() });
                        continue;
                    };
                    let split = split_topic(t);
                    let mut ignored = Vec::new();
                    for (key, present) in BLUEPRINT_ONLY.iter().zip([
                        split.producers.is_some(),
                        split.consumers.is_some(),
                        split.managed.is_some(),
                        split.kafka_name.is_some(),
                    ]) {
                        if present {
                            ignored.push((*key).to_string());
                        }
                    }
                    let mut reasons = split.unknown;
                    reasons.extend(read_topic_fields(&split.settings).1);
                    o.topics.insert(
                        id.clone(),
                        TopicOverride { settings: split.settings, reasons, ignored, not_object: false },
                    );
                }
            }
            ("streamlets", Node::Object(s)) => {
                o.streamlets = s.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect();
            }
            ("pod", n) => o.pod = Some(n.clone()),
            ("topics" | "streamlets", _) => o.shape.push(Problem::OverridesNotObject(format!("flow.{k}"))),
            _ => o.shape.push(Problem::UnknownOverrideSection(k.clone())),
        }
    }
    o
}

/// A topic's settings with its override laid over them, key by key.
pub fn merged_fields(blueprint: &Object, over: Option<&TopicOverride>) -> (TopicFields, Vec<Reason>) {
    match over {
        Some(o) if !o.not_object => {
            let mut merged = blueprint.clone();
            tree::merge(&mut merged, &o.settings);
            read_topic_fields(&merged)
        }
        _ => read_topic_fields(blueprint),
    }
}

/// What a streamlet is deployed with.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamletDeploy {
    /// Replicas (default 1; 0 stops it).
    pub replicas: i32,
    /// Every declared parameter, resolved and typed, by key.
    pub config: Map<String, Value>,
    /// Its own pod settings (`flow.streamlets.<name>.pod`).
    pub pod: Option<PodSettings>,
}

/// A verified blueprint with its `--conf` files applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Deployment {
    /// Per streamlet.
    pub streamlets: BTreeMap<StreamletName, StreamletDeploy>,
    /// Per topic: the merged settings.
    pub topics: BTreeMap<TopicId, TopicFields>,
    /// The pod settings of every streamlet (`flow.pod`).
    pub pod: Option<PodSettings>,
}

/// Applies the overrides to a verified blueprint. `declared_topics` are every topic id of the
/// blueprint, the ones without ports included: overriding those is not an error.
///
/// # Errors
/// The `--conf` problems, in the order: sections, unknown topics, unknown
/// streamlets, topic settings, then per streamlet its replicas, undeclared and unresolved parameters.
pub fn apply(
    bp: &VerifiedBlueprint,
    declared_topics: &BTreeSet<String>,
    ov: &Overrides,
) -> (Option<Deployment>, Vec<Problem>, Vec<Note>) {
    let mut problems = ov.shape.clone();
    let mut notes = Vec::new();
    for id in ov.topics.keys().filter(|id| !declared_topics.contains(*id)) {
        problems.push(Problem::UnknownTopicOverride(id.clone()));
    }
    let known_streamlet = |n: &str| bp.streamlets.keys().any(|s| s.as_str() == n);
    for name in ov.streamlets.keys().filter(|n| !known_streamlet(n)) {
        problems.push(Problem::UnknownStreamletOverride(name.clone()));
    }
    for (id, t) in ov.topics.iter().filter(|(id, _)| declared_topics.contains(*id)) {
        if t.not_object {
            problems.push(Problem::OverridesNotObject(format!("flow.topics.{id}")));
            continue;
        }
        for r in &t.reasons {
            problems.push(Problem::TopicOverride { topic: id.clone(), reason: r.to_string() });
        }
        if let Some(c) = read_topic_fields(&t.settings).0.cluster
            && ClusterName::parse(&c).is_none()
        {
            problems.push(Problem::InvalidClusterName(c));
        }
        for key in &t.ignored {
            notes.push(Note::OverrideIgnored { topic: id.clone(), key: key.clone() });
        }
    }

    let mut topics = BTreeMap::new();
    for (id, t) in &bp.topics {
        let over = ov.topics.get(id.as_str());
        let (fields, reasons) = merged_fields(&t.settings, over);
        // Both sides were read on their own already, and a merge of two valid trees is valid: a
        // reason here repeats one reported above.
        let reported = over.is_some_and(|o| !o.reasons.is_empty());
        for r in reasons.into_iter().filter(|_| !reported) {
            problems.push(Problem::TopicOverride { topic: id.to_string(), reason: r.to_string() });
        }
        topics.insert(id.clone(), fields);
    }

    // The pod settings that did not read; the others are checked all the same.
    let mut defaults_read = true;
    let mut unread = BTreeSet::new();
    let defaults = ov.pod.as_ref().and_then(|n| {
        let read = read_pod(n, "flow.pod", &mut problems);
        defaults_read = read.is_some();
        read
    });
    let mut streamlets = BTreeMap::new();
    for (name, s) in &bp.streamlets {
        let over = match ov.streamlets.get(name.as_str()) {
            None => None,
            Some(Node::Object(o)) => Some(o),
            Some(_) => {
                problems.push(Problem::OverridesNotObject(format!("flow.streamlets.{name}")));
                continue;
            }
        };
        let mut replicas = 1;
        let mut values = Object::new();
        let mut own_pod = None;
        for (k, v) in over.into_iter().flatten() {
            match k.as_str() {
                _ if v.is_null() => {}
                "replicas" => match v.as_text().map(|t| t.trim().parse::<i64>()) {
                    Some(Ok(n)) if n < 0 => problems.push(Problem::ReplicasNegative(name.to_string())),
                    Some(Ok(n)) => match i32::try_from(n) {
                        Ok(n) => replicas = n,
                        Err(_) => problems.push(Problem::ReplicasNotNumber(name.to_string())),
                    },
                    _ => problems.push(Problem::ReplicasNotNumber(name.to_string())),
                },
                "config" => match v {
                    Node::Object(c) => values = c.clone(),
                    _ => problems.push(Problem::OverridesNotObject(format!("flow.streamlets.{name}.config"))),
                },
                "pod" => {
                    own_pod = read_pod(v, &format!("flow.streamlets.{name}.pod"), &mut problems);
                    if own_pod.is_none() {
                        unread.insert(name.clone());
                    }
                }
                other => problems.push(Problem::StreamletOverride {
                    streamlet: name.to_string(),
                    reason: format!(
                        "'{other}' is not a streamlet setting; a --conf file sets replicas, config and pod"
                    ),
                }),
            }
        }
        for key in values.keys().filter(|k| s.descriptor.param(k).is_none()) {
            problems.push(Problem::ParamNotDeclared { streamlet: name.to_string(), key: key.clone() });
        }
        let mut config = Map::new();
        for p in s.descriptor.params() {
            let given = values.get(p.key.as_str()).filter(|v| !v.is_null());
            let text = match (given, p.default.as_ref()) {
                (Some(v), _) => match v.as_text() {
                    Some(t) => t.to_string(),
                    None => {
                        problems.push(Problem::ParamType {
                            streamlet: name.to_string(),
                            key: p.key.to_string(),
                            value: v.render(),
                            ty: p.ty,
                        });
                        continue;
                    }
                },
                (None, Some(d)) => d.clone(),
                (None, None) => {
                    problems.push(Problem::ParamMissing { streamlet: name.to_string(), key: p.key.to_string() });
                    continue;
                }
            };
            match p.ty.typed(&text) {
                Some(v) => {
                    config.insert(p.key.to_string(), v);
                }
                None => problems.push(Problem::ParamType {
                    streamlet: name.to_string(),
                    key: p.key.to_string(),
                    value: text,
                    ty: p.ty,
                }),
            }
        }
        streamlets.insert(name.clone(), StreamletDeploy { replicas, config, pod: own_pod });
    }
    // The operator's own check of the settings as the resource will carry them, named as written.
    // Without the pipeline's defaults, what a streamlet gets of both is unknown: nothing more is said.
    if defaults_read {
        let each = streamlets.iter().filter(|(name, _)| !unread.contains(*name)).map(|(name, d)| {
            let builtin = bp.streamlets.get(name).is_some_and(|s| s.builtin);
            (name.as_str(), builtin, d.pod.as_ref())
        });
        for p in pod::check_pipeline(defaults.as_ref(), each) {
            let section = match &p.scope {
                pod::Scope::Pipeline => "flow.pod".to_string(),
                pod::Scope::Streamlet(s) => format!("flow.streamlets.{s}.pod"),
            };
            problems.push(Problem::PodSetting { section, path: p.path, reason: p.reason });
        }
    }
    if problems.is_empty() {
        (Some(Deployment { streamlets, topics, pod: defaults }), problems, notes)
    } else {
        (None, problems, notes)
    }
}

/// Reads the pod settings of `section` (`flow.pod`, `flow.streamlets.<name>.pod`); `None`, with its
/// problem, when they do not read (the first setting that does not is reported).
fn read_pod(node: &Node, section: &str, problems: &mut Vec<Problem>) -> Option<PodSettings> {
    if !matches!(node, Node::Object(_)) {
        problems.push(Problem::OverridesNotObject(section.to_string()));
        return None;
    }
    match typed::read::<PodSettings>(&flat_maps(node)) {
        Ok(p) => Some(p),
        Err(e) => {
            let reason = if e.unknown { pod::unknown_setting(&e.path) } else { e.message.clone() };
            problems.push(Problem::PodSetting { section: section.to_string(), path: e.dotted(), reason });
            None
        }
    }
}

/// `node` with its `labels`, `annotations` and `nodeSelector` flattened into dotted keys, as the
/// property blocks of a topic are: `labels { example.com/tier = gold }` (which HOCON reads as an
/// object `example` holding `com/tier`) and `labels { "example.com/tier" = gold }` mean the same.
fn flat_maps(node: &Node) -> Node {
    let mut node = node.clone();
    if let Node::Object(o) = &mut node {
        for key in ["labels", "annotations", "nodeSelector"] {
            if let Some(Node::Object(map)) = o.get(key)
                && let Ok(flat) = tree::flatten(map)
            {
                let texts = flat
                    .into_iter()
                    .map(|(k, text)| (k, Node::Scalar(tree::Scalar { text, kind: tree::ScalarKind::String })))
                    .collect();
                o.insert(key.to_string(), Node::Object(texts));
            }
        }
    }
    node
}
