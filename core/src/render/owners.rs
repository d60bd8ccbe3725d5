//! Which Kafka topics the operator created for an `AnkkaFlow`, so that it deletes a topic only when
//! it created it for that very resource (docs/rendering.md, "Who owns a topic").
//!
//! **Where the record is kept.** One ConfigMap per resource, `flow-topics-<uid>`, in the operator's
//! own namespace: a tenant who may write the resource (its spec, its annotations, even its status)
//! or anything in its own namespace cannot write there, and the resource's uid names the owner, so
//! a resource deleted and created again under its name is another owner. The ConfigMap has one data
//! key per Kafka topic name; its value lists the topic ids (KIP-516) of the topics of that name
//! the operator created for the resource, and [`CREATING`] while a creation is under way. Kafka
//! gives every topic a new id when it is created, so a topic deleted and created again by someone
//! else is told apart from the one the operator created, whatever its name.
//!
//! **Write-ahead.** Before it creates a topic, the operator records [`CREATING`] under its name;
//! once Kafka answered that it created it, the topic's id replaces the intent. An operator stopped
//! between the two finds the intent and a topic it cannot tell from one someone else created in
//! the meantime: it adopts it read-only ([`Adoption::Unproven`]) rather than claim it.
//!
//! Everything here is pure: the record and Kafka's answer are inputs.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Owner;
use crate::names::{LABEL_MANAGED_BY, MANAGED_BY};

/// Prefix of the record's ConfigMap name; the resource's uid follows.
pub const RECORD_PREFIX: &str = "flow-topics-";

/// Label of a record: the uid of the resource it is about.
pub const LABEL_OWNER_UID: &str = "flow.ankka.thinkmorestupidless.com/owner-uid";

/// Label of a record: the namespace of the resource it is about.
pub const LABEL_OWNER_NAMESPACE: &str = "flow.ankka.thinkmorestupidless.com/owner-namespace";

/// Annotation of a record: `<namespace>/<name>` of the resource it is about (a name may be longer
/// than a label value can be).
pub const ANNOTATION_OWNER: &str = "flow.ankka.thinkmorestupidless.com/owner";

/// The token of a record's value that says a creation of the topic is under way.
pub const CREATING: &str = "creating";

/// The name of the record of the resource of uid `uid`.
pub fn record_name(uid: &str) -> String {
    format!("{RECORD_PREFIX}{uid}")
}

/// A topic id as Kafka's own tools show it (`kafka-topics.sh --describe`, `TopicId:`): the 16
/// bytes of the UUID, most significant half first, in URL-safe base64 without padding (Kafka's
/// `Uuid.toString`). `None` for the zero UUID, which Kafka answers for "no id" (brokers before
/// Kafka 2.8, KIP-516).
pub fn topic_id(most_significant: i64, least_significant: i64) -> Option<String> {
    if most_significant == 0 && least_significant == 0 {
        return None;
    }
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&most_significant.to_be_bytes());
    bytes[8..].copy_from_slice(&least_significant.to_be_bytes());
    Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Whether `token` is a topic id as [`topic_id`] writes it.
pub fn is_topic_id(token: &str) -> bool {
    token.len() == 22
        && base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).is_ok_and(|b| b.len() == 16 && b != [0; 16])
}

/// What the record says of one Kafka topic name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// Ids of the topics of that name the operator created for the resource.
    pub ids: BTreeSet<String>,
    /// Whether a creation of the topic was under way.
    pub creating: bool,
}

impl Entry {
    fn is_empty(&self) -> bool {
        self.ids.is_empty() && !self.creating
    }

    /// The ConfigMap value: the ids, then [`CREATING`], separated by commas.
    fn value(&self) -> String {
        let mut tokens: Vec<&str> = self.ids.iter().map(String::as_str).collect();
        if self.creating {
            tokens.push(CREATING);
        }
        tokens.join(",")
    }
}

/// The record of one resource: by Kafka topic name, what the operator created.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    topics: BTreeMap<String, Entry>,
}

impl Record {
    /// Reads a record from its ConfigMap's data. A token that is neither a topic id nor
    /// [`CREATING`] is left out and named in the second value (an administrator's typo proves
    /// nothing, so it owns nothing).
    pub fn from_data(data: &BTreeMap<String, String>) -> (Record, Vec<String>) {
        let mut record = Record::default();
        let mut problems = Vec::new();
        for (name, value) in data {
            let mut entry = Entry::default();
            for token in value.split(|c: char| c == ',' || c.is_whitespace()).filter(|t| !t.is_empty()) {
                if token == CREATING {
                    entry.creating = true;
                } else if is_topic_id(token) {
                    entry.ids.insert(token.to_string());
                } else {
                    problems
                        .push(format!("key '{name}' lists '{token}', which is neither a topic id nor '{CREATING}'"));
                }
            }
            if !entry.is_empty() {
                record.topics.insert(name.clone(), entry);
            }
        }
        (record, problems)
    }

    /// What the record says of topic name `name`.
    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.topics.get(name)
    }

    /// Whether the record holds nothing.
    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// The ConfigMap data of the record.
    pub fn data(&self) -> BTreeMap<String, String> {
        self.topics.iter().map(|(name, e)| (name.clone(), e.value())).collect()
    }

    /// Records that a creation of topic `name` is under way.
    pub fn intend(&mut self, name: &str) {
        self.topics.entry(name.to_string()).or_default().creating = true;
    }

    /// Records that the operator created topic `name`, whose id is `id`: the intent is done.
    pub fn created(&mut self, name: &str, id: &str) {
        let entry = self.topics.entry(name.to_string()).or_default();
        entry.ids.insert(id.to_string());
        entry.creating = false;
    }

    /// Drops the intent of topic `name` (its creation found the topic there already, or the intent
    /// was reported unproven).
    pub fn drop_intent(&mut self, name: &str) {
        if let Some(e) = self.topics.get_mut(name) {
            e.creating = false;
            if e.is_empty() {
                self.topics.remove(name);
            }
        }
    }

    /// The keys that differ from `before`, as a JSON merge patch (RFC 7396) of the ConfigMap's
    /// data: a changed key with its new value, a removed one with `null`. `None` when nothing
    /// differs.
    pub fn patch(&self, before: &Record) -> Option<serde_json::Value> {
        let (now, was) = (self.data(), before.data());
        let mut data = serde_json::Map::new();
        for (k, v) in &now {
            if was.get(k) != Some(v) {
                data.insert(k.clone(), serde_json::Value::String(v.clone()));
            }
        }
        for k in was.keys().filter(|k| !now.contains_key(*k)) {
            data.insert(k.clone(), serde_json::Value::Null);
        }
        (!data.is_empty()).then(|| serde_json::json!({ "data": data }))
    }

    /// The record's ConfigMap for resource `owner`, in the operator's namespace `namespace`.
    pub fn config_map(&self, owner: &Owner, namespace: &str) -> ConfigMap {
        let labels = [
            (LABEL_MANAGED_BY, MANAGED_BY.to_string()),
            (LABEL_OWNER_UID, owner.uid.clone()),
            (LABEL_OWNER_NAMESPACE, owner.namespace.clone()),
        ];
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(record_name(&owner.uid)),
                namespace: Some(namespace.to_string()),
                labels: Some(labels.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
                annotations: Some(BTreeMap::from([(
                    ANNOTATION_OWNER.to_string(),
                    format!("{}/{}", owner.namespace, owner.name),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(self.data()),
            ..ConfigMap::default()
        }
    }
}

/// The namespace and name of the resource a record is about, from its [`ANNOTATION_OWNER`] value.
pub fn owner_of(annotation: &str) -> Option<(&str, &str)> {
    annotation.split_once('/').filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
}

/// Whether the record of the resource of uid `uid` is left over, given the uid of the object the
/// API server holds under the resource's name now (`None`: no object): the resource is gone, and
/// an object of another uid is another resource. Deleting a left-over record loses nothing: its
/// owner can never act again.
pub fn left_over(uid: &str, found: Option<&str>) -> bool {
    found != Some(uid)
}

/// Who owns an existing managed topic, as far as the operator can prove it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// The operator created this very topic (its id is recorded) for this resource: it may delete
    /// it with the resource.
    Created,
    /// Anything else: the operator uses the topic, never alters it, never deletes it.
    Adopted(Adoption),
}

/// Why an existing managed topic is adopted read-only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Adoption {
    /// The record does not name it: it existed before the resource declared it (or another
    /// resource created it, or an operator before owners were recorded).
    ExistedBefore,
    /// The operator created a topic of that name, but this one has another id: someone deleted it
    /// and created it again.
    Recreated {
        /// The id of the topic Kafka has now.
        live: String,
    },
    /// A creation was under way and the operator stopped before recording the topic's id: it
    /// cannot tell its own topic from one someone else created meanwhile.
    Unproven,
    /// Kafka gives the topic no id (brokers before Kafka 2.8): nothing can prove who created it.
    NoTopicId,
}

impl Adoption {
    /// Why, in a few words, for the status and the events.
    pub fn why(&self) -> String {
        match self {
            Adoption::ExistedBefore => "it existed before this resource declared it".into(),
            Adoption::Recreated { live } => {
                format!("it was deleted and created again outside the operator (it has topic id {live} now)")
            }
            Adoption::Unproven => "the operator stopped between creating a topic of that name and recording it, \
                                   so it cannot prove it created this one"
                .into(),
            Adoption::NoTopicId => "Kafka gives it no topic id (brokers before Kafka 2.8), so nothing proves who \
                                    created it"
                .into(),
        }
    }
}

/// Who owns the existing topic `name`, whose live topic id is `live_id`, given the `record` of the
/// resource that declares it managed.
pub fn ownership(record: &Record, name: &str, live_id: Option<&str>) -> Ownership {
    let Some(live) = live_id else { return Ownership::Adopted(Adoption::NoTopicId) };
    let entry = record.entry(name);
    match entry {
        Some(e) if e.ids.contains(live) => Ownership::Created,
        Some(e) if e.creating => Ownership::Adopted(Adoption::Unproven),
        Some(e) if !e.ids.is_empty() => Ownership::Adopted(Adoption::Recreated { live: live.to_string() }),
        _ => Ownership::Adopted(Adoption::ExistedBefore),
    }
}

#[cfg(test)]
mod tests;
