//! Model-based test of the reset machine: random histories of operator restarts and crashes, ledger
//! losses, streamlets starting and stopping, consumers reading, stray members, Kafka faults, new and
//! malformed requests, run against the simulated world of `flow_ledger_tests`. The invariants (the
//! guarantees of docs/reset.md, listed in docs/ledger-tests.md) are checked after every transition,
//! and at the end of each history the world is made quiet and the request must finish.
//!
//! Default: 2048 cases ([`DEFAULT_CASES`]). Deep run: `PROPTEST_CASES=20000 cargo test -p
//! flow-ledger-tests --release`. A failure shrinks to a minimal history and its seed is saved in
//! `proptest-regressions/<test>.txt`, which is replayed first on every run.

use std::collections::{BTreeMap, BTreeSet};

use std::time::Duration;

use flow_core::reset::DEFAULT_SETTLE;
use flow_core::resource::RequestPhase;
use flow_core::tenancy::Verdict;
use flow_ledger_tests::world::{Fact, MALFORMED, request_id};
use flow_ledger_tests::{Ask, During, Fault, Init, KnownIssue, KubeFault, Reconciled, Streamlet, TopicInit, World};
use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::{Config, FileFailurePersistence};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};

prop_state_machine! {
    #![proptest_config(config("reset_machine"))]

    /// Every invariant, without exception (the issues the model found are fixed; docs/ledger-tests.md).
    #[test]
    fn reset_machine_keeps_its_invariants(sequential 1..=40 => ResetTest<true, true>);
}

/// Cases by default, unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 2048;

fn config(regressions: &'static str) -> Config {
    let path: &'static str = Box::leak(format!("proptest-regressions/{regressions}.txt").into_boxed_str());
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(DEFAULT_CASES);
    Config { cases, failure_persistence: Some(Box::new(FileFailurePersistence::Direct(path))), ..Config::default() }
}

/// How a streamlet stands, as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Run {
    /// Replicas 1, one pod.
    Running,
    /// Replicas 0, its pod still Terminating.
    Lingering,
    /// Replicas 0, no pod.
    Stopped,
}

/// The request annotation, as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Current {
    Nothing,
    /// Request number `n` (its id is `request_id(n)`).
    Request {
        n: u64,
        ask: Ask,
    },
    Malformed,
}

/// The reference model: only the knobs of the world that decide which transitions make sense. It
/// knows nothing of the machine's phases.
#[derive(Clone, Debug)]
struct Model {
    init: Init,
    next_request: u64,
    current: Current,
    run: BTreeMap<Streamlet, Run>,
    stray: BTreeMap<Streamlet, u32>,
    /// The operator's settle delay, for the whole history.
    settle: Duration,
    /// Whether the status keeps summaries of the groups only (as for large topics).
    summaries: bool,
    /// Whether the resource was deleted and created again; only in histories whose ledger was, and
    /// stays, whole (never lost, written and read without fault): with the resource's status gone,
    /// the ledger alone tells that a request was taken up for the earlier object. Without it the
    /// request runs again, as docs/reset.md says.
    recreated: bool,
    /// Whether the ledger was lost or failed a read or a write.
    ledger_faults: bool,
}

#[derive(Clone, Debug)]
enum Transition {
    /// The operator (re)starts and reconciles; work under way completes in the order `order`
    /// picks; it crashes after starting that many pieces of work when given.
    Reconcile {
        crash_after: Option<u8>,
        order: Vec<u8>,
        /// A new request written while the drive first sleeps (else as it ends).
        replace: Option<Ask>,
        /// Added to every group's lane in this drive.
        lane_shift: u8,
        /// During this reconcile another resource maps to the groups on the same cluster
        /// (`Some(true)`: the reset is refused), or on one that cannot be told apart yet
        /// (`Some(false)`: it waits).
        shared: Option<bool>,
    },
    /// The next `count` of the operator's writes of a kind fail.
    InjectKubeFault {
        kind: KubeFault,
        count: u8,
    },
    /// The operator's ledger volume is lost.
    LoseLedger,
    /// The resource is deleted and created again with the same request annotation.
    Recreate,
    StartTargets {
        streamlet: Streamlet,
    },
    /// Replicas to 0; with `linger` the pod stays (Terminating) until a later stop.
    StopTargets {
        streamlet: Streamlet,
        linger: bool,
    },
    /// The running streamlet reads everything and commits the high watermarks, empty metadata.
    ConsumerReadsAll {
        streamlet: Streamlet,
    },
    AddStrayMember {
        streamlet: Streamlet,
    },
    RemoveStrayMember {
        streamlet: Streamlet,
    },
    /// Happens while the operator next waits out a settle: a closing consumer's commit (case F1) or a
    /// partition added (case B5).
    Arm {
        what: During,
    },
    /// A partition is added to the streamlet's topic.
    AddPartition {
        streamlet: Streamlet,
    },
    /// A consumer that is no member of the group commits where it stands (a closing pod).
    StrayCommit {
        streamlet: Streamlet,
    },
    /// The `count` Kafka calls after the next `skip` ones meet `kind`.
    InjectFault {
        kind: Fault,
        count: u8,
        skip: u8,
    },
    Produce {
        streamlet: Streamlet,
        partition: i32,
        n: i64,
    },
    DeleteRecords {
        streamlet: Streamlet,
        partition: i32,
        by: i64,
    },
    /// The broker carries out the oldest call it holds of one of the connections holding calls
    /// (`pick`, modulo their number).
    BrokerCarriesOut {
        pick: u8,
    },
    /// The broker restarts: the calls it holds are lost.
    BrokerRestart,
    /// A fresh request id in the annotation.
    NewRequest {
        ask: Ask,
    },
    /// Annotation text that does not parse.
    MalformedRequest {
        kind: usize,
    },
}

fn streamlet() -> impl Strategy<Value = Streamlet> {
    prop_oneof![Just(Streamlet::Router), Just(Streamlet::Sink)]
}

fn topic_init() -> impl Strategy<Value = TopicInit> {
    let partition = (0i64..40, 0i64..80, proptest::option::of(0i64..140))
        .prop_map(|(start, len, committed)| (start, start + len, committed.map(|c| c.min(start + len))));
    proptest::collection::vec(partition, 3).prop_map(|partitions| TopicInit { partitions })
}

impl ReferenceStateMachine for Model {
    type State = Model;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<Model> {
        let running = prop_oneof![Just(BTreeSet::new()), proptest::collection::btree_set(streamlet(), 0..=2)];
        let settle = prop_oneof![
            4 => Just(DEFAULT_SETTLE),
            1 => Just(Duration::ZERO),
            1 => Just(Duration::from_secs(5)),
        ];
        let summaries = prop_oneof![2 => Just(false), 1 => Just(true)];
        (topic_init(), topic_init(), running, settle, summaries)
            .prop_map(|(router, sink, running, settle, summaries)| {
                let init = Init {
                    topics: BTreeMap::from([(Streamlet::Router, router), (Streamlet::Sink, sink)]),
                    running: running.clone(),
                };
                let run = Streamlet::ALL
                    .into_iter()
                    .map(|s| (s, if running.contains(&s) { Run::Running } else { Run::Stopped }))
                    .collect();
                Model {
                    init,
                    next_request: 1,
                    current: Current::Nothing,
                    run,
                    stray: BTreeMap::new(),
                    settle,
                    summaries,
                    recreated: false,
                    ledger_faults: false,
                }
            })
            .boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Transition> {
        let ask = prop_oneof![
            3 => Just(Ask::All),
            2 => Just(Ask::Router),
            1 => Just(Ask::Sink),
            1 => Just(Ask::Both),
            1 => Just(Ask::Unknown),
            1 => Just(Ask::NoInlets),
        ];
        let fault = prop_oneof![
            2 => Just(Fault::Transient),
            1 => Just(Fault::Final),
            2 => Just(Fault::TimeoutAfterApply),
            4 => Just(Fault::Held),
        ];
        // Most drives carry out fewer than 8 effects: crash points are aimed there mostly.
        let crash = prop_oneof![4 => Just(None), 3 => (1u8..=7).prop_map(Some), 1 => (8u8..=16).prop_map(Some)];
        let kube_fault = prop_oneof![
            8 => Just(KubeFault::StatusWrite),
            4 => Just(KubeFault::DoneWrite),
            8 => Just(if state.recreated { KubeFault::StatusWrite } else { KubeFault::LedgerWrite }),
            4 => Just(if state.recreated { KubeFault::DoneWrite } else { KubeFault::LedgerRead }),
            // Every drive acts: a lost Lease abandons the next one, whatever it does.
            1 => Just(KubeFault::LeaseLost),
        ];
        // `flow reset --replace` while a drive sleeps: a request of sink alone most often, whose lane
        // differs from the one sink has in a request of both groups (the case of issue 28).
        let replace = prop_oneof![
            4 => Just(None),
            2 => Just(Some(Ask::Sink)),
            1 => Just(Some(Ask::Router)),
            1 => Just(Some(Ask::All)),
        ];
        // Mostly in the order the work started; sometimes in an order of the history's choosing.
        let order = prop_oneof![2 => Just(vec![]), 1 => proptest::collection::vec(any::<u8>(), 1..16)];
        let shared = prop_oneof![40 => Just(None), 1 => Just(Some(true)), 1 => Just(Some(false))];
        let mut options: Vec<(u32, BoxedStrategy<Transition>)> = vec![
            (
                12,
                (crash, order, replace, prop_oneof![2 => Just(0u8), 1 => 1u8..16], shared)
                    .prop_map(|(crash_after, order, replace, lane_shift, shared)| Transition::Reconcile {
                        crash_after,
                        order,
                        replace,
                        lane_shift,
                        shared,
                    })
                    .boxed(),
            ),
            (2, (kube_fault, 1u8..=2).prop_map(|(kind, count)| Transition::InjectKubeFault { kind, count }).boxed()),
            (
                2,
                Just(if state.recreated {
                    Transition::Reconcile {
                        crash_after: None,
                        order: vec![],
                        replace: None,
                        lane_shift: 0,
                        shared: None,
                    }
                } else {
                    Transition::LoseLedger
                })
                .boxed(),
            ),
            (3, ask.prop_map(|ask| Transition::NewRequest { ask }).boxed()),
            (1, (0..MALFORMED.len()).prop_map(|kind| Transition::MalformedRequest { kind }).boxed()),
            (
                3,
                (fault, 1u8..=6, 0u8..=3)
                    .prop_map(|(kind, count, skip)| Transition::InjectFault { kind, count, skip })
                    .boxed(),
            ),
            (
                5,
                prop_oneof![
                    1 => streamlet().prop_map(During::StrayCommit),
                    1 => streamlet().prop_map(During::AddPartition),
                ]
                .prop_map(|what| Transition::Arm { what })
                .boxed(),
            ),
            (3, any::<u8>().prop_map(|pick| Transition::BrokerCarriesOut { pick }).boxed()),
            (1, Just(Transition::BrokerRestart).boxed()),
            (1, streamlet().prop_map(|streamlet| Transition::AddPartition { streamlet }).boxed()),
            (1, streamlet().prop_map(|streamlet| Transition::StrayCommit { streamlet }).boxed()),
            (
                1,
                (streamlet(), 0..3i32, 1i64..50)
                    .prop_map(|(streamlet, partition, n)| Transition::Produce { streamlet, partition, n })
                    .boxed(),
            ),
            (
                1,
                (streamlet(), 0..3i32, 1i64..60)
                    .prop_map(|(streamlet, partition, by)| Transition::DeleteRecords { streamlet, partition, by })
                    .boxed(),
            ),
        ];
        for s in Streamlet::ALL {
            let run = state.run[&s];
            if run != Run::Running {
                options.push((3, Just(Transition::StartTargets { streamlet: s }).boxed()));
            }
            if run != Run::Stopped {
                options.push((4, Just(Transition::StopTargets { streamlet: s, linger: false }).boxed()));
                options.push((3, Just(Transition::ConsumerReadsAll { streamlet: s }).boxed()));
            }
            if run == Run::Running {
                options.push((1, Just(Transition::StopTargets { streamlet: s, linger: true }).boxed()));
            }
            let stray = state.stray.get(&s).copied().unwrap_or(0);
            if stray < 2 {
                options.push((1, Just(Transition::AddStrayMember { streamlet: s }).boxed()));
            }
            if stray > 0 {
                options.push((2, Just(Transition::RemoveStrayMember { streamlet: s }).boxed()));
            }
        }
        // Created again while a request is written, so that the new object meets it.
        if !state.ledger_faults && matches!(state.current, Current::Request { .. }) {
            options.push((2, Just(Transition::Recreate).boxed()));
        }
        Union::new_weighted(options).boxed()
    }

    fn preconditions(state: &Model, t: &Transition) -> bool {
        let run = |s: &Streamlet| state.run[s];
        let stray = |s: &Streamlet| state.stray.get(s).copied().unwrap_or(0);
        match t {
            Transition::StartTargets { streamlet } => run(streamlet) != Run::Running,
            Transition::StopTargets { streamlet, linger: false } => run(streamlet) != Run::Stopped,
            Transition::StopTargets { streamlet, linger: true } => run(streamlet) == Run::Running,
            Transition::ConsumerReadsAll { streamlet } => run(streamlet) != Run::Stopped,
            Transition::AddStrayMember { streamlet } => stray(streamlet) < 2,
            Transition::RemoveStrayMember { streamlet } => stray(streamlet) > 0,
            Transition::LoseLedger
            | Transition::InjectKubeFault { kind: KubeFault::LedgerRead | KubeFault::LedgerWrite, .. } => {
                !state.recreated
            }
            Transition::Recreate => !state.ledger_faults,
            _ => true,
        }
    }

    fn apply(mut state: Model, t: &Transition) -> Model {
        match t {
            Transition::NewRequest { ask } => {
                state.current = Current::Request { n: state.next_request, ask: *ask };
                state.next_request += 1;
            }
            Transition::MalformedRequest { .. } => state.current = Current::Malformed,
            Transition::Recreate => state.recreated = true,
            Transition::LoseLedger
            | Transition::InjectKubeFault { kind: KubeFault::LedgerRead | KubeFault::LedgerWrite, .. } => {
                state.ledger_faults = true;
            }
            Transition::StartTargets { streamlet } => {
                state.run.insert(*streamlet, Run::Running);
            }
            Transition::StopTargets { streamlet, linger } => {
                state.run.insert(*streamlet, if *linger { Run::Lingering } else { Run::Stopped });
            }
            Transition::AddStrayMember { streamlet } => *state.stray.entry(*streamlet).or_default() += 1,
            Transition::RemoveStrayMember { streamlet } => *state.stray.entry(*streamlet).or_default() -= 1,
            Transition::Reconcile { replace: Some(ask), .. } => {
                state.current = Current::Request { n: state.next_request, ask: *ask };
                state.next_request += 1;
            }
            Transition::Reconcile { replace: None, .. }
            | Transition::ConsumerReadsAll { .. }
            | Transition::InjectFault { .. }
            | Transition::InjectKubeFault { .. }
            | Transition::Arm { .. }
            | Transition::AddPartition { .. }
            | Transition::StrayCommit { .. }
            | Transition::BrokerCarriesOut { .. }
            | Transition::BrokerRestart
            | Transition::Produce { .. }
            | Transition::DeleteRecords { .. } => {}
        }
        state
    }
}

/// The test. `STRICT` accepts no known issue; `OUTCOME_IN_STATUS` runs the driver with the
/// operator change proposed for `KnownIssue::OutcomeOnlyInLedger`, whose history it then rejects.
struct ResetTest<const STRICT: bool, const OUTCOME_IN_STATUS: bool>;

impl<const STRICT: bool, const OUTCOME_IN_STATUS: bool> ResetTest<STRICT, OUTCOME_IN_STATUS> {
    fn accepted() -> &'static [KnownIssue] {
        match (STRICT, OUTCOME_IN_STATUS) {
            (true, _) => &[],
            (false, true) => &[KnownIssue::SettleAmbiguity],
            (false, false) => &[KnownIssue::SettleAmbiguity, KnownIssue::OutcomeOnlyInLedger],
        }
    }
}

/// Whether one reconcile must finish the current request: it is well-formed and not done, none of its
/// targets runs, its groups have no members, Kafka will not fail, and no other resource shares its
/// groups on a cluster that cannot be told apart.
fn must_finish(world: &World) -> Option<String> {
    if matches!(world.shared, Some(Verdict::Waits(_))) {
        return None;
    }
    let id = world.current_id()?;
    let targets = world.requests.get(&id)?.targets().unwrap_or_default();
    let quiet = world.kube.done.as_deref() != Some(id.as_str())
        && !world.faults_pending()
        && targets.iter().all(|s| !world.kube.runs(*s) && world.kafka.stray_members.get(s).copied().unwrap_or(0) == 0);
    quiet.then_some(id)
}

fn reconcile(mut world: World, model: &Model, crash_after: Option<u8>, order: &[u8], replace: Option<Ask>) -> World {
    // The model has written the replacing request already: the reconcile ran on the one before it.
    if let (Some(ask), Current::Request { n, .. }) = (replace, model.current) {
        world.replace = Some((n, ask));
        world.reconcile_in(crash_after, order);
        if let Some((n, ask)) = world.replace.take() {
            world.write_request(n, ask);
        }
        return world;
    }
    let facts_before = world.facts.len();
    let ledger_before = world.ledger.clone();
    let done_before = world.kube.done.clone();
    let calls_before = world.kafka.calls;
    let must = must_finish(&world);

    let end = world.reconcile_in(crash_after, order);
    let new = &world.facts[facts_before..];

    match model.current {
        Current::Nothing => assert_eq!(end, Reconciled::NoRequest),
        Current::Malformed => {
            // Reported, and never acted on: one ResetRefused event and nothing else (the operator may
            // stop before it, by a crash or a lost Lease).
            let refused =
                |f: &Fact| matches!(f, Fact::Event(e) if e.reason == "ResetRefused" && e.key.starts_with("malformed/"));
            match end {
                Reconciled::Crashed { .. } | Reconciled::Abandoned => assert!(
                    new.iter().all(|f| refused(f) || matches!(f, Fact::Crash { .. } | Fact::Abandoned)),
                    "a malformed request must produce a ResetRefused event and nothing else: {new:?}"
                ),
                _ => {
                    assert_eq!(end, Reconciled::Malformed, "a malformed annotation must be refused");
                    assert!(
                        matches!(new, [f] if refused(f)),
                        "a malformed request must produce a ResetRefused event and nothing else: {new:?}"
                    );
                }
            }
            assert_eq!(world.ledger, ledger_before, "a malformed request must not touch the ledger");
            assert_eq!(world.kube.done, done_before, "a malformed request must not write done");
            assert_eq!(world.kafka.calls, calls_before, "a malformed request must not call Kafka");
            if end == Reconciled::Malformed {
                let status = world.kube.status_reset.as_ref().expect("a malformed request is reported in the status");
                assert_eq!((status.id.as_str(), status.phase.as_str()), ("", "Refused"));
            }
        }
        Current::Request { n, ask } => {
            let id = request_id(n);
            assert_eq!(world.current_id().as_deref(), Some(id.as_str()));
            if ask.targets().is_none() && !matches!(end, Reconciled::Crashed { .. } | Reconciled::Abandoned) {
                assert_eq!(
                    world.kube.done.as_deref(),
                    Some(id.as_str()),
                    "a refused request ({ask:?}) must be marked done: {end:?}"
                );
            }
            if end == Reconciled::Members {
                assert!(
                    ask.targets().unwrap_or_default().iter().any(|s| world
                        .kafka
                        .stray_members
                        .get(s)
                        .copied()
                        .unwrap_or(0)
                        > 0),
                    "request {id} waits for members although no target's group has any"
                );
            }
            if matches!(end, Reconciled::SharedRefused | Reconciled::SharedWaits) {
                assert_eq!(
                    world.kafka.calls, calls_before,
                    "request {id}: the shared-group rule held it back, yet it called Kafka"
                );
                let shown = world.kube.status_reset.as_ref().map(|r| (r.id.as_str(), r.phase));
                let phase =
                    if end == Reconciled::SharedRefused { RequestPhase::Refused } else { RequestPhase::Waiting };
                assert_eq!(shown, Some((id.as_str(), phase)), "request {id}: the status shows the shared-group rule");
            }
            if end == Reconciled::SharedRefused {
                let shown = world.kube.status_at_done.as_ref().map(|r| (r.id.as_str(), r.phase));
                assert_eq!(
                    shown,
                    Some((id.as_str(), RequestPhase::Refused)),
                    "request {id}: refused, shown before done"
                );
            }
            if end == Reconciled::Waiting {
                assert_eq!(world.kafka.calls, calls_before, "a waiting request must not call Kafka");
                assert!(
                    ask.targets().unwrap_or_default().iter().any(|s| world.kube.runs(*s)),
                    "request {id} waits although none of its targets runs"
                );
            }
            // A crash point past the drive's last effect never fires: such a reconcile counts too.
            if !matches!(end, Reconciled::Crashed { .. })
                && let Some(id) = must
            {
                assert!(
                    matches!(end, Reconciled::Done | Reconciled::SharedRefused),
                    "liveness: a quiet world must finish request {id} in one reconcile: {end:?}"
                );
                assert_eq!(world.kube.done.as_deref(), Some(id.as_str()), "liveness: request {id} must be done");
            }
        }
    }
    world
}

impl<const STRICT: bool, const OUTCOME_IN_STATUS: bool> StateMachineTest for ResetTest<STRICT, OUTCOME_IN_STATUS> {
    type SystemUnderTest = World;
    type Reference = Model;

    fn init_test(model: &Model) -> World {
        let mut world = World::new(&model.init);
        world.outcome_in_status = OUTCOME_IN_STATUS;
        world.settle = model.settle;
        world.summaries = model.summaries;
        world
    }

    fn apply(mut world: World, model: &Model, t: Transition) -> World {
        match t {
            Transition::Reconcile { crash_after, order, replace, lane_shift, shared } => {
                world.lane_shift = usize::from(lane_shift);
                world.shared = shared.map(|refused| {
                    let why = "consumer group shared with another AnkkaFlow".to_string();
                    if refused { Verdict::Refused(why) } else { Verdict::Waits(why) }
                });
                let mut world = reconcile(world, model, crash_after, &order, replace);
                // The other resource is gone again by the next reconcile.
                world.shared = None;
                return world;
            }
            Transition::InjectKubeFault { kind, count } => world.inject_kube(kind, count),
            Transition::LoseLedger => world.lose_ledger(),
            Transition::Recreate => world.recreate(),
            Transition::StartTargets { streamlet } => world.start(streamlet),
            Transition::StopTargets { streamlet, linger } => world.stop(streamlet, linger),
            Transition::ConsumerReadsAll { streamlet } => world.consumer_reads_all(streamlet),
            Transition::AddStrayMember { streamlet } => world.add_stray_member(streamlet),
            Transition::RemoveStrayMember { streamlet } => world.remove_stray_member(streamlet),
            Transition::InjectFault { kind, count, skip } => {
                world.inject(Fault::Pass, skip);
                world.inject(kind, count);
            }
            Transition::Arm { what } => world.arm(what),
            Transition::AddPartition { streamlet } => world.add_partition(streamlet),
            Transition::StrayCommit { streamlet } => world.stray_commit(streamlet),
            Transition::BrokerCarriesOut { pick } => world.broker_carries_out(pick),
            Transition::BrokerRestart => world.restart_broker(),
            Transition::Produce { streamlet, partition, n } => world.produce(streamlet, partition, n),
            Transition::DeleteRecords { streamlet, partition, by } => world.delete_records(streamlet, partition, by),
            Transition::NewRequest { ask } => {
                let Current::Request { n, .. } = model.current else { unreachable!("the model just wrote a request") };
                world.write_request(n, ask);
            }
            Transition::MalformedRequest { kind } => world.write_malformed(kind),
        }
        world
    }

    fn check_invariants(world: &World, _model: &Model) {
        let v = world.violations(Self::accepted());
        if !v.is_empty() {
            let facts: Vec<String> = world.facts.iter().enumerate().map(|(i, f)| format!("{i:>3} {f:?}")).collect();
            panic!("invariants broken:\n{}\nfacts:\n{}", v.join("\n"), facts.join("\n"));
        }
    }

    /// Liveness: once every target stops, no member stays and Kafka stops failing, one more
    /// reconcile finishes the request, and every invariant still holds.
    fn teardown(mut world: World, model: Model) {
        for s in Streamlet::ALL {
            world.stop(s, false);
            while world.kafka.stray_members.get(&s).copied().unwrap_or(0) > 0 {
                world.remove_stray_member(s);
            }
        }
        world.kafka.faults.clear();
        world.kube.faults.clear();
        world.shared = None;
        let end = world.reconcile(None);
        if let Current::Request { n, .. } = model.current {
            let id = request_id(n);
            assert_eq!(
                world.kube.done.as_deref(),
                Some(id.as_str()),
                "liveness: with targets stopped, no members and no faults, request {id} must be done ({end:?})"
            );
        }
        let v = world.violations(Self::accepted());
        if !v.is_empty() {
            let facts: Vec<String> = world.facts.iter().enumerate().map(|(i, f)| format!("{i:>3} {f:?}")).collect();
            panic!("invariants broken after the final reconcile:\n{}\nfacts:\n{}", v.join("\n"), facts.join("\n"));
        }
    }
}

/// The generator reaches the states that matter often enough: a fixed sample of histories is run,
/// and the share of histories reaching each is printed (`--nocapture`) and held above a floor, so that
/// a change to the generator cannot quietly make the model shallow.
#[test]
fn generated_histories_reach_the_interesting_states() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    const SAMPLE: usize = 256;
    let mut runner = TestRunner::deterministic();
    let strategy = Model::sequential_strategy(1..=40);
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut longest = 0;
    for _ in 0..SAMPLE {
        let (mut model, transitions, _) = strategy.new_tree(&mut runner).expect("a history").current();
        longest = longest.max(transitions.len());
        let mut world = World::new(&model.init);
        world.settle = model.settle;
        world.summaries = model.summaries;
        for t in transitions {
            model = Model::apply(model, &t);
            world = <ResetTest<false, false> as StateMachineTest>::apply(world, &model, t);
        }
        for what in flow_ledger_tests::coverage::reached(&world) {
            *counts.entry(what).or_default() += 1;
        }
    }
    println!("{SAMPLE} histories, longest {longest} transitions; histories reaching:");
    for (what, n) in &counts {
        println!("  {:>5.1}%  {what}", 100.0 * *n as f64 / SAMPLE as f64);
    }
    for (what, n) in &counts {
        assert!(*n * 100 >= SAMPLE * 3, "only {n} of {SAMPLE} histories reach: {what}");
    }
    assert_eq!(counts.len(), 19, "some state is never reached: {counts:?}");
}
