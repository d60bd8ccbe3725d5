//! The plan: its actions in order, rollouts, removals, deletion and the finalizer.

use super::*;

/// Every topic of `cart` exists; the managed ones are those the operator created ([`RECORD`]).
fn all_exist() -> BTreeMap<String, KafkaTopic> {
    BTreeMap::from([
        ("cart-events".to_string(), live("shop.cart-events.v1", 3, 1, &[])),
        ("review-carts".to_string(), live("cart.review-carts", 3, 1, &[])),
        ("valid-carts".to_string(), live("cart.valid-carts", 12, 1, &[("retention.ms", "86400000")])),
    ])
}

fn rolled_out(r: &RenderedStreamlet, replicas: i32) -> ObservedDeployment {
    ObservedDeployment {
        uid: format!("uid-{}", r.name),
        config_hash: Some(r.config_hash.clone()),
        process_image: r.process_image.clone(),
        generation: 5,
        observed_generation: 5,
        updated_replicas: replicas,
        ready_replicas: replicas,
        replica_failure: None,
    }
}

fn describe(actions: &[Action<'_>]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            Action::Record(e) => format!("event {}: {}", e.reason, e.note),
            other => other.subject(),
        })
        .collect()
}

#[test]
fn the_objects_wait_for_kafka_only_when_a_running_streamlet_uses_a_managed_topic() {
    // cart: router reads unmanaged cart-events and writes managed valid-carts and review-carts;
    // sink reads valid-carts.
    let flow = generated("cart");
    assert!(valid(&flow, &nothing()).objects_wait_for_topics());
    // Every streamlet stopped: no pod can start before its topics exist.
    let mut stopped = flow.clone();
    stopped.spec.streamlets.iter_mut().for_each(|s| s.replicas = 0);
    assert!(!valid(&stopped, &nothing()).objects_wait_for_topics());
    // One running streamlet with a managed topic is enough.
    let mut one = stopped.clone();
    one.spec.streamlets.iter_mut().filter(|s| s.name == "sink").for_each(|s| s.replicas = 2);
    assert!(valid(&one, &nothing()).objects_wait_for_topics());
    // Unmanaged topics only: the operator never creates them, so nothing waits for Kafka.
    let mut unmanaged = flow.clone();
    unmanaged.spec.streamlets.iter_mut().for_each(|s| s.replicas = 3);
    for t in &mut unmanaged.spec.topics {
        t.managed = false;
    }
    assert!(!valid(&unmanaged, &nothing()).objects_wait_for_topics());
}

#[test]
fn a_first_reconcile_creates_topics_before_anything_else_in_order() {
    let mut flow = generated("cart");
    flow.spec.on_delete = Some(OnDelete { managed_topics: ManagedTopicsPolicy::Delete });
    let v = valid(&flow, &nothing());
    assert_eq!(v.pipeline(), "cart");
    assert_eq!(
        v.topics().iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["cart-events", "review-carts", "valid-carts"]
    );
    let topics = BTreeMap::from([
        ("cart-events".to_string(), KafkaTopic::Missing),
        ("review-carts".to_string(), KafkaTopic::Missing),
        ("valid-carts".to_string(), KafkaTopic::Missing),
    ]);
    let plan = v.build(&observed(&topics, &BTreeMap::new(), &BTreeSet::new()));
    assert_eq!(
        describe(&plan.actions()),
        [
            "finalizer 'flow.ankka.thinkmorestupidless.com/managed-topics'",
            "the record of the topics the operator created",
            "event TopicMissing: topic 'shop.cart-events.v1' is not managed by the pipeline and does not exist; its consumers will not become ready",
            "topic 'cart.review-carts'",
            "event TopicCreated: created topic 'cart.review-carts' with 3 partitions",
            "topic 'cart.valid-carts'",
            "event TopicCreated: created topic 'cart.valid-carts' with 12 partitions",
            "ServiceAccount 'flow-cart'",
            "Role 'flow-cart'",
            "RoleBinding 'flow-cart'",
            "Secret 'flow-cart-router'",
            "Deployment 'flow-cart-router'",
            "Secret 'flow-cart-sink'",
            "Deployment 'flow-cart-sink'",
        ]
    );
    assert_eq!(plan.actions()[0], Action::AddFinalizer);
    // The intents are recorded before any topic is created (the ids of the topics of that name
    // created earlier stay: they prove nothing of the new topics, and cost nothing).
    let Action::WriteRecord(record) = plan.actions()[1] else { panic!() };
    for name in ["cart.review-carts", "cart.valid-carts"] {
        assert!(record.entry(name).is_some_and(|e| e.creating), "{name}");
    }
    let Action::CreateTopic(created) = plan.actions()[5] else { panic!() };
    assert_eq!((created.partitions, created.replication), (12, 1));
    assert_eq!(created.config, secret(&[("retention.ms", "86400000")]));
    assert_eq!(plan.status.phase.as_deref(), Some("Degraded"));
    assert_eq!(
        plan.status.detail,
        "topic 'shop.cart-events.v1' does not exist; router: rolling out; sink: rolling out"
    );
    assert_eq!(
        plan.status.topics,
        [
            crate::resource::TopicStatus {
                id: "cart-events".into(),
                exists: false,
                detail: "topic 'shop.cart-events.v1' does not exist".into(),
                ownership: None,
            },
            crate::resource::TopicStatus {
                id: "review-carts".into(),
                exists: true,
                detail: "created by the operator".into(),
                ownership: Some(crate::resource::TopicOwnership::Created),
            },
            crate::resource::TopicStatus {
                id: "valid-carts".into(),
                exists: true,
                detail: "created by the operator".into(),
                ownership: Some(crate::resource::TopicOwnership::Created),
            },
        ]
    );
    assert_eq!(plan.status.observed_generation, Some(2));
}

#[test]
fn a_rolled_out_pipeline_is_ready_and_rolls_nothing() {
    let flow = generated("cart");
    let v = valid(&flow, &nothing());
    let deployments: BTreeMap<String, ObservedDeployment> =
        [("router", 3), ("sink", 1)].iter().map(|(n, r)| (n.to_string(), rolled_out(rendered(&v, n), *r))).collect();
    let secrets: BTreeSet<String> = ["router".to_string(), "sink".to_string()].into();
    let topics = all_exist();
    let plan = v.build(&observed(&topics, &deployments, &secrets));
    assert_eq!(plan.finalizer, FinalizerChange::Keep);
    assert!(plan.actions().iter().all(|a| !matches!(a, Action::Record(_) | Action::CreateTopic(_))));
    assert_eq!(plan.status.phase.as_deref(), Some("Ready"));
    assert_eq!(plan.status.detail, "");
}

#[test]
fn a_changed_hash_or_image_rolls_the_streamlet_once_per_change() {
    let flow = generated("cart");
    let v = valid(&flow, &nothing());
    let mut old_hash = rolled_out(rendered(&v, "router"), 3);
    old_hash.config_hash = Some("before".into());
    let mut old_image = rolled_out(rendered(&v, "sink"), 1);
    old_image.process_image = Some("ghcr.io/example/cart-sink:0.3.0".into());
    let deployments = BTreeMap::from([("router".to_string(), old_hash), ("sink".to_string(), old_image)]);
    let topics = all_exist();
    let plan = v.build(&observed(&topics, &deployments, &BTreeSet::new()));
    let events: Vec<&Event> = plan.streamlets.iter().filter_map(|s| s.rolled.as_ref()).collect();
    assert_eq!(
        events.iter().map(|e| (e.reason.as_str(), e.note.as_str())).collect::<Vec<_>>(),
        [
            ("StreamletRolled", "streamlet 'router' rolls out: its image, descriptor or configuration changed"),
            ("StreamletRolled", "streamlet 'sink' rolls out: its image, descriptor or configuration changed"),
        ]
    );
    assert_eq!(events[0].type_, EventType::Normal);
    // the event follows its Deployment
    let order = describe(&plan.actions());
    let deployment = order.iter().position(|a| a == "Deployment 'flow-cart-router'").unwrap();
    assert!(order[deployment + 1].starts_with("event StreamletRolled: streamlet 'router'"));
    assert_eq!(plan.status.phase.as_deref(), Some("Pending"));
    // a later change is another roll, recorded as another event
    let mut edited = flow.clone();
    edited
        .spec
        .streamlets
        .iter_mut()
        .find(|s| s.name == "router")
        .unwrap()
        .config
        .insert("review-threshold".into(), json!(300));
    let v2 = valid(&edited, &nothing());
    let plan2 = v2.build(&observed(&topics, &deployments, &BTreeSet::new()));
    let again = plan2.streamlets[0].rolled.as_ref().unwrap();
    assert_eq!(again.note, events[0].note);
    assert_ne!(again.name_for("cart"), events[0].name_for("cart"));
}

#[test]
fn a_cluster_secret_edit_rolls_exactly_the_streamlets_that_use_it() {
    let flow = generated("cart");
    let before = valid(&flow, &nothing());
    let mut edited = clusters();
    edited.extend([cluster(
        "shop",
        &[
            ("bootstrap.servers", "kafka.kafka.svc:9092"),
            ("connection-config", "security.protocol=PLAINTEXT\n"),
            ("consumer-config", "fetch.min.bytes=1024\n"),
        ],
    )]);
    let after = match decide(&Inputs {
        flow: &flow,
        sidecar_image: Some(SIDECAR),
        clusters: &edited,
        token_endpoints: &Default::default(),
        stage_secrets: &nothing(),
    })
    .unwrap()
    {
        Decision::Apply(v) => *v,
        other => panic!("{other:?}"),
    };
    // router reads cart-events (cluster shop); sink reads valid-carts (cluster default)
    assert_ne!(rendered(&before, "router").config_hash, rendered(&after, "router").config_hash);
    assert_eq!(rendered(&before, "sink").config_hash, rendered(&after, "sink").config_hash);
    assert!(
        rendered(&after, "router")
            .streamlet_conf
            .contains(r#"consumer-config { "auto.offset.reset" = "earliest", "fetch.min.bytes" = "1024" }"#)
    );
}

#[test]
fn streamlets_no_longer_in_the_resource_are_removed() {
    let flow = generated("cart");
    let v = valid(&flow, &nothing());
    let mut deployments = BTreeMap::from([
        ("router".to_string(), rolled_out(rendered(&v, "router"), 3)),
        ("sink".to_string(), rolled_out(rendered(&v, "sink"), 1)),
        ("audit".to_string(), ObservedDeployment::default()),
    ]);
    deployments.insert("zeta".into(), ObservedDeployment::default());
    let secrets = BTreeSet::from(["audit".to_string(), "orphan".to_string()]);
    let topics = all_exist();
    let plan = v.build(&observed(&topics, &deployments, &secrets));
    let tail: Vec<String> =
        describe(&plan.actions()).into_iter().skip_while(|a| a != "Deployment 'flow-cart-sink'").skip(1).collect();
    assert_eq!(
        tail,
        [
            "Deployment 'flow-cart-audit'",
            "Secret 'flow-cart-audit'",
            "event StreamletRemoved: streamlet 'audit' is no longer in the pipeline",
            "Secret 'flow-cart-orphan'",
            "event StreamletRemoved: streamlet 'orphan' is no longer in the pipeline",
            "Deployment 'flow-cart-zeta'",
            "event StreamletRemoved: streamlet 'zeta' is no longer in the pipeline",
        ]
    );
    assert_eq!(plan.status.streamlets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["router", "sink"]);
}

#[test]
fn the_finalizer_is_present_only_with_delete() {
    let mut flow = generated("cart");
    let topics = all_exist();
    let (d, s) = (BTreeMap::new(), BTreeSet::new());
    let finalizer = |flow: &AnkkaFlow| valid(flow, &nothing()).build(&observed(&topics, &d, &s)).finalizer;
    assert_eq!(finalizer(&flow), FinalizerChange::Keep);
    flow.metadata.finalizers = Some(vec![FINALIZER.into()]);
    assert_eq!(finalizer(&flow), FinalizerChange::Remove);
    flow.spec.on_delete = Some(OnDelete { managed_topics: ManagedTopicsPolicy::Delete });
    assert_eq!(finalizer(&flow), FinalizerChange::Keep);
    flow.metadata.finalizers = None;
    assert_eq!(finalizer(&flow), FinalizerChange::Add);
    // a refused resource gets no finalizer either: nothing is applied
    assert!(matches!(decide_with(&flow, None, &nothing()), Decision::Refuse(_)));
}

#[test]
fn deletion_deletes_managed_topics_and_nothing_else() {
    let mut flow = generated("cart");
    flow.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-09-28T10:00:00Z".parse().unwrap()));
    // Keep, no finalizer: nothing to do
    let Decision::Delete(d) = decide_with(&flow, Some(SIDECAR), &nothing()) else { panic!() };
    assert_eq!(d, Deletion { candidates: vec![], unresolved: vec![], remove_finalizer: false });
    // Delete with the finalizer: the managed topics, sorted, then the finalizer; also when refused
    flow.spec.on_delete = Some(OnDelete { managed_topics: ManagedTopicsPolicy::Delete });
    flow.metadata.finalizers = Some(vec!["other".into(), FINALIZER.into()]);
    let Decision::Delete(d) = decide_with(&flow, None, &nothing()) else { panic!() };
    assert_eq!(
        d.candidates.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["cart.review-carts", "cart.valid-carts"]
    );
    assert!(d.remove_finalizer && d.unresolved.is_empty());
    // a managed topic that does not resolve is left, with why
    let none = BTreeMap::new();
    let Decision::Delete(d) = decide(&Inputs {
        flow: &flow,
        sidecar_image: Some(SIDECAR),
        clusters: &none,
        token_endpoints: &Default::default(),
        stage_secrets: &nothing(),
    })
    .unwrap() else {
        panic!()
    };
    assert!(d.candidates.is_empty() && d.remove_finalizer);
    assert_eq!(
        d.unresolved,
        [
            "topic 'review-carts' uses Kafka cluster 'default', but there is no Secret 'kafka-cluster-default'",
            "topic 'valid-carts' uses Kafka cluster 'default', but there is no Secret 'kafka-cluster-default'",
        ]
    );
}

#[test]
fn an_incomplete_resource_is_an_error() {
    let mut flow = generated("cart");
    flow.metadata.uid = None;
    let err = decide(&Inputs {
        flow: &flow,
        sidecar_image: Some(SIDECAR),
        clusters: &clusters(),
        token_endpoints: &Default::default(),
        stage_secrets: &nothing(),
    })
    .unwrap_err();
    assert_eq!(err.to_string(), "the resource has no uid");
}

#[test]
fn a_failed_apply_is_a_warning_event_and_the_applied_condition() {
    let v = valid(&generated("cart"), &nothing());
    let topics = all_exist();
    let (d, s) = (BTreeMap::new(), BTreeSet::new());
    let plan = v.build(&observed(&topics, &d, &s));
    let actions = plan.actions();
    let deployment = actions.iter().find(|a| matches!(a, Action::ApplyDeployment(_))).unwrap();
    let (event, outcome) =
        apply_failed(deployment, "exceeded quota: compute, requested: pods=1, used: pods=10, limited: pods=10");
    assert_eq!((event.type_, event.reason.as_str()), (EventType::Warning, "ApplyFailed"));
    assert_eq!(
        event.note,
        "could not apply Deployment 'flow-cart-router': exceeded quota: compute, requested: pods=1, used: pods=10, limited: pods=10"
    );
    assert_eq!(outcome, ApplyOutcome::Failed { message: event.note.clone() });
    let created = TopicCreation {
        id: "t".into(),
        name: "cart.t".into(),
        partitions: 1,
        replication: 1,
        config: BTreeMap::new(),
        event: event.clone(),
    };
    assert_eq!(
        apply_failed(&Action::CreateTopic(&created), "Broker: Policy violation").0.note,
        "could not create topic 'cart.t': Broker: Policy violation"
    );
    assert_eq!(
        apply_failed(&Action::DeleteSecret("flow-cart-x"), "forbidden").0.note,
        "could not delete Secret 'flow-cart-x': forbidden"
    );
    assert_eq!(
        apply_failed(&Action::AddFinalizer, "conflict").0.note,
        "could not add finalizer 'flow.ankka.thinkmorestupidless.com/managed-topics': conflict"
    );
}

#[test]
fn the_labels_and_names_come_from_one_place() {
    let v = valid(&generated("cart"), &nothing());
    let r = rendered(&v, "sink");
    let labels = r.deployment.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[LABEL_PIPELINE], "cart");
    assert_eq!(labels[LABEL_STREAMLET], "sink");
    assert_eq!(labels[LABEL_NAME], "cart-sink");
    assert_eq!(labels[LABEL_MANAGED_BY], "ankka-flow");
}

#[test]
fn objects_as_last_applied_are_left_alone_while_topics_and_removals_still_run() {
    use crate::render::applied::ObjectsStep;
    use crate::resource::AppliedDeployment;
    let v = valid(&generated("cart"), &nothing());
    let deployments: BTreeMap<String, ObservedDeployment> =
        [("router", 3), ("sink", 1)].iter().map(|(n, r)| (n.to_string(), rolled_out(rendered(&v, n), *r))).collect();
    let mut topics = all_exist();
    topics.insert("valid-carts".into(), KafkaTopic::Missing);
    let secrets = BTreeSet::from(["orphan".to_string()]);
    // The first reconcile applies everything, and the status records what.
    let first = v.build(&observed(&topics, &deployments, &secrets));
    let ObjectsStep::Apply { hash } = &first.objects else { panic!("{:?}", first.objects) };
    let applied = |n: &str| (n.to_string(), AppliedDeployment { uid: format!("uid-{n}"), generation: 5 });
    let record = first.objects.record(Some(BTreeMap::from([applied("router"), applied("sink")])), None, NOW);
    let record = record.expect("a record");
    assert_eq!(&record.hash, hash);

    // The next one, with nothing changed, applies no object; a missing topic is still created (its
    // intent recorded first) and a streamlet no longer in the resource still removed.
    let next = v.build(&Observed { applied: Some(&record), ..observed(&topics, &deployments, &secrets) });
    assert_eq!(next.objects, ObjectsStep::Unchanged { reapply_in: REAPPLY_AFTER });
    assert_eq!(
        describe(&next.actions()),
        [
            "the record of the topics the operator created",
            "topic 'cart.valid-carts'",
            "event TopicCreated: created topic 'cart.valid-carts' with 12 partitions",
            "Secret 'flow-cart-orphan'",
            "event StreamletRemoved: streamlet 'orphan' is no longer in the pipeline",
        ]
    );
    assert_eq!(next.status, first.status);

    // Another replica count renders another Deployment: every object is applied again.
    let mut scaled = generated("cart");
    scaled.spec.streamlets[0].replicas = 2;
    let scaled = valid(&scaled, &nothing())
        .build(&Observed { applied: Some(&record), ..observed(&topics, &deployments, &secrets) });
    assert!(matches!(&scaled.objects, ObjectsStep::Apply { hash: h } if h != hash));
    assert_eq!(scaled.actions().iter().filter(|a| matches!(a, Action::ApplyDeployment(_))).count(), 2);
}

#[test]
fn an_unproven_intent_is_reported_and_dropped_before_any_creation() {
    let v = valid(&generated("cart"), &nothing());
    let mut record = RECORD.clone();
    record.intend("cart.valid-carts");
    let mut topics = all_exist();
    // Someone else's topic of that name, or the operator's whose id it never recorded: no telling.
    let theirs = owners::topic_id(7, 7).unwrap();
    topics.insert(
        "valid-carts".into(),
        KafkaTopic::Exists(LiveTopic { partitions: 12, replication: 1, configs: secret(&[]), topic_id: Some(theirs) }),
    );
    let (d, s) = (BTreeMap::new(), BTreeSet::new());
    let plan = v.build(&Observed { record: &record, ..observed(&topics, &d, &s) });
    let Some(Action::WriteRecord(written)) = plan.setup_actions().first().copied() else { panic!("{plan:?}") };
    assert_eq!(written.entry("cart.valid-carts").map(|e| e.creating), Some(false));
    assert_eq!(*written, *RECORD, "only the intent goes");
    assert!(describe(&plan.actions()).iter().any(|a| a.starts_with(
        "event TopicAdopted: topic 'cart.valid-carts' is adopted read-only: the operator stopped between creating"
    )));
    let status = plan.status.topics.iter().find(|t| t.id == "valid-carts").unwrap();
    assert_eq!(status.ownership, Some(crate::resource::TopicOwnership::Adopted));
    // Reported once: with the intent gone, the next reconcile sees a topic the record does not name.
    let again = v.build(&Observed { record: written, ..observed(&topics, &d, &s) });
    assert_eq!(again.record, None);
}

#[test]
fn deletion_deletes_only_the_topics_the_operator_created_for_the_resource() {
    let mut flow = generated("cart");
    flow.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-09-28T10:00:00Z".parse().unwrap()));
    flow.spec.on_delete = Some(OnDelete { managed_topics: ManagedTopicsPolicy::Delete });
    flow.metadata.finalizers = Some(vec![FINALIZER.into()]);
    let Decision::Delete(d) = decide_with(&flow, Some(SIDECAR), &nothing()) else { panic!() };
    // The operator created review-carts only; valid-carts existed before the resource.
    let mut record = Record::default();
    record.created("cart.review-carts", &id_of("cart.review-carts"));
    // Only what the record names is asked of Kafka.
    assert_eq!(d.to_describe(&record).iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["review-carts"]);
    let names = |events: &[Event]| events.iter().map(|e| e.note.clone()).collect::<Vec<_>>();
    let kept_valid = "topic 'cart.valid-carts' is left in Kafka: the operator did not create it for this resource";

    let kafka = BTreeMap::from([("review-carts".to_string(), live("cart.review-carts", 3, 1, &[]))]);
    let t = d.topics(&record, &kafka);
    assert_eq!(t.delete.iter().map(|(t, _)| t.name.as_str()).collect::<Vec<_>>(), ["cart.review-carts"]);
    assert_eq!(t.delete[0].1.note, "deleted topic 'cart.review-carts', which the operator created for this resource");
    assert_eq!(names(&t.kept), [kept_valid]);
    assert!(t.unreachable.is_empty());

    // Deleted and created again by someone else: another topic, left as it is.
    let theirs = owners::topic_id(9, 9).unwrap();
    let recreated = KafkaTopic::Exists(LiveTopic {
        partitions: 3,
        replication: 1,
        configs: secret(&[]),
        topic_id: Some(theirs.clone()),
    });
    let t = d.topics(&record, &BTreeMap::from([("review-carts".to_string(), recreated)]));
    assert!(t.delete.is_empty());
    assert_eq!(
        names(&t.kept),
        [
            format!(
                "topic 'cart.review-carts' is left in Kafka: it was deleted and created again outside the operator (it \
                 has topic id {theirs} now)"
            ),
            kept_valid.to_string()
        ]
    );

    // Gone already: nothing to do. Kafka unreachable: the deletion waits, the finalizer stays.
    let t = d.topics(&record, &BTreeMap::from([("review-carts".to_string(), KafkaTopic::Missing)]));
    assert!(t.delete.is_empty() && t.unreachable.is_empty());
    let down = BTreeMap::from([("review-carts".to_string(), KafkaTopic::Unreachable("timed out".into()))]);
    assert_eq!(d.topics(&record, &down).unreachable, ["cannot describe topic 'cart.review-carts': timed out"]);
    assert_eq!(d.topics(&record, &BTreeMap::new()).unreachable, ["topic 'cart.review-carts' was not described"]);

    // Without a record (a resource of an operator before owners were recorded, or another resource
    // of the same name): nothing is deleted, and Kafka is not even asked.
    let none = Record::default();
    assert!(d.to_describe(&none).is_empty());
    let t = d.topics(&none, &BTreeMap::new());
    assert!(t.delete.is_empty() && t.unreachable.is_empty() && t.kept.len() == 2);
}
