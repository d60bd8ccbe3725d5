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
//! ([`reset_verdict`]), unless every cluster Secret involved allows it
//! ([`ANNOTATION_ALLOW_SHARED_GROUPS`](crate::connection::ANNOTATION_ALLOW_SHARED_GROUPS)).
//!
//! Two inlets are on the same cluster when they use the same cluster Secret, when their broker
//! lists have an address in common, or when Kafka gives the same cluster id over both connections
//! (every broker of a cluster reports the cluster's id in its metadata, KIP-78): so any spelling of
//! the same brokers (`localhost` for `127.0.0.1`, another listener, another DNS name) is the same
//! cluster. The ids are an input ([`ClusterId`]): the operator asks Kafka for those that
//! [`undecided`] names, and nothing here trusts a name the operator did not resolve itself. An id
//! that could not be learned (the cluster did not answer) decides nothing: the other resource may be
//! on the same cluster, so a reset of the group waits until it can be told ([`Verdict::Waits`]),
//! and is never taken as going to another cluster. A resource refused as a whole has no connection
//! of the operator's: only its Secret and its broker addresses count for it. `docs/tenancy.md`
//! says what an administrator decides.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::connection::{self, Clusters, DEFAULT_CLUSTER, KafkaConnection, TokenEndpoints};
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

/// A Kafka cluster's id as the operator learned it over one connection, or why it could not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterId {
    /// The id the cluster's metadata gave.
    Known(String),
    /// Why none was learned (the cluster did not answer in time, refused the client's TLS or
    /// credentials); never holds a credential.
    Unknown(String),
}

/// What the check knows of the cluster ids: the id learned over a connection, `None` when it was
/// not asked.
pub type ClusterIds<'a> = &'a dyn Fn(&KafkaConnection) -> Option<ClusterId>;

/// One of a resource's consumer groups that other resources map to, on the same cluster or on one
/// that could not be told apart from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedGroup {
    /// The group.
    pub group: GroupId,
    /// The other resources on the same cluster, sorted.
    pub others: Vec<FlowRef>,
    /// The other resources whose cluster could not be told apart from this one's (an id could not
    /// be learned), sorted, each with why.
    pub undecided: Vec<(FlowRef, String)>,
    /// The cluster Secrets involved (the resource's and the others', undecided ones included),
    /// sorted.
    pub secrets: Vec<String>,
    /// Whether every cluster Secret involved allows shared groups (and at least one is involved).
    pub allowed: bool,
}

/// Where an inlet's group lives: the cluster Secret its topic uses, if any, the broker addresses it
/// reaches, and the operator's connection to it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Place {
    cluster: Option<String>,
    brokers: BTreeSet<String>,
    /// `None` when the topic does not resolve (its resource is refused): the operator has no
    /// connection of its to ask.
    connection: Option<KafkaConnection>,
}

/// Whether two places are the same cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Same {
    Yes,
    No,
    /// Perhaps: an id could not be learned; why.
    Unknown(String),
}

impl Place {
    fn of(topic: &TopicSpec, namespace: &str, clusters: &Clusters, endpoints: &TokenEndpoints) -> Place {
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
        let connection =
            connection::resolve_topic(topic, namespace, clusters, endpoints).ok().map(|t| t.kafka_connection().clone());
        Place { cluster, brokers, connection }
    }

    /// Whether the cluster Secret or the broker addresses alone say it is the same cluster.
    fn same_by_name(&self, other: &Place) -> bool {
        (self.cluster.is_some() && self.cluster == other.cluster) || !self.brokers.is_disjoint(&other.brokers)
    }

    /// The connections whose ids decide whether `self` and `other` are the same cluster: none when
    /// the names decide already, or when either has no connection.
    fn to_learn<'p>(&'p self, other: &'p Place) -> Vec<&'p KafkaConnection> {
        match (&self.connection, &other.connection) {
            (Some(a), Some(b)) if !self.same_by_name(other) => vec![a, b],
            _ => vec![],
        }
    }

    /// Whether `self` (the resource's own place) and `other` are the same cluster, with the ids
    /// known in `ids`.
    fn same_cluster(&self, other: &Place, ids: ClusterIds<'_>) -> Same {
        if self.same_by_name(other) {
            return Same::Yes;
        }
        let (Some(mine), Some(theirs)) = (&self.connection, &other.connection) else { return Same::No };
        // The reason of the resource's own cluster is its to read; of another's, only that it did not
        // answer (the other's brokers and errors are not this resource's to learn).
        match (ids(mine), ids(theirs)) {
            (Some(ClusterId::Known(a)), Some(ClusterId::Known(b))) => {
                if a == b {
                    Same::Yes
                } else {
                    Same::No
                }
            }
            (Some(ClusterId::Unknown(why)), _) => {
                Same::Unknown(format!("this pipeline's Kafka cluster did not give its id: {why}"))
            }
            (None, _) => Same::Unknown("this pipeline's Kafka cluster id is not known yet".into()),
            (_, Some(ClusterId::Unknown(_)) | None) => {
                Same::Unknown("the other pipeline's Kafka cluster did not give its id".into())
            }
        }
    }
}

/// The addresses of a broker list, lower-cased, without a `SCHEME://` prefix.
fn addresses(list: &str) -> impl Iterator<Item = String> + '_ {
    list.split(',').map(str::trim).filter(|a| !a.is_empty()).map(|a| {
        let a = a.rsplit("://").next().unwrap_or(a);
        a.to_ascii_lowercase()
    })
}

/// Each inlet's group of `p` with the place of its topic. An inlet bound to an undeclared topic
/// has no place and is left out.
fn inlet_groups(p: &Pipeline<'_>, clusters: &Clusters, endpoints: &TokenEndpoints) -> Vec<(GroupId, Place)> {
    let spec = p.spec;
    spec.streamlets
        .iter()
        .flat_map(|s| s.inlets.iter().map(move |(inlet, topic)| (s, inlet, topic)))
        .filter_map(|(s, inlet, topic)| {
            let t = spec.topic(topic)?;
            Some((GroupId::new(&spec.pipeline, &s.name, inlet), Place::of(t, p.namespace, clusters, endpoints)))
        })
        .collect()
}

/// Each group of `me` (of `groups`, when given) that another resource of `all` maps to, with its
/// place and, per other resource, the other's place. `all` may include `me` (by namespace and
/// name), which is skipped.
fn candidates<'a>(
    me: Pipeline<'_>,
    all: &[Pipeline<'a>],
    clusters: &Clusters,
    endpoints: &TokenEndpoints,
    groups: Option<&[GroupId]>,
) -> Vec<(GroupId, Place, FlowRef, Place)> {
    // Cheap first: only a resource of the same pipeline id maps to any of these groups.
    let others: Vec<&Pipeline<'a>> = all
        .iter()
        .filter(|o| !(o.namespace == me.namespace && o.name == me.name) && o.spec.pipeline == me.spec.pipeline)
        .collect();
    if others.is_empty() {
        return Vec::new();
    }
    let mine: Vec<(GroupId, Place)> = inlet_groups(&me, clusters, endpoints)
        .into_iter()
        .filter(|(g, _)| groups.is_none_or(|gs| gs.contains(g)))
        .collect();
    let mut out = Vec::new();
    for other in others {
        let at = FlowRef { namespace: other.namespace.into(), name: other.name.into() };
        for (group, place) in inlet_groups(other, clusters, endpoints) {
            for (my_group, my_place) in mine.iter().filter(|(g, _)| *g == group) {
                out.push((my_group.clone(), my_place.clone(), at.clone(), place.clone()));
            }
        }
    }
    out
}

/// The connections whose cluster ids [`shared_groups`] needs to tell whether another resource of
/// `all` maps to a group of `me` (one of `groups`, when given) on the same cluster: those of the
/// pairs that neither a cluster Secret nor a broker address decides. Empty in the common case (no
/// other resource of the same pipeline id), so the operator asks Kafka nothing then.
pub fn undecided(
    me: Pipeline<'_>,
    all: &[Pipeline<'_>],
    clusters: &Clusters,
    endpoints: &TokenEndpoints,
    groups: Option<&[GroupId]>,
) -> Vec<KafkaConnection> {
    let mut out: Vec<KafkaConnection> = Vec::new();
    for (_, mine, _, theirs) in candidates(me, all, clusters, endpoints, groups) {
        for c in mine.to_learn(&theirs) {
            if !out.contains(c) {
                out.push(c.clone());
            }
        }
    }
    out
}

/// The groups of `me` that another resource of `all` maps to on the same cluster, or on a cluster
/// that `ids` cannot tell apart from it, sorted by group. `all` may include `me` (by namespace and
/// name), which is skipped.
pub fn shared_groups(
    me: Pipeline<'_>,
    all: &[Pipeline<'_>],
    clusters: &Clusters,
    endpoints: &TokenEndpoints,
    ids: ClusterIds<'_>,
) -> Vec<SharedGroup> {
    type Found = (BTreeSet<FlowRef>, BTreeMap<FlowRef, String>, BTreeSet<String>);
    let mut found: BTreeMap<GroupId, Found> = BTreeMap::new();
    for (group, mine, other, theirs) in candidates(me, all, clusters, endpoints, None) {
        let same = mine.same_cluster(&theirs, ids);
        if same == Same::No {
            continue;
        }
        let entry = found.entry(group).or_default();
        entry.2.extend(mine.cluster.iter().chain(theirs.cluster.iter()).cloned());
        match same {
            Same::Unknown(why) => {
                entry.1.insert(other, why);
            }
            _ => {
                entry.0.insert(other);
            }
        }
    }
    found
        .into_iter()
        .map(|(group, (others, undecided, secrets))| {
            let allowed =
                !secrets.is_empty() && secrets.iter().all(|s| clusters.get(s).is_some_and(|c| c.allow_shared_groups));
            // A resource found on the same cluster over one of its inlets is not undecided over another.
            let undecided = undecided.into_iter().filter(|(o, _)| !others.contains(o)).collect();
            SharedGroup {
                group,
                others: others.into_iter().collect(),
                undecided,
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

/// What the shared-group rule says of a reset request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Refused: another resource maps to one of its groups on the same cluster. Why.
    Refused(String),
    /// It cannot go yet: another resource maps to one of its groups on a cluster that could not be
    /// told apart from its own (an id could not be learned). Why; looked at again later.
    Waits(String),
}

/// What the shared-group rule says of reset request `id`, which targets `groups`: refused when
/// another resource maps to one of them on the same cluster, waiting when one may (a cluster id
/// could not be learned), unless every cluster Secret involved allows shared groups. `None` when
/// nothing holds it back. A request that waits is looked at again every `recheck`
/// (`crate::reset::WAIT_RECHECK`), which its reason says.
pub fn reset_verdict(id: &str, groups: &[GroupId], shared: &[SharedGroup], recheck: Duration) -> Option<Verdict> {
    let blocking: Vec<&SharedGroup> = shared.iter().filter(|s| !s.allowed && groups.contains(&s.group)).collect();
    let listed = |names: Vec<String>| {
        let n = names.len();
        let mut shown: Vec<String> = names.into_iter().take(LISTED).collect();
        if n > LISTED {
            shown.push(format!("{} more", n - LISTED));
        }
        shown.join(", ")
    };
    let refused: Vec<String> = blocking
        .iter()
        .filter(|s| !s.others.is_empty())
        .map(|s| {
            let others = listed(s.others.iter().map(|o| format!("AnkkaFlow {o}")).collect());
            format!("consumer group {} is also the consumer group of {others}", s.group)
        })
        .collect();
    if !refused.is_empty() {
        let secrets: BTreeSet<&str> = blocking
            .iter()
            .filter(|s| !s.others.is_empty())
            .flat_map(|s| s.secrets.iter().map(String::as_str))
            .collect();
        return Some(Verdict::Refused(format!(
            "reset {id} refused: {} on the same Kafka cluster, and a reset would move its offsets too; give one of the \
             pipelines another name{}",
            refused.join("; "),
            allow_hint(&secrets)
        )));
    }
    let waiting: Vec<String> = blocking
        .iter()
        .filter(|s| !s.undecided.is_empty())
        .map(|s| {
            let others = listed(s.undecided.iter().map(|(o, why)| format!("AnkkaFlow {o} ({why})")).collect());
            format!("consumer group {} is also the consumer group of {others}", s.group)
        })
        .collect();
    if waiting.is_empty() {
        return None;
    }
    let secrets: BTreeSet<&str> = blocking
        .iter()
        .filter(|s| !s.undecided.is_empty())
        .flat_map(|s| s.secrets.iter().map(String::as_str))
        .collect();
    Some(Verdict::Waits(format!(
        "reset {id} waits: {}, on a Kafka cluster that cannot be told apart from this one's yet, and a reset would move \
         its offsets too if it is the same; looked at again every {} s; give one of the pipelines another name{}",
        waiting.join("; "),
        recheck.as_secs(),
        allow_hint(&secrets)
    )))
}

/// How an administrator allows a group on the clusters of `secrets`: empty when no Secret is
/// involved (two resources with their own brokers), which nobody can allow.
fn allow_hint(secrets: &BTreeSet<&str>) -> String {
    if secrets.is_empty() {
        return String::new();
    }
    format!(
        ", or have an administrator annotate Secret {} with {}: \"true\"",
        secrets.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", "),
        crate::connection::ANNOTATION_ALLOW_SHARED_GROUPS
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::{ANNOTATION_ALLOW_SHARED_GROUPS, ANNOTATION_ALLOWED_NAMESPACES, Cluster};
    use crate::targets::tests::cart;

    /// The operator's recheck of a waiting request.
    const RECHECK: Duration = crate::reset::WAIT_RECHECK;

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
        let p = Pipeline { namespace: "ns", name: "n", spec };
        inlet_groups(&p, &Clusters::new(), &TokenEndpoints::default()).into_iter().map(|(g, _)| g.to_string()).collect()
    }

    /// No cluster id was asked.
    fn none(_: &KafkaConnection) -> Option<ClusterId> {
        None
    }

    /// The ids of the clusters in these tests, by the broker list the operator connects to: both
    /// spellings of one broker are cluster `A`, `other:9092` is cluster `B`, `down:9092` did not
    /// answer.
    fn ids(c: &KafkaConnection) -> Option<ClusterId> {
        match c.bootstrap_servers.as_str() {
            "127.0.0.1:9092" | "localhost:9092" | "PLAINTEXT://localhost:9092" | "kafka.shop.svc:9092" => {
                Some(ClusterId::Known("A".into()))
            }
            "other:9092" => Some(ClusterId::Known("B".into())),
            "down:9092" => Some(ClusterId::Unknown("no answer within 10 s".into())),
            _ => None,
        }
    }

    fn refused(id: &str, groups: &[GroupId], shared: &[SharedGroup]) -> Option<String> {
        match reset_verdict(id, groups, shared, RECHECK) {
            Some(Verdict::Refused(why)) => Some(why),
            Some(Verdict::Waits(why)) => panic!("waits, not refused: {why}"),
            None => None,
        }
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
        // The Secret decides: no id is needed.
        assert_eq!(undecided(all[1], &all, &clusters, &TokenEndpoints::default(), None), Vec::<KafkaConnection>::new());
        let shared = shared_groups(all[1], &all, &clusters, &TokenEndpoints::default(), &none);
        let mut want: Vec<String> = groups_of(&tenant);
        want.sort();
        assert!(!want.is_empty());
        assert_eq!(shared.iter().map(|s| s.group.to_string()).collect::<Vec<_>>(), want);
        let router = shared.iter().find(|s| s.group.as_str() == "cart.router.in").unwrap();
        assert_eq!(router.others, [FlowRef { namespace: "shop".into(), name: "cart".into() }]);
        assert_eq!(router.secrets, ["kafka-cluster-shop"]);
        assert!(!router.allowed);
        // And the other way round.
        assert_eq!(shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &none).len(), want.len());

        let why = refused("u1", &[GroupId::from_raw("cart.router.in")], &shared).unwrap();
        assert_eq!(
            why,
            "reset u1 refused: consumer group cart.router.in is also the consumer group of AnkkaFlow shop/cart on the \
             same Kafka cluster, and a reset would move its offsets too; give one of the pipelines another name, or \
             have an administrator annotate Secret 'kafka-cluster-shop' with \
             flow.ankka.thinkmorestupidless.com/allow-shared-consumer-groups: \"true\""
        );
        assert_eq!(reset_verdict("u1", &[GroupId::from_raw("cart.other.in")], &shared, RECHECK), None);
    }

    #[test]
    fn other_clusters_other_pipelines_and_the_resource_itself_share_nothing() {
        let clusters: Clusters = [cluster("shop", "127.0.0.1:9092", false), cluster("eu", "other:9092", false)].into();
        let shop = cart_on(Some("shop"), None);
        let eu = cart_on(Some("eu"), None);
        let mut renamed = cart_on(Some("shop"), None);
        renamed.pipeline = "cart-tenant".into();
        let all = [
            Pipeline { namespace: "shop", name: "cart", spec: &shop },
            Pipeline { namespace: "tenant", name: "cart", spec: &eu },
            Pipeline { namespace: "tenant", name: "cart-2", spec: &renamed },
        ];
        // Two Secrets, other brokers: Kafka's ids decide, and they differ.
        assert_eq!(undecided(all[0], &all, &clusters, &TokenEndpoints::default(), None).len(), 2);
        assert_eq!(shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &ids), Vec::new());
        // Without the other's resource, nothing is asked at all.
        assert_eq!(
            undecided(all[0], &all[..1], &clusters, &TokenEndpoints::default(), None),
            Vec::<KafkaConnection>::new()
        );
    }

    #[test]
    fn any_spelling_of_the_same_brokers_is_the_same_cluster() {
        // The escape: shop's Secret names 127.0.0.1, the tenant's own brokers localhost.
        let clusters: Clusters = [cluster("shop", "127.0.0.1:9092", false)].into();
        let shop = cart_on(Some("shop"), None);
        for spelling in ["localhost:9092", "PLAINTEXT://localhost:9092", "kafka.shop.svc:9092"] {
            let tenant = cart_on(None, Some(spelling));
            let all = [
                Pipeline { namespace: "shop", name: "cart", spec: &shop },
                Pipeline { namespace: "tenant", name: "cart", spec: &tenant },
            ];
            let asked: Vec<String> = undecided(all[1], &all, &clusters, &TokenEndpoints::default(), None)
                .into_iter()
                .map(|c| c.bootstrap_servers)
                .collect();
            assert_eq!(asked.len(), 2, "{spelling}: {asked:?}");
            assert!(asked.contains(&"127.0.0.1:9092".to_string()), "{asked:?}");
            let shared = shared_groups(all[1], &all, &clusters, &TokenEndpoints::default(), &ids);
            let router = shared.iter().find(|s| s.group.as_str() == "cart.router.in").expect(spelling);
            assert_eq!(router.others, [FlowRef { namespace: "shop".into(), name: "cart".into() }]);
            let why = refused("u1", &[GroupId::from_raw("cart.router.in")], &shared).unwrap();
            assert!(why.starts_with("reset u1 refused: consumer group cart.router.in is also"), "{why}");
            // Both sides are told.
            assert_eq!(shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &ids).len(), shared.len());
        }
    }

    #[test]
    fn an_id_that_cannot_be_learned_holds_the_reset_back_and_never_lets_it_through() {
        let clusters: Clusters = [cluster("shop", "127.0.0.1:9092", false)].into();
        let shop = cart_on(Some("shop"), None);
        let tenant = cart_on(None, Some("down:9092"));
        let all = [
            Pipeline { namespace: "shop", name: "cart", spec: &shop },
            Pipeline { namespace: "tenant", name: "cart", spec: &tenant },
        ];
        let router = GroupId::from_raw("cart.router.in");
        let cases = [
            (
                shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &ids),
                "the other pipeline's Kafka cluster did not give its id",
            ),
            (
                shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &none),
                "this pipeline's Kafka cluster id is not known yet",
            ),
        ];
        for (shared, reason) in cases {
            let s = shared.iter().find(|s| s.group == router).unwrap();
            assert_eq!(s.others, Vec::<FlowRef>::new());
            assert_eq!(
                s.undecided,
                [(FlowRef { namespace: "tenant".into(), name: "cart".into() }, reason.to_string())]
            );
            match reset_verdict("u1", std::slice::from_ref(&router), &shared, RECHECK) {
                Some(Verdict::Waits(why)) => assert_eq!(
                    why,
                    format!(
                        "reset u1 waits: consumer group cart.router.in is also the consumer group of AnkkaFlow \
                         tenant/cart ({reason}), on a Kafka cluster that cannot be told apart from this one's yet, and \
                         a reset would move its offsets too if it is the same; looked at again every 5 s; give one of \
                         the pipelines another name, or have an administrator annotate Secret 'kafka-cluster-shop' \
                         with flow.ankka.thinkmorestupidless.com/allow-shared-consumer-groups: \"true\""
                    )
                ),
                other => panic!("{other:?}"),
            }
        }
        // Seen from the tenant: its own cluster did not answer, and it is told why.
        let shared = shared_groups(all[1], &all, &clusters, &TokenEndpoints::default(), &ids);
        let s = shared.iter().find(|s| s.group == router).unwrap();
        assert_eq!(s.undecided[0].1, "this pipeline's Kafka cluster did not give its id: no answer within 10 s");
        // Once the id is known, the answer is certain either way.
        let learned = |c: &KafkaConnection| match c.bootstrap_servers.as_str() {
            "down:9092" => Some(ClusterId::Known("B".into())),
            _ => ids(c),
        };
        assert_eq!(shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &learned), Vec::new());
        // An administrator who allows shared groups on shop's cluster lets it go without the id.
        let clusters: Clusters = [cluster("shop", "127.0.0.1:9092", true)].into();
        let shared = shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &ids);
        assert!(shared.iter().all(|s| s.allowed && s.secrets == ["kafka-cluster-shop"]));
        assert_eq!(reset_verdict("u1", std::slice::from_ref(&router), &shared, RECHECK), None);
    }

    #[test]
    fn a_refused_resource_counts_by_its_secret_and_its_addresses_only() {
        // The tenant is not allowed on shop's cluster: its topic does not resolve, so the operator
        // has no connection of its to ask. The same Secret still names the same cluster.
        let mut clusters: Clusters = [cluster("shop", "127.0.0.1:9092", false)].into();
        if let Some(c) = clusters.get_mut("shop") {
            c.allowed_namespaces = Some(crate::connection::AllowedNamespaces::Listed(["shop".to_string()].into()));
        }
        let shop = cart_on(Some("shop"), None);
        let tenant = cart_on(Some("shop"), None);
        let all = [
            Pipeline { namespace: "shop", name: "cart", spec: &shop },
            Pipeline { namespace: "tenant", name: "cart", spec: &tenant },
        ];
        assert_eq!(undecided(all[0], &all, &clusters, &TokenEndpoints::default(), None), Vec::<KafkaConnection>::new());
        let shared = shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &none);
        assert!(shared.iter().all(|s| s.others.len() == 1 && s.undecided.is_empty()));
        // A refused resource with other brokers and a refused setting: nothing to ask, not shared.
        let mut evil = cart_on(None, Some("localhost:9092"));
        for t in &mut evil.topics {
            t.connection_config.insert("plugin.library.paths".into(), "/tmp/x.so".into());
        }
        let all = [
            Pipeline { namespace: "shop", name: "cart", spec: &shop },
            Pipeline { namespace: "tenant", name: "cart", spec: &evil },
        ];
        assert_eq!(undecided(all[0], &all, &clusters, &TokenEndpoints::default(), None), Vec::<KafkaConnection>::new());
        assert_eq!(shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &ids), Vec::new());
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
        let shared = shared_groups(all[1], &all, &clusters, &TokenEndpoints::default(), &ids);
        let router = shared.iter().find(|s| s.group.as_str() == "cart.router.in").unwrap();
        assert_eq!(router.others, [FlowRef { namespace: "shop".into(), name: "cart".into() }]);
        // The cluster involved allows shared groups: the reset is not refused.
        assert!(router.allowed);
        assert_eq!(reset_verdict("u1", std::slice::from_ref(&router.group), &shared, RECHECK), None);
        // Two resources with their own brokers and no Secret: nobody can allow it.
        let all = [
            Pipeline { namespace: "a", name: "cart", spec: &elsewhere },
            Pipeline { namespace: "b", name: "cart", spec: &elsewhere },
        ];
        let shared = shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &none);
        assert!(shared.iter().all(|s| !s.allowed && s.secrets.is_empty()));
        let why = refused("u2", &[GroupId::from_raw("cart.router.in")], &shared).unwrap();
        assert!(why.ends_with("give one of the pipelines another name"), "{why}");
    }

    #[test]
    fn allowing_needs_every_secret_involved() {
        let clusters: Clusters = [cluster("shop", "k:1", true), cluster("alias", "k:1", false)].into();
        let a = cart_on(Some("shop"), None);
        let b = cart_on(Some("alias"), None);
        let all =
            [Pipeline { namespace: "a", name: "cart", spec: &a }, Pipeline { namespace: "b", name: "cart", spec: &b }];
        let shared = shared_groups(all[0], &all, &clusters, &TokenEndpoints::default(), &none);
        assert!(!shared.is_empty());
        assert!(shared.iter().all(|s| !s.allowed && s.secrets == ["kafka-cluster-alias", "kafka-cluster-shop"]));
    }

    #[test]
    fn only_the_groups_asked_about_need_ids() {
        let clusters: Clusters = [cluster("shop", "127.0.0.1:9092", false)].into();
        let shop = cart_on(Some("shop"), None);
        let mut tenant = cart_on(None, Some("localhost:9092"));
        // The tenant reads only `cart-events` (the router's inlet), not `valid-carts` (the sink's).
        tenant.streamlets.retain(|s| s.name != "sink");
        let all = [
            Pipeline { namespace: "shop", name: "cart", spec: &shop },
            Pipeline { namespace: "tenant", name: "cart", spec: &tenant },
        ];
        assert_eq!(
            undecided(all[0], &all, &clusters, &TokenEndpoints::default(), Some(&[GroupId::from_raw("cart.sink.in")])),
            Vec::new()
        );
        assert_eq!(
            undecided(
                all[0],
                &all,
                &clusters,
                &TokenEndpoints::default(),
                Some(&[GroupId::from_raw("cart.router.in")])
            )
            .len(),
            2
        );
    }

    #[test]
    fn a_refusal_names_five_others_and_counts_the_rest() {
        let spec = cart_on(Some("shop"), None);
        let clusters: Clusters = [cluster("shop", "k:1", false)].into();
        let names: Vec<String> = (0..8).map(|i| format!("team-{i}")).collect();
        let mut all: Vec<Pipeline<'_>> =
            names.iter().map(|n| Pipeline { namespace: n, name: "cart", spec: &spec }).collect();
        all.push(Pipeline { namespace: "shop", name: "cart", spec: &spec });
        let shared = shared_groups(all[8], &all, &clusters, &TokenEndpoints::default(), &none);
        let why = refused("u1", &[GroupId::from_raw("cart.router.in")], &shared).unwrap();
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
