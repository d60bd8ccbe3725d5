//! Drives one resource's reset request: a `flow_core::reset::Run`, built from a fresh read, says
//! what to start, what fact it needs, and what to wait for, and this module carries it out against
//! Kubernetes, Kafka and the ledger, feeding back what happened (see the run loop in
//! `flow_core::reset`'s `run` module). Every decision, and the order of every effect, is core's;
//! this is the I/O.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use flow_adapters::kafka::{ResetCalls, TopicRead};
use flow_adapters::kube as k;
use flow_adapters::ledger::Owner;
use flow_core::events::Event;
use flow_core::names::{self, GroupId};
use flow_core::reset::{
    Drive, DriveOptions, End, Ended, Fresh, GroupOutcome, Input, Inspection, KafkaCall, KafkaFailure, Need, Next, Pins,
    Report, Run, State, Timestamp, Work,
};
use flow_core::resource::{AnkkaFlow, AnkkaFlowStatus};
use flow_core::targets::InletTarget;
use futures::future::{BoxFuture, Shared};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use kube::{Api, ResourceExt};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::api::{Error, MayAct, Recorder, timed};
use crate::connections::Connections;
use crate::context::{Context, now};
use crate::faults;
use crate::metrics::RequesterLabels;
use crate::writes::Object;

/// How long until `at`, from now (zero once it has passed).
fn until(at: Timestamp) -> Duration {
    now().until(at)
}

/// Carries the resource's reset request as far as it can go now.
///
/// `status` holds the rest of the status this reconcile computed; this fills in `reset` and
/// `resetHistory`. While a group's intent or outcome is made durable, the status is written with
/// it, so that the cluster holds per-group progress even if the ledger is lost. Returns when to look
/// again (a waiting request).
///
/// `quiet` is sent once every group of the request is in its settle or waits for a retry, and
/// dropped when the drive returns: until then, the reconcile keeps other API calls off the reset's
/// critical path.
///
/// # Errors
/// A Kubernetes or ledger failure; the request is then rebuilt from durable state on the retry.
pub async fn drive(
    ctx: &Context,
    cached: &AnkkaFlow,
    status: &mut AnkkaFlowStatus,
    quiet: oneshot::Sender<()>,
) -> Result<Option<Duration>, Error> {
    if let Some(s) = &cached.status {
        status.reset.clone_from(&s.reset);
        status.reset_history.clone_from(&s.reset_history);
    }
    if k::reset_annotations(cached).0.is_none() {
        return Ok(None);
    }
    // Act only on a fresh read: the watch cache may predate our own done write (case D2). Unless
    // the operator's own watch of the pods is current (`crate::stopped::running`), the pipeline's
    // pods are listed at the same time (for the pipeline id the cache has, and again when the run
    // needs them in the rare case the fresh read names another): the list does not depend on the
    // read, and the group's members, checked in Kafka before any commit, stay the guard of last
    // resort.
    let ns = cached.namespace().ok_or(Error::Incomplete("namespace"))?;
    let api: Api<AnkkaFlow> = Api::namespaced(ctx.client.clone(), &ns);
    let name = cached.name_any();
    let listed = async {
        match watched_pods(cached) {
            Some(_) => None,
            None => timed(k::running_pods(&ctx.client, &ns, &cached.spec.pipeline)).await.ok(),
        }
    };
    let (flow, pods) = tokio::join!(timed(api.get(&name)), listed);
    let flow = flow?;
    let pods = pods.filter(|_| flow.spec.pipeline == cached.spec.pipeline);
    // Every write of this drive lands on the object just read, or nowhere (`crate::writes`).
    let object = Arc::new(Object::of(ctx, &flow)?);
    let (request, done) = k::reset_annotations(&flow);
    let flow_status = flow.status.as_ref();
    let written = k::request_written_at(&flow);
    let annotation = |key: &str| flow.annotations().get(key).map(String::as_str);
    let fresh = Fresh {
        uid: object.uid(),
        request,
        done,
        written: written.as_deref(),
        reset: flow_status.and_then(|s| s.reset.as_ref()),
        history: flow_status.map_or(&[], |s| &s.reset_history),
        requested_by: annotation(names::ANNOTATION_REQUESTED_BY),
        decision: annotation(names::ANNOTATION_DECISION),
        decided_by: annotation(names::ANNOTATION_DECIDED_BY),
    };
    let options = DriveOptions {
        settle: Duration::from_secs(ctx.settings.reset_settle_seconds),
        concurrency: usize::from(ctx.settings.reset_concurrency),
        retry_for: Duration::from_secs(ctx.settings.reset_retry_seconds),
        approval: ctx.settings.approval_policy(&ns, annotation(names::ANNOTATION_APPROVAL)),
    };
    let mut run = Run::new(&fresh, flow.spec.clone(), options, now());
    // Counted when first taken up: before its first status write, the status names another request.
    if run.taken_up() {
        let requester = flow_core::reset::requester_kind(fresh.requested_by).to_string();
        ctx.metrics.reset_requests.get_or_create(&RequesterLabels { requester }).inc();
    }
    let io = Io {
        ctx,
        flow: &flow,
        api: &api,
        object: Arc::clone(&object),
        owner: Owner { namespace: &ns, name: &name, uid: object.uid() },
        connections: Connections::new(ctx),
        pods,
        lanes: None,
        topics: Arc::default(),
        events: Events::new(&flow),
        quiet: Some(quiet),
    };
    io.run(&mut run, status).await
}

/// The pipeline's pods that can still run, per streamlet, from the operator's own watch
/// (`crate::stopped::running`), when it is current and shows no pod of a streamlet stopped in the
/// spec: the page's path, where the reset goes on at once. Otherwise `None`, and the API server is
/// asked: a pod the watch has not seen go yet never makes a reset wait.
fn watched_pods(flow: &AnkkaFlow) -> Option<BTreeMap<String, u32>> {
    let pods = crate::stopped::running(&flow.namespace()?, &flow.spec.pipeline)?;
    let mut stopped = flow.spec.streamlets.iter().filter(|s| s.replicas == 0);
    stopped.all(|s| pods.get(&s.name).is_none_or(|n| *n == 0)).then_some(pods)
}

/// What one run of a request works with: its I/O.
struct Io<'a> {
    ctx: &'a Context,
    flow: &'a AnkkaFlow,
    /// For reads: whether a newer request superseded this one.
    api: &'a Api<AnkkaFlow>,
    /// For writes: the status and the done annotation, on the object read only.
    object: Arc<Object>,
    owner: Owner<'a>,
    connections: Connections<'a>,
    /// The pipeline's running pods, listed beside the fresh read (when it names the same pipeline).
    pods: Option<BTreeMap<String, u32>>,
    /// The lane of each group's Kafka calls, given at the first call.
    lanes: Option<BTreeMap<GroupId, usize>>,
    /// The topic reads of the run's inspections under way.
    topics: Arc<TopicReads>,
    /// Sent when the drive first sleeps (see [`drive`]).
    quiet: Option<oneshot::Sender<()>>,
    /// The run's events being recorded: they are off the reset's critical path, a few at a time,
    /// and awaited before the done write, so that a request shows done only with its events
    /// recorded.
    events: Events,
}

/// Events of one run recorded at once at most. The outcomes of many groups come together (16 or
/// more at each status write), and as many event creations at once kept the API server from the
/// run's next status write, which the remaining commits wait for: in a reset of 200 groups two such
/// writes took 270-340 ms beside 78 creations, against 50-90 ms otherwise (docs/performance.md,
/// "Where a large reset's CPU went").
const EVENTS_AT_ONCE: usize = 4;

/// Events being recorded beside the run's other work (see [`Io`]), [`EVENTS_AT_ONCE`] at a time.
struct Events {
    flow: Arc<AnkkaFlow>,
    recording: Vec<JoinHandle<()>>,
    turns: Arc<tokio::sync::Semaphore>,
}

impl Events {
    fn new(flow: &AnkkaFlow) -> Self {
        let turns = Arc::new(tokio::sync::Semaphore::new(EVENTS_AT_ONCE));
        Events { flow: Arc::new(flow.clone()), recording: Vec::new(), turns }
    }

    /// Starts recording `event` (once its turn comes).
    fn record(&mut self, events: &Recorder, event: Event) {
        let (events, flow, turns) = (events.clone(), Arc::clone(&self.flow), Arc::clone(&self.turns));
        self.recording.push(tokio::spawn(async move {
            // The semaphore is never closed; without a turn the event is recorded all the same.
            let _turn = turns.acquire_owned().await.ok();
            events.record(flow.as_ref(), &event).await;
        }));
    }

    /// Waits until every event started so far is recorded (or its failure logged).
    async fn recorded(&mut self) {
        for task in self.recording.drain(..) {
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "recording an event ended early");
            }
        }
    }
}

/// A status write under way: its persist's token, what it makes durable, and the write.
struct Writing {
    token: u64,
    intent: bool,
    outcome: bool,
    task: JoinHandle<Result<(), Error>>,
}

/// What woke the run loop while work was in flight.
enum Woke {
    Kafka(Result<Input, tokio::task::JoinError>),
    Written(Result<Result<(), Error>, tokio::task::JoinError>),
    Tick,
}

/// The run's work under way: Kafka calls and status writes run as tasks of their own, beside each
/// other. They are never aborted: a run that stops early waits for them (a blocking Kafka call cannot
/// be cancelled, and one that outlived its run unnoticed could land after a newer run's).
#[derive(Default)]
struct Flight {
    calls: FuturesUnordered<JoinHandle<Input>>,
    writing: Option<Writing>,
    /// The first failure, which ends the run once nothing is in flight.
    failure: Option<Error>,
}

impl Flight {
    /// Waits until a call or the write under way ends, or until `tick`, and reports it; then every
    /// Kafka result that came in meanwhile, so that their persists share one ledger flush and one
    /// status write.
    async fn wait(&mut self, run: &mut Run, tick: Option<Timestamp>) {
        // Waits only for tasks that exist: the run's count of work in flight is the same.
        debug_assert_eq!(run.in_flight(), self.calls.len() + usize::from(self.writing.is_some()));
        let written = async {
            match self.writing.as_mut() {
                Some(w) => (&mut w.task).await,
                None => std::future::pending().await,
            }
        };
        let woke = tokio::select! {
            Some(joined) = self.calls.next(), if !self.calls.is_empty() => Woke::Kafka(joined),
            w = written => Woke::Written(w),
            () = tokio::time::sleep(tick.map_or(Duration::MAX, until)), if tick.is_some() => Woke::Tick,
        };
        match woke {
            Woke::Kafka(joined) => self.result(run, joined),
            Woke::Written(written) => self.written(run, written).await,
            Woke::Tick => run.handle(Report::Tick, now()),
        }
        while let Some(Some(joined)) = self.calls.next().now_or_never() {
            self.result(run, joined);
        }
    }

    /// Reports a Kafka call's result; a call that panicked stops the run.
    fn result(&mut self, run: &mut Run, joined: Result<Input, tokio::task::JoinError>) {
        match joined {
            Ok(input) => run.handle(Report::Kafka(input), now()),
            Err(e) => {
                run.handle(Report::KafkaLost, now());
                self.failure.get_or_insert(Error::Task(e));
            }
        }
    }

    /// Reports the end of the write under way.
    async fn written(&mut self, run: &mut Run, written: Result<Result<(), Error>, tokio::task::JoinError>) {
        let Some(done) = self.writing.take() else { return };
        match written.map_err(Error::Task).and_then(|w| w) {
            Ok(()) => {
                tracing::debug!(token = done.token, "persist durable");
                if done.intent {
                    faults::point("after-intent").await;
                }
                if done.outcome {
                    faults::point("after-outcome").await;
                }
                run.handle(Report::Persisted(done.token), now());
            }
            Err(e) => {
                run.handle(Report::PersistFailed(done.token), now());
                self.failure.get_or_insert(e);
            }
        }
    }
}

impl Io<'_> {
    /// Carries out what `run` says until it is over: the run loop of `flow_core::reset::Run`.
    async fn run(mut self, run: &mut Run, status: &mut AnkkaFlowStatus) -> Result<Option<Duration>, Error> {
        let mut flight = Flight::default();
        loop {
            match run.poll(now()) {
                Next::Start(work) => self.start(work, run, status, &mut flight).await,
                // Asked with nothing in flight: a failure here ends the run at once.
                Next::Need(need) => {
                    let report = self.need(need, run.id().unwrap_or_default()).await?;
                    run.handle(report, now());
                }
                Next::Wait(tick) => flight.wait(run, tick).await,
                Next::Sleep(at) => {
                    if let Some(quiet) = self.quiet.take() {
                        // Nobody may be waiting: the apply waits only when the reconcile began
                        // with a request pending, and may have ended already.
                        let _ = quiet.send(());
                    }
                    // Nothing is in flight while it sleeps, and everything it did is durable: on a
                    // stop the run ends here, and the next operator goes on from the ledger and the
                    // status (docs/reset.md, "Guarantees"). Otherwise a group that retries (up to
                    // FLOW_RESET_RETRY_SECONDS) would hold the shutdown, and the hand-over, as long.
                    let stop = self.ctx.stop.clone();
                    tokio::select! {
                        () = tokio::time::sleep(until(at)) => run.handle(Report::Tick, now()),
                        () = stop.requested() => {
                            tracing::info!(
                                namespace = self.owner.namespace,
                                name = %self.flow.name_any(),
                                request = run.id().unwrap_or_default(),
                                "the operator stops: the reset waits for its next attempt, which the next operator makes"
                            );
                            self.events.recorded().await;
                            return Ok(Some(until(at)));
                        }
                    }
                }
                Next::Finished(end) => return self.finish(run, end, status, flight.failure).await,
            }
        }
    }

    /// Ends the run: the events that say why it waits are recorded before the drive lets the apply
    /// start, so that they come in the order they were decided; then the status as the run left it.
    async fn finish(
        &mut self,
        run: &mut Run,
        end: End,
        status: &mut AnkkaFlowStatus,
        failure: Option<Error>,
    ) -> Result<Option<Duration>, Error> {
        self.events.recorded().await;
        if matches!(end.how, Ended::Done | Ended::Stalled) {
            count_finished(self.ctx, run);
        }
        if let Some(reset) = end.reset {
            status.reset = Some(reset);
        }
        if let Some(history) = end.history {
            status.reset_history = history;
        }
        if end.how == Ended::Abandoned {
            return Err(failure.unwrap_or(Error::Incomplete("a reason to stop the reset")));
        }
        Ok(end.recheck)
    }

    /// Reads the fact the run needs (`id`: its request).
    async fn need(&mut self, need: Need, id: &str) -> Result<Report, Error> {
        let (ctx, flow) = (self.ctx, self.flow);
        Ok(match need {
            // A ledger that cannot be read is reported by `crate::ledger`; the status stands in for it.
            Need::Ledger(of) => Report::Ledger(ctx.ledger.progress(self.owner, &of).await),
            Need::Pods => {
                let pods = match self.pods.take().or_else(|| watched_pods(flow)) {
                    Some(pods) => pods,
                    None => timed(k::running_pods(&ctx.client, self.owner.namespace, &flow.spec.pipeline)).await?,
                };
                // When this process saw each streamlet stopped, by its own watch: the settle counts from it.
                let stopped = crate::stopped::stopped(self.owner.namespace, &flow.spec.pipeline);
                Report::Pods { pods, stopped }
            }
            // About to touch Kafka: the shared-group rule, asked at every run, a resumed request's
            // too (no status decides a security rule).
            Need::Shared(groups) => Report::Shared(crate::tenancy::shared_reset_verdict(ctx, flow, id, &groups).await?),
            // Looked up in the controllers' cache, which the watch keeps within milliseconds of the
            // API server (a request written in those milliseconds is as late as one written just
            // after a fresh read); the run asks for a fresh read when the cache shows another.
            Need::Requested { fresh: false } => {
                let annotation = ctx.cached(flow).and_then(|f| k::reset_annotations(&f).0.map(str::to_string));
                Report::Requested { annotation, fresh: false }
            }
            Need::Requested { fresh: true } => {
                let read = timed(self.api.get(&flow.name_any())).await?;
                Report::Requested { annotation: k::reset_annotations(&read).0.map(str::to_string), fresh: true }
            }
        })
    }

    /// Starts one piece of work. What commits (a fence too), publishes or writes happens only while
    /// this instance holds the Lease with a margin: refused work was never started. A failure to
    /// start ends the run once nothing is in flight.
    async fn start(&mut self, work: Work, run: &mut Run, status: &mut AnkkaFlowStatus, flight: &mut Flight) {
        if work.acts() && !self.ctx.may_act.now() {
            run.handle(Report::NotStarted(work), now());
            flight.failure.get_or_insert(Error::LeaseLost);
            return;
        }
        if let Err(e) = self.carry_out(work, run, status, flight).await {
            run.handle(Report::Failed, now());
            flight.failure.get_or_insert(e);
        }
    }

    /// Carries out one piece of work the run may start.
    async fn carry_out(
        &mut self,
        work: Work,
        run: &Run,
        status: &mut AnkkaFlowStatus,
        flight: &mut Flight,
    ) -> Result<(), Error> {
        match work {
            Work::Kafka(call) => {
                let machine = run.drive().map(Drive::machine);
                let at = machine.and_then(|m| m.destination().time()).map(|t| t.0);
                // A dry run's plan warns about the topic's retention and compaction.
                let configs = match &call {
                    KafkaCall::Inspect(target) if machine.is_some_and(|m| m.dry_run()) => {
                        topic_configs(self.ctx, &mut self.connections, self.flow, target).await
                    }
                    _ => BTreeMap::new(),
                };
                // A group outside the map (never expected) shares lane 0.
                let lanes = self.lanes.get_or_insert_with(|| lanes(run));
                let lane = lanes.get(call.group()).copied().unwrap_or(0);
                let may_act = self.ctx.may_act.clone();
                let inputs = CallInputs { at, configs, topics: Arc::clone(&self.topics) };
                let call = run_kafka(&mut self.connections, self.flow, lane, call, inputs, may_act).await;
                flight.calls.push(tokio::spawn(call));
            }
            Work::Persist(persist) => {
                tracing::debug!(token = persist.token, writes = persist.writes.len(), "persist started");
                status.reset = Some(persist.reset.clone());
                status.reset_history.clone_from(&persist.history);
                flow_core::render::status::sync_reset_complete(status, k8s_openapi::jiff::Timestamp::now());
                let (object, snapshot) = (Arc::clone(&self.object), status.clone());
                let fail = persist.carries_intent() && faults::fail("intent-status-write");
                let (intent, outcome) = (persist.carries_intent(), persist.carries_outcome());
                let ledger = self.ctx.ledger.clone();
                let (namespace, name, id) =
                    (self.owner.namespace.to_string(), self.flow.name_any(), run.id().unwrap_or_default().to_string());
                flight.writing = Some(Writing {
                    token: persist.token,
                    intent,
                    outcome,
                    task: tokio::spawn(async move {
                        // The ledger (its flush on a blocking thread) and the status, which carries
                        // this progress too, at once: neither waits for the other's round trip. A
                        // ledger that cannot take it leaves the status alone to hold it, and never
                        // blocks a reset. The persist counts as durable once both ended, so nothing
                        // that depends on it starts before the ledger holds it too (the ledger
                        // tests model this: the ledger is written as the persist starts).
                        let to_ledger = async {
                            if !persist.writes.is_empty() {
                                let owner = Owner { namespace: &namespace, name: &name, uid: object.uid() };
                                ledger.put(owner, &id, persist.writes).await;
                            }
                        };
                        let to_status = async {
                            if fail {
                                return Err(
                                    kube::Error::Service("fault injection: the status write fails".into()).into()
                                );
                            }
                            object.status(&snapshot).await
                        };
                        let ((), written) = tokio::join!(to_ledger, to_status);
                        written
                    }),
                });
            }
            Work::Record(event) => self.events.record(&self.ctx.events, event),
            Work::WriteDone(id) => {
                self.events.recorded().await;
                faults::point("before-done").await;
                let name = self.flow.name_any();
                self.object.done(&id).await?;
                tracing::info!(namespace = self.flow.namespace().unwrap_or_default(), name = %name, request = %id, "reset request done");
            }
        }
        Ok(())
    }
}

/// The topic reads of one run, per topic of the pipeline (so per connection).
///
/// - **Inspections** (per topic and instant of a reset to a time): an inspection joins the read of
///   its topic under way instead of asking Kafka for the same offsets again, so the groups that read
///   one topic (a fan-out's) share it; one that finds none under way, or only one that ended, starts
///   its own. So every inspection sees the log as it was while the inspection was under way, never
///   an older read.
/// - **Read-backs**: the partitions the topic has, listed after the group's write was sent, so that
///   a partition added to the topic since its inspection is read back too (docs/reset.md). A
///   read-back takes the latest listing of its topic, under way or ended, when it started at or after
///   its own write was sent, and starts a new one otherwise: the groups whose writes overlap share
///   one listing instead of one each. Kafka orders a group's write and a metadata request no more
///   than that (they go to different brokers, and brokers learn of new partitions each on its own).
#[derive(Default)]
struct TopicReads {
    reads: Mutex<HashMap<TopicKey, SharedRead>>,
    listings: Mutex<HashMap<(String, String), (Instant, SharedListing)>>,
}

/// A topic of the pipeline (its id, which names its connection), its Kafka name, and the instant of
/// a reset to a time.
type TopicKey = (String, String, Option<i64>);

/// A topic read that several inspections await.
type SharedRead = Shared<BoxFuture<'static, Result<TopicRead, KafkaFailure>>>;

/// A listing of a topic's partitions that several read-backs await.
type SharedListing = Shared<BoxFuture<'static, Result<Vec<i32>, KafkaFailure>>>;

impl TopicReads {
    /// The read of `target`'s topic: the one under way, or a new one over `client`.
    fn read(&self, target: &InletTarget, at: Option<i64>, client: &Arc<dyn ResetCalls>) -> SharedRead {
        let key = (target.topic_id.clone(), target.topic.clone(), at);
        let mut reads = self.reads.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(read) = reads.get(&key).filter(|r| r.peek().is_none()) {
            return read.clone();
        }
        tracing::debug!(topic = %target.topic, "topic read started");
        let read = Arc::clone(client).read_topic(target.topic.clone(), at).shared();
        reads.insert(key, read.clone());
        read
    }

    /// The partitions of `target`'s topic, listed at or after `sent` (when the group's write was
    /// sent): the latest listing, when it started then or later and did not fail, or a new one over
    /// `client`.
    fn partitions(&self, target: &InletTarget, sent: Instant, client: &Arc<dyn ResetCalls>) -> SharedListing {
        let key = (target.topic_id.clone(), target.topic.clone());
        let mut listings = self.listings.lock().unwrap_or_else(|p| p.into_inner());
        let usable = |(started, listing): &&(Instant, SharedListing)| {
            *started >= sent && !matches!(listing.peek(), Some(Err(_)))
        };
        if let Some((_, listing)) = listings.get(&key).filter(usable) {
            return listing.clone();
        }
        tracing::debug!(topic = %target.topic, "partition listing started");
        let listing = Arc::clone(client).list_partitions(target.topic.clone()).shared();
        listings.insert(key, (Instant::now(), listing.clone()));
        listing
    }
}

/// What a Kafka call takes from its run beside the call itself: for an inspection, `at`, the instant
/// a reset to a time looks offsets up for (milliseconds since the Unix epoch), and a dry run's topic
/// settings; for an inspection and a read-back, the run's topic reads ([`TopicReads`]).
struct CallInputs {
    at: Option<i64>,
    configs: BTreeMap<String, String>,
    topics: Arc<TopicReads>,
}

/// Why a commit or a fence was not sent.
const NOT_LEADER: &str = "not sent: this operator no longer holds the Lease with a margin";

/// Consumer groups with a Kafka call under way in this process, whichever drive started it.
///
/// A drive waits for its own calls before it gives up, but a reconcile can also be dropped (the
/// controller stopping), and a blocking Kafka call cannot be cancelled: it runs on. So a call claims
/// its group first and holds the claim until the call has truly ended, and the next call on the
/// group, from a newer drive, waits for it. A call that ended without Kafka's answer may still be
/// held by the broker: the group's next calls then go over its connection, behind it ([`PINS`]).
struct Busy {
    groups: Mutex<HashSet<GroupId>>,
    freed: Notify,
}

static BUSY: LazyLock<Busy> = LazyLock::new(|| Busy { groups: Mutex::new(HashSet::new()), freed: Notify::new() });

/// The claim of a group: dropped when its call ended.
struct Claim(GroupId);

impl Drop for Claim {
    fn drop(&mut self) {
        BUSY.groups.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.0);
        BUSY.freed.notify_waiters();
    }
}

/// Per consumer group, the client (and so the connection) of its latest write that Kafka has not
/// answered: the group's next calls go over it, behind that write, whichever drive or request makes
/// them (`flow_core::reset::Pins`). Held for the process: a write of one request must not be
/// overtaken by the next request's calls. The client is kept alive by it even when the pool has
/// let it go.
/// Keyed by the cluster's bootstrap servers and the group: a group of the same name on another
/// cluster is another group.
static PINS: LazyLock<Mutex<Pins<PinKey, Arc<dyn ResetCalls>>>> = LazyLock::new(|| Mutex::new(Pins::new()));

/// A group on a cluster: the cluster's bootstrap servers, and the group.
type PinKey = (String, GroupId);

/// The client the next call of group `key` must use, if a write of it is unanswered.
fn pinned(key: &PinKey) -> Option<Arc<dyn ResetCalls>> {
    PINS.lock().unwrap_or_else(|p| p.into_inner()).connection(key).cloned()
}

/// Waits until no call is under way on `group`, and claims it.
async fn claim(group: &GroupId) -> Claim {
    loop {
        let freed = BUSY.freed.notified();
        tokio::pin!(freed);
        // Registered before looking, so that a release between the look and the wait is not missed.
        freed.as_mut().enable();
        if BUSY.groups.lock().unwrap_or_else(|p| p.into_inner()).insert(group.clone()) {
            return Claim(group.clone());
        }
        tracing::debug!(%group, "waiting for an earlier Kafka call on the group to end");
        freed.await;
    }
}

/// Starts one Kafka call: resolves its connection's client and bulkhead now (reading the cluster
/// Secrets the first time), and returns the call as a future that yields the machine's input. The
/// future holds the group's [`Claim`] and its turn of the bulkhead while the call runs; a call that
/// gets no turn in time fails as transient, and the group retries it. An inspection joins the read of its
/// topic under way, if any, and a read-back takes a listing of its topic's partitions started once its
/// commit was sent ([`TopicReads`]).
async fn run_kafka(
    connections: &mut Connections<'_>,
    flow: &AnkkaFlow,
    lane: usize,
    call: KafkaCall,
    inputs: CallInputs,
    may_act: MayAct,
) -> impl Future<Output = Input> + Send + 'static {
    let group = call.group().clone();
    let pipeline = (flow.namespace().unwrap_or_default(), flow.spec.pipeline.clone());
    let client = connections.reset_client(flow, &call.target().topic_id, lane).await;
    let cluster = connections.get(flow, &call.target().topic_id).await.map(|c| c.bootstrap_servers).ok();
    let gate = connections.gate(flow, &call.target().topic_id).await;
    let (name, writes) = (call.name(), call.writes());
    async move {
        let _claim = claim(&group).await;
        let key = cluster.map(|c| (c, group.clone()));
        // Looked up once the claim is held: the call before it may just have pinned the group.
        let client = match key.as_ref().and_then(pinned) {
            Some(pinned) => {
                tracing::info!(%group, call = name, "Kafka has not answered an earlier write of the group: the call goes over that write's connection, behind it");
                Ok(pinned)
            }
            None => client,
        };
        // Its turn of the connection's bulkhead, held until the call ended (see `crate::connections::Gate`).
        let (client, _turn) = match (client, gate) {
            (Ok(client), Ok(gate)) => match gate.enter().await {
                Ok(turn) => (Ok(client), Some(turn)),
                Err(f) => (Err(f), None),
            },
            (Err(f), _) | (_, Err(f)) => (Err(f), None),
        };
        let used = client.as_ref().ok().map(Arc::clone);
        let started = std::time::Instant::now();
        tracing::debug!(%group, call = name, lane, "Kafka call started");
        let input = match call {
            KafkaCall::Inspect(target) => {
                let streamlet = target.streamlet.clone();
                let result = async {
                    let client = client?;
                    let read = inputs.topics.read(&target, inputs.at, &client).await?;
                    client.inspect(target, read).await
                }
                .await;
                if result.as_ref().is_ok_and(|seen| seen.members > 0) {
                    // A consumer runs after its streamlet's pods went: its stop is not known.
                    crate::stopped::members_seen(&pipeline, &streamlet);
                }
                Input::Inspected {
                    group,
                    result: result.map(|seen| Inspection { topic_configs: inputs.configs, ..seen }),
                }
            }
            KafkaCall::Fence { target, offsets, metadata } => {
                faults::group_point("before-fence", group.as_str()).await;
                let result = if may_act.now() {
                    async { client?.fence(target, offsets, metadata).await }.await
                } else {
                    Err(KafkaFailure::unavailable(NOT_LEADER))
                };
                Input::Fenced { group, result }
            }
            KafkaCall::Commit { target, offsets, metadata } => {
                // Checked again as late as can be: the claim may have waited. The read-back goes
                // over the same client, to the same coordinator: behind the commit.
                let result = if may_act.now() {
                    async {
                        let client = client?;
                        let sent = Arc::clone(&client).write(target.clone(), offsets, metadata).await?;
                        faults::group_point("before-read-back", group.as_str()).await;
                        let partitions = inputs.topics.partitions(&target, sent, &client).await?;
                        client.read_back(target, partitions).await
                    }
                    .await
                } else {
                    Err(KafkaFailure::unavailable(NOT_LEADER))
                };
                faults::group_point("after-commit", group.as_str()).await;
                Input::ReadBack { group, result }
            }
            KafkaCall::Read(target) => {
                Input::Read { group, result: async { client?.read_committed(target).await }.await }
            }
        };
        tracing::debug!(group = %input.group().map_or("", |g| g.as_str()), call = name, ms = started.elapsed().as_millis(), "Kafka call ended");
        if let (Some(client), Some(key)) = (used, key) {
            let answered = input.answered();
            if writes && !answered {
                tracing::warn!(group = %key.1, call = name, "Kafka did not answer the write: the group's next calls go over its connection, behind it");
            }
            PINS.lock().unwrap_or_else(|p| p.into_inner()).ended(&key, client, writes, answered);
        }
        input
    }
}

/// The settings of the topic `target` reads that a plan warns about (`cleanup.policy`,
/// `retention.ms`, `retention.bytes`), over the topic's own connection; empty when they cannot be
/// read (the plan then has no warning about them, and the inspection says why Kafka failed).
async fn topic_configs(
    ctx: &Context,
    connections: &mut Connections<'_>,
    flow: &AnkkaFlow,
    target: &InletTarget,
) -> BTreeMap<String, String> {
    let Ok(conn) = connections.get(flow, &target.topic_id).await else { return BTreeMap::new() };
    let keys = ["cleanup.policy", "retention.ms", "retention.bytes"].map(String::from).into_iter().collect();
    match ctx.kafka.describe(&conn, BTreeMap::from([(target.topic.clone(), keys)])).await.remove(&target.topic) {
        Some(flow_core::render::topics::KafkaTopic::Exists(t)) => t.configs,
        _ => BTreeMap::new(),
    }
}

/// The lane of each group of a request (see `crate::connections::LANES`): its place among the
/// request's groups, so that up to `LANES` groups each have a connection of their own (a hash of
/// the name put 3 of 10 groups on one lane). Each group keeps to its lane for the whole drive, so
/// that its calls stay in order over one connection.
fn lanes(run: &Run) -> BTreeMap<GroupId, usize> {
    match run.drive().map(|d| d.machine().state()) {
        Some(State::Resetting(r)) => r.groups.keys().enumerate().map(|(i, g)| (g.clone(), i)).collect(),
        _ => BTreeMap::new(),
    }
}

/// Counts the groups of a request that just finished, and its duration since it was first seen.
fn count_finished(ctx: &Context, run: &mut Run) {
    let Some(drive) = run.drive_mut() else { return };
    let Some(groups) = drive.outcomes() else { return };
    let mut counted: BTreeMap<&'static str, u64> = BTreeMap::new();
    for (_, outcome) in groups.values() {
        let outcome = match outcome {
            GroupOutcome::Reset { .. } => "reset",
            GroupOutcome::Failed { .. } => "failed",
            // A dry run moved nothing: it is no reset to count.
            GroupOutcome::Planned { .. } => return,
        };
        *counted.entry(outcome).or_default() += 1;
    }
    for (outcome, n) in counted {
        ctx.metrics.reset_groups.get_or_create(&crate::metrics::OutcomeLabels { outcome: outcome.into() }).inc_by(n);
    }
    let requested_at = drive.status(now()).requested_at.unwrap_or_default();
    if let Ok(t) = requested_at.parse::<k8s_openapi::jiff::Timestamp>() {
        let secs = k8s_openapi::jiff::Timestamp::now().duration_since(t).as_secs_f64();
        ctx.metrics.reset_duration.observe(secs.max(0.0));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use flow_adapters::kafka::Call;
    use flow_core::reset::{Committed, Positions};

    use super::*;

    /// A client whose topic reads are counted and end only when told to.
    #[derive(Default)]
    struct Counting {
        reads: AtomicUsize,
        answer: Notify,
        /// Whether partition listings fail.
        listings_fail: std::sync::atomic::AtomicBool,
    }

    impl ResetCalls for Counting {
        fn read_topic(self: Arc<Self>, _topic: String, _at: Option<i64>) -> Call<TopicRead> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                self.answer.notified().await;
                Ok(TopicRead { partitions: vec![0], ..TopicRead::default() })
            })
        }
        fn inspect(self: Arc<Self>, _: InletTarget, _: TopicRead) -> Call<Inspection> {
            unreachable!("not called here")
        }
        fn write(self: Arc<Self>, _: InletTarget, _: BTreeMap<i32, i64>, _: String) -> Call<Instant> {
            unreachable!("not called here")
        }
        fn list_partitions(self: Arc<Self>, _topic: String) -> Call<Vec<i32>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                self.answer.notified().await;
                if self.listings_fail.load(Ordering::SeqCst) {
                    return Err(KafkaFailure::unreachable("no answer"));
                }
                Ok(vec![0])
            })
        }
        fn read_back(self: Arc<Self>, _: InletTarget, _: Vec<i32>) -> Call<Committed> {
            unreachable!("not called here")
        }
        fn read_committed(self: Arc<Self>, _: InletTarget) -> Call<Positions> {
            unreachable!("not called here")
        }
    }

    fn target(group: &str, topic_id: &str) -> InletTarget {
        InletTarget {
            group: GroupId::from_raw(group),
            streamlet: group.into(),
            inlet: "in".into(),
            topic_id: topic_id.into(),
            topic: "shop.events".into(),
        }
    }

    #[tokio::test]
    async fn inspections_of_one_topic_share_the_read_under_way_and_never_one_that_ended() {
        let counting = Arc::new(Counting::default());
        let client: Arc<dyn ResetCalls> = counting.clone();
        let reads = TopicReads::default();
        let first = reads.read(&target("p.a.in", "events"), None, &client);
        let second = reads.read(&target("p.b.in", "events"), None, &client);
        // Another topic of the pipeline (another connection, maybe) and a reset to a time read their own.
        let other = reads.read(&target("p.c.in", "other"), None, &client);
        let timed = reads.read(&target("p.d.in", "events"), Some(1_000), &client);
        assert_eq!(counting.reads.load(Ordering::SeqCst), 3, "the second inspection joined the first's read");
        // The two inspections wait on the one read, which answers once.
        counting.answer.notify_one();
        let both = tokio::spawn(futures::future::join(first, second));
        let (a, b) = both.await.expect("joined");
        assert_eq!(a, b);
        assert!(a.is_ok());
        // A read that ended is never joined: the next inspection reads again.
        let _again = reads.read(&target("p.e.in", "events"), None, &client);
        assert_eq!(counting.reads.load(Ordering::SeqCst), 4);
        drop((other, timed));
    }

    #[tokio::test]
    async fn read_backs_share_a_partition_listing_started_after_their_writes_were_sent() {
        let counting = Arc::new(Counting::default());
        let client: Arc<dyn ResetCalls> = counting.clone();
        let reads = TopicReads::default();
        let sent_a = Instant::now();
        let sent_b = Instant::now();
        // A's write ended first: its listing starts after both writes were sent, and B takes it.
        let a = reads.partitions(&target("p.a.in", "events"), sent_a, &client);
        let b = reads.partitions(&target("p.b.in", "events"), sent_b, &client);
        assert_eq!(counting.reads.load(Ordering::SeqCst), 1, "B took A's listing");
        counting.answer.notify_one();
        let (a, b) = futures::future::join(a, b).await;
        assert_eq!((a.clone(), b), (Ok(vec![0]), Ok(vec![0])));
        // Ended, it still serves a write sent before it started...
        let _c = reads.partitions(&target("p.c.in", "events"), sent_b, &client);
        assert_eq!(counting.reads.load(Ordering::SeqCst), 1);
        // ...but never one sent after: that read-back lists the partitions again.
        std::thread::sleep(Duration::from_millis(2));
        let sent_d = Instant::now();
        let _d = reads.partitions(&target("p.d.in", "events"), sent_d, &client);
        assert_eq!(counting.reads.load(Ordering::SeqCst), 2, "D's write was sent after the listing started");
        // Another topic of the pipeline has its own listing.
        let _e = reads.partitions(&target("p.e.in", "other"), sent_a, &client);
        assert_eq!(counting.reads.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_failed_partition_listing_is_never_taken_again() {
        let counting = Arc::new(Counting::default());
        counting.listings_fail.store(true, Ordering::SeqCst);
        let client: Arc<dyn ResetCalls> = counting.clone();
        let reads = TopicReads::default();
        let sent = Instant::now();
        let failed = reads.partitions(&target("p.a.in", "events"), sent, &client);
        counting.answer.notify_one();
        assert!(failed.await.is_err());
        // Started after the write was sent, but it failed: the next read-back lists again.
        counting.listings_fail.store(false, Ordering::SeqCst);
        let again = reads.partitions(&target("p.b.in", "events"), sent, &client);
        assert_eq!(counting.reads.load(Ordering::SeqCst), 2);
        counting.answer.notify_one();
        assert_eq!(again.await, Ok(vec![0]));
    }
}
