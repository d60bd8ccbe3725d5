//! The status a reconcile writes, assembled by one pure function ([`assemble`]) from what its steps
//! saw and did ([`Report`]); `crate::writes::Object` writes it.

use flow_core::render::status::{self, ApplyOutcome};
use flow_core::resource::{AnkkaFlow, AnkkaFlowStatus, Condition};
use k8s_openapi::jiff::Timestamp;

/// What a reconcile's steps saw and did, as far as the status is concerned.
#[derive(Debug)]
pub struct Report<'f> {
    /// The status as stored when the reconcile read the resource.
    pub stored: Option<&'f AnkkaFlowStatus>,
    /// The resource's `metadata.generation`.
    pub generation: Option<i64>,
    /// What became of the pipeline's objects.
    pub pipeline: Pipeline,
    /// A status holding the reset's part (`reset`, `resetHistory`) as step reset left it (and step
    /// follow measured it); none when the reset did not run, and the stored part stays.
    pub reset: Option<AnkkaFlowStatus>,
    /// Step rebuild's conditions (`Rebuilding`, `CaughtUp`).
    pub rebuild: Vec<Condition>,
    /// Why the reset ledger cannot be used, if it cannot (the `ResetLedger` condition).
    pub ledger: Option<String>,
    /// When the reconcile ends: the time of every transition it makes.
    pub now: Timestamp,
}

/// What became of the pipeline's objects.
#[derive(Debug)]
pub enum Pipeline {
    /// Refused (step refuse): the refusal's status, and its outcome.
    Refused {
        /// Phase `Failed`, the problems in the detail.
        status: AnkkaFlowStatus,
        /// `Refused` or `SidecarImageMissing`.
        outcome: ApplyOutcome,
    },
    /// Built and applied (step apply), or applied up to a rejected step: the plan's status with the
    /// record of what was applied.
    Built {
        /// The plan's status.
        status: AnkkaFlowStatus,
        /// `Applied`, or the rejected step.
        outcome: ApplyOutcome,
    },
    /// A step failed before a status was computed: the stored status stays, with the failure in
    /// the `Applied` condition. Once the reset ran beside the apply, the record of the last apply
    /// goes: the apply may have stopped part-way.
    Stopped {
        /// `reconcile failed: <why>`.
        message: String,
        /// Whether step reset ran (its part of the status is in [`Report::reset`]).
        reset_ran: bool,
    },
}

impl<'f> Report<'f> {
    /// A report on `flow`, ending now, with nothing from steps rebuild and ledger yet.
    pub fn of(flow: &'f AnkkaFlow, pipeline: Pipeline, reset: Option<AnkkaFlowStatus>) -> Self {
        Report {
            stored: flow.status.as_ref(),
            generation: flow.metadata.generation,
            pipeline,
            reset,
            rebuild: Vec::new(),
            ledger: None,
            now: Timestamp::now(),
        }
    }
}

/// The status `report` leads to, with its conditions and transition times
/// ([`status::finish`]); none when it says nothing new over the stored one ([`status::needs_write`]).
pub fn assemble(report: Report<'_>) -> Option<AnkkaFlowStatus> {
    let Report { stored, generation, pipeline, reset, rebuild, ledger, now } = report;
    let (mut status, outcome) = match pipeline {
        Pipeline::Refused { status, outcome } | Pipeline::Built { status, outcome } => (status, outcome),
        Pipeline::Stopped { message, reset_ran } => {
            let mut status = stored.cloned().unwrap_or_default();
            if reset_ran {
                status.applied = None;
            }
            (status, ApplyOutcome::Failed { message })
        }
    };
    // The reset's part as the reset left it, else as stored: the server-side apply of the status
    // would remove it otherwise.
    let (part, history) = match (reset, stored) {
        (Some(r), _) => (r.reset, r.reset_history),
        (None, Some(s)) => (s.reset.clone(), s.reset_history.clone()),
        (None, None) => (None, Vec::new()),
    };
    status.reset = part;
    status.reset_history = history;
    status.conditions.extend(rebuild);
    if let Some(problem) = ledger {
        status.conditions.push(status::ledger_condition(&problem, generation));
    }
    let status = status::finish(status, stored, &outcome, now);
    status::needs_write(stored, &status).then_some(status)
}

#[cfg(test)]
mod tests {
    use flow_core::resource::{AppliedObjects, RequestPhase, ResetStatus};

    use super::*;

    fn stored() -> AnkkaFlowStatus {
        AnkkaFlowStatus {
            phase: Some("Ready".into()),
            detail: "ready".into(),
            reset: Some(ResetStatus { id: "r-1".into(), phase: RequestPhase::Done, ..ResetStatus::default() }),
            applied: Some(AppliedObjects { hash: "h".into(), ..AppliedObjects::default() }),
            ..AnkkaFlowStatus::default()
        }
    }

    fn report(stored: &AnkkaFlowStatus, pipeline: Pipeline, reset: Option<AnkkaFlowStatus>) -> Report<'_> {
        Report {
            stored: Some(stored),
            generation: Some(3),
            pipeline,
            reset,
            rebuild: Vec::new(),
            ledger: None,
            now: Timestamp::now(),
        }
    }

    fn applied(status: &AnkkaFlowStatus) -> (&str, &str) {
        let c = status.conditions.iter().find(|c| c.type_ == "Applied").expect("an Applied condition");
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn a_refusal_keeps_the_stored_reset_and_says_why_nothing_was_applied() {
        let stored = stored();
        let refused = AnkkaFlowStatus { phase: Some("Failed".into()), detail: "bad".into(), ..Default::default() };
        let outcome = ApplyOutcome::Refused { reason: "Refused".into() };
        let status = assemble(report(&stored, Pipeline::Refused { status: refused, outcome }, None)).expect("a write");
        assert_eq!(status.reset, stored.reset);
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(applied(&status), ("False", "Refused"));
    }

    #[test]
    fn a_step_failed_before_the_reset_keeps_the_record_of_the_apply_and_one_after_it_drops_it() {
        let stored = stored();
        let message = "reconcile failed: cannot read the Kafka cluster Secrets".to_string();
        let early = assemble(report(&stored, Pipeline::Stopped { message: message.clone(), reset_ran: false }, None))
            .expect("a write");
        assert_eq!(early.applied, stored.applied);
        assert_eq!(applied(&early), ("False", "ApplyFailed"));
        assert_eq!(early.phase, stored.phase);
        let mut reset = stored.clone();
        reset.reset = Some(ResetStatus { id: "r-2".into(), phase: RequestPhase::Resetting, ..ResetStatus::default() });
        let late =
            assemble(report(&stored, Pipeline::Stopped { message, reset_ran: true }, Some(reset))).expect("a write");
        assert_eq!(late.applied, None, "an apply may have stopped part-way");
        assert_eq!(late.reset.as_ref().map(|r| r.id.as_str()), Some("r-2"), "the reset's part as the reset left it");
    }

    #[test]
    fn what_the_steps_saw_adds_the_rebuild_and_ledger_conditions_and_an_unchanged_status_is_not_written() {
        let stored = stored();
        let built = || Pipeline::Built { status: stored.clone(), outcome: ApplyOutcome::Applied };
        let mut with = report(&stored, built(), Some(stored.clone()));
        with.ledger = Some("the ledger cannot be opened".into());
        let first = assemble(with).expect("a write");
        assert!(first.conditions.iter().any(|c| c.type_ == "ResetLedger" && c.observed_generation == Some(3)));
        assert_eq!(applied(&first), ("True", "Applied"));
        // The next reconcile builds the same status from the plan, and sees the same ledger.
        let mut again = report(&first, built(), None);
        again.ledger = Some("the ledger cannot be opened".into());
        assert_eq!(assemble(again), None, "nothing new: no write");
    }
}
