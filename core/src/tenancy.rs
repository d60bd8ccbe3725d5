//! Consumer groups that pipelines of several resources share.
//!
//! A consumer group is named `<pipeline>.<streamlet>.<inlet>`, without the namespace, so two
//! `AnkkaFlow`s (in two namespaces, or two in one) with the same pipeline id and streamlet map to the
//! same group. On one Kafka cluster that is one group: the streamlets of both share its partitions,
//! and a reset of either moves the other's offsets, whether its streamlets run or not.
//!
//! [`shared_groups`] finds, for one resource, each of its inlets' groups that another resource also
//! maps to on the same cluster. The operator records a Warning event `ConsumerGroupShared` on both
//! ([`shared_group_event`]) and refuses a reset request that targets such a group
//! ([`reset_refusal`]), unless every cluster Secret involved allows it
//! ([`ANNOTATION_ALLOW_SHARED_GROUPS`](crate::connection::ANNOTATION_ALLOW_SHARED_GROUPS)).
//!
//! Two inlets are on the same cluster when they use the same cluster Secret, or when their broker
//! lists have an address in common (a topic that names its own brokers may point at a cluster that
//! a Secret also reaches). Another listener or another DNS name of the same brokers is not
//! recognised: `docs/tenancy.md` says what an administrator does about that.

use std::collections::{BTreeMap, BTreeSet};

use crate::connection::{Clusters, DEFAULT_CLUSTER};
use crate::events::{Event, EventType};
use crate::names::GroupId;
use crate::resource::{AnkkaFlowSpec, TopicSpec};

/// One resource, as the check sees it.
#[derive(Clone, Copy, Debug)]
pub struct Pipeline<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its spec.
    pub spec: &'a AnkkaFlowSpec,
}

/// A resource, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlowRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for FlowRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One of a resource's consumer groups that other resources map to on the same cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedGroup {
    /// The group.
    pub group: GroupId,
    /// The other resources, sorted.
    pub others: Vec<FlowRef>,
    /// The cluster Secrets involved (the resource's and the others'), sorted.
    pub secrets: Vec<String>,
    /// Whether every cluster Secret involved allows shared groups (and at least one is involved).
    pub allowed: bool,
}

/// Where an inlet's group lives: the cluster Secret its topic uses, if any, and the broker
/// addresses it reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Place {
    cluster: Option<String>,
    brokers: BTreeSet<String>,
}

impl Place {
    fn of(topic: &TopicSpec, clusters: &Clusters) -> Place {
        let own = topic.bootstrap_servers.as_deref().filter(|s| !s.trim().is_empty());
        let cluster = match (&topic.cluster, own) {
            (Some(c), _) => Some(c.clone()),
            (None, None) => Some(DEFAULT_CLUSTER.to_string()),
            (None, Some(_)) => None,
        };
        // Every address the inlet might reach: its own and its cluster's (a resource that sets both
        // is refused, but the check looks at every resource, refused ones included).
        let of_cluster = cluster.as_ref().and_then(|c| clusters.get(c)).and_then(|c| c.bootstrap_servers.as_deref());
        let brokers = own.into_iter().chain(of_cluster).flat_map(addresses).collect();
        Place { cluster, brokers }
    }

    fn same_cluster(&self, other: &Place) -> bool {
        (self.cluster.is_some() && self.cluster == other.cluster) || !self.brokers.is_disjoint(&other.brokers)
    }
}

/// The addresses of a broker list, lower-cased, without a `SCHEME://` prefix.
fn addresses(list: &str) -> impl Iterator<Item = String> + '_ {
    list.split(',').map(str::trim).filter(|a| !a.is_empty()).map(|a| {
        let a = a.rsplit("://").next().unwrap_or(a);
        a.to_ascii_lowercase()
    })
}

/// Each inlet's group of `spec` with the place of its topic. An inlet bound to an undeclared topic
/// has no place and is left out.
fn inlet_groups(spec: &AnkkaFlowSpec, clusters: &Clusters) -> Vec<(GroupId, Place)> {
    spec.streamlets
        .iter()
        .flat_map(|s| s.inlets.iter().map(move |(inlet, topic)| (s, inlet, topic)))
        .filter_map(|(s, inlet, topic)| {
            let t = spec.topic(topic)?;
            Some((GroupId::new(&spec.pipeline, &s.name, inlet), Place::of(t, clusters)))
        })
        .collect()
}

/// The groups of `me` that another resource of `all` maps to on the same cluster, sorted by group.
/// `all` may include `me` (by namespace and name), which is skipped.
pub fn shared_groups(me: Pipeline<'_>, all: &[Pipeline<'_>], clusters: &Clusters) -> Vec<SharedGroup> {
    let mine = inlet_groups(me.spec, clusters);
    if mine.is_empty() {
        return Vec::new();
    }
    let wanted: BTreeSet<&str> = mine.iter().map(|(g, _)| g.as_str()).collect();
    let mut found: BTreeMap<GroupId, (BTreeSet<FlowRef>, BTreeSet<String>)> = BTreeMap::new();
    for other in all {
        if other.namespace == me.namespace && other.name == me.name {
            continue;
        }
        // Cheap first: a resource of another pipeline id maps to none of these groups.
        if other.spec.pipeline != me.spec.pipeline {
            continue;
        }
        for (group, place) in inlet_groups(other.spec, clusters) {
            if !wanted.contains(group.as_str()) {
                continue;
            }
            for (my_group, my_place) in mine.iter().filter(|(g, _)| *g == group) {
                if my_place.same_cluster(&place) {
                    let entry = found.entry(my_group.clone()).or_default();
                    entry.0.insert(FlowRef { namespace: other.namespace.into(), name: other.name.into() });
                    entry.1.extend(my_place.cluster.iter().chain(place.cluster.iter()).cloned());
                }
            }
        }
    }
    found
        .into_iter()
        .map(|(group, (others, secrets))| {
            let allowed =
                !secrets.is_empty() && secrets.iter().all(|s| clusters.get(s).is_some_and(|c| c.allow_shared_groups));
            SharedGroup {
                group,
                others: others.into_iter().collect(),
                secrets: secrets.into_iter().map(|c| format!("kafka-cluster-{c}")).collect(),
                allowed,
            }
        })
        .collect()
}

/// The Warning recorded on a resource for one group it shares with `other`: one event per group
/// and other resource, so that the note is the same whichever reconcile records it.
pub fn shared_group_event(group: &GroupId, other: &FlowRef, allowed: bool) -> Event {
    let consequence = if allowed {
        "an administrator allowed it on this cluster, so a reset of either moves the other's offsets"
    } else {
        "a reset of it is refused while both exist"
    };
    let note = format!(
        "consumer group {group} is also the consumer group of AnkkaFlow {other} on the same Kafka cluster: the \
         streamlets of both share it, and {consequence}"
    );
    Event::new(EventType::Warning, "ConsumerGroupShared", note.clone(), note)
}

/// Other resources named per group in a refusal; the rest are counted, so that the note stays
/// within an event's size.
const LISTED: usize = 5;

/// Why reset request `id`, which targets `groups`, is refused: the groups among them that another
/// resource also maps to on the same cluster, unless allowed. `None` when nothing refuses it.
pub fn reset_refusal(id: &str, groups: &[GroupId], shared: &[SharedGroup]) -> Option<String> {
    let blocking: Vec<String> = shared
        .iter()
        .filter(|s| !s.allowed && groups.contains(&s.group))
        .map(|s| {
            let mut others: Vec<String> = s.others.iter().take(LISTED).map(|o| format!("AnkkaFlow {o}")).collect();
            if s.others.len() > LISTED {
                others.push(format!("{} more", s.others.len() - LISTED));
            }
            format!("consumer group {} is also the consumer group of {}", s.group, others.join(", "))
        })
        .collect();
    if blocking.is_empty() {
        return None;
    }
    let secrets: BTreeSet<&str> = shared
        .iter()
        .filter(|s| !s.allowed && groups.contains(&s.group))
        .flat_map(|s| s.secrets.iter().map(String::as_str))
        .collect();
    let allow = if secrets.is_empty() {
        String::new()
    } else {
        format!(
            ", or have an administrator annotate Secret {} with {}: \"true\"",
            secrets.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", "),
            crate::connection::ANNOTATION_ALLOW_SHARED_GROUPS
        )
    };
    Some(format!(
        "reset {id} refused: {} on the same Kafka cluster, and a reset would move its offsets too; give one of the \
         pipelines another name{allow}",
        blocking.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::{ANNOTATION_ALLOW_SHARED_GROUPS, ANNOTATION_ALLOWED_NAMESPACES, Cluster};
    use crate::targets::tests::cart;

    fn cluster(name: &str, brokers: &str, shared: bool) -> (String, Cluster) {
        let data = BTreeMap::from([("bootstrap.servers".to_string(), brokers.to_string())]);
        let mut annotations = BTreeMap::from([(ANNOTATION_ALLOWED_NAMESPACES.to_string(), "*".to_string())]);
        if shared {
            annotations.insert(ANNOTATION_ALLOW_SHARED_GROUPS.to_string(), "true".to_string());
        }
        (name.to_string(), Cluster::from_secret(name, &data, &annotations))
    }

    /// The cart pipeline whose topics use cluster `cluster` or brokers `brokers`.
    fn cart_on(cluster: Option<&str>, brokers: Option<&str>) -> AnkkaFlowSpec {
        let mut spec = cart(1);
        for t in &mut spec.topics {
            t.cluster = cluster.map(str::to_string);
            t.bootstrap_servers = brokers.map(str::to_string);
        }
        spec
    }

    fn groups_of(spec: &AnkkaFlowSpec) -> Vec<String> {
        inlet_groups(spec, &Clusters::new()).into_iter().map(|(g, _)| g.to_string()).collect()
    }

    #[test]
    fn the_same_pipeline_in_two_namespaces_on_one_cluster_shares_its_groups() {
        let clusters: Clusters = [cluster("shop", "kafka:9092", false)].into();
        let shop = cart_on(Some("shop"), None);
        let tenant = cart_on(Some("shop"), None);
        let all = [
            Pipeline { namespace: "shop", name: "cart", spec: &shop },
            Pipeline { namespace: "tenant", name: "cart", spec: &tenant },
        ];
        let shared = shared_groups(all[1], &all, &clusters);
        let mut want: Vec<String> = groups_of(&tenant);
        want.sort();
        assert!(!want.is_empty());
        assert_eq!(shared.iter().map(|s| s.group.to_string()).collect::<Vec<_>>(), want);
        let router = shared.iter().find(|s| s.group.as_str() == "cart.router.in").unwrap();
        assert_eq!(router.others, [FlowRef { namespace: "shop".into(), name: "cart".into() }]);
        assert_eq!(router.secrets, ["kafka-cluster-shop"]);
        assert!(!router.allowed);
        // And the other way round.
        assert_eq!(shared_groups(all[0], &all, &clusters).len(), want.len());

        let why = reset_refusal("u1", &[GroupId::from_raw("cart.router.in")], &shared).unwrap();
        assert_eq!(
            why,
            "reset u1 refused: consumer group cart.router.in is also the consumer group of AnkkaFlow shop/cart on the \
             same Kafka cluster, and a reset would move its offsets too; give one of the pipelines another name, or \
             have an administrator annotate Secret 'kafka-cluster-shop' with \
             flow.ankka.thinkmorestupidless.com/allow-shared-consumer-groups: \"true\""
        );
        assert_eq!(reset_refusal("u1", &[GroupId::from_raw("cart.other.in")], &shared), None);
    }

    #[test]
    fn other_clusters_other_pipelines_and_the_resource_itself_share_nothing() {
        let clusters: Clusters = [cluster("shop", "kafka:9092", false), cluster("eu", "kafka-eu:9092", false)].into();
        let shop = cart_on(Some("shop"), None);
        let eu = cart_on(Some("eu"), None);
        let mut renamed = cart_on(Some("shop"), None);
        renamed.pipeline = "cart-tenant".into();
        let all = [
            Pipeline { namespace: "shop", name: "cart", spec: &shop },
            Pipeline { namespace: "tenant", name: "cart", spec: &eu },
            Pipeline { namespace: "tenant", name: "cart-2", spec: &renamed },
        ];
        assert_eq!(shared_groups(all[0], &all, &clusters), Vec::new());
    }

    #[test]
    fn a_topic_with_its_own_brokers_shares_with_the_cluster_it_points_at() {
        let clusters: Clusters = [cluster("shop", "kafka-0:9092, Kafka-1:9092", true)].into();
        let shop = cart_on(Some("shop"), None);
        let tenant = cart_on(None, Some("SASL_SSL://kafka-1:9092"));
        let elsewhere = cart_on(None, Some("other:9092"));
        let all = [
            Pipeline { namespace: "shop", name: "cart", spec: &shop },
            Pipeline { namespace: "tenant", name: "cart", spec: &tenant },
            Pipeline { namespace: "elsewhere", name: "cart", spec: &elsewhere },
        ];
        let shared = shared_groups(all[1], &all, &clusters);
        let router = shared.iter().find(|s| s.group.as_str() == "cart.router.in").unwrap();
        assert_eq!(router.others, [FlowRef { namespace: "shop".into(), name: "cart".into() }]);
        // The cluster involved allows shared groups: the reset is not refused.
        assert!(router.allowed);
        assert_eq!(reset_refusal("u1", std::slice::from_ref(&router.group), &shared), None);
        // Two resources with their own brokers and no Secret: nobody can allow it.
        let all = [
            Pipeline { namespace: "a", name: "cart", spec: &elsewhere },
            Pipeline { namespace: "b", name: "cart", spec: &elsewhere },
        ];
        let shared = shared_groups(all[0], &all, &clusters);
        assert!(shared.iter().all(|s| !s.allowed && s.secrets.is_empty()));
        let why = reset_refusal("u2", &[GroupId::from_raw("cart.router.in")], &shared).unwrap();
        assert!(why.ends_with("give one of the pipelines another name"), "{why}");
    }

    #[test]
    fn allowing_needs_every_secret_involved() {
        let clusters: Clusters = [cluster("shop", "k:1", true), cluster("alias", "k:1", false)].into();
        let a = cart_on(Some("shop"), None);
        let b = cart_on(Some("alias"), None);
        let all =
            [Pipeline { namespace: "a", name: "cart", spec: &a }, Pipeline { namespace: "b", name: "cart", spec: &b }];
        let shared = shared_groups(all[0], &all, &clusters);
        assert!(!shared.is_empty());
        assert!(shared.iter().all(|s| !s.allowed && s.secrets == ["kafka-cluster-alias", "kafka-cluster-shop"]));
    }

    #[test]
    fn a_refusal_names_five_others_and_counts_the_rest() {
        let spec = cart_on(Some("shop"), None);
        let clusters: Clusters = [cluster("shop", "k:1", false)].into();
        let names: Vec<String> = (0..8).map(|i| format!("team-{i}")).collect();
        let mut all: Vec<Pipeline<'_>> =
            names.iter().map(|n| Pipeline { namespace: n, name: "cart", spec: &spec }).collect();
        all.push(Pipeline { namespace: "shop", name: "cart", spec: &spec });
        let shared = shared_groups(all[8], &all, &clusters);
        let why = reset_refusal("u1", &[GroupId::from_raw("cart.router.in")], &shared).unwrap();
        assert!(
            why.contains(
                "of AnkkaFlow team-0/cart, AnkkaFlow team-1/cart, AnkkaFlow team-2/cart, AnkkaFlow team-3/cart, \
                 AnkkaFlow team-4/cart, 3 more on the same Kafka cluster"
            ),
            "{why}"
        );
    }

    #[test]
    fn the_warning_names_the_group_and_the_other_resource() {
        let other = FlowRef { namespace: "shop".into(), name: "cart".into() };
        let e = shared_group_event(&GroupId::from_raw("cart.router.in"), &other, false);
        assert_eq!(e.reason, "ConsumerGroupShared");
        assert_eq!(e.type_, EventType::Warning);
        assert_eq!(
            e.note,
            "consumer group cart.router.in is also the consumer group of AnkkaFlow shop/cart on the same Kafka cluster: \
             the streamlets of both share it, and a reset of it is refused while both exist"
        );
        assert_ne!(e.key, shared_group_event(&GroupId::from_raw("cart.router.in"), &other, true).key);
    }
}
