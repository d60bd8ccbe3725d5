//! `flow generate`: a verified blueprint, its `--conf` files and images become one `AnkkaFlow`
//! resource (docs/cli.md, "flow generate"; docs/blueprint.md, "The generated resource").

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::descriptor::PROTOCOL_VERSION;
use super::names::{KafkaTopicName, PipelineId};
use super::problems::{Note, Problem};
use super::{CLEANUP_POLICY, Source, VerifyInput, check, default_pipeline, images, name_problems};
use crate::names::{LABEL_MANAGED_BY, LABEL_PIPELINE, MANAGED_BY, is_dns_label};
use crate::resource::{AnkkaFlow, AnkkaFlowSpec, Batch, ManagedTopicsPolicy, OnDelete, StreamletSpec, TopicSpec};

/// Default batch limits (docs/blueprint.md, "Topics").
pub const DEFAULT_MAX_RECORDS: i64 = 100;
/// 1 MiB.
pub const DEFAULT_MAX_BYTES: i64 = 1_048_576;

/// The inputs of `flow generate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerateInput {
    /// What `verify` reads.
    pub verify: VerifyInput,
    /// `--images <file>`.
    pub images_file: Option<Source>,
    /// `--image <name>=<ref>` values, as given.
    pub images: Vec<String>,
    /// `--pipeline`.
    pub pipeline: Option<String>,
    /// `--version`, or what the CLI found (`git describe`, else `unversioned`).
    pub version: String,
    /// `-n`.
    pub namespace: Option<String>,
    /// `--delete-managed-topics`.
    pub delete_managed_topics: bool,
}

/// A generated resource and the notes for stderr.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The resource.
    pub resource: AnkkaFlow,
    /// Notes.
    pub notes: Vec<Note>,
}

/// The pipeline id: `--pipeline`, else `blueprint.name`, else the blueprint's file name up to its
/// first `.`.
fn pipeline_text(input: &GenerateInput, blueprint_name: Option<&str>) -> String {
    match &input.pipeline {
        Some(p) => p.clone(),
        None => default_pipeline(&input.verify.blueprint.name, blueprint_name),
    }
}

/// Generates the resource.
///
/// # Errors
/// Every problem of `verify`, then: images, `Streamlet '<name>' has no image.` /
/// `… is built in and takes no image.`, a bad pipeline id or namespace, and a managed topic whose
/// Kafka name `<pipeline>.<id>` is longer than Kafka allows.
pub fn generate(input: &GenerateInput) -> Result<Generated, Vec<Problem>> {
    let c = check(&input.verify);
    let mut problems = c.problems;

    let (images, p) = images::read(input.images_file.as_ref(), &input.images, &input.verify.env);
    problems.extend(p);
    if let Some(raw) = &c.raw {
        let takes_image: Vec<&String> =
            raw.streamlets.iter().filter(|(_, d)| !d.starts_with("builtin/")).map(|(n, _)| n).collect();
        // A mistyped name on the command line would leave the image unused without a word.
        for (arg, name) in &images.args {
            if !raw.streamlets.contains_key(name) {
                let known = takes_image.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
                problems.push(Problem::UnknownImageStreamlet { argument: arg.clone(), streamlet: name.clone(), known });
            }
        }
        for (name, reference) in &raw.streamlets {
            let builtin = reference.starts_with("builtin/");
            match (builtin, images.by_name.get(name)) {
                (true, Some(_)) => problems.push(Problem::BuiltinImage(name.clone())),
                (false, None) if images.file_ok => problems.push(Problem::NoImage(name.clone())),
                (false, Some(image)) => {
                    if let Some(reason) = images::reference_problem(image) {
                        problems.push(Problem::InvalidImage {
                            streamlet: name.clone(),
                            reference: image.clone(),
                            reason,
                        });
                    }
                }
                _ => {}
            }
        }
    }

    let pipeline = if input.pipeline.is_some() || c.raw.is_some() {
        let text = pipeline_text(input, c.raw.as_ref().and_then(|r| r.name.as_deref()));
        let id = PipelineId::parse(&text);
        if id.is_none() {
            problems.push(Problem::PipelineId(text));
        }
        id
    } else {
        None
    };
    if let Some(ns) = input.namespace.as_deref()
        && !is_dns_label(ns)
    {
        problems.push(Problem::Namespace(ns.to_string()));
    }

    let (Some(v), Some(pipeline)) = (c.verified, pipeline) else { return Err(problems) };
    problems.extend(name_problems(pipeline.as_str(), &v));

    let mut topics = Vec::new();
    for (id, t) in &v.blueprint.topics {
        let name = match (&t.kafka_name, t.managed) {
            (Some(n), _) => n.to_string(),
            (None, true) => format!("{pipeline}.{id}"),
            (None, false) => id.to_string(),
        };
        // The blueprint check looks at the id alone; Kafka sees this (docs/blueprint.md, "Choices we made").
        if KafkaTopicName::parse(&name).is_none() {
            problems.push(Problem::InvalidTopicName(name.clone()));
        }
        let f = v.deployment.topics.get(id).cloned().unwrap_or_default();
        let mut topic_config = f.topic;
        if t.managed && t.delta && !topic_config.contains_key(CLEANUP_POLICY) {
            topic_config.insert(CLEANUP_POLICY.to_string(), "compact".to_string());
        }
        topics.push(TopicSpec {
            id: id.to_string(),
            name,
            managed: t.managed,
            cluster: f.cluster,
            bootstrap_servers: f.bootstrap_servers,
            partitions: f.partitions,
            replicas: f.replicas,
            connection_config: f.connection,
            producer_config: f.producer,
            consumer_config: f.consumer,
            topic_config,
            batch: Some(Batch {
                max_records: f.batch_max_records.unwrap_or(DEFAULT_MAX_RECORDS),
                max_bytes: f.batch_max_bytes.unwrap_or(DEFAULT_MAX_BYTES),
            }),
        });
    }
    if !problems.is_empty() {
        return Err(problems);
    }

    let streamlets = v
        .blueprint
        .streamlets
        .iter()
        .map(|(name, s)| {
            let d = v.deployment.streamlets.get(name);
            StreamletSpec {
                name: name.to_string(),
                image: if s.builtin {
                    String::new()
                } else {
                    images.by_name.get(name.as_str()).cloned().unwrap_or_default()
                },
                replicas: d.map_or(1, |d| d.replicas),
                config: d.map(|d| d.config.clone()).unwrap_or_default(),
                inlets: s.inlets.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect(),
                outlets: s.outlets.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect(),
                descriptor: s.descriptor.streamlet_object(),
                builtin: s.builtin,
                pod: d.and_then(|d| d.pod.clone()).map(Box::new),
            }
        })
        .collect();

    let spec = AnkkaFlowSpec {
        pipeline: pipeline.to_string(),
        version: Some(input.version.clone()),
        protocol_version: Some(PROTOCOL_VERSION.to_string()),
        on_delete: Some(OnDelete {
            managed_topics: if input.delete_managed_topics {
                ManagedTopicsPolicy::Delete
            } else {
                ManagedTopicsPolicy::Keep
            },
        }),
        streamlets,
        topics,
        pod: v.deployment.pod.clone().map(Box::new),
    };
    let mut resource = AnkkaFlow::new(pipeline.as_str(), spec);
    resource.metadata = ObjectMeta {
        name: Some(pipeline.to_string()),
        namespace: input.namespace.clone(),
        labels: Some(BTreeMap::from([
            (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
            (LABEL_PIPELINE.to_string(), pipeline.to_string()),
        ])),
        ..ObjectMeta::default()
    };
    Ok(Generated { resource, notes: v.notes })
}

/// The resource as YAML for `kubectl apply -f -`.
///
/// Strings that read as another type in YAML 1.1 or 1.2 (`"1.0"`, `"100"`, `"yes"`, `"on"`) are
/// quoted, so `protocolVersion` and `default_value` stay strings for every reader.
///
/// # Errors
/// The serializer's reason; it has none for this type in practice.
pub fn to_yaml(resource: &AnkkaFlow) -> Result<String, String> {
    serde_saphyr::to_string(resource).map_err(|e| e.to_string())
}
