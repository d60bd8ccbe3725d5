//! Drives one resource's reset request through `flow_core::reset::ResetMachine`, carrying out its
//! effects against Kubernetes, Kafka and the ledger (see the drive contract in `flow_core::reset`).

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flow_adapters::kafka;
use flow_adapters::kube as k;
use flow_adapters::ledger::{self, Owner};
use flow_core::events::{Event, EventType};
use flow_core::names::GroupId;
use flow_core::request::ResetRequest;
use flow_core::reset::{Effect, GroupOutcome, Input, Intent, ResetMachine, State, Timestamp, WAIT_RECHECK};
use flow_core::resource::{AnkkaFlow, AnkkaFlowStatus, ResetStatus};
use flow_core::targets::InletTarget;
use kube::{Api, ResourceExt};
use tokio::task::JoinSet;

use crate::connections::Connections;
use crate::context::{Context, Error};
use crate::faults;

fn rfc3339_now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// When the operator first saw a request, and when it finished: kept across reconciles.
struct Stamps {
    requested_at: String,
    finished_at: Option<String>,
}

impl Stamps {
    fn apply(&self, mut r: ResetStatus) -> ResetStatus {
        r.requested_at = Some(self.requested_at.clone());
        if matches!(r.phase.as_str(), "Done" | "Refused") {
            r.finished_at = Some(self.finished_at.clone().unwrap_or_else(rfc3339_now));
        }
        r
    }
}

fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// Carries the resource's reset request as far as it can go now.
///
/// `status` holds the rest of the status this reconcile computed; this fills in `reset` and
/// `resetHistory`. While a group's intent is persisted, the status is written with it, so that the
/// cluster holds per-group progress even if the ledger is lost. Returns when to look again (a
/// waiting request).
///
/// # Errors
/// A Kubernetes or ledger failure; the request is then rebuilt from durable state on the retry.
pub async fn drive(ctx: &Context, cached: &AnkkaFlow, status: &mut AnkkaFlowStatus) -> Result<Option<Duration>, Error> {
    if let Some(s) = &cached.status {
        status.reset.clone_from(&s.reset);
        status.reset_history.clone_from(&s.reset_history);
    }
    if k::reset_annotations(cached).0.is_none() {
        return Ok(None);
    }
    // Act only on a fresh read: the watch cache may predate our own done write (case D2).
    let ns = cached.namespace().ok_or(Error::Incomplete("namespace"))?;
    let api: Api<AnkkaFlow> = Api::namespaced(ctx.client.clone(), &ns);
    let flow = api.get(&cached.name_any()).await?;
    let (Some(raw), done) = k::reset_annotations(&flow) else {
        return Ok(None);
    };
    let request_text = raw.to_string();
    let previous = flow.status.as_ref().and_then(|s| s.reset.clone());
    let old_history = flow.status.as_ref().map(|s| s.reset_history.clone()).unwrap_or_default();

    let request = match ResetRequest::parse(raw) {
        Ok(r) => r,
        Err(why) => {
            record(ctx, &flow, &flow_core::reset::malformed_event(raw, &why)).await;
            status.reset_history = flow_core::reset::history(&old_history, previous.as_ref(), "");
            status.reset = Some(ResetStatus {
                id: String::new(),
                phase: "Refused".into(),
                detail: why.to_string(),
                ..Default::default()
            });
            return Ok(None);
        }
    };
    if let Some(event) = flow_core::reset::superseded_event(previous.as_ref(), &request.id) {
        record(ctx, &flow, &event).await;
    }
    status.reset_history = flow_core::reset::history(&old_history, previous.as_ref(), &request.id);
    let same = previous.as_ref().filter(|p| p.id == request.id);
    let stamps = Stamps {
        requested_at: same.and_then(|p| p.requested_at.clone()).unwrap_or_else(rfc3339_now),
        finished_at: same.and_then(|p| p.finished_at.clone()),
    };
    // The fresh read holds the status the finishing reconcile wrote (the cache may not yet).
    if done == Some(request.id.as_str())
        && let Some(kept) =
            previous.as_ref().filter(|p| p.id == request.id && matches!(p.phase.as_str(), "Done" | "Refused"))
    {
        status.reset = Some(kept.clone());
        return Ok(None);
    }

    let name = flow.name_any();
    let owner = Owner { namespace: &ns, name: &name };
    let from_status = flow
        .status
        .as_ref()
        .and_then(|s| s.reset.as_ref())
        .filter(|r| r.id == request.id)
        .map(flow_core::reset::records_from_status)
        .unwrap_or_default();
    let records = flow_core::reset::merge_records(ctx.ledger.records(owner, &request.id)?, from_status);
    let request_id = request.id.clone();
    let fresh = records.is_empty();
    let mut machine =
        ResetMachine::new(request, done, records).with_settle(Duration::from_secs(ctx.settings.reset_settle_seconds));
    if matches!(machine.state(), State::Done(_)) {
        // Done, but the status missed the final write (it failed, or the operator stopped just
        // before): rebuilt from the recorded outcomes, with nothing redone.
        status.reset = Some(stamps.apply(machine.status()));
        return Ok(None);
    }
    let pods = k::running_pods(&ctx.client, &ns, &flow.spec.pipeline).await?;
    machine.handle(Input::Observed { spec: flow.spec.clone(), pods }, now());
    // About to touch Kafka for the first time: refused if another resource maps to one of its
    // groups on the same cluster (the machine's effects are dropped, so nothing is carried out).
    if fresh && let State::Resetting(r) = machine.state() {
        let groups: Vec<GroupId> = r.groups.keys().cloned().collect();
        if let Some(why) = crate::tenancy::shared_reset_refusal(ctx, &flow, &request_id, &groups).await? {
            let note = Event::new(EventType::Warning, "ResetRefused", why.clone(), format!("{request_id}/refused"));
            record(ctx, &flow, &note).await;
            k::write_done(&api, &name, &request_id).await?;
            status.reset = Some(stamps.apply(ResetStatus {
                id: request_id,
                phase: "Refused".into(),
                detail: why,
                ..Default::default()
            }));
            return Ok(None);
        }
    }

    let mut connections = Connections::new(ctx);
    // Kafka effects of different groups run concurrently, at most `limit` at once; one group's
    // effects still run one after another, since the machine emits its next one only on the result.
    let limit = usize::from(ctx.settings.reset_concurrency.max(1));
    let mut queued: VecDeque<KafkaCall> = VecDeque::new();
    // A JoinSet aborts what is still in flight when the drive returns early (the machine is then
    // rebuilt from durable state, which settles any commit whose outcome was not persisted).
    let mut in_flight: JoinSet<Input> = JoinSet::new();
    // Persists go to the ledger at once (one flush per batch) and to the status by writes that run
    // beside the Kafka calls, one at a time, each carrying every persist made before it started.
    // The effects that must follow a persist (a commit after its intent, an event after its
    // outcome, the done write) are held until a status write that started after them succeeded;
    // reads, fences and inspections need no wait. So a slow status write (a large pipeline's
    // status is hundreds of KiB) delays only what depends on it, and carries many groups at once.
    // Aborted when the drive returns early, so an older status never lands after a newer one.
    let mut status_write: JoinSet<Result<(), kube::Error>> = JoinSet::new();
    let mut writing: Option<StatusWrite> = None;
    let mut unwritten = Unwritten::default();
    let mut held: Vec<Gated> = Vec::new();
    loop {
        let mut writes = Vec::new();
        while let Some(effect) = machine.poll_effect() {
            match effect {
                Effect::PersistIntent { group, intent, .. } => writes.push(Persist::Intent(group, intent)),
                Effect::PersistOutcome { group, outcome, .. } => writes.push(Persist::Outcome(group, outcome)),
                Effect::InspectGroup(target) => queued.push_back(KafkaCall::Inspect(target)),
                // A group already under way goes first, so that groups finish early and few are
                // open at once.
                Effect::Fence { target, offsets, metadata } => {
                    queued.push_front(KafkaCall::Fence { target, offsets, metadata })
                }
                Effect::ReadCommitted(target) => queued.push_front(KafkaCall::Read(target)),
                Effect::CommitOffsets { target, offsets, metadata } => {
                    held.push(Gated::Commit(KafkaCall::Commit { target, offsets, metadata }))
                }
                Effect::Record(event) => held.push(Gated::Record(event)),
                Effect::WriteDone { id } => held.push(Gated::WriteDone(id)),
            }
        }
        if !writes.is_empty() {
            let batch: Vec<ledger::Write<'_>> = writes.iter().map(Persist::as_write).collect();
            ctx.ledger.put(owner, &request_id, &batch)?;
            unwritten.add(&writes);
        }
        if writing.is_none() {
            if unwritten.any() {
                status.reset = Some(stamps.apply(machine.status()));
                let (api, name, snapshot) = (api.clone(), name.clone(), status.clone());
                status_write.spawn(async move { k::write_status(&api, &name, &snapshot).await });
                writing =
                    Some(StatusWrite { carries: std::mem::take(&mut unwritten), releases: std::mem::take(&mut held) });
            } else {
                // Everything emitted so far is written: what is held may go.
                for effect in std::mem::take(&mut held) {
                    release(ctx, &flow, &api, effect, &mut queued).await?;
                }
            }
        }
        while in_flight.len() < limit
            && let Some(effect) = queued.pop_front()
        {
            in_flight.spawn(run_kafka(&mut connections, &flow, effect).await);
        }
        if !in_flight.is_empty() || writing.is_some() {
            let retry_at = machine.poll_timeout();
            let wait = retry_at.map_or(Duration::MAX, until);
            let woke = tokio::select! {
                Some(joined) = in_flight.join_next() => Woke::Kafka(joined),
                Some(written) = status_write.join_next() => Woke::Written(written),
                () = tokio::time::sleep(wait), if retry_at.is_some() => Woke::Tick,
            };
            match woke {
                Woke::Kafka(joined) => {
                    machine.handle(joined.map_err(Error::Task)?, now());
                    // Every result that came in meanwhile is taken now, so that their persists
                    // share one ledger flush and one status write.
                    while let Some(joined) = in_flight.try_join_next() {
                        machine.handle(joined.map_err(Error::Task)?, now());
                    }
                }
                Woke::Written(written) => {
                    let Some(done) = writing.take() else { continue };
                    written.map_err(Error::Task)??;
                    if done.carries.intent {
                        faults::point("after-intent").await;
                    }
                    if done.carries.outcome {
                        faults::point("after-outcome").await;
                    }
                    for effect in done.releases {
                        release(ctx, &flow, &api, effect, &mut queued).await?;
                    }
                }
                Woke::Tick => machine.handle(Input::Tick, now()),
            }
            continue;
        }
        match machine.state() {
            State::Resetting(_) => match machine.poll_timeout() {
                Some(at) => {
                    // Show why a group waits for its next attempt while the driver sleeps.
                    let shown = Some(stamps.apply(machine.status()));
                    if status.reset != shown {
                        status.reset = shown;
                        k::write_status(&api, &name, status).await?;
                    }
                    tokio::time::sleep(until(at)).await;
                    // A newer request (`flow reset --replace`) supersedes this one: stop here and let
                    // the next reconcile take the new one.
                    if k::reset_annotations(&api.get(&name).await?).0 != Some(request_text.as_str()) {
                        status.reset = Some(stamps.apply(machine.status()));
                        return Ok(Some(Duration::ZERO));
                    }
                    machine.handle(Input::Tick, now());
                }
                None => break,
            },
            State::Waiting(_) => {
                status.reset = Some(stamps.apply(machine.status()));
                return Ok(Some(WAIT_RECHECK));
            }
            State::Requested(_) | State::Done(_) => break,
        }
    }
    count_finished(ctx, &machine, &stamps.requested_at);
    status.reset = Some(stamps.apply(machine.status()));
    Ok(None)
}

/// A persisting effect held for its batch.
enum Persist {
    Intent(GroupId, Intent),
    Outcome(GroupId, GroupOutcome),
}

impl Persist {
    fn as_write(&self) -> ledger::Write<'_> {
        match self {
            Persist::Intent(g, i) => ledger::Write::Intent(g, i),
            Persist::Outcome(g, o) => ledger::Write::Outcome(g, o),
        }
    }
}

/// Persists in the ledger whose status write has not started yet.
#[derive(Default)]
struct Unwritten {
    intent: bool,
    outcome: bool,
}

impl Unwritten {
    /// Whether anything waits to be written (every persist is an intent or an outcome).
    fn any(&self) -> bool {
        self.intent || self.outcome
    }

    fn add(&mut self, writes: &[Persist]) {
        self.intent |= writes.iter().any(|w| matches!(w, Persist::Intent(..)));
        self.outcome |= writes.iter().any(|w| matches!(w, Persist::Outcome(..)));
    }
}

/// What the status write under way carries, and the effects that wait for it.
struct StatusWrite {
    carries: Unwritten,
    releases: Vec<Gated>,
}

/// What woke the drive loop.
enum Woke {
    Kafka(Result<Input, tokio::task::JoinError>),
    Written(Result<Result<(), kube::Error>, tokio::task::JoinError>),
    Tick,
}

/// An effect that must follow the persists emitted before it (see `drive`).
enum Gated {
    /// A reset commit, after its intent.
    Commit(KafkaCall),
    /// An event, after the outcome it reports.
    Record(Event),
    /// The done annotation, after every outcome.
    WriteDone(String),
}

/// Carries out an effect that waited for the status write carrying the persists before it.
async fn release(
    ctx: &Context,
    flow: &AnkkaFlow,
    api: &Api<AnkkaFlow>,
    effect: Gated,
    queued: &mut VecDeque<KafkaCall>,
) -> Result<(), Error> {
    match effect {
        Gated::Commit(call) => queued.push_front(call),
        Gated::Record(event) => record(ctx, flow, &event).await,
        Gated::WriteDone(id) => {
            faults::point("before-done").await;
            let name = flow.name_any();
            k::write_done(api, &name, &id).await?;
            tracing::info!(namespace = flow.namespace().unwrap_or_default(), name = %name, request = %id, "reset request done");
        }
    }
    Ok(())
}

/// How long until `at`, from now (zero once it has passed).
fn until(at: Timestamp) -> Duration {
    Duration::from_millis(u64::try_from(at.0.saturating_sub(now().0)).unwrap_or(0))
}

/// A Kafka effect of the machine, waiting for its turn.
enum KafkaCall {
    Inspect(InletTarget),
    Fence { target: InletTarget, offsets: BTreeMap<i32, i64>, metadata: String },
    Commit { target: InletTarget, offsets: BTreeMap<i32, i64>, metadata: String },
    Read(InletTarget),
}

/// Starts one Kafka call: resolves its connection's client now (reading the cluster Secrets the
/// first time), and returns the call as a future that yields the machine's input.
async fn run_kafka(
    connections: &mut Connections<'_>,
    flow: &AnkkaFlow,
    call: KafkaCall,
) -> impl Future<Output = Input> + Send + 'static {
    let target = match &call {
        KafkaCall::Inspect(t) | KafkaCall::Read(t) => t,
        KafkaCall::Fence { target, .. } | KafkaCall::Commit { target, .. } => target,
    };
    let group = target.group.clone();
    let client = connections.client(flow, &target.topic_id).await;
    async move {
        match call {
            KafkaCall::Inspect(target) => {
                Input::Inspected { group, result: async { kafka::inspect(client?, target).await }.await }
            }
            KafkaCall::Fence { target, offsets, metadata } => {
                Input::Fenced { group, result: async { kafka::fence(client?, target, offsets, metadata).await }.await }
            }
            KafkaCall::Commit { target, offsets, metadata } => {
                let result = async { kafka::commit(client?, target, offsets, metadata).await }.await;
                faults::point("after-commit").await;
                Input::Committed { group, result }
            }
            KafkaCall::Read(target) => {
                Input::Read { group, result: async { kafka::read_committed(client?, target).await }.await }
            }
        }
    }
}

/// Counts the groups of a request that just finished, and its duration since it was first seen.
fn count_finished(ctx: &Context, machine: &ResetMachine, requested_at: &str) {
    let State::Done(flow_core::reset::Done::Completed { groups, .. }) = machine.state() else { return };
    for (_, outcome) in groups.values() {
        let outcome = match outcome {
            flow_core::reset::GroupOutcome::Reset { .. } => "reset",
            flow_core::reset::GroupOutcome::Failed { .. } => "failed",
        };
        ctx.metrics.reset_groups.get_or_create(&crate::metrics::OutcomeLabels { outcome: outcome.into() }).inc();
    }
    if let Ok(t) = requested_at.parse::<k8s_openapi::jiff::Timestamp>() {
        let secs = k8s_openapi::jiff::Timestamp::now().duration_since(t).as_secs_f64();
        ctx.metrics.reset_duration.observe(secs.max(0.0));
    }
}

/// Records an event; a failure (for example no RBAC grant for events) is logged, never fatal.
async fn record(ctx: &Context, flow: &AnkkaFlow, event: &Event) {
    let ns = flow.namespace().unwrap_or_default();
    let name = flow.name_any();
    match event.type_ {
        flow_core::events::EventType::Normal => {
            tracing::info!("{ns}/{name}: {}: {}", event.reason, event.note)
        }
        flow_core::events::EventType::Warning => {
            tracing::warn!("{ns}/{name}: {}: {}", event.reason, event.note)
        }
    }
    if let Err(e) = k::record_event(&ctx.client, flow, event, &ctx.settings.instance).await {
        tracing::warn!(namespace = %ns, name = %name, reason = %event.reason, error = %e, "could not record the event");
    }
}
