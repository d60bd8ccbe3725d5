//! Which streamlets and consumer groups a reset request targets, and whether they are stopped.
//!
//! The same rules run in the CLI (before writing a request) and in the operator (before acting on
//! one), because the CLI's view may be stale. Only the wording differs: the CLI writes streamlet names
//! in brackets, the operator without (docs/cli.md, "flow reset"; docs/reset.md, "Refusals").

use std::collections::BTreeMap;

use crate::names::GroupId;
use crate::resource::AnkkaFlowSpec;

/// One streamlet to reset, with the consumer group of each of its inlets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Streamlet name.
    pub streamlet: String,
    /// The streamlet's inlets, sorted by inlet name.
    pub inlets: Vec<InletTarget>,
}

/// One inlet of a target: its consumer group and the topic it reads.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct InletTarget {
    /// `<pipeline>.<streamlet>.<inlet>`.
    pub group: GroupId,
    /// Streamlet name.
    pub streamlet: String,
    /// Inlet name.
    pub inlet: String,
    /// Topic id inside the pipeline.
    pub topic_id: String,
    /// Kafka topic name; the topic id itself when the resource does not declare that topic (the
    /// connection lookup then fails and reports it).
    pub topic: String,
}

/// A streamlet named in a request that cannot be reset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamedProblem {
    /// No streamlet of that name in the resource.
    Unknown(String),
    /// The streamlet exists but has no inlets, so no consumer groups.
    NoInlets(String),
}

/// Why no targets could be selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectionError {
    /// No streamlet was named and none has an inlet.
    NothingToReset {
        /// `spec.pipeline`.
        pipeline: String,
    },
    /// Some named streamlets are unknown or have no inlets; every one is listed.
    Named(Vec<NamedProblem>),
}

/// Why a target is not stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunningProblem {
    /// The resource's replicas for it are not 0.
    NotScaledToZero(String),
    /// Pods that can still run exist (Pending, Running or Unknown, Terminating included).
    HasPods(String, u32),
}

/// Selects the targets of a request naming `names` (empty = every streamlet with an inlet).
///
/// Targets come sorted by streamlet name, inlets by inlet name. Duplicate names count once.
///
/// # Errors
/// [`SelectionError::NothingToReset`] when nothing is named and no streamlet has an inlet;
/// [`SelectionError::Named`] listing every named streamlet that does not exist or has no inlet.
pub fn select(spec: &AnkkaFlowSpec, names: &[String]) -> Result<Vec<Target>, SelectionError> {
    let mut chosen: Vec<&str> = if names.is_empty() {
        spec.streamlets.iter().filter(|s| !s.inlets.is_empty()).map(|s| s.name.as_str()).collect()
    } else {
        let mut problems = Vec::new();
        for name in names {
            match spec.streamlet(name) {
                None => problems.push(NamedProblem::Unknown(name.clone())),
                Some(s) if s.inlets.is_empty() => problems.push(NamedProblem::NoInlets(name.clone())),
                Some(_) => {}
            }
        }
        problems.dedup();
        if !problems.is_empty() {
            return Err(SelectionError::Named(problems));
        }
        names.iter().map(String::as_str).collect()
    };
    chosen.sort_unstable();
    chosen.dedup();
    if chosen.is_empty() {
        return Err(SelectionError::NothingToReset { pipeline: spec.pipeline.clone() });
    }
    Ok(chosen
        .into_iter()
        .filter_map(|name| spec.streamlet(name))
        .map(|s| Target {
            streamlet: s.name.clone(),
            inlets: s
                .inlets
                .iter()
                .map(|(inlet, topic_id)| InletTarget {
                    group: GroupId::new(&spec.pipeline, &s.name, inlet),
                    streamlet: s.name.clone(),
                    inlet: inlet.clone(),
                    topic_id: topic_id.clone(),
                    topic: spec.topic(topic_id).map_or_else(|| topic_id.clone(), |t| t.name.clone()),
                })
                .collect(),
        })
        .collect())
}

/// The targets that are not stopped: replicas in the resource other than 0, or pods that can still
/// run. `pods` counts such pods per streamlet label value.
pub fn running(spec: &AnkkaFlowSpec, targets: &[Target], pods: &BTreeMap<String, u32>) -> Vec<RunningProblem> {
    let mut problems = Vec::new();
    for t in targets {
        if spec.streamlet(&t.streamlet).is_some_and(|s| s.replicas != 0) {
            problems.push(RunningProblem::NotScaledToZero(t.streamlet.clone()));
        }
        if let Some(&n) = pods.get(&t.streamlet).filter(|n| **n > 0) {
            problems.push(RunningProblem::HasPods(t.streamlet.clone(), n));
        }
    }
    problems
}

/// Whether a pod still counts as a running consumer, from its phase and deletion mark.
///
/// Rule (cases F1, F3): a pod that can still run counts, Terminating ones included, since a consumer
/// may commit while it shuts down. Pods in phase `Succeeded` or `Failed` have no running containers and
/// do not count, so a leftover of an old ReplicaSet never blocks a reset forever.
pub fn pod_counts(phase: Option<&str>) -> bool {
    !matches!(phase, Some("Succeeded") | Some("Failed"))
}

impl RunningProblem {
    /// The streamlet concerned.
    pub fn streamlet(&self) -> &str {
        match self {
            RunningProblem::NotScaledToZero(s) | RunningProblem::HasPods(s, _) => s,
        }
    }

    /// The operator's wording: `router is not scaled to 0`, `router still has 2 pod(s)`.
    pub fn operator_text(&self) -> String {
        match self {
            RunningProblem::NotScaledToZero(s) => format!("{s} is not scaled to 0"),
            RunningProblem::HasPods(s, n) => format!("{s} still has {n} pod(s)"),
        }
    }

    /// The CLI's wording: `[router] is not scaled to 0`, `[router] still has 2 pod(s)`.
    pub fn cli_text(&self) -> String {
        match self {
            RunningProblem::NotScaledToZero(s) => format!("[{s}] is not scaled to 0"),
            RunningProblem::HasPods(s, n) => format!("[{s}] still has {n} pod(s)"),
        }
    }
}

/// The CLI's refusal for streamlets that are still running (exact, docs/cli.md, "flow reset").
pub fn cli_running_message(problems: &[RunningProblem]) -> String {
    let texts: Vec<String> = problems.iter().map(RunningProblem::cli_text).collect();
    let mut names: Vec<&str> = problems.iter().map(RunningProblem::streamlet).collect();
    names.dedup();
    format!(
        "cannot reset offsets while streamlets are running: {}. Stop them first: set replicas: 0 for {} \
         (flow generate --conf with flow.streamlets.<name>.replicas = 0) and apply, then wait for their pods to go.",
        texts.join("; "),
        names.join(", ")
    )
}

/// The CLI's refusal for a selection error (exact, docs/cli.md, "flow reset").
pub fn cli_selection_message(err: &SelectionError) -> String {
    match err {
        SelectionError::NothingToReset { pipeline } => {
            format!("pipeline {pipeline} has no streamlets with inlets to reset")
        }
        SelectionError::Named(problems) => {
            let texts: Vec<String> = problems
                .iter()
                .map(|p| match p {
                    NamedProblem::Unknown(n) => format!("no streamlet [{n}]"),
                    NamedProblem::NoInlets(n) => {
                        format!("streamlet [{n}] has no inlets, so no consumer groups to reset")
                    }
                })
                .collect();
            format!("cannot reset offsets: {}", texts.join("; "))
        }
    }
}

/// The operator's refusal note for a selection error (event `ResetRefused`).
///
/// Unknown names use the existing operator's text `reset <id> names unknown streamlet(s) a, b`;
/// unlike it, named streamlets without inlets are refused too rather than skipped in silence.
pub fn operator_selection_note(id: &str, err: &SelectionError) -> String {
    match err {
        SelectionError::NothingToReset { pipeline } => {
            format!("reset {id}: pipeline {pipeline} has no streamlets with inlets to reset")
        }
        SelectionError::Named(problems) => {
            let unknown: Vec<&str> = problems
                .iter()
                .filter_map(|p| match p {
                    NamedProblem::Unknown(n) => Some(n.as_str()),
                    NamedProblem::NoInlets(_) => None,
                })
                .collect();
            let no_inlets: Vec<&str> = problems
                .iter()
                .filter_map(|p| match p {
                    NamedProblem::NoInlets(n) => Some(n.as_str()),
                    NamedProblem::Unknown(_) => None,
                })
                .collect();
            let mut parts = Vec::new();
            if !unknown.is_empty() {
                parts.push(format!("reset {id} names unknown streamlet(s) {}", unknown.join(", ")));
            }
            if !no_inlets.is_empty() {
                let lead = if parts.is_empty() { format!("reset {id} names ") } else { String::new() };
                parts.push(format!("{lead}streamlet(s) without inlets {}", no_inlets.join(", ")));
            }
            parts.join("; ")
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::resource::{StreamletSpec, TopicSpec};

    pub(crate) fn streamlet(name: &str, replicas: i32, inlets: &[(&str, &str)]) -> StreamletSpec {
        StreamletSpec {
            name: name.into(),
            image: format!("registry.example.com/{name}:1"),
            replicas,
            config: Default::default(),
            inlets: inlets.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
            outlets: Default::default(),
            descriptor: Default::default(),
            builtin: false,
            pod: None,
        }
    }

    pub(crate) fn topic(id: &str, name: &str) -> TopicSpec {
        TopicSpec {
            id: id.into(),
            name: name.into(),
            managed: false,
            cluster: None,
            bootstrap_servers: Some("127.0.0.1:19092".into()),
            partitions: None,
            replicas: None,
            connection_config: Default::default(),
            producer_config: Default::default(),
            consumer_config: Default::default(),
            topic_config: Default::default(),
            batch: None,
        }
    }

    pub(crate) fn cart(router_replicas: i32) -> AnkkaFlowSpec {
        AnkkaFlowSpec {
            pipeline: "cart".into(),
            version: None,
            protocol_version: Some("1.0".into()),
            on_delete: None,
            streamlets: vec![
                streamlet("sink", 1, &[("in", "valid-carts")]),
                streamlet("router", router_replicas, &[("in", "cart-events")]),
                streamlet("source", 1, &[]),
            ],
            topics: vec![topic("cart-events", "shop.cart-events.v1"), topic("valid-carts", "cart.valid-carts")],
            pod: None,
        }
    }

    #[test]
    fn all_streamlets_with_inlets_sorted() {
        let t = select(&cart(0), &[]).unwrap();
        let names: Vec<_> = t.iter().map(|t| t.streamlet.as_str()).collect();
        assert_eq!(names, ["router", "sink"]);
        assert_eq!(t[0].inlets[0].group.as_str(), "cart.router.in");
        assert_eq!(t[0].inlets[0].topic, "shop.cart-events.v1");
    }

    #[test]
    fn named_problems_list_every_name() {
        let err = select(&cart(0), &["nope".into(), "source".into(), "router".into()]).unwrap_err();
        assert_eq!(
            cli_selection_message(&err),
            "cannot reset offsets: no streamlet [nope]; streamlet [source] has no inlets, so no consumer groups to reset"
        );
        assert_eq!(
            operator_selection_note("u1", &err),
            "reset u1 names unknown streamlet(s) nope; streamlet(s) without inlets source"
        );
    }

    #[test]
    fn nothing_to_reset() {
        let mut spec = cart(0);
        spec.streamlets.retain(|s| s.inlets.is_empty());
        assert_eq!(
            cli_selection_message(&select(&spec, &[]).unwrap_err()),
            "pipeline cart has no streamlets with inlets to reset"
        );
    }

    #[test]
    fn running_targets_and_messages() {
        let spec = cart(1);
        let targets = select(&spec, &["router".into()]).unwrap();
        let pods = BTreeMap::from([("router".to_string(), 2), ("sink".to_string(), 1)]);
        let problems = running(&spec, &targets, &pods);
        assert_eq!(
            problems,
            [RunningProblem::NotScaledToZero("router".into()), RunningProblem::HasPods("router".into(), 2)]
        );
        assert_eq!(
            cli_running_message(&problems),
            "cannot reset offsets while streamlets are running: [router] is not scaled to 0; [router] still has 2 pod(s). \
             Stop them first: set replicas: 0 for router (flow generate --conf with flow.streamlets.<name>.replicas = 0) \
             and apply, then wait for their pods to go."
        );
        assert!(running(&cart(0), &targets, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn finished_pods_do_not_count() {
        assert!(pod_counts(Some("Running")));
        assert!(pod_counts(Some("Pending")));
        assert!(pod_counts(None));
        assert!(!pod_counts(Some("Succeeded")));
        assert!(!pod_counts(Some("Failed")));
    }
}
