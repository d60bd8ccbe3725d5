//! The reset machine: one reset request, from the annotation to the done write.
//!
//! # States
//! `Requested` -> `Waiting` -> `Resetting` -> `Done`. A request whose id equals the done annotation
//! starts, and stays, `Done`. Each group of a resetting request goes its own way (see [`GroupPhase`]):
//! inspected, fenced, its intent made durable, committed and read back, verified after the settle
//! delay, finished.
//!
//! # Drive contract (sans-IO)
//! The machine does no I/O and reads no clock. Its driver does this, in order:
//! 1. build it with [`ResetMachine::new`] from the parsed request, the done annotation and the durable
//!    [`GroupProgress`] of this request (ledger and status);
//! 2. feed a fresh [`Input::Observed`] (the resource and its pod counts, read without a cache);
//! 3. drain [`ResetMachine::poll_effect`] until it returns `None`, carrying out each [`Effect`] in the
//!    order given and feeding each result back with [`ResetMachine::handle`] (results may be fed back
//!    after draining, in any order across groups);
//! 4. when no effect is left, ask [`ResetMachine::poll_timeout`]: while the machine is `Resetting`,
//!    wait until that instant and feed [`Input::Tick`]; while `Waiting`, look again at that instant
//!    by starting over at step 1 (a waiting request reads only Kubernetes, never Kafka); `None` means
//!    there is nothing more to do for this request.
//!
//! Effects that persist ([`Effect::PersistIntent`], [`Effect::PersistOutcome`]) must be durable before
//! the driver carries out any effect emitted after them that commits or publishes
//! ([`Effect::CommitOffsets`], [`Effect::Record`], [`Effect::WriteDone`]); effects that only read or
//! fence ([`Effect::InspectGroup`], [`Effect::Fence`], [`Effect::ReadCommitted`]) may go ahead
//! meanwhile, and persists may be carried out earlier than emitted, several at once. If a persist
//! fails, the driver drops the machine and starts over later from durable state. Recording an event
//! may fail without stopping anything (a missing RBAC grant must not block a reset).
//!
//! The operator does not follow these rules by hand: a [`Run`] (see [`run`]) takes a fresh read of
//! the resource through the [`intake`], the facts it needs (the ledger, the pods, the shared-group
//! verdict, whether the request still stands after a sleep) and every completion as [`Report`]s, and
//! says what to do [`Next`]; its [`Drive`] holds the machine's effects by these rules and hands out
//! only the work that may start now (see [`drive`]). The operator and the model tests in
//! `ledger-tests/` run the same `Run`, each with its own I/O.
//!
//! # Why a group is never reset twice
//! Offsets alone cannot tell "the reset never landed" from "it landed and the streamlet has since
//! read everything again" (the group is back where it was). So each commit carries a marker in
//! Kafka's per-partition commit metadata:
//! 1. the *fence*: the group's current offsets are committed again, unchanged, with the metadata
//!    [`fence_marker`] (no position moves);
//! 2. the intent (offsets before, log start offsets to commit) is made durable (ledger and status);
//! 3. the log start offsets are committed with the metadata [`reset_marker`], and read back.
//!
//! A machine rebuilt from an intent without outcome never commits blindly: it *recovers* the intent,
//! reading the committed offsets and their metadata ([`Effect::ReadCommitted`]). The reset marker
//! everywhere means the reset landed. The fence everywhere (and no offset where there was none) means
//! it never did, and only then is the group reset. Anything else means a consumer committed after the
//! fence, so the streamlet ran: if some partition is now behind where the group was before, the
//! consumer started from the reset, which landed. Otherwise Kafka cannot tell whether the consumer
//! started from the reset or from where it was; the group is reported failed with that reason (never
//! reset again, which could rewind a finished rebuild, and never reported as a success it may not be).
//! A transient failure of that read is retried like any other: the group waits [`backoff`] (a
//! [`ResetMachine::poll_timeout`]; the read is emitted on the [`Input::Tick`] at or after it), and
//! once [`ResetMachine::with_retry_for`] has passed since the group's first failure, or at once for a
//! final failure, the group fails ("could not learn whether an earlier commit landed"), never
//! committed. Its status shows `Recovering` meanwhile.
//!
//! # The settle, and the verifying read after it
//! A consumer that was still closing when the reset ran (a pod past its deletion, a consumer outside
//! Kubernetes that never joined the group) can commit its old position right after the reset commit,
//! overwriting it. So once a group's commit reads back at its log start offsets, the machine waits
//! the settle delay ([`DEFAULT_SETTLE`], see [`ResetMachine::with_settle`]) and reads the group's
//! committed positions again to verify them ([`Effect::ReadCommitted`], every partition of the topic
//! as its metadata stands then). The wait is a [`ResetMachine::poll_timeout`] like a retry's: the
//! driver feeds [`Input::Tick`] at that instant and carries out the read.
//! - Every partition of the intent still at its target: the group is reset.
//! - Some partition moved: the group fails, and its event lists each moved partition with where it
//!   is now and what it was reset to (a consumer overwrote the reset).
//! - Partitions that the intent did not cover (added to the topic after the inspection): the group
//!   stays reset on the partitions verified (its event counts only those), and a second event,
//!   `ResetPartitionsAdded`, names the added partitions, which were not reset.
//! - The read fails: transient failures are retried with [`backoff`] for as long as
//!   [`ResetMachine::with_retry_for`] allows; a final failure fails the group (the reset landed and read back once, but whether it held
//!   is unknown, and an unknown is never reported as a success).
//!
//! A crash during the settle leaves an intent without outcome, so the rebuilt machine recovers it by
//! the markers as above; when every partition still carries the reset marker it waits the settle
//! delay and verifies too. A settle of 0 skips the verifying read (and with it both checks).

mod approval;
mod destination;
mod drive;
mod group;
mod intake;
mod machine;
mod order;
mod plan;
mod recovery;
mod retry;
mod run;
mod status;
mod summary;
mod survey;
mod vocabulary;
mod wording;

pub use approval::{
    ApprovalPolicy, Asked, DEFAULT_APPROVAL_TIMEOUT, Decision, Gate, approval_required, gate, plan_records,
    requester_kind,
};
pub use destination::{Destination, Given, GivenOffsets, Source, undo};
pub use drive::{Drive, DriveOptions, GATHER, GATHER_QUEUED, Idle, KafkaCall, Persist, ProgressWrite, Work};
pub use group::{Group, GroupPhase};
pub use intake::{
    Admitted, Answer, Fresh, HISTORY_LEN, Intake, Started, history, intake, malformed_event, superseded_event,
};
pub use machine::{DEFAULT_SETTLE, Done, MEMBERS_IN_DRIVE, ResetMachine, Resetting, State, WAIT_RECHECK, Waiting};
pub use order::Pins;
pub use retry::{DEFAULT_RETRY_FOR, FIRST_BACKOFF, MAX_BACKOFF, Retry, backoff};
pub use run::{End, Ended, Need, Next, Report, Run};
pub use status::{catching_up, failing_since, merge_progress, progress_from_status};
pub use summary::{LISTED_GROUPS, LISTED_OFFSETS, MESSAGE_LIMIT, group_message};
pub use vocabulary::{
    Committed, Effect, FailureKind, GroupOutcome, GroupProgress, Input, Inspection, Intent, KafkaFailure, LedgerEntry,
    NAMED_MEMBERS, Position, Positions, Timestamp, fence_marker, reset_marker,
};
pub use wording::{NAMED_PARTITIONS, outcome_event, outcome_events, waiting_event, went};

#[cfg(test)]
mod bounded_tests;
#[cfg(test)]
mod destination_tests;
#[cfg(test)]
mod drive_tests;
#[cfg(test)]
mod run_tests;
#[cfg(test)]
mod survey_tests;
#[cfg(test)]
mod tests;
