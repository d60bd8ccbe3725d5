//! Build (pure, cannot fail): a [`ValidPipeline`] and what Kafka and the API server hold give the
//! [`Plan`].

use super::*;

impl ValidPipeline {
    /// The pipeline id.
    pub fn pipeline(&self) -> &str {
        &self.pipeline
    }

    /// Every topic of the resource, resolved, sorted by id: describe each in Kafka (partitions,
    /// replication of the first partition, and the live values of its `topicConfig` keys).
    pub fn topics(&self) -> &[ResolvedTopic] {
        &self.topics
    }

    /// What is rendered per streamlet, sorted by name.
    pub fn streamlets(&self) -> impl Iterator<Item = &RenderedStreamlet> {
        self.streamlets.iter().map(|(_, r)| r)
    }

    /// Whether the pipeline's objects (ServiceAccount, Role, RoleBinding, the streamlets' Secrets
    /// and Deployments, the removals) must wait for the topics' step: Kafka's description of them,
    /// and the creation of the managed topics found missing. Nothing rendered into the objects
    /// depends on Kafka's answer; the one real dependency is the order of docs/rendering.md ("One
    /// reconcile, in order", step 4), that a streamlet never starts before its topics exist. Only a
    /// managed topic can be created by the operator, and only a Deployment with pods starts a
    /// streamlet: the objects wait when a streamlet rendered with replicas above 0 reads or writes
    /// a managed topic. Otherwise (unmanaged topics only, or every such streamlet at 0 replicas, as
    /// when it is stopped before a reset) they are applied without waiting for Kafka.
    pub fn objects_wait_for_topics(&self) -> bool {
        let managed: BTreeSet<&str> = self.topics.iter().filter(|t| t.managed).map(|t| t.id.as_str()).collect();
        self.streamlets.iter().any(|(spec, r)| {
            // Kubernetes' default for a Deployment without replicas is 1.
            let runs = r.deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1) > 0;
            runs && spec.inlets.values().chain(spec.outlets.values()).any(|t| managed.contains(t.as_str()))
        })
    }

    /// The plan, given what was observed of the topics and of the pipeline's objects.
    pub fn build(&self, observed: &Observed<'_>) -> Plan {
        let mut topic_steps = Vec::new();
        let mut topic_status = Vec::new();
        // The record to write before any creation: intents reported unproven are dropped (they
        // have been reported), then an intent is added for each creation.
        let mut record = observed.record.clone();
        let mut intents = Vec::new();
        for t in &self.topics {
            let kafka = observed
                .topics
                .get(&t.id)
                .cloned()
                .unwrap_or_else(|| KafkaTopic::Unreachable("the topic was not described".into()));
            let d = topics::decide(t, &kafka, observed.record);
            if d.ownership == Some(Ownership::Adopted(owners::Adoption::Unproven)) {
                record.drop_intent(&t.name);
            }
            intents.extend(d.create.as_ref().map(|c| c.name.clone()));
            topic_steps.push((d.create, d.events));
            topic_status.push(d.status);
        }
        for name in &intents {
            record.intend(name);
        }
        let record = (record != *observed.record).then_some(record);
        let mut steps = Vec::new();
        let mut streamlet_status = Vec::new();
        for (spec, r) in &self.streamlets {
            let seen = observed.deployments.get(&r.name);
            let rolled = seen
                .filter(|d| {
                    d.config_hash.as_deref() != Some(r.config_hash.as_str()) || d.process_image != r.process_image
                })
                .map(|_| {
                    let note =
                        format!("streamlet '{}' rolls out: its image, descriptor or configuration changed", r.name);
                    let key =
                        format!("{}/{}/{}", r.name, r.config_hash, r.process_image.as_deref().unwrap_or_default());
                    Event::new(EventType::Normal, "StreamletRolled", note, key)
                });
            streamlet_status.push(status::streamlet_status(spec, &r.config_hash, seen));
            steps.push(StreamletStep { rendered: r.clone(), rolled });
        }
        let wanted: BTreeSet<&str> = self.streamlets.iter().map(|(s, _)| s.name.as_str()).collect();
        let gone: BTreeSet<&str> = observed
            .deployments
            .keys()
            .chain(observed.secrets)
            .map(String::as_str)
            .filter(|s| !wanted.contains(s))
            .collect();
        let removals = gone
            .into_iter()
            .map(|s| {
                let object = streamlet_object_name(&self.pipeline, s);
                Removal {
                    streamlet: s.to_string(),
                    deployment: observed.deployments.contains_key(s).then(|| object.clone()),
                    secret: observed.secrets.contains(s).then_some(object),
                    event: keyed(
                        EventType::Normal,
                        "StreamletRemoved",
                        format!("streamlet '{s}' is no longer in the pipeline"),
                    ),
                }
            })
            .collect();
        let (phase, detail) = status::phase(&streamlet_status, &topic_status);
        let hash = applied::objects_hash(
            &(&self.service_account, &self.role, &self.role_binding),
            &self.streamlets.iter().map(|(_, r)| (&r.secret, &r.deployment)).collect::<Vec<_>>(),
        );
        let objects = applied::objects_step(
            hash,
            self.streamlets.iter().map(|(_, r)| r.name.as_str()),
            observed.applied,
            observed.deployments,
            steps.iter().any(|s| s.rolled.is_some()),
            observed.now,
            observed.reapply_after,
        );
        Plan {
            finalizer: self.finalizer,
            record,
            objects,
            topics: topic_steps,
            service_account: self.service_account.clone(),
            role: self.role.clone(),
            role_binding: self.role_binding.clone(),
            streamlets: steps,
            removals,
            status: AnkkaFlowStatus {
                observed_generation: self.generation,
                phase: Some(phase.as_str().into()),
                detail,
                streamlets: streamlet_status.into_iter().map(|(s, _)| s).collect(),
                topics: topic_status,
                ..AnkkaFlowStatus::default()
            },
        }
    }
}
