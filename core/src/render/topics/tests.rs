use super::*;
use crate::render::owners::topic_id;
use crate::targets::tests::topic;

/// The id of the topic the operator created, and of another one of the same name.
fn ours() -> String {
    topic_id(0x0102_0304_0506_0708, 0x090a_0b0c_0d0e_0f10).unwrap()
}
fn theirs() -> String {
    topic_id(0x7f7f_0000_0000_0001, 0x0000_0000_0000_0002).unwrap()
}

/// A record that says the operator created `cart.valid-carts` as [`ours`].
fn created() -> Record {
    let mut r = Record::default();
    r.created("cart.valid-carts", &ours());
    r
}

fn status(exists: bool, detail: &str, ownership: Option<TopicOwnership>) -> TopicStatus {
    TopicStatus { id: "valid-carts".into(), exists, detail: detail.into(), ownership }
}

fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn notes(d: &TopicDecision) -> Vec<(String, String)> {
    d.events.iter().map(|e| (e.reason.clone(), e.note.clone())).collect()
}

/// Partitions, replicas and topic config of a managed topic.
type Managed<'a> = (i32, i32, &'a [(&'a str, &'a str)]);

fn resolved(managed: Option<Managed<'_>>) -> ResolvedTopic {
    let mut t = topic("valid-carts", "cart.valid-carts");
    t.bootstrap_servers = Some("k:9092".into());
    if let Some((partitions, replicas, config)) = managed {
        t.managed = true;
        t.partitions = Some(partitions);
        t.replicas = Some(replicas);
        t.topic_config = map(config);
    }
    crate::connection::resolve_topic(&t, "shop", &Default::default(), &Default::default()).unwrap()
}

/// The topic the operator created ([`ours`]), as Kafka describes it.
fn live(partitions: i32, replication: i32, configs: &[(&str, &str)]) -> KafkaTopic {
    KafkaTopic::Exists(LiveTopic { partitions, replication, configs: map(configs), topic_id: Some(ours()) })
}

/// Another topic: its topic id is `id`.
fn other(id: Option<String>) -> KafkaTopic {
    KafkaTopic::Exists(LiveTopic { partitions: 12, replication: 1, configs: BTreeMap::new(), topic_id: id })
}

#[test]
fn a_missing_managed_topic_is_created_with_its_settings() {
    let t = resolved(Some((12, 1, &[("retention.ms", "86400000")])));
    let d = decide(&t, &KafkaTopic::Missing, &Record::default());
    let c = d.create.unwrap();
    assert_eq!((c.name.as_str(), c.partitions, c.replication), ("cart.valid-carts", 12, 1));
    assert_eq!(c.config, map(&[("retention.ms", "86400000")]));
    assert_eq!(c.event.reason, "TopicCreated");
    assert_eq!(c.event.type_, EventType::Normal);
    assert_eq!(c.event.note, "created topic 'cart.valid-carts' with 12 partitions");
    assert!(d.events.is_empty());
    assert_eq!(d.status, status(true, "created by the operator", Some(TopicOwnership::Created)));
}

#[test]
fn an_existing_managed_topic_is_never_altered_only_reported() {
    let t = resolved(Some((12, 3, &[("retention.ms", "86400000"), ("segment.ms", "1000")])));
    let same = decide(&t, &live(12, 3, &[("retention.ms", "86400000"), ("segment.ms", " 1000 ")]), &created());
    assert_eq!((same.create, same.events.len()), (None, 0));
    assert_eq!(same.status, status(true, "", Some(TopicOwnership::Created)));
    assert_eq!(same.ownership, Some(Ownership::Created));

    let d = decide(&t, &live(6, 1, &[("retention.ms", "604800000")]), &created());
    assert!(d.create.is_none());
    assert_eq!(
        notes(&d),
        [
            (
                "TopicDiffers".to_string(),
                "topic 'cart.valid-carts' exists with 6 partitions and replication 1; the resource declares 12 and 3. Left as it is.".to_string()
            ),
            (
                "TopicSettingsIgnored".to_string(),
                "topic 'cart.valid-carts' exists; changed settings retention.ms, segment.ms were not applied".to_string()
            ),
        ]
    );
    assert!(d.events.iter().all(|e| e.type_ == EventType::Warning));
}

#[test]
fn an_uncompacted_topic_that_should_be_compacted_gets_its_own_warning() {
    let t = resolved(Some((3, 1, &[("cleanup.policy", "compact"), ("retention.ms", "1")])));
    let d = decide(&t, &live(3, 1, &[("cleanup.policy", "delete"), ("retention.ms", "2")]), &created());
    assert_eq!(
        notes(&d),
        [
            (
                "TopicNotCompacted".to_string(),
                "topic 'cart.valid-carts' exists with cleanup.policy = delete although the resource asks for compact; it is not compacted and was left as it is, so records older than its retention are missing from a rebuild. Set cleanup.policy on the topic in Kafka to compact it.".to_string()
            ),
            (
                "TopicSettingsIgnored".to_string(),
                "topic 'cart.valid-carts' exists; changed settings retention.ms were not applied".to_string()
            ),
        ]
    );
    // compacted and deleted is compacted: a differing policy is only a setting
    let d = decide(&t, &live(3, 1, &[("cleanup.policy", "compact,delete"), ("retention.ms", "1")]), &created());
    assert_eq!(
        notes(&d),
        [(
            "TopicSettingsIgnored".to_string(),
            "topic 'cart.valid-carts' exists; changed settings cleanup.policy were not applied".to_string()
        )]
    );
    // the same policies in another order are the same policy
    let t = resolved(Some((3, 1, &[("cleanup.policy", "compact, delete")])));
    assert!(decide(&t, &live(3, 1, &[("cleanup.policy", "delete,compact")]), &created()).events.is_empty());
}

#[test]
fn unmanaged_topics_are_only_described() {
    let t = resolved(None);
    let d = decide(&t, &KafkaTopic::Missing, &Record::default());
    assert!(d.create.is_none());
    assert_eq!(
        notes(&d),
        [(
            "TopicMissing".to_string(),
            "topic 'cart.valid-carts' is not managed by the pipeline and does not exist; its consumers will not become ready".to_string()
        )]
    );
    assert_eq!(d.status, status(false, "topic 'cart.valid-carts' does not exist", None));
    // settings of an unmanaged topic are its owner's: nothing to compare, and it has no owner here
    let d = decide(&t, &live(1, 1, &[]), &Record::default());
    assert!(d.events.is_empty() && d.status.exists && d.ownership.is_none());
    assert_eq!(d.status.ownership, None);
    let d = decide(&t, &KafkaTopic::Unreachable("timed out".into()), &Record::default());
    assert!(d.events.is_empty() && d.create.is_none());
    assert_eq!(d.status.detail, "Kafka unreachable: timed out");
    assert!(!d.status.exists);
}

#[test]
fn an_unreachable_managed_topic_is_neither_created_nor_reported_missing() {
    let t = resolved(Some((3, 1, &[])));
    let d = decide(&t, &KafkaTopic::Unreachable("timed out".into()), &created());
    assert!(d.create.is_none() && d.events.is_empty());
    // who owns it cannot be told while Kafka cannot be asked
    assert_eq!(d.status, status(true, "created by the operator", None));
}

#[test]
fn an_existing_topic_the_record_does_not_name_is_adopted_read_only_and_still_compared() {
    let t = resolved(Some((12, 3, &[("retention.ms", "86400000")])));
    let d = decide(&t, &other(Some(theirs())), &Record::default());
    assert!(d.create.is_none());
    assert_eq!(d.ownership, Some(Ownership::Adopted(owners::Adoption::ExistedBefore)));
    assert_eq!(
        notes(&d),
        [
            (
                "TopicAdopted".to_string(),
                "topic 'cart.valid-carts' is adopted read-only: it existed before this resource declared it. The \
                 operator never alters or deletes it, whatever onDelete says."
                    .to_string()
            ),
            (
                "TopicDiffers".to_string(),
                "topic 'cart.valid-carts' exists with 12 partitions and replication 1; the resource declares 12 and 3. Left as it is.".to_string()
            ),
            (
                "TopicSettingsIgnored".to_string(),
                "topic 'cart.valid-carts' exists; changed settings retention.ms were not applied".to_string()
            ),
        ]
    );
    assert_eq!(d.events[0].type_, EventType::Warning);
    assert_eq!(
        d.status,
        status(true, "adopted read-only: it existed before this resource declared it", Some(TopicOwnership::Adopted))
    );
    // another resource's record does not help: the record is this resource's only
    let mut elsewhere = Record::default();
    elsewhere.created("cart.other", &theirs());
    assert_eq!(decide(&t, &other(Some(theirs())), &elsewhere).status.ownership, Some(TopicOwnership::Adopted));
}

#[test]
fn a_topic_created_again_by_someone_else_is_adopted_whatever_its_name() {
    let t = resolved(Some((12, 1, &[])));
    let d = decide(&t, &other(Some(theirs())), &created());
    assert_eq!(d.ownership, Some(Ownership::Adopted(owners::Adoption::Recreated { live: theirs() })));
    assert_eq!(
        d.status.detail,
        format!(
            "adopted read-only: it was deleted and created again outside the operator (it has topic id {} now)",
            theirs()
        )
    );
    assert_eq!(notes(&d).len(), 1);
}

#[test]
fn an_intent_without_an_id_proves_nothing_and_no_topic_id_proves_nothing() {
    let t = resolved(Some((12, 1, &[])));
    let mut intent = Record::default();
    intent.intend("cart.valid-carts");
    let d = decide(&t, &other(Some(theirs())), &intent);
    assert_eq!(d.ownership, Some(Ownership::Adopted(owners::Adoption::Unproven)));
    assert!(d.status.detail.starts_with("adopted read-only: the operator stopped between creating"), "{:?}", d.status);
    // Kafka before 2.8 gives no topic id: even a recorded creation proves nothing
    let d = decide(&t, &other(None), &created());
    assert_eq!(d.ownership, Some(Ownership::Adopted(owners::Adoption::NoTopicId)));
    assert_eq!(d.status.ownership, Some(TopicOwnership::Adopted));
}

#[test]
fn a_missing_managed_topic_over_its_clusters_limit_is_not_created() {
    let mut t = resolved(Some((12, 1, &[])));
    t.cluster = Some("big".into());
    t.max_partitions = Some(10);
    let d = decide(&t, &KafkaTopic::Missing, &Record::default());
    assert_eq!(d.create, None);
    let why = "managed topic 'valid-carts' (Kafka topic 'cart.valid-carts') has 12 partitions, more than the 10 that \
               Secret 'kafka-cluster-big' allows a managed topic (annotation \
               'flow.ankka.thinkmorestupidless.com/max-topic-partitions'); it was not created";
    assert_eq!(notes(&d), [("TopicNotCreated".to_string(), why.to_string())]);
    assert_eq!(d.status, status(false, why, None));
    // At the limit, it is created.
    t.max_partitions = Some(12);
    assert!(decide(&t, &KafkaTopic::Missing, &Record::default()).create.is_some());
    // One that exists is never held to the limit: nothing is created.
    t.max_partitions = Some(10);
    let d = decide(&t, &live(12, 1, &[]), &Record::default());
    assert_eq!(d.create, None);
    assert!(d.status.exists && d.events.iter().all(|e| e.reason != "TopicNotCreated"), "{d:?}");
}
