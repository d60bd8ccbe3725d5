//! Validate (pure): [`decide`] turns what was fetched into a deletion, a refusal or a
//! [`ValidPipeline`], rendering each streamlet's `streamlet.conf`, Secret and Deployment on the way.

use super::*;
use crate::blueprint::names::KafkaTopicName;
use crate::pod::PodSettings;

/// The Neo4j Secrets the built-ins of `flow` name, to read before [`decide`].
pub fn stage_secrets_to_read(flow: &AnkkaFlow) -> BTreeSet<String> {
    flow.spec.streamlets.iter().filter(|s| s.builtin).filter_map(stage_secret_name).map(str::to_string).collect()
}

pub(super) fn stage_secret_name(s: &StreamletSpec) -> Option<&str> {
    s.config.get(STAGE_SECRET_PARAM).and_then(|v| v.as_str()).filter(|v| !v.trim().is_empty())
}

fn sorted_streamlets(flow: &AnkkaFlow) -> Vec<&StreamletSpec> {
    let mut s: Vec<&StreamletSpec> = flow.spec.streamlets.iter().collect();
    s.sort_by(|a, b| a.name.cmp(&b.name));
    s
}

/// Decides what to do with `inputs.flow`.
///
/// # Errors
/// [`Incomplete`] when the resource has no name, namespace or uid.
pub fn decide(inputs: &Inputs<'_>) -> Result<Decision, Incomplete> {
    let flow = inputs.flow;
    let owner = Owner::of(flow).ok_or_else(|| {
        Incomplete(if flow.metadata.namespace.is_none() {
            "namespace"
        } else if flow.metadata.uid.is_none() {
            "uid"
        } else {
            "name"
        })
    })?;
    let spec = &flow.spec;
    let policy = spec.on_delete.as_ref().map(|o| o.managed_topics).unwrap_or_default();
    let has_finalizer = flow.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER);

    if flow.metadata.deletion_timestamp.is_some() {
        let mut deletion = Deletion { candidates: Vec::new(), unresolved: Vec::new(), remove_finalizer: has_finalizer };
        if has_finalizer && policy == ManagedTopicsPolicy::Delete {
            let mut managed: Vec<_> = spec.topics.iter().filter(|t| t.managed).collect();
            managed.sort_by(|a, b| a.id.cmp(&b.id));
            for t in managed {
                match connection::resolve_topic(t, &owner.namespace, inputs.clusters, inputs.token_endpoints) {
                    Ok(r) => deletion.candidates.push(r),
                    Err(problems) => deletion.unresolved.extend(problems.iter().map(ToString::to_string)),
                }
            }
        }
        return Ok(Decision::Delete(deletion));
    }

    let sidecar_image = inputs.sidecar_image.map(str::trim).filter(|s| !s.is_empty());
    let mut problems = Vec::new();
    if sidecar_image.is_none() {
        problems.push(Problem::NoSidecarImage);
    }

    // Topics.
    let mut topic_counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &spec.topics {
        *topic_counts.entry(&t.id).or_default() += 1;
    }
    for (id, count) in topic_counts.iter().filter(|(_, n)| **n > 1) {
        problems.push(Problem::TopicDeclaredTwice { topic: id.to_string(), count: *count });
    }
    // The rule `flow verify` applies to Kafka topic names, here before any Kafka call: Kafka would
    // only answer a name it refuses with InvalidTopic once asked.
    let mut invalid = BTreeSet::new();
    for t in &spec.topics {
        if KafkaTopicName::parse(&t.name).is_none() && invalid.insert(t.name.as_str()) {
            problems.push(Problem::InvalidTopicName(t.name.clone()));
        }
    }
    let resolution = connection::resolve_pipeline(spec, &owner.namespace, inputs.clusters, inputs.token_endpoints);
    problems.extend(resolution.problems.into_iter().map(Problem::Topic));
    // The names of managed topics its cluster allows the namespace, decided before Kafka is asked.
    problems.extend(
        connection::names_not_allowed(&resolution.topics, &owner.namespace, inputs.clusters)
            .into_iter()
            .map(Problem::Topic),
    );
    let mut resolved: BTreeMap<String, ResolvedTopic> = BTreeMap::new();
    for t in resolution.topics {
        resolved.entry(t.id.clone()).or_insert(t);
    }

    // Streamlets.
    let streamlets = sorted_streamlets(flow);
    let mut streamlet_counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &streamlets {
        *streamlet_counts.entry(&s.name).or_default() += 1;
    }
    for (name, count) in streamlet_counts.iter().filter(|(_, n)| **n > 1) {
        problems.push(Problem::StreamletDeclaredTwice { streamlet: name.to_string(), count: *count });
    }
    let builtins = descriptor::builtins();
    let mut descriptors: BTreeMap<&str, Descriptor> = BTreeMap::new();
    let mut stage_versions: BTreeMap<&str, String> = BTreeMap::new();
    for s in &streamlets {
        let name = s.name.clone();
        let parsed = if s.descriptor.is_empty() {
            problems.push(Problem::NoDescriptor(name.clone()));
            None
        } else {
            match Descriptor::from_streamlet_object(&s.descriptor) {
                Ok(d) => Some(d),
                Err(rejected) => {
                    problems.extend(rejected.problems.into_iter().map(|problem| {
                        if problem.is_shape() {
                            Problem::DescriptorParse { streamlet: name.clone(), problem }
                        } else {
                            Problem::Descriptor { streamlet: name.clone(), problem }
                        }
                    }));
                    None
                }
            }
        };
        if let Some(d) = &parsed {
            for inlet in d.inlets().iter().filter(|p| !s.inlets.contains_key(p.name.as_str())) {
                problems.push(Problem::InletNotBound { streamlet: name.clone(), inlet: inlet.name.to_string() });
            }
            for (kind, bound) in [(PortKind::Inlet, &s.inlets), (PortKind::Outlet, &s.outlets)] {
                for port in bound.keys() {
                    if d.port(port).is_none_or(|(k, _)| k != kind) {
                        problems.push(Problem::UndeclaredPort { streamlet: name.clone(), kind, port: port.clone() });
                    }
                }
            }
        }
        if s.builtin {
            if !s.image.trim().is_empty() {
                problems.push(Problem::BuiltinImage(name.clone()));
            }
            let builtin_name = s.descriptor.get("name").and_then(|v| v.as_str()).unwrap_or_default();
            if !builtins.iter().any(|b| b.name().as_str() == builtin_name) {
                problems.push(Problem::UnknownBuiltin { streamlet: name.clone(), builtin: builtin_name.to_string() });
            } else {
                match stage_secret_name(s) {
                    None => problems.push(Problem::NoStageSecret(name.clone())),
                    Some(secret) => match inputs.stage_secrets.get(secret) {
                        None | Some(StageSecret::Missing) => problems.push(Problem::StageSecretMissing {
                            streamlet: name.clone(),
                            secret: secret.to_string(),
                            namespace: owner.namespace.clone(),
                        }),
                        Some(StageSecret::Unreadable(reason)) => problems.push(Problem::StageSecretUnreadable {
                            streamlet: name.clone(),
                            secret: secret.to_string(),
                            reason: reason.clone(),
                        }),
                        Some(StageSecret::Found { keys, resource_version }) => {
                            for key in STAGE_SECRET_KEYS.iter().filter(|k| !keys.contains(**k)) {
                                problems.push(Problem::StageSecretKey {
                                    streamlet: name.clone(),
                                    secret: secret.to_string(),
                                    key: key.to_string(),
                                });
                            }
                            stage_versions.insert(&s.name, resource_version.clone());
                        }
                    },
                }
            }
        } else if s.image.trim().is_empty() {
            problems.push(Problem::NoImage(name.clone()));
        }
        for (port, topic) in s.inlets.iter().chain(&s.outlets) {
            if spec.topic(topic).is_none() {
                problems.push(Problem::UndeclaredTopic {
                    streamlet: name.clone(),
                    port: port.clone(),
                    topic: topic.clone(),
                });
            }
        }
        if let Some(d) = parsed {
            descriptors.insert(&s.name, d);
        }
    }

    // Names.
    let named: Vec<NamedStreamlet<'_>> = streamlets
        .iter()
        .map(|s| NamedStreamlet { name: &s.name, stage_secret: if s.builtin { stage_secret_name(s) } else { None } })
        .collect();
    problems.extend(names::check(&spec.pipeline, &named).into_iter().map(Problem::Name));

    // Pod settings: what Pod Security `restricted` forbids, and what Kubernetes would refuse.
    let pods = streamlets.iter().map(|s| (s.name.as_str(), s.builtin, s.pod.as_deref()));
    problems.extend(crate::pod::check_pipeline(spec.pod.as_deref(), pods).into_iter().map(Problem::Pod));

    let sidecar_image = match sidecar_image {
        Some(image) if problems.is_empty() => image,
        _ => {
            let reason = if sidecar_image.is_none() { REASON_SIDECAR_IMAGE_MISSING } else { REASON_REFUSED };
            let events = problems.iter().map(|p| keyed(EventType::Warning, reason, p.to_string())).collect();
            let status = AnkkaFlowStatus {
                observed_generation: flow.metadata.generation,
                phase: Some(Phase::Failed.as_str().into()),
                detail: problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
                ..AnkkaFlowStatus::default()
            };
            return Ok(Decision::Refuse(Box::new(Refusal { problems, events, reason, status })));
        }
    };

    // Render: nothing below can fail.
    let pipeline = spec.pipeline.as_str();
    // A pending rebuild holds its targets at 0 replicas; the resource's spec is left as it is.
    let annotation = |key: &str| flow.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str);
    let held = crate::rebuild::held(
        spec,
        annotation(crate::names::ANNOTATION_RESET),
        annotation(crate::names::ANNOTATION_RESET_DONE),
    );
    let mut rendered = Vec::new();
    for s in streamlets {
        let Some(d) = descriptors.get(s.name.as_str()) else { continue };
        let descriptor_json = d.canonical_json();
        let conf = streamlet_conf(pipeline, s, d, &resolved);
        let stage_version = stage_versions.get(s.name.as_str()).map(String::as_str);
        let hash = config_hash(&descriptor_json, &conf, stage_version);
        let process_image = (!s.builtin).then(|| s.image.clone());
        let secret = streamlet_secret(pipeline, &s.name, &descriptor_json, &conf, &owner);
        let pod = PodSettings::for_streamlet(spec.pod.as_deref(), s.pod.as_deref(), s.builtin);
        let deployment = workload::deployment(
            &DeploymentParts {
                pipeline,
                streamlet: &s.name,
                replicas: if held.contains(&s.name) { 0 } else { s.replicas },
                sidecar_image,
                process_image: process_image.as_deref(),
                stage_secret: if s.builtin { stage_secret_name(s) } else { None },
                config_hash: &hash,
                pod: &pod,
            },
            &owner,
        );
        rendered.push((
            s.clone(),
            RenderedStreamlet {
                name: s.name.clone(),
                descriptor_json,
                streamlet_conf: conf,
                config_hash: hash,
                process_image,
                secret,
                deployment,
            },
        ));
    }
    let finalizer = match (policy, has_finalizer) {
        (ManagedTopicsPolicy::Delete, false) => FinalizerChange::Add,
        (ManagedTopicsPolicy::Keep, true) => FinalizerChange::Remove,
        _ => FinalizerChange::Keep,
    };
    Ok(Decision::Apply(Box::new(ValidPipeline {
        pipeline: pipeline.to_string(),
        generation: flow.metadata.generation,
        finalizer,
        topics: resolved.into_values().collect(),
        service_account: workload::service_account(pipeline, &owner),
        role: workload::role(pipeline, &owner),
        role_binding: workload::role_binding(pipeline, &owner),
        streamlets: rendered,
    })))
}

/// The `streamlet.conf` of one streamlet: its bound ports, each with its topic's resolved settings.
fn streamlet_conf(
    pipeline: &str,
    s: &StreamletSpec,
    d: &Descriptor,
    resolved: &BTreeMap<String, ResolvedTopic>,
) -> String {
    let inlets = s
        .inlets
        .iter()
        .filter_map(|(port, id)| resolved.get(id).map(|t| (port, t)))
        .map(|(port, t)| {
            let id = GroupId::new(pipeline, &s.name, port).to_string();
            InletConf {
                name: port.clone(),
                topic: t.name.clone(),
                group: id.clone(),
                client_id: id,
                bootstrap_servers: t.bootstrap_servers.clone(),
                connection_config: t.connection_config.clone(),
                consumer_config: t.consumer_config.clone(),
                max_records: t.batch.max_records,
                max_bytes: t.batch.max_bytes,
            }
        })
        .collect();
    let outlets = s
        .outlets
        .iter()
        .filter_map(|(port, id)| resolved.get(id).map(|t| (port, t)))
        .map(|(port, t)| OutletConf {
            name: port.clone(),
            topic: t.name.clone(),
            client_id: format!("{pipeline}.{}.{port}", s.name),
            bootstrap_servers: t.bootstrap_servers.clone(),
            connection_config: t.connection_config.clone(),
            producer_config: t.producer_config.clone(),
        })
        .collect();
    StreamletConf {
        pipeline: pipeline.to_string(),
        streamlet: s.name.clone(),
        config: s.config.clone(),
        stage: s
            .builtin
            .then(|| StageConf { name: d.name().to_string(), credentials_dir: NEO4J_CREDENTIALS_DIR.into() }),
        inlets,
        outlets,
    }
    .render()
}
