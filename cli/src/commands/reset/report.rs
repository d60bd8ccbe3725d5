//! What `flow reset status` and every waiting command say about a reset request: the [`Report`]
//! read from the resource's status (written by the operator) and its annotations, how it ended
//! (the exit code of `--wait`), and its table and progress lines.

use std::collections::BTreeMap;
use std::time::Instant;

use flow_adapters::kube as k;
use flow_core::request::ResetRequest;
use flow_core::resource::{AnkkaFlow, Approval, GroupStage, GroupStatus, RequestPhase};
use kube::ResourceExt;
use serde::Serialize;

use crate::exit::{self, Failure};
use crate::output::{self, Format};

/// Where a request stands: what `-o json|yaml` prints.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The request id.
    pub id: String,
    /// Namespace of the AnkkaFlow.
    pub namespace: String,
    /// The AnkkaFlow's name.
    pub pipeline: String,
    /// `Requested` (the operator has not picked it up yet), `Waiting`, `Resetting`, `Done`,
    /// `Refused` or `Superseded`.
    pub phase: RequestPhase,
    /// Why it waits or was refused.
    pub detail: String,
    /// The instant the groups go to (RFC 3339), for a reset to a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The request as its requester wrote it (its streamlets, and where it moves the groups: a
    /// time, an undo, or a saved plan with every offset), while the AnkkaFlow still holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<ResetRequest>,
    /// When it was written, as the API server recorded it (RFC 3339, to the second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written_at: Option<String>,
    /// When the operator first saw it: took it up (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<String>,
    /// Who requested it, as the API server authenticated them (docs/governance.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// Who or which policy approved it, or that it was denied or expired, where approval applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// When it finished (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Per consumer group.
    pub groups: Vec<GroupStatus>,
}

impl Report {
    pub(super) fn finished(&self) -> bool {
        self.phase.finished()
    }

    /// Finished, and every group it reset has caught up (its lag was seen at 0).
    pub(super) fn caught_up(&self) -> bool {
        self.finished()
            && self.groups.iter().filter(|g| g.outcome == GroupStage::Reset).all(|g| g.caught_up_at.is_some())
    }

    /// One line for stderr while `--wait` waits: the phase, how many groups are finished, and why
    /// it waits. A group is finished once it has its outcome: reset, failed, or, in a dry run, planned.
    pub(super) fn progress(&self) -> String {
        let mut line = format!("reset {} of '{}': {}", self.id, self.pipeline, self.phase);
        if !self.groups.is_empty() {
            let finished = self
                .groups
                .iter()
                .filter(|g| matches!(g.outcome, GroupStage::Reset | GroupStage::Failed | GroupStage::Planned))
                .count();
            line.push_str(&format!(", {finished} of {} consumer groups finished", self.groups.len()));
        }
        if !self.detail.is_empty() {
            line.push_str(&format!(" ({})", self.detail));
        }
        line
    }

    /// How a finished request ended, as the exit code of `flow reset --wait` and the line for
    /// stderr; `None` while it is not finished, and for a request done with every group reset.
    pub(super) fn ending(&self, ns: &str) -> Option<(u8, String)> {
        let (id, pipeline) = (&self.id, &self.pipeline);
        match self.phase {
            RequestPhase::Refused => {
                Some((exit::RESET_REFUSED, format!("reset {id} of '{pipeline}' was refused: {}", self.detail)))
            }
            RequestPhase::Superseded => {
                Some((exit::RESET_REFUSED, format!("reset {id} of '{pipeline}' was superseded by a newer request")))
            }
            RequestPhase::Denied | RequestPhase::Expired => {
                Some((exit::RESET_REFUSED, format!("reset {id} of '{pipeline}': {}", self.detail)))
            }
            RequestPhase::Done => {
                let failed: Vec<&str> =
                    self.groups.iter().filter(|g| g.outcome == GroupStage::Failed).map(|g| g.group.as_str()).collect();
                (!failed.is_empty()).then(|| {
                    (
                        exit::GROUPS_FAILED,
                        format!(
                            "reset {id} of '{pipeline}' is done, but {} of {} consumer groups could not be reset: {}; \
                             kubectl -n {ns} get events --field-selector involvedObject.kind=AnkkaFlow,reason=ResetOffsetsFailed \
                             says why",
                            failed.len(),
                            self.groups.len(),
                            failed.join(", ")
                        ),
                    )
                })
            }
            _ => None,
        }
    }
}

/// Records per second each group's lag fell by, between two looks (`--watch`).
pub(super) type Rates = BTreeMap<String, f64>;

/// Updates `rates` from the report `prev` seen at `at` to `r` seen at `now`: for each group whose
/// lag moved, the records per second it fell by. A group whose lag did not move keeps its rate.
pub(super) fn update_rates(rates: &mut Rates, prev: &Report, at: Instant, r: &Report, now: Instant) {
    let secs = now.duration_since(at).as_secs_f64().max(0.001);
    for g in &r.groups {
        let before = prev.groups.iter().find(|p| p.group == g.group).and_then(|p| p.lag);
        if let (Some(b), Some(l)) = (before, g.lag)
            && b != l
        {
            rates.insert(g.group.clone(), (b - l) as f64 / secs);
        }
    }
}

/// What one resource says about request `id`, if anything.
pub(super) fn report_from(flow: &AnkkaFlow, id: &str) -> Option<Report> {
    let (raw, done) = k::reset_annotations(flow);
    let request = raw.map(ResetRequest::parse).and_then(Result::ok).filter(|r| r.id == id);
    let base = |phase: RequestPhase| Report {
        id: id.to_string(),
        namespace: flow.namespace().unwrap_or_default(),
        pipeline: flow.name_any(),
        phase,
        detail: String::new(),
        to: None,
        request: request.clone(),
        written_at: None,
        requested_at: None,
        requested_by: None,
        approval: None,
        finished_at: None,
        groups: vec![],
    };
    let status = flow.status.as_ref();
    if let Some(r) = status.and_then(|s| s.reset.as_ref()).filter(|r| r.id == id) {
        return Some(Report {
            detail: r.detail.clone(),
            to: r.to.clone(),
            written_at: r.written_at.clone(),
            requested_at: r.requested_at.clone(),
            requested_by: r.requested_by.clone(),
            approval: r.approval.clone(),
            finished_at: r.finished_at.clone(),
            // A large request's status keeps a summary of each group: its message is spelled out
            // here from the group's other fields, so that the table and `-o json|yaml` say it whole.
            groups: r
                .groups
                .iter()
                .map(|g| GroupStatus { message: flow_core::reset::group_message(r, g), ..g.clone() })
                .collect(),
            ..base(r.phase)
        });
    }
    if let Some(h) = status.and_then(|s| s.reset_history.iter().find(|h| h.id == id)) {
        return Some(base(h.phase));
    }
    // Done, with its status not written yet: the operator writes a refusal's status before its done
    // annotation, and a completed request's after it (see `flow_core::reset::Drive`).
    match &request {
        Some(_) if done == Some(id) => Some(base(RequestPhase::Done)),
        Some(_) => Some(base(RequestPhase::Requested)),
        None => None,
    }
}

/// Renders `r` in `format`.
///
/// # Errors
/// The report cannot be serialised (not expected).
pub fn render(r: &Report, format: Format) -> Result<String, Failure> {
    match format {
        Format::Text => Ok(table(r, &Rates::new())),
        other => output::render(r, other),
    }
}

/// One line per group whose lag is measured: records left of those to reprocess, percent done and,
/// with a rate from `--watch`, the time to zero.
pub(super) fn catch_up_lines(r: &Report, rates: &Rates) -> String {
    let mut out = String::new();
    for g in r.groups.iter().filter(|g| g.outcome == GroupStage::Reset) {
        let Some(left) = g.lag else { continue };
        if let Some(at) = &g.caught_up_at {
            out.push_str(&format!("catch-up: {} caught up at {at}\n", g.group));
            continue;
        }
        let total = g.records_to_reprocess.max(left).max(1);
        let done = 100 * (total - left) / total;
        out.push_str(&format!("catch-up: {} {left} of {total} records left ({done}% done)", g.group));
        if let Some(rate) = rates.get(&g.group).filter(|r| **r > 0.0) {
            out.push_str(&format!(", {rate:.1} records/s, about {:.0} s to zero", left as f64 / rate));
        }
        out.push('\n');
    }
    out
}

/// Whole seconds from `written` to `taken_up` (both RFC 3339), when both parse: how long a request
/// waited for the operator. The API server records the time written to the second, so less than a
/// second reads 0.
fn waited(written: &str, taken_up: &str) -> Option<i64> {
    use k8s_openapi::jiff::Timestamp;
    let (w, t) = (written.parse::<Timestamp>().ok()?, taken_up.parse::<Timestamp>().ok()?);
    Some((t.as_second() - w.as_second()).max(0))
}

pub(super) fn table(r: &Report, rates: &Rates) -> String {
    let mut out = format!("reset {} of {}/{}: {}", r.id, r.namespace, r.pipeline, r.phase);
    if !r.detail.is_empty() {
        out.push_str(&format!(" ({})", r.detail));
    }
    out.push('\n');
    if let Some(t) = &r.to {
        out.push_str(&format!("to: {t}\n"));
    }
    if let Some(t) = &r.requested_at {
        out.push_str(&format!("requested: {t}"));
        if let Some(by) = &r.requested_by {
            out.push_str(&format!(" by {by}"));
        }
        if let Some(f) = &r.finished_at {
            out.push_str(&format!("  finished: {f}"));
        }
        out.push('\n');
    }
    if let Some(w) = &r.written_at {
        out.push_str(&format!("written: {w}"));
        if let Some(waited) = r.requested_at.as_deref().and_then(|t| waited(w, t)) {
            out.push_str(&format!("  (taken up {waited} s later)"));
        }
        out.push('\n');
    }
    if let Some(a) = &r.approval {
        let how = match (&a.by, &a.policy) {
            (Some(by), _) => format!(" by {by}"),
            (None, Some(policy)) => format!(" by policy {policy}"),
            (None, None) => String::new(),
        };
        out.push_str(&format!("approval: {:?}{how}\n", a.decision));
    }
    if r.groups.is_empty() {
        return out;
    }
    let rows: Vec<[String; 6]> = r
        .groups
        .iter()
        .map(|g| {
            [
                g.group.clone(),
                g.topic.clone(),
                g.partitions.to_string(),
                g.records_to_reprocess.to_string(),
                g.outcome.to_string(),
                g.message.clone(),
            ]
        })
        .collect();
    out.push_str(&output::columns(["GROUP", "TOPIC", "PARTITIONS", "RECORDS", "OUTCOME", "MESSAGE"], &rows));
    out.push_str(&catch_up_lines(r, rates));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_up_groups() {
        let r = Report {
            requested_at: Some("2026-11-29T16:00:00Z".into()),
            finished_at: Some("2026-11-29T16:00:01Z".into()),
            groups: vec![GroupStatus {
                group: "cart.router.in".into(),
                topic: "shop.cart-events.v1".into(),
                outcome: GroupStage::Reset,
                message: "3 partition(s) of 'shop.cart-events.v1' to earliest".into(),
                partitions: 3,
                records_to_reprocess: 300,
                ..Default::default()
            }],
            ..report(RequestPhase::Done, &[])
        };
        let t = table(&r, &Rates::new());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "reset u1 of shop/cart: Done");
        assert_eq!(lines[1], "requested: 2026-11-29T16:00:00Z  finished: 2026-11-29T16:00:01Z");
        assert!(!t.contains("written:"), "a status without the time written says nothing of it");
        assert!(lines[2].starts_with("GROUP            TOPIC"), "{}", lines[2]);
        assert!(lines[3].starts_with("cart.router.in   shop.cart-events.v1   3            300"), "{}", lines[3]);
        let json: serde_json::Value = serde_json::from_str(&render(&r, Format::Json).unwrap()).unwrap();
        assert_eq!(json["groups"][0]["recordsToReprocess"], 300);
    }

    #[test]
    fn the_time_written_and_the_wait_until_taken_up() {
        let r = Report {
            written_at: Some("2026-11-29T16:21:40Z".into()),
            requested_at: Some("2026-11-29T16:24:12.100Z".into()),
            requested_by: Some("alice".into()),
            ..report(RequestPhase::Resetting, &[])
        };
        let t = table(&r, &Rates::new());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[1], "requested: 2026-11-29T16:24:12.100Z by alice");
        assert_eq!(lines[2], "written: 2026-11-29T16:21:40Z  (taken up 152 s later)");
        let json: serde_json::Value = serde_json::from_str(&render(&r, Format::Json).unwrap()).unwrap();
        assert_eq!(json["writtenAt"], "2026-11-29T16:21:40Z");
        // Taken up within the second it was written (recorded to the second): 0, never less.
        assert_eq!(waited("2026-11-29T16:21:40Z", "2026-11-29T16:21:40.900Z"), Some(0));
        assert_eq!(waited("2026-11-29T16:21:41Z", "2026-11-29T16:21:40.900Z"), Some(0));
        assert_eq!(waited("not a time", "2026-11-29T16:21:40.900Z"), None);
    }

    #[test]
    fn catch_up_shows_records_left_percent_and_time_to_zero() {
        let mut g = GroupStatus {
            group: "cart.router.in".into(),
            outcome: GroupStage::Reset,
            records_to_reprocess: 300,
            lag: Some(120),
            ..Default::default()
        };
        let r = |g: GroupStatus| Report { groups: vec![g], ..report(RequestPhase::Done, &[]) };
        let rates = Rates::from([("cart.router.in".to_string(), 40.0)]);
        assert_eq!(
            catch_up_lines(&r(g.clone()), &rates),
            "catch-up: cart.router.in 120 of 300 records left (60% done), 40.0 records/s, about 3 s to zero\n"
        );
        assert!(!r(g.clone()).caught_up());
        g.lag = Some(0);
        g.caught_up_at = Some("2026-11-29T16:00:09Z".into());
        assert_eq!(
            catch_up_lines(&r(g.clone()), &Rates::new()),
            "catch-up: cart.router.in caught up at 2026-11-29T16:00:09Z\n"
        );
        assert!(r(g).caught_up());
    }

    #[test]
    fn a_summarised_group_message_is_spelled_out_whole() {
        // A group of 1,000 partitions: the status keeps a summary, with no message for a plain reset.
        let flow: AnkkaFlow = serde_json::from_value(serde_json::json!({
            "apiVersion": "flow.ankka.thinkmorestupidless.com/v1alpha1",
            "kind": "AnkkaFlow",
            "metadata": {"name": "cart", "namespace": "shop"},
            "spec": {"pipeline": "cart", "streamlets": []},
            "status": {"reset": {"id": "u1", "phase": "Done", "groups": [{
                "group": "cart.router.in",
                "topic": "shop.cart-events.v1",
                "partitions": 1000,
                "recordsToReprocess": 5000,
                "outcome": "Reset",
                "message": ""
            }]}}
        }))
        .unwrap();
        let r = report_from(&flow, "u1").unwrap();
        assert_eq!(r.groups[0].message, "1000 partition(s) of 'shop.cart-events.v1' to earliest");
        let json: serde_json::Value = serde_json::from_str(&render(&r, Format::Json).unwrap()).unwrap();
        assert_eq!(json["groups"][0]["message"], "1000 partition(s) of 'shop.cart-events.v1' to earliest");
    }

    fn report(phase: RequestPhase, outcomes: &[GroupStage]) -> Report {
        Report {
            id: "u1".into(),
            namespace: "shop".into(),
            pipeline: "cart".into(),
            phase,
            detail: String::new(),
            to: None,
            request: None,
            written_at: None,
            requested_at: None,
            requested_by: None,
            approval: None,
            finished_at: None,
            groups: outcomes
                .iter()
                .enumerate()
                .map(|(i, o)| GroupStatus { group: format!("cart.s{i}.in"), outcome: *o, ..Default::default() })
                .collect(),
        }
    }

    #[test]
    fn how_a_waited_for_request_ended_is_its_exit_code() {
        assert_eq!(
            report(RequestPhase::Resetting, &[GroupStage::Reset, GroupStage::Pending]).ending("shop"),
            None,
            "not finished"
        );
        assert_eq!(
            report(RequestPhase::Done, &[GroupStage::Reset, GroupStage::Reset]).ending("shop"),
            None,
            "done well: exit 0"
        );
        let (code, line) = report(RequestPhase::Done, &[GroupStage::Reset, GroupStage::Failed]).ending("shop").unwrap();
        assert_eq!(code, exit::GROUPS_FAILED);
        assert!(
            line.starts_with("reset u1 of 'cart' is done, but 1 of 2 consumer groups could not be reset: cart.s1.in;")
        );
        let mut refused = report(RequestPhase::Refused, &[]);
        refused.detail = "streamlet [router] still has 1 pod(s)".into();
        assert_eq!(
            refused.ending("shop"),
            Some((exit::RESET_REFUSED, "reset u1 of 'cart' was refused: streamlet [router] still has 1 pod(s)".into()))
        );
        assert_eq!(report(RequestPhase::Superseded, &[]).ending("shop").unwrap().0, exit::RESET_REFUSED);
    }

    #[test]
    fn progress_counts_finished_groups() {
        assert_eq!(report(RequestPhase::Requested, &[]).progress(), "reset u1 of 'cart': Requested");
        assert_eq!(
            report(RequestPhase::Resetting, &[GroupStage::Reset, GroupStage::Committing, GroupStage::Failed])
                .progress(),
            "reset u1 of 'cart': Resetting, 2 of 3 consumer groups finished"
        );
        // A plan: each group planned is finished.
        assert_eq!(
            report(RequestPhase::Resetting, &[GroupStage::Planned, GroupStage::Pending]).progress(),
            "reset u1 of 'cart': Resetting, 1 of 2 consumer groups finished"
        );
        assert_eq!(
            report(RequestPhase::Done, &[GroupStage::Planned]).progress(),
            "reset u1 of 'cart': Done, 1 of 1 consumer groups finished"
        );
    }
}
