//! Verification of a blueprint against descriptors and built-ins (docs/blueprint.md).

use std::collections::{BTreeMap, BTreeSet};

use super::descriptor::{self, Contract, Descriptor, PortKind};
use super::names::{ClusterName, KafkaTopicName, PortName, PortPath, StreamletName, TopicId};
use super::problems::{Note, Problem};
use super::raw::{RawBlueprint, TopicFields};
use super::tree::Object;
use super::{DescriptorSource, Source, SourceError};

/// The descriptors a blueprint is verified against: the valid ones of the descriptor directory
/// and the built-ins.
#[derive(Debug, Default)]
pub struct Catalog {
    found: BTreeMap<String, Descriptor>,
    /// Names declared by a file that was refused or declared twice: already reported.
    unusable: BTreeSet<String>,
    /// The directory itself could not be used (already reported): every lookup fails silently.
    unavailable: bool,
    builtins: Vec<Descriptor>,
}

/// What a streamlet's descriptor reference leads to.
enum Lookup<'a> {
    Found(&'a Descriptor, bool),
    /// Unknown, but the reason was already reported.
    Silent,
    Unknown(Problem),
}

impl Catalog {
    /// Loads and validates the descriptor files (docs/blueprint.md, "Descriptors").
    ///
    /// # Errors
    /// The problems found, in file-name order; the catalog holds the valid descriptors anyway.
    pub fn load(source: &DescriptorSource) -> (Catalog, Vec<Problem>) {
        let mut c = Catalog { builtins: descriptor::builtins(), ..Catalog::default() };
        let mut problems = Vec::new();
        let files: Vec<&Source> = match source {
            DescriptorSource::NotGiven => return (c, problems),
            DescriptorSource::NotADirectory(dir) => {
                c.unavailable = true;
                return (c, vec![Problem::DescriptorsNotADirectory(dir.clone())]);
            }
            DescriptorSource::Directory { dir, files } if files.is_empty() => {
                c.unavailable = true;
                return (c, vec![Problem::DescriptorsEmpty(dir.clone())]);
            }
            DescriptorSource::Directory { files, .. } => {
                let mut f: Vec<&Source> = files.iter().collect();
                f.sort_by(|a, b| a.name.cmp(&b.name));
                f
            }
        };
        let mut declared: BTreeMap<String, usize> = BTreeMap::new();
        for file in files {
            let text = match &file.text {
                Ok(t) => t,
                Err(e) => {
                    let reason = match e {
                        SourceError::Missing => "no such file".to_string(),
                        SourceError::NotAFile => "not a file".to_string(),
                        SourceError::Unreadable(r) => r.clone(),
                    };
                    problems.push(Problem::Descriptor {
                        file: file.name.clone(),
                        problem: descriptor::DescriptorProblem::Unreadable(reason),
                    });
                    continue;
                }
            };
            match Descriptor::parse(text) {
                Ok(d) => {
                    let name = d.name().to_string();
                    *declared.entry(name.clone()).or_default() += 1;
                    c.found.entry(name).or_insert(d);
                }
                Err(r) => {
                    if let Some(name) = r.name {
                        *declared.entry(name.clone()).or_default() += 1;
                        c.unusable.insert(name);
                    }
                    problems.extend(
                        r.problems.into_iter().map(|problem| Problem::Descriptor { file: file.name.clone(), problem }),
                    );
                }
            }
        }
        for (name, count) in declared.into_iter().filter(|(_, n)| *n > 1) {
            problems.push(Problem::DuplicateDescriptor { name: name.clone(), count });
            c.found.remove(&name);
            c.unusable.insert(name);
        }
        (c, problems)
    }

    fn lookup(&self, streamlet: &str, reference: &str) -> Lookup<'_> {
        if let Some(x) = reference.strip_prefix("builtin/") {
            return match self.builtins.iter().find(|d| d.name().as_str() == x) {
                Some(d) => Lookup::Found(d, true),
                None => Lookup::Unknown(Problem::UnknownBuiltin {
                    streamlet: streamlet.to_string(),
                    builtin: x.to_string(),
                    known: self.builtins.iter().map(|d| d.name().to_string()).collect(),
                }),
            };
        }
        match self.found.get(reference) {
            Some(d) => Lookup::Found(d, false),
            None if self.unavailable || self.unusable.contains(reference) => Lookup::Silent,
            None => Lookup::Unknown(Problem::UnknownDescriptor {
                streamlet: streamlet.to_string(),
                descriptor: reference.to_string(),
            }),
        }
    }
}

/// A streamlet of a verified blueprint.
#[derive(Clone, Debug, PartialEq)]
pub struct Streamlet {
    /// Its descriptor.
    pub descriptor: Descriptor,
    /// Whether it is a built-in (`builtin/<name>`).
    pub builtin: bool,
    /// Bound inlets: inlet → topic id.
    pub inlets: BTreeMap<PortName, TopicId>,
    /// Bound outlets: outlet → topic id.
    pub outlets: BTreeMap<PortName, TopicId>,
}

/// A topic of a verified blueprint: one with at least one port.
#[derive(Clone, Debug, PartialEq)]
pub struct Topic {
    /// `topic.name`, when the blueprint sets it.
    pub kafka_name: Option<KafkaTopicName>,
    /// Whether the platform owns the topic.
    pub managed: bool,
    /// The settings `--conf` files may change, as a tree.
    pub settings: Object,
    /// Whether a port of it carries graph deltas (docs/blueprint.md, "Graph deltas").
    pub delta: bool,
}

/// A blueprint that passed every check of docs/blueprint.md, "The blueprint" (parameters and
/// `--conf` are checked on top of it).
#[derive(Clone, Debug, PartialEq)]
pub struct VerifiedBlueprint {
    /// `blueprint.name`, unvalidated (only the final pipeline id is).
    pub name: Option<String>,
    /// Every streamlet, sorted by name.
    pub streamlets: BTreeMap<StreamletName, Streamlet>,
    /// Every topic with at least one port, sorted by id.
    pub topics: BTreeMap<TopicId, Topic>,
}

struct Bound {
    path: PortPath,
    contract: Contract,
}

/// Verifies a blueprint. `merged` gives a topic's settings with the `--conf` overrides laid over,
/// so that an unmanaged topic may get its brokers or cluster from `--conf` (docs/blueprint.md,
/// "Choices we made").
///
/// # Errors
/// Every problem found, in the order: streamlets, topics (by id), ports on several topics,
/// unconnected inlets.
pub fn verify(
    raw: &RawBlueprint,
    catalog: &Catalog,
    merged: &dyn Fn(&str, &Object) -> TopicFields,
) -> (Option<VerifiedBlueprint>, Vec<Problem>, Vec<Note>) {
    let mut problems = Vec::new();
    let mut resolved: BTreeMap<&str, (&Descriptor, bool)> = BTreeMap::new();
    for (name, reference) in &raw.streamlets {
        if StreamletName::parse(name).is_none() {
            problems.push(Problem::InvalidStreamletName(name.clone()));
        }
        match catalog.lookup(name, reference) {
            Lookup::Found(d, builtin) => {
                resolved.insert(name, (d, builtin));
            }
            Lookup::Silent => {}
            Lookup::Unknown(p) => problems.push(p),
        }
    }

    // port path → topic ids it is bound to
    let mut bindings: BTreeMap<PortPath, BTreeSet<&str>> = BTreeMap::new();
    let mut topics = BTreeMap::new();
    for (id, t) in &raw.topics {
        let mut bound: Vec<Bound> = Vec::new();
        let mut any_port = false;
        for (written, expected) in
            t.producers.iter().map(|p| (p, PortKind::Outlet)).chain(t.consumers.iter().map(|p| (p, PortKind::Inlet)))
        {
            let shown = written.trim();
            let Some(path) = PortPath::parse(written) else {
                problems.push(Problem::MalformedPath(shown.to_string()));
                continue;
            };
            if !raw.streamlets.contains_key(path.streamlet()) {
                problems.push(Problem::UnknownPort { path: shown.to_string(), suggestions: Vec::new() });
                continue;
            }
            // A streamlet whose descriptor is unknown was reported already.
            let Some((d, _)) = resolved.get(path.streamlet()) else { continue };
            let Some((kind, port)) = d.port(path.port()) else {
                let mut suggestions: Vec<String> =
                    d.inlets().iter().chain(d.outlets()).map(|p| format!("{}.{}", path.streamlet(), p.name)).collect();
                suggestions.sort();
                problems.push(Problem::UnknownPort { path: shown.to_string(), suggestions });
                continue;
            };
            any_port = true;
            if kind != expected {
                problems.push(match expected {
                    PortKind::Outlet => Problem::NotAProducer { path: shown.to_string(), topic: id.clone() },
                    PortKind::Inlet => Problem::NotAConsumer { path: shown.to_string(), topic: id.clone() },
                });
                continue;
            }
            bindings.entry(path.clone()).or_default().insert(id);
            if !bound.iter().any(|b| b.path == path) {
                bound.push(Bound { path, contract: port.contract.clone() });
            }
        }
        if !any_port {
            // A topic without ports is dropped: not checked, not counted, not written.
            continue;
        }
        bound.sort_by_key(|b| b.path.to_string());
        for (i, a) in bound.iter().enumerate() {
            for b in &bound[i + 1..] {
                if a.contract.format() != b.contract.format() || a.contract.fingerprint() != b.contract.fingerprint() {
                    problems.push(Problem::Incompatible {
                        a: a.path.to_string(),
                        a_contract: a.contract.to_string(),
                        b: b.path.to_string(),
                        b_contract: b.contract.to_string(),
                    });
                }
            }
        }
        let kafka_name = t.kafka_name.as_deref().unwrap_or(id);
        let valid_name = KafkaTopicName::parse(kafka_name);
        if valid_name.is_none() {
            problems.push(Problem::InvalidTopicName(kafka_name.to_string()));
        }
        let fields = merged(id, &t.settings);
        let own = super::raw::read_topic_fields(&t.settings).0;
        if let Some(c) = own.cluster.as_deref()
            && ClusterName::parse(c).is_none()
        {
            problems.push(Problem::InvalidClusterName(c.to_string()));
        }
        if !t.managed {
            if !t.producers.is_empty() {
                problems.push(Problem::UnmanagedWithProducers {
                    topic: id.clone(),
                    producers: t.producers.iter().map(|p| p.trim().to_string()).collect(),
                });
            }
            if fields.cluster.is_none() && fields.bootstrap_servers.is_none() {
                problems.push(Problem::UnmanagedWithoutBrokers(id.clone()));
            }
        }
        if let Some(topic_id) = TopicId::parse(id) {
            let explicit = t.kafka_name.as_ref().and(valid_name);
            topics.insert(
                topic_id,
                Topic {
                    kafka_name: explicit,
                    managed: t.managed,
                    settings: t.settings.clone(),
                    delta: bound.iter().any(|b| b.contract.is_graph_delta()),
                },
            );
        } else {
            // An empty key: HOCON allows `"" { … }`, Kafka does not.
            problems.push(Problem::InvalidTopicName(id.clone()));
        }
    }

    for (path, ids) in &bindings {
        if ids.len() > 1 {
            problems.push(Problem::BoundTwice {
                path: path.to_string(),
                topics: ids.iter().map(|s| s.to_string()).collect(),
            });
        }
    }

    let mut unconnected_inlets = Vec::new();
    let mut unconnected_outlets = Vec::new();
    let mut streamlets = BTreeMap::new();
    for (name, (d, builtin)) in &resolved {
        let mut inlets = BTreeMap::new();
        let mut outlets = BTreeMap::new();
        for (ports, kind) in [(d.inlets(), PortKind::Inlet), (d.outlets(), PortKind::Outlet)] {
            for p in ports {
                let path = PortPath::new(name, p.name.as_str());
                let topic = bindings.get(&path).and_then(|ids| ids.first()).and_then(|id| TopicId::parse(id));
                match (topic, kind) {
                    (Some(t), PortKind::Inlet) => {
                        inlets.insert(p.name.clone(), t);
                    }
                    (Some(t), PortKind::Outlet) => {
                        outlets.insert(p.name.clone(), t);
                    }
                    (None, PortKind::Inlet) => unconnected_inlets.push(path.to_string()),
                    (None, PortKind::Outlet) => unconnected_outlets.push(path.to_string()),
                }
            }
        }
        if let Some(n) = StreamletName::parse(name) {
            streamlets.insert(n, Streamlet { descriptor: (*d).clone(), builtin: *builtin, inlets, outlets });
        }
    }
    if !unconnected_inlets.is_empty() {
        unconnected_inlets.sort();
        problems.push(Problem::UnconnectedInlets(unconnected_inlets));
    }
    let mut notes = Vec::new();
    if !unconnected_outlets.is_empty() {
        unconnected_outlets.sort();
        notes.push(Note::UnconnectedOutlets(unconnected_outlets));
    }
    if problems.is_empty() && streamlets.len() == raw.streamlets.len() {
        (Some(VerifiedBlueprint { name: raw.name.clone(), streamlets, topics }), problems, notes)
    } else {
        (None, problems, notes)
    }
}
