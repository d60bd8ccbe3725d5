//! Whether a reset request may touch Kafka yet: the approval gate (docs/governance.md).
//!
//! Where approval applies (an administrator's list of namespaces, or a pipeline's own
//! [`ANNOTATION_APPROVAL`](crate::names::ANNOTATION_APPROVAL)), a request waits, `AwaitingApproval`,
//! until a user other than its requester approves it, an administrator's policy approves it
//! without a person, somebody denies it, or it expires. Who requested and who decided are annotations
//! the API server stamps at admission (the shipped admission policies), so neither is the client's
//! word; the gate checks again that the approver is not the requester, for a cluster without them.
//!
//! The gate applies only to a request that has touched nothing yet: once a request has progress
//! (an intent of a group), it was approved when it began, and it runs to its end whatever is
//! written afterwards; a denial then is too late, and changes nothing.

use std::time::Duration;

use super::vocabulary::Timestamp;
use crate::request::{ResetRequest, To};
use crate::resource::{Approval, ApprovalDecision};

/// How long a request waits for approval by default: a day.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The administrator's rules for one pipeline's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApprovalPolicy {
    /// Whether its requests need approval.
    pub required: bool,
    /// Dry runs (`flow reset --dry-run`, which change nothing) need none.
    pub auto_approve_dry_runs: bool,
    /// A saved plan (`flow reset --plan`) that reprocesses at most this many records, counted from
    /// the plan itself, needs none.
    pub auto_approve_max_records: Option<u64>,
    /// How long a request waits for a decision before it expires, from when the operator first saw
    /// it.
    pub timeout: Duration,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy {
            required: false,
            auto_approve_dry_runs: true,
            auto_approve_max_records: None,
            timeout: DEFAULT_APPROVAL_TIMEOUT,
        }
    }
}

/// Whether the resets of a pipeline in `namespace` need approval: its namespace is one of
/// `namespaces` (the operator's setting; `*` is every namespace), or the pipeline's own approval
/// annotation says `required`.
pub fn approval_required(namespaces: &[String], namespace: &str, annotation: Option<&str>) -> bool {
    namespaces.iter().any(|n| n == "*" || n == namespace)
        || annotation.is_some_and(|a| a.trim().eq_ignore_ascii_case("required"))
}

/// What the decision annotation says: `approved <id>` or `denied <id>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// `approved <id>`.
    Approved(String),
    /// `denied <id>`.
    Denied(String),
}

impl Decision {
    /// Reads the annotation's text; anything else is no decision.
    pub fn parse(text: &str) -> Option<Decision> {
        let mut words = text.split_whitespace();
        let (verb, id, rest) = (words.next()?, words.next()?, words.next());
        if rest.is_some() {
            return None;
        }
        match verb {
            "approved" => Some(Decision::Approved(id.to_string())),
            "denied" => Some(Decision::Denied(id.to_string())),
            _ => None,
        }
    }

    /// The annotation's text.
    pub fn text(&self) -> String {
        match self {
            Decision::Approved(id) => format!("approved {id}"),
            Decision::Denied(id) => format!("denied {id}"),
        }
    }
}

/// What the gate saw of a request: the request, and the governance annotations as the fresh read
/// has them.
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    /// The request.
    pub request: &'a ResetRequest,
    /// Who requested it.
    pub requested_by: Option<&'a str>,
    /// The decision annotation's text.
    pub decision: Option<&'a str>,
    /// Who wrote the decision.
    pub decided_by: Option<&'a str>,
    /// When the operator first saw the request.
    pub requested_at: Timestamp,
}

/// The gate's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// The request may run; how it was approved, where approval applies.
    Open(Option<Approval>),
    /// It waits for a decision: why, for the status and its event, and when it expires.
    Awaiting(String, Timestamp),
    /// Denied or expired: settled for good without touching anything.
    Closed(Approval),
}

/// The gate for request `asked` under `policy`, at `now`.
pub fn gate(policy: &ApprovalPolicy, asked: &Asked<'_>, now: Timestamp) -> Gate {
    if !policy.required {
        return Gate::Open(None);
    }
    let id = asked.request.id.as_str();
    let by = asked.decided_by.map(str::trim).filter(|b| !b.is_empty());
    let decision = asked.decision.and_then(Decision::parse);
    let mut not_counted = None;
    match decision {
        Some(Decision::Denied(d)) if d == id => {
            return Gate::Closed(Approval {
                decision: ApprovalDecision::Denied,
                by: by.map(str::to_string),
                policy: None,
            });
        }
        Some(Decision::Approved(d)) if d == id => match by {
            Some(b) if Some(b) != asked.requested_by => {
                return Gate::Open(Some(Approval {
                    decision: ApprovalDecision::Approved,
                    by: Some(b.to_string()),
                    policy: None,
                }));
            }
            Some(b) => not_counted = Some(format!("{b} requested it, and may not approve it too")),
            None => not_counted = Some("the approval names no approver".to_string()),
        },
        _ => {}
    }
    if let Some(policy_name) = auto_approval(policy, asked.request) {
        return Gate::Open(Some(Approval {
            decision: ApprovalDecision::Approved,
            by: None,
            policy: Some(policy_name),
        }));
    }
    let expires = asked.requested_at.after(policy.timeout);
    if now >= expires {
        return Gate::Closed(Approval { decision: ApprovalDecision::Expired, by: None, policy: None });
    }
    let requester = asked.requested_by.map_or_else(String::new, |r| format!(" (requested by {r})"));
    let not_counted = not_counted.map_or_else(String::new, |why| format!("; an approval was written, but {why}"));
    let why = format!(
        "reset {id}{requester} awaits approval: a user with the approve permission, other than the requester, runs \
         flow reset approve {id} (or flow reset deny {id}); it expires at {}{not_counted}",
        expires.rfc3339()
    );
    Gate::Awaiting(why, expires)
}

/// The administrator's policy that approves `request` without a person, by name, if any.
fn auto_approval(policy: &ApprovalPolicy, request: &ResetRequest) -> Option<String> {
    if request.dry_run && policy.auto_approve_dry_runs {
        return Some("dry-run".to_string());
    }
    let max = policy.auto_approve_max_records?;
    let Some(To::Plan(plan)) = &request.to else { return None };
    let records = plan_records(plan)?;
    (records <= max).then(|| format!("records-at-most-{max}"))
}

/// The records a plan makes its groups read again: per partition, how far back it moves (a plan
/// only moves a group while its committed offsets are the expected ones, so this is what it does).
/// `None` when some partition has no committed offset to count from.
pub fn plan_records(plan: &crate::request::PlanOffsets) -> Option<u64> {
    let mut total: u64 = 0;
    for partitions in plan.groups.values() {
        for (expected, new) in partitions.values() {
            let back = expected.map(|e| e.saturating_sub(*new).max(0))?;
            total = total.saturating_add(u64::try_from(back).unwrap_or(0));
        }
    }
    Some(total)
}

/// What kind of identity requested a reset, as a bounded metric label (never the name itself):
/// `serviceaccount` for a Kubernetes service account (`system:serviceaccount:<ns>:<name>`, see
/// <https://kubernetes.io/docs/reference/access-authn-authz/authentication/#service-account-tokens>),
/// `user` for anyone else the API server authenticated, `unknown` when nothing stamped the request.
pub fn requester_kind(requested_by: Option<&str>) -> &'static str {
    match requested_by {
        None | Some("") => "unknown",
        Some(user) if user.starts_with("system:serviceaccount:") => "serviceaccount",
        Some(_) => "user",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::PlanOffsets;

    const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";

    fn request() -> ResetRequest {
        ResetRequest { id: ID.into(), ..Default::default() }
    }

    fn required() -> ApprovalPolicy {
        ApprovalPolicy { required: true, ..Default::default() }
    }

    fn asked<'a>(r: &'a ResetRequest, decision: Option<&'a str>, by: Option<&'a str>) -> Asked<'a> {
        Asked { request: r, requested_by: Some("alice"), decision, decided_by: by, requested_at: Timestamp(0) }
    }

    #[test]
    fn without_the_requirement_every_request_runs() {
        let r = request();
        assert_eq!(gate(&ApprovalPolicy::default(), &asked(&r, None, None), Timestamp(0)), Gate::Open(None));
    }

    #[test]
    fn a_request_waits_until_someone_else_approves_it() {
        let r = request();
        let Gate::Awaiting(why, _) = gate(&required(), &asked(&r, None, None), Timestamp(1000)) else { panic!() };
        assert!(why.starts_with(&format!("reset {ID} (requested by alice) awaits approval: ")), "{why}");
        assert!(why.contains("it expires at 1970-01-02T00:00:00Z"), "{why}");
        let approved = format!("approved {ID}");
        assert_eq!(
            gate(&required(), &asked(&r, Some(&approved), Some("bob")), Timestamp(1000)),
            Gate::Open(Some(Approval { decision: ApprovalDecision::Approved, by: Some("bob".into()), policy: None }))
        );
        // the requester's own approval does not count; nor one without an approver
        let Gate::Awaiting(why, _) = gate(&required(), &asked(&r, Some(&approved), Some("alice")), Timestamp(1000))
        else {
            panic!()
        };
        assert!(why.ends_with("an approval was written, but alice requested it, and may not approve it too"), "{why}");
        assert!(matches!(gate(&required(), &asked(&r, Some(&approved), None), Timestamp(1000)), Gate::Awaiting(..)));
        // a decision about another request does not count either
        let other = "approved 00000000-0000-4000-8000-000000000000";
        assert!(matches!(gate(&required(), &asked(&r, Some(other), Some("bob")), Timestamp(1000)), Gate::Awaiting(..)));
    }

    #[test]
    fn a_denied_request_closes_and_an_undecided_one_expires() {
        let r = request();
        let denied = format!("denied {ID}");
        assert_eq!(
            gate(&required(), &asked(&r, Some(&denied), Some("alice")), Timestamp(5)),
            Gate::Closed(Approval { decision: ApprovalDecision::Denied, by: Some("alice".into()), policy: None })
        );
        let day = i64::try_from(DEFAULT_APPROVAL_TIMEOUT.as_millis()).unwrap();
        assert!(matches!(gate(&required(), &asked(&r, None, None), Timestamp(day - 1)), Gate::Awaiting(..)));
        assert_eq!(
            gate(&required(), &asked(&r, None, None), Timestamp(day)),
            Gate::Closed(Approval { decision: ApprovalDecision::Expired, by: None, policy: None })
        );
    }

    #[test]
    fn policies_approve_dry_runs_and_small_plans_and_say_so() {
        let mut dry = request();
        dry.dry_run = true;
        assert_eq!(
            gate(&required(), &asked(&dry, None, None), Timestamp(0)),
            Gate::Open(Some(Approval {
                decision: ApprovalDecision::Approved,
                by: None,
                policy: Some("dry-run".into())
            }))
        );
        let no_dry = ApprovalPolicy { auto_approve_dry_runs: false, ..required() };
        assert!(matches!(gate(&no_dry, &asked(&dry, None, None), Timestamp(0)), Gate::Awaiting(..)));

        let plan = |expected: Option<i64>| {
            let mut r = request();
            let groups = [("cart.router.in".to_string(), [(0, (expected, 10)), (1, (Some(30), 30))].into())].into();
            r.to = Some(To::Plan(PlanOffsets { id: ID.into(), groups }));
            r
        };
        let small = ApprovalPolicy { auto_approve_max_records: Some(90), ..required() };
        let approved = |r: &ResetRequest| gate(&small, &asked(r, None, None), Timestamp(0));
        assert!(
            matches!(approved(&plan(Some(100))), Gate::Open(Some(a)) if a.policy.as_deref() == Some("records-at-most-90"))
        );
        assert!(matches!(approved(&plan(Some(101))), Gate::Awaiting(..)), "91 records");
        assert!(matches!(approved(&plan(None)), Gate::Awaiting(..)), "a partition without an offset is no count");
        assert!(matches!(approved(&request()), Gate::Awaiting(..)), "a reset to the start is no plan");
    }

    #[test]
    fn decisions_and_requirements_read_as_written() {
        assert_eq!(Decision::parse(&format!("approved {ID}")), Some(Decision::Approved(ID.into())));
        assert_eq!(Decision::parse(&format!(" denied  {ID} ")), Some(Decision::Denied(ID.into())));
        assert_eq!(Decision::parse("approved"), None);
        assert_eq!(Decision::parse(&format!("approved {ID} extra")), None);
        assert_eq!(Decision::parse(&format!("maybe {ID}")), None);
        assert_eq!(Decision::Denied(ID.into()).text(), format!("denied {ID}"));
        assert!(approval_required(&["shop".into()], "shop", None));
        assert!(approval_required(&["*".into()], "any", None));
        assert!(!approval_required(&["shop".into()], "tenant", None));
        assert!(approval_required(&[], "tenant", Some("Required")));
        assert!(!approval_required(&[], "tenant", Some("no")));
    }

    #[test]
    fn requester_kinds_are_bounded() {
        assert_eq!(requester_kind(None), "unknown");
        assert_eq!(requester_kind(Some("")), "unknown");
        assert_eq!(requester_kind(Some("system:serviceaccount:ci:deployer")), "serviceaccount");
        assert_eq!(requester_kind(Some("alice@example.com")), "user");
        // a user named like a prefix of it is still a user
        assert_eq!(requester_kind(Some("system:serviceaccounts")), "user");
    }
}
