use super::*;
use crate::targets::tests::topic;

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

fn live(partitions: i32, replication: i32, configs: &[(&str, &str)]) -> KafkaTopic {
    KafkaTopic::Exists(LiveTopic { partitions, replication, configs: map(configs) })
}

#[test]
fn a_missing_managed_topic_is_created_with_its_settings() {
    let t = resolved(Some((12, 1, &[("retention.ms", "86400000")])));
    let d = decide(&t, &KafkaTopic::Missing);
    let c = d.create.unwrap();
    assert_eq!((c.name.as_str(), c.partitions, c.replication), ("cart.valid-carts", 12, 1));
    assert_eq!(c.config, map(&[("retention.ms", "86400000")]));
    assert_eq!(c.event.reason, "TopicCreated");
    assert_eq!(c.event.type_, EventType::Normal);
    assert_eq!(c.event.note, "created topic 'cart.valid-carts' with 12 partitions");
    assert!(d.events.is_empty());
    assert_eq!(
        d.status,
        TopicStatus { id: "valid-carts".into(), exists: true, detail: "created by the operator".into() }
    );
}

#[test]
fn an_existing_managed_topic_is_never_altered_only_reported() {
    let t = resolved(Some((12, 3, &[("retention.ms", "86400000"), ("segment.ms", "1000")])));
    let same = decide(&t, &live(12, 3, &[("retention.ms", "86400000"), ("segment.ms", " 1000 ")]));
    assert_eq!((same.create, same.events.len()), (None, 0));
    assert_eq!(same.status, TopicStatus { id: "valid-carts".into(), exists: true, detail: String::new() });

    let d = decide(&t, &live(6, 1, &[("retention.ms", "604800000")]));
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
    let d = decide(&t, &live(3, 1, &[("cleanup.policy", "delete"), ("retention.ms", "2")]));
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
    let d = decide(&t, &live(3, 1, &[("cleanup.policy", "compact,delete"), ("retention.ms", "1")]));
    assert_eq!(
        notes(&d),
        [(
            "TopicSettingsIgnored".to_string(),
            "topic 'cart.valid-carts' exists; changed settings cleanup.policy were not applied".to_string()
        )]
    );
    // the same policies in another order are the same policy
    let t = resolved(Some((3, 1, &[("cleanup.policy", "compact, delete")])));
    assert!(decide(&t, &live(3, 1, &[("cleanup.policy", "delete,compact")])).events.is_empty());
}

#[test]
fn unmanaged_topics_are_only_described() {
    let t = resolved(None);
    let d = decide(&t, &KafkaTopic::Missing);
    assert!(d.create.is_none());
    assert_eq!(
        notes(&d),
        [(
            "TopicMissing".to_string(),
            "topic 'cart.valid-carts' is not managed by the pipeline and does not exist; its consumers will not become ready".to_string()
        )]
    );
    assert_eq!(
        d.status,
        TopicStatus {
            id: "valid-carts".into(),
            exists: false,
            detail: "topic 'cart.valid-carts' does not exist".into()
        }
    );
    // settings of an unmanaged topic are its owner's: nothing to compare
    let d = decide(&t, &live(1, 1, &[]));
    assert!(d.events.is_empty() && d.status.exists);
    let d = decide(&t, &KafkaTopic::Unreachable("timed out".into()));
    assert!(d.events.is_empty() && d.create.is_none());
    assert_eq!(d.status.detail, "Kafka unreachable: timed out");
    assert!(!d.status.exists);
}

#[test]
fn an_unreachable_managed_topic_is_neither_created_nor_reported_missing() {
    let t = resolved(Some((3, 1, &[])));
    let d = decide(&t, &KafkaTopic::Unreachable("timed out".into()));
    assert!(d.create.is_none() && d.events.is_empty());
    assert_eq!(
        d.status,
        TopicStatus { id: "valid-carts".into(), exists: true, detail: "created by the operator".into() }
    );
}
