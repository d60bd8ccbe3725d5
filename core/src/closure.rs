//! A rebuild from streamlets (`flow rebuild --from <streamlet>`, docs/rebuild.md): the pipeline's
//! graph, the *closure* of the named streamlets (they and every streamlet downstream of them), where
//! each consumer group of the closure goes and why, and why a rebuild from them is refused.
//!
//! # The graph
//! A streamlet *writes* a topic when one of its outlets is bound to it, and *reads* it when one of
//! its inlets is. Topics are told apart as Kafka sees them, by their connection (the cluster, or the
//! bootstrap servers of a topic that names none) and their Kafka name, so that two topic ids of the
//! pipeline that name one Kafka topic are one topic of the graph. A streamlet is downstream of
//! another when it reads a topic the other writes, or is downstream of a streamlet that does.
//!
//! # Where each group goes
//! Every streamlet of the closure is stopped, and each inlet of it is placed ([`Place`]):
//! - on a topic that some streamlet of the closure writes: at the **end** of the topic, as it stands
//!   once every streamlet of the closure has stopped (so once every writer of it has: no writer of
//!   it is outside the closure, or the rebuild is refused). It then reads exactly what the replay
//!   writes, and none of the records the topic held before;
//! - else, on a named streamlet: at the **start** of its topic (or the time the request names): the
//!   replay itself;
//! - else (a downstream streamlet that also reads a topic nothing of the closure writes): **kept**
//!   where it is; nothing of the rebuild writes that topic again.
//!
//! A named streamlet downstream of another named one reads the other's replay: its inlets on topics
//! the closure writes go to the end too (from the start it would read every record twice).
//!
//! # The order of stop, reset and start
//! Every streamlet of the closure is held at 0 replicas at once; the positions are taken only once
//! none of them has a pod left, so that every writer of a topic has stopped before the end of the
//! topic is read for its readers; the groups move; then every streamlet of the closure starts again
//! at once. Whichever starts first, a reader put at the end of its topic reads only what the replay
//! writes there. (The reset machine carries this out: see [`crate::reset`].)
//!
//! # Refusals
//! Each is decided from the resource alone, and the operator decides it again (a tenant may write
//! the request by hand): a named streamlet that does not exist or has no inlets; a cycle among the
//! streamlets of the closure (a streamlet on it reads what it writes itself, so no position of its
//! group reads each record once); a topic of the closure that a streamlet outside the closure writes
//! too, or that the pipeline does not manage (producers outside the pipeline may write it): its
//! readers, put at its end, would skip what those write while they are stopped. A producer outside
//! the pipeline that writes a managed topic can only be seen by its records: the reset machine
//! refuses the request when the end of a topic moves while every streamlet of the closure is
//! stopped (see [`crate::reset`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::names::GroupId;
use crate::resource::{AnkkaFlowSpec, TopicSpec};
use crate::targets::{InletTarget, Target};

/// Where one consumer group of the closure goes, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// An inlet of a named streamlet on a topic nothing of the closure writes: to the start of the
    /// topic (or to the request's time), to read it again.
    Replay,
    /// An inlet on a topic that streamlets of the closure write again (`writers`, sorted): to the
    /// end of the topic as it stands once they stopped, to read only what they write again.
    End {
        /// The streamlets of the closure that write the topic.
        writers: Vec<String>,
    },
    /// An inlet of a downstream streamlet on a topic nothing of the closure writes: left where it
    /// is.
    Kept,
}

/// One inlet of a streamlet of the closure, and where its group goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The group and its topic.
    pub target: InletTarget,
    /// Where it goes.
    pub place: Place,
}

/// The streamlets a rebuild from `from` stops, and where each of their groups goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Closure {
    from: Vec<String>,
    order: Vec<String>,
    placements: Vec<Placement>,
    /// Per streamlet of the closure that is not named: the named streamlets it is downstream of,
    /// and the topics (Kafka names) through which it reads the closure.
    downstream: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)>,
}

/// Why a rebuild from the named streamlets is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// No streamlet of that name.
    Unknown(String),
    /// The streamlet has no inlets: nothing to read again.
    NoInlets(String),
    /// Streamlets of the closure form a cycle: the path, streamlet, topic, streamlet, ..., ending
    /// with the streamlet it started from.
    Cycle(Vec<String>),
    /// A topic the closure writes and reads is also written by streamlets outside the closure.
    WrittenOutside {
        /// Kafka topic name.
        topic: String,
        /// The streamlets of the closure that write it.
        inside: Vec<String>,
        /// The streamlets outside the closure that write it.
        outside: Vec<String>,
        /// The streamlets of the closure that read it.
        readers: Vec<String>,
    },
    /// A topic the closure writes and reads is not managed by the pipeline.
    Unmanaged {
        /// Kafka topic name.
        topic: String,
        /// Its topic id.
        id: String,
        /// The streamlets of the closure that read it.
        readers: Vec<String>,
    },
}

/// A topic of the graph: its connection and its Kafka name.
type Key = (String, String);

/// The topic a port is bound to, as Kafka sees it (see the module documentation). A topic id the
/// resource does not declare stands for itself (the operator refuses such a resource anyway).
fn key(spec: &AnkkaFlowSpec, id: &str) -> Key {
    match spec.topic(id) {
        Some(t) => (location(t), t.name.clone()),
        None => (String::new(), id.to_string()),
    }
}

/// Where a topic lives: the cluster it names, the bootstrap servers it names, or the default cluster.
fn location(t: &TopicSpec) -> String {
    match (&t.cluster, &t.bootstrap_servers) {
        (Some(c), _) => format!("cluster {c}"),
        (None, Some(b)) => format!("servers {b}"),
        (None, None) => format!("cluster {}", crate::connection::DEFAULT_CLUSTER),
    }
}

/// The closure of a rebuild from `from` in `spec`.
///
/// # Errors
/// Every [`Problem`]: the named streamlets that do not exist or have no inlets (alone, since the
/// graph means nothing then), else each cycle found, topic written outside the closure and topic not
/// managed.
pub fn of(spec: &AnkkaFlowSpec, from: &[String]) -> Result<Closure, Vec<Problem>> {
    let mut named: Vec<String> = from.to_vec();
    named.sort_unstable();
    named.dedup();
    let mut problems: Vec<Problem> = named
        .iter()
        .filter_map(|n| match spec.streamlet(n) {
            None => Some(Problem::Unknown(n.clone())),
            Some(s) if s.inlets.is_empty() => Some(Problem::NoInlets(n.clone())),
            Some(_) => None,
        })
        .collect();
    if !problems.is_empty() {
        return Err(problems);
    }

    let mut writers: BTreeMap<Key, BTreeSet<&str>> = BTreeMap::new();
    let mut readers: BTreeMap<Key, BTreeSet<&str>> = BTreeMap::new();
    for s in &spec.streamlets {
        for id in s.outlets.values() {
            writers.entry(key(spec, id)).or_default().insert(&s.name);
        }
        for id in s.inlets.values() {
            readers.entry(key(spec, id)).or_default().insert(&s.name);
        }
    }
    let writes = |s: &str| -> BTreeSet<Key> {
        spec.streamlet(s).map(|s| s.outlets.values().map(|id| key(spec, id)).collect()).unwrap_or_default()
    };

    // Every streamlet downstream of the named ones, with the named streamlets each descends from.
    let mut inside: BTreeSet<&str> = named.iter().map(String::as_str).collect();
    let mut from_named: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let mut queue: VecDeque<(&str, &str)> = named.iter().map(|n| (n.as_str(), n.as_str())).collect();
    while let Some((s, origin)) = queue.pop_front() {
        for k in writes(s) {
            for r in readers.get(&k).into_iter().flatten() {
                let seen = from_named.entry(r).or_default();
                if seen.insert(origin.to_string()) {
                    inside.insert(r);
                    queue.push_back((r, origin));
                }
            }
        }
    }

    // Edges inside the closure: a writer before each reader of what it writes.
    let mut edges: BTreeMap<&str, BTreeMap<&str, Key>> = BTreeMap::new();
    for s in &inside {
        for k in writes(s) {
            for r in readers.get(&k).into_iter().flatten() {
                edges.entry(s).or_default().entry(r).or_insert_with(|| k.clone());
            }
        }
    }
    let order = topological(&inside, &edges);
    if order.len() < inside.len() {
        let left: BTreeSet<&str> = inside.iter().copied().filter(|s| !order.iter().any(|o| o == s)).collect();
        problems.extend(cycle(&left, &edges).map(Problem::Cycle));
    }

    // Topics the closure writes and reads: written by nothing outside it, and managed.
    for (k, ws) in &writers {
        let (ins, outs): (Vec<&str>, Vec<&str>) = ws.iter().partition(|w| inside.contains(*w));
        let reading: Vec<String> = readers.get(k).into_iter().flatten().map(|r| r.to_string()).collect();
        if ins.is_empty() || reading.is_empty() {
            continue;
        }
        if !outs.is_empty() {
            problems.push(Problem::WrittenOutside {
                topic: k.1.clone(),
                inside: ins.iter().map(|s| s.to_string()).collect(),
                outside: outs.iter().map(|s| s.to_string()).collect(),
                readers: reading.clone(),
            });
        }
        if let Some(t) = spec.topics.iter().find(|t| !t.managed && (location(t), t.name.clone()) == *k) {
            problems.push(Problem::Unmanaged { topic: k.1.clone(), id: t.id.clone(), readers: reading });
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }

    let mut placements: Vec<Placement> = Vec::new();
    for s in spec.streamlets.iter().filter(|s| inside.contains(s.name.as_str())) {
        for (inlet, id) in &s.inlets {
            let k = key(spec, id);
            let within: Vec<String> =
                writers.get(&k).into_iter().flatten().filter(|w| inside.contains(*w)).map(|w| w.to_string()).collect();
            let place = if !within.is_empty() {
                Place::End { writers: within }
            } else if named.contains(&s.name) {
                Place::Replay
            } else {
                Place::Kept
            };
            let target = InletTarget {
                group: GroupId::new(&spec.pipeline, &s.name, inlet),
                streamlet: s.name.clone(),
                inlet: inlet.clone(),
                topic_id: id.clone(),
                topic: spec.topic(id).map_or_else(|| id.clone(), |t| t.name.clone()),
            };
            placements.push(Placement { target, place });
        }
    }
    placements.sort_by(|a, b| a.target.group.as_str().cmp(b.target.group.as_str()));

    let downstream = order
        .iter()
        .filter(|s| !named.contains(s))
        .map(|s| {
            let through = placements
                .iter()
                .filter(|p| p.target.streamlet == *s && matches!(p.place, Place::End { .. }))
                .map(|p| p.target.topic.clone())
                .collect();
            (s.clone(), (from_named.get(s.as_str()).cloned().unwrap_or_default(), through))
        })
        .collect();
    Ok(Closure { from: named, order, placements, downstream })
}

/// The streamlets of `nodes` in an order where each comes after every streamlet it reads from
/// (ties by name); streamlets on a cycle, and those after one, are left out.
fn topological(nodes: &BTreeSet<&str>, edges: &BTreeMap<&str, BTreeMap<&str, Key>>) -> Vec<String> {
    let mut incoming: BTreeMap<&str, usize> = nodes.iter().map(|n| (*n, 0)).collect();
    for targets in edges.values() {
        for t in targets.keys() {
            *incoming.entry(t).or_default() += 1;
        }
    }
    let mut ready: BTreeSet<&str> = incoming.iter().filter(|(_, n)| **n == 0).map(|(s, _)| *s).collect();
    let mut order = Vec::new();
    while let Some(s) = ready.pop_first() {
        order.push(s.to_string());
        for t in edges.get(s).into_iter().flat_map(BTreeMap::keys) {
            if let Some(n) = incoming.get_mut(t) {
                *n -= 1;
                if *n == 0 {
                    ready.insert(t);
                }
            }
        }
    }
    order
}

/// One cycle among `left` (streamlets that no topological order could place), as its path:
/// streamlet, topic, streamlet, ..., back to the first streamlet.
fn cycle(left: &BTreeSet<&str>, edges: &BTreeMap<&str, BTreeMap<&str, Key>>) -> Option<Vec<String>> {
    // Each streamlet left has a writer among those left (else the order would have placed it), so
    // walking from writer to writer repeats a streamlet within `left.len()` steps: the walk from
    // its first visit, read backwards, is a cycle.
    let writer = |n: &str| {
        edges.iter().find_map(|(w, readers)| if left.contains(w) { readers.get(n).map(|k| (*w, k)) } else { None })
    };
    let mut path: Vec<&str> = vec![*left.iter().next()?];
    // `via[j]`: the topic through which `path[j + 1]` writes what `path[j]` reads.
    let mut via: Vec<&Key> = Vec::new();
    for _ in 0..=left.len() {
        let at = *path.last()?;
        let (w, k) = writer(at)?;
        if let Some(i) = path.iter().position(|s| *s == w) {
            let mut out = vec![w.to_string(), format!("'{}'", k.1), at.to_string()];
            for j in (i..path.len() - 1).rev() {
                out.push(format!("'{}'", via[j].1));
                out.push(path[j].to_string());
            }
            return Some(out);
        }
        via.push(k);
        path.push(w);
    }
    None
}

impl Closure {
    /// The named streamlets, sorted, each once.
    pub fn from(&self) -> &[String] {
        &self.from
    }

    /// Every streamlet of the closure, each after the streamlets it reads from (ties by name).
    pub fn order(&self) -> &[String] {
        &self.order
    }

    /// Every streamlet of the closure: what a rebuild from the named ones holds at 0 replicas.
    pub fn streamlets(&self) -> BTreeSet<String> {
        self.order.iter().cloned().collect()
    }

    /// Every inlet of the closure's streamlets, with where its group goes, sorted by group.
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    /// Where `group` goes; `None` for a group outside the closure.
    pub fn place(&self, group: &GroupId) -> Option<&Place> {
        self.placements.iter().find(|p| p.target.group == *group).map(|p| &p.place)
    }

    /// The groups the rebuild moves (those not [`Place::Kept`]), per streamlet, as
    /// [`crate::targets::select`] gives them: sorted by streamlet, then by inlet.
    pub fn targets(&self) -> Vec<Target> {
        let mut by: BTreeMap<&str, Vec<InletTarget>> = BTreeMap::new();
        for p in self.placements.iter().filter(|p| p.place != Place::Kept) {
            by.entry(&p.target.streamlet).or_default().push(p.target.clone());
        }
        by.into_iter()
            .map(|(s, mut inlets)| {
                inlets.sort_by(|a, b| a.inlet.cmp(&b.inlet));
                Target { streamlet: s.to_string(), inlets }
            })
            .collect()
    }

    /// The groups that write what `group` reads: the moved groups of the writers of its topic, for
    /// a group put at the end; none for the others. A group at the end has read the whole replay
    /// only once these have read all of theirs.
    pub fn upstream(&self, group: &GroupId) -> Vec<GroupId> {
        let Some(Place::End { writers }) = self.place(group) else { return vec![] };
        self.placements
            .iter()
            .filter(|p| writers.contains(&p.target.streamlet) && p.place != Place::Kept)
            .map(|p| p.target.group.clone())
            .collect()
    }

    /// Why each streamlet of the closure is in it, in [`Closure::order`]: `named with --from`, or
    /// `downstream of middle (reads 'chain.cooked')`. `b` writes a streamlet's name (the CLI puts it in
    /// brackets).
    pub fn reasons(&self, b: impl Fn(&str) -> String) -> Vec<(String, String)> {
        self.order
            .iter()
            .map(|s| {
                let why = match self.downstream.get(s) {
                    None => "named with --from".to_string(),
                    Some((origins, through)) => format!(
                        "downstream of {} (reads {})",
                        origins.iter().map(|o| b(o)).collect::<Vec<_>>().join(", "),
                        through.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ")
                    ),
                };
                (s.clone(), why)
            })
            .collect()
    }
}

/// Where a group of [`Place::End`] goes, as its events and the status say it: `the end (it reads
/// only what middle writes again)`.
pub fn end_text(writers: &[String]) -> String {
    format!(
        "the end (it reads only what {} write{} again)",
        writers.join(", "),
        if writers.len() == 1 { "s" } else { "" }
    )
}

impl Problem {
    /// The problem in words; `b` writes a streamlet's name (the CLI puts it in brackets).
    pub fn text(&self, b: &dyn Fn(&str) -> String) -> String {
        let list = |names: &[String]| names.iter().map(|n| b(n)).collect::<Vec<_>>().join(", ");
        match self {
            Problem::Unknown(n) => format!("no streamlet {}", b(n)),
            Problem::NoInlets(n) => {
                format!("streamlet {} has no inlets, so it has nothing to read again", b(n))
            }
            Problem::Cycle(path) => {
                let shown: Vec<String> =
                    path.iter().map(|p| if p.starts_with('\'') { p.clone() } else { b(p) }).collect();
                format!(
                    "the streamlets downstream of it form a cycle, {}: a streamlet on it reads what it writes itself, so \
                     no position of its consumer group reads each replayed record once",
                    shown.join(" -> ")
                )
            }
            Problem::WrittenOutside { topic, inside, outside, readers } => format!(
                "topic '{topic}', which {} write{} again, is also written by {}, which {} not downstream of what is \
                 rebuilt and keep{} running: {} put at its end would skip what {} write{} while {} stopped; add {} \
                 with --from too, so that {} write{} again as well",
                list(inside),
                if inside.len() == 1 { "s" } else { "" },
                list(outside),
                if outside.len() == 1 { "is" } else { "are" },
                if outside.len() == 1 { "s" } else { "" },
                list(readers),
                list(outside),
                if outside.len() == 1 { "s" } else { "" },
                if readers.len() == 1 { "it is" } else { "they are" },
                list(outside),
                if outside.len() == 1 { "it" } else { "they" },
                if outside.len() == 1 { "s" } else { "" },
            ),
            Problem::Unmanaged { topic, id, readers } => format!(
                "topic '{topic}' (topic id '{id}') is not managed by the pipeline, so producers outside it may write \
                 it too, and {} put at its end would skip what they write while {} stopped; a topic that streamlets \
                 write is managed",
                list(readers),
                if readers.len() == 1 { "it is" } else { "they are" },
            ),
        }
    }
}

/// The CLI's refusal of a rebuild from `from` (exact, docs/cli.md, "flow rebuild").
pub fn cli_message(from: &[String], problems: &[Problem]) -> String {
    let b = |n: &str| format!("[{n}]");
    let texts: Vec<String> = problems.iter().map(|p| p.text(&b)).collect();
    format!("cannot rebuild from {}: {}", from.iter().map(|n| b(n)).collect::<Vec<_>>().join(", "), texts.join("; "))
}

/// The operator's refusal note of rebuild `id` from `from` (event `ResetRefused`, status detail).
pub fn operator_note(id: &str, from: &[String], problems: &[Problem]) -> String {
    let b = |n: &str| n.to_string();
    let texts: Vec<String> = problems.iter().map(|p| p.text(&b)).collect();
    format!("reset {id} refused, nothing was reset: a rebuild from {}: {}", from.join(", "), texts.join("; "))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::targets::tests::{streamlet, topic};

    /// `chain`: source reads the unmanaged `chain-input.v1` and writes `raw`; middle reads `raw` and
    /// writes `cooked`; sink reads `cooked`.
    pub(crate) fn chain() -> AnkkaFlowSpec {
        let mut source = streamlet("source", 1, &[("in", "input")]);
        source.outlets.insert("out".into(), "raw".into());
        let mut middle = streamlet("middle", 1, &[("in", "raw")]);
        middle.outlets.insert("out".into(), "cooked".into());
        let sink = streamlet("sink", 1, &[("in", "cooked")]);
        let managed = |id: &str| TopicSpec { managed: true, ..topic(id, &format!("chain.{id}")) };
        AnkkaFlowSpec {
            pipeline: "chain".into(),
            version: None,
            protocol_version: Some("1.0".into()),
            on_delete: None,
            streamlets: vec![sink, middle, source],
            topics: vec![topic("input", "chain-input.v1"), managed("raw"), managed("cooked")],
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn places(c: &Closure) -> Vec<(String, Place)> {
        c.placements().iter().map(|p| (p.target.group.to_string(), p.place.clone())).collect()
    }

    #[test]
    fn from_middle_replays_middle_and_puts_sink_at_the_end() {
        let c = of(&chain(), &names(&["middle"])).unwrap();
        assert_eq!(c.order(), ["middle", "sink"]);
        assert_eq!(
            places(&c),
            [
                ("chain.middle.in".into(), Place::Replay),
                ("chain.sink.in".into(), Place::End { writers: names(&["middle"]) })
            ]
        );
        assert_eq!(c.streamlets(), BTreeSet::from(["middle".to_string(), "sink".to_string()]));
        assert_eq!(c.upstream(&GroupId::from_raw("chain.sink.in")), [GroupId::from_raw("chain.middle.in")]);
        assert!(c.upstream(&GroupId::from_raw("chain.middle.in")).is_empty());
        let reasons = c.reasons(|s| s.to_string());
        assert_eq!(reasons[0], ("middle".into(), "named with --from".into()));
        assert_eq!(reasons[1], ("sink".into(), "downstream of middle (reads 'chain.cooked')".into()));
        let targets: Vec<String> = c.targets().iter().map(|t| t.streamlet.clone()).collect();
        assert_eq!(targets, ["middle", "sink"]);
    }

    #[test]
    fn from_the_source_takes_the_whole_chain_and_from_the_sink_only_it() {
        let c = of(&chain(), &names(&["source"])).unwrap();
        assert_eq!(c.order(), ["source", "middle", "sink"]);
        assert_eq!(c.place(&GroupId::from_raw("chain.source.in")), Some(&Place::Replay));
        assert_eq!(c.place(&GroupId::from_raw("chain.middle.in")), Some(&Place::End { writers: names(&["source"]) }));
        let c = of(&chain(), &names(&["sink", "sink"])).unwrap();
        assert_eq!((c.from(), c.order()), (&names(&["sink"])[..], &names(&["sink"])[..]));
        assert_eq!(places(&c), [("chain.sink.in".into(), Place::Replay)]);
    }

    #[test]
    fn a_named_streamlet_downstream_of_another_reads_its_replay() {
        let c = of(&chain(), &names(&["sink", "source"])).unwrap();
        assert_eq!(c.place(&GroupId::from_raw("chain.sink.in")), Some(&Place::End { writers: names(&["middle"]) }));
        let reasons = c.reasons(|s| s.to_string());
        assert_eq!(reasons.last().unwrap().1, "named with --from");
    }

    #[test]
    fn a_join_keeps_its_other_input() {
        let mut spec = chain();
        spec.topics.push(topic("customers", "shop.customers.v1"));
        spec.streamlets[0].inlets.insert("customers".into(), "customers".into());
        let c = of(&spec, &names(&["middle"])).unwrap();
        assert_eq!(c.place(&GroupId::from_raw("chain.sink.customers")), Some(&Place::Kept));
        assert_eq!(c.targets()[1].inlets.len(), 1, "a kept group is no target");
    }

    #[test]
    fn unknown_names_and_names_without_inlets_are_refused_alone() {
        let mut spec = chain();
        spec.streamlets.push(streamlet("gen", 1, &[]));
        let err = of(&spec, &names(&["nope", "gen", "middle"])).unwrap_err();
        assert_eq!(err, [Problem::NoInlets("gen".into()), Problem::Unknown("nope".into())]);
        assert_eq!(
            cli_message(&names(&["gen", "nope"]), &err),
            "cannot rebuild from [gen], [nope]: streamlet [gen] has no inlets, so it has nothing to read again; no \
             streamlet [nope]"
        );
    }

    #[test]
    fn a_cycle_is_refused_with_its_path() {
        let mut spec = chain();
        spec.topics.push(TopicSpec { managed: true, ..topic("back", "chain.back") });
        spec.streamlets[0].outlets.insert("back".into(), "back".into());
        spec.streamlets[1].inlets.insert("back".into(), "back".into());
        let err = of(&spec, &names(&["middle"])).unwrap_err();
        assert_eq!(err, [Problem::Cycle(names(&["middle", "'chain.cooked'", "sink", "'chain.back'", "middle"]))]);
        assert!(
            operator_note("u1", &names(&["middle"]), &err).starts_with(
                "reset u1 refused, nothing was reset: a rebuild from middle: the streamlets downstream of it form a \
                 cycle, middle -> 'chain.cooked' -> sink -> 'chain.back' -> middle: "
            ),
            "{}",
            operator_note("u1", &names(&["middle"]), &err)
        );
        // A cycle upstream of what is rebuilt does not matter.
        assert!(of(&spec, &names(&["sink"])).is_err(), "sink is on it");
        let mut upstream = chain();
        upstream.streamlets[2].inlets.insert("loop".into(), "raw".into());
        assert!(of(&upstream, &names(&["middle"])).is_ok(), "source reads its own output, upstream of middle");
        assert!(matches!(of(&upstream, &names(&["source"])).unwrap_err()[0], Problem::Cycle(_)));
    }

    #[test]
    fn a_topic_written_outside_the_closure_is_refused() {
        let mut spec = chain();
        let mut other = streamlet("other", 1, &[("in", "input")]);
        other.outlets.insert("out".into(), "cooked".into());
        spec.streamlets.push(other);
        let err = of(&spec, &names(&["middle"])).unwrap_err();
        assert_eq!(
            err,
            [Problem::WrittenOutside {
                topic: "chain.cooked".into(),
                inside: names(&["middle"]),
                outside: names(&["other"]),
                readers: names(&["sink"]),
            }]
        );
        assert_eq!(
            cli_message(&names(&["middle"]), &err),
            "cannot rebuild from [middle]: topic 'chain.cooked', which [middle] writes again, is also written by \
             [other], which is not downstream of what is rebuilt and keeps running: [sink] put at its end would skip \
             what [other] writes while it is stopped; add [other] with --from too, so that it writes again as well"
        );
        assert!(of(&spec, &names(&["middle", "other"])).is_ok(), "both writers replay");
    }

    #[test]
    fn two_topic_ids_of_one_kafka_topic_are_one_topic() {
        let mut spec = chain();
        // `alias` names the Kafka topic `chain.cooked` on the same cluster as `cooked`.
        spec.topics.push(TopicSpec { managed: true, ..topic("alias", "chain.cooked") });
        let mut other = streamlet("other", 1, &[("in", "input")]);
        other.outlets.insert("out".into(), "alias".into());
        spec.streamlets.push(other);
        assert!(matches!(of(&spec, &names(&["middle"])).unwrap_err()[0], Problem::WrittenOutside { .. }));
        // On another cluster it is another topic.
        spec.topics.last_mut().unwrap().cluster = Some("elsewhere".into());
        assert!(of(&spec, &names(&["middle"])).is_ok());
    }

    #[test]
    fn an_unmanaged_topic_inside_the_closure_is_refused() {
        let mut spec = chain();
        spec.topics.iter_mut().find(|t| t.id == "cooked").unwrap().managed = false;
        let err = of(&spec, &names(&["middle"])).unwrap_err();
        assert_eq!(
            err,
            [Problem::Unmanaged { topic: "chain.cooked".into(), id: "cooked".into(), readers: names(&["sink"]) }]
        );
        // Its own input may be unmanaged: nothing of the rebuild writes it.
        assert!(of(&spec, &names(&["sink"])).is_ok());
    }

    #[test]
    fn the_end_says_who_writes_again() {
        assert_eq!(end_text(&names(&["middle"])), "the end (it reads only what middle writes again)");
        assert_eq!(end_text(&names(&["a", "b"])), "the end (it reads only what a, b write again)");
    }
}
