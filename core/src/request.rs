//! The reset request annotation, `flow.ankka.thinkmorestupidless.com/reset-offsets`.
//!
//! Shape (docs/reset.md, "The request"): `{"id":"<uuid>","streamlets":["router"]}`. An empty
//! `streamlets` list means "every streamlet with an inlet". We are stricter than the platform this
//! replaces, which ignored a request it could not parse: here every malformed annotation is reported
//! with the reason (docs/reset.md, "Refusals").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::names::is_dns_label;

/// The most streamlet names one request may list. A pipeline has far fewer; the bound keeps refusal
/// messages and status small when an annotation is written by mistake or by a script gone wrong.
pub const MAX_NAMED_STREAMLETS: usize = 256;

/// A well-formed reset request.
///
/// Only `id` and `streamlets` are written for a reset to the earliest offsets, so that request reads
/// exactly as it always did. `to` is written only when set; an operator that does not know a field
/// or a destination refuses the whole request as malformed, and so never carries it out as a reset
/// to the earliest offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// The request id: a UUID in its hyphenated lower-case form.
    pub id: String,
    /// The streamlets to reset; empty means every streamlet with an inlet.
    #[serde(default)]
    pub streamlets: Vec<String>,
    /// Where the consumer groups go; absent means each partition's log start offset (earliest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<To>,
    /// With `to.undo`: put the offsets back even where the group consumed since that request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// Only plan (`flow reset --dry-run`): each group is inspected and its plan written to the
    /// status; nothing is committed.
    #[serde(default, rename = "dryRun", skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// A rebuild (`flow rebuild`): while the request is not done, the operator renders its targets'
    /// Deployments at 0 replicas itself, and waits only for their pods to go (see docs/rebuild.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebuild: bool,
    /// A rebuild from these streamlets (`flow rebuild --from`): they and every streamlet downstream
    /// of them are stopped, the named ones read their input again from the start (or `to`), and
    /// each downstream group goes to the end of the topic it reads, to read only what the replay
    /// writes (see [`crate::closure`]). Empty: a rebuild of `streamlets`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
}

/// Where a request moves the consumer groups, when not to the log start offsets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum To {
    /// `{"datetime":"2026-11-29T16:00:00Z"}`: each partition to its first offset whose record's
    /// timestamp is at or after this instant (RFC 3339).
    Datetime(String),
    /// `{"undo":"<id>"}`: back to the offsets recorded before request `<id>`.
    Undo(String),
    /// `{"plan":{"id":"<dry run id>","groups":{"<group>":{"<partition>":[<expected>,<new>]}}}}`:
    /// exactly the offsets a dry run planned, each group only while its committed offsets are still
    /// the expected ones (`null`: none).
    Plan(PlanOffsets),
}

/// The most partitions, over all its groups, a plan may carry (it travels in an annotation).
pub const MAX_PLAN_PARTITIONS: usize = 4096;

/// The offsets of a plan (see [`To::Plan`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanOffsets {
    /// The dry run that made the plan.
    pub id: String,
    /// Per consumer group, per partition: the committed offset the plan expects (`None`: none) and
    /// the offset it goes to.
    pub groups: BTreeMap<String, BTreeMap<i32, (Option<i64>, i64)>>,
}

/// Why a request annotation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MalformedRequest {
    /// Not JSON, or not the request's shape (unknown field, wrong type, missing `id`).
    #[error("it is not a reset request: {0}")]
    Shape(String),
    /// The id is not a UUID.
    #[error("its id '{0}' is not a UUID")]
    IdNotUuid(String),
    /// More names than [`MAX_NAMED_STREAMLETS`].
    #[error("it names {0} streamlets, more than the {max} a request may name", max = MAX_NAMED_STREAMLETS)]
    TooManyNames(usize),
    /// Names that cannot be streamlet names at all.
    #[error("{} not a streamlet name: {}", if .0.len() == 1 { "this is" } else { "these are" }, .0.join(", "))]
    BadNames(Vec<String>),
    /// `to.datetime` is not an RFC 3339 instant.
    #[error("its time '{0}' is not an RFC 3339 instant (such as 2026-11-29T16:00:00Z)")]
    BadTime(String),
    /// The id of `to.undo` is not a UUID.
    #[error("the request it undoes, '{0}', is not a UUID")]
    UndoneIdNotUuid(String),
    /// `force` without `to.undo`.
    #[error("'force' goes only with 'to.undo'")]
    ForceWithoutUndo,
    /// A plan that is not one.
    #[error("its plan {0}")]
    BadPlan(String),
    /// A rebuild with what a rebuild does not take.
    #[error("a rebuild {0}")]
    BadRebuild(&'static str),
}

/// Whether the request annotation (`request`) holds a request that the done annotation (`done`)
/// does not name yet: one the reset driver still has to carry out. A malformed annotation is none
/// (the driver answers it at once).
pub fn pending(request: Option<&str>, done: Option<&str>) -> bool {
    request.and_then(|r| ResetRequest::parse(r).ok()).is_some_and(|r| done != Some(r.id.as_str()))
}

impl ResetRequest {
    /// Parses the annotation value.
    ///
    /// # Errors
    /// [`MalformedRequest`] when the text is not JSON of the request's shape (unknown fields are
    /// refused), the id is not a UUID, more than [`MAX_NAMED_STREAMLETS`] names are listed, or a name
    /// is not a DNS label. Long inputs are quoted only in part.
    pub fn parse(text: &str) -> Result<Self, MalformedRequest> {
        let request: ResetRequest = serde_json::from_str(text).map_err(|e| MalformedRequest::Shape(e.to_string()))?;
        if !is_request_id(&request.id) {
            return Err(MalformedRequest::IdNotUuid(clip(&request.id, 64)));
        }
        let named = request.streamlets.len() + request.from.len();
        if named > MAX_NAMED_STREAMLETS {
            return Err(MalformedRequest::TooManyNames(named));
        }
        let bad: Vec<String> = request
            .streamlets
            .iter()
            .chain(&request.from)
            .filter(|n| !is_dns_label(n))
            .map(|n| format!("'{}'", clip(n, 64)))
            .collect();
        if !bad.is_empty() {
            return Err(MalformedRequest::BadNames(bad));
        }
        match &request.to {
            None => {}
            Some(To::Datetime(t)) => {
                parse_instant(t).ok_or_else(|| MalformedRequest::BadTime(clip(t, 64)))?;
            }
            Some(To::Undo(id)) if !is_request_id(id) => {
                return Err(MalformedRequest::UndoneIdNotUuid(clip(id, 64)));
            }
            Some(To::Undo(_)) => {}
            Some(To::Plan(plan)) => check_plan(plan, request.dry_run)?,
        }
        if request.force && !matches!(request.to, Some(To::Undo(_))) {
            return Err(MalformedRequest::ForceWithoutUndo);
        }
        if !request.from.is_empty() {
            // A rebuild from streamlets may be planned, and its named streamlets go to the start, a
            // time or a plan's offsets.
            if !request.rebuild {
                return Err(MalformedRequest::BadRebuild("from streamlets is marked 'rebuild'"));
            }
            if !request.streamlets.is_empty() {
                return Err(MalformedRequest::BadRebuild("names its streamlets in 'from' or 'streamlets', not both"));
            }
            if matches!(request.to, Some(To::Undo(_))) {
                return Err(MalformedRequest::BadRebuild("from streamlets is not undone with 'to.undo'"));
            }
            return Ok(request);
        }
        if request.rebuild && request.dry_run {
            return Err(MalformedRequest::BadRebuild("is carried out, not planned"));
        }
        if request.rebuild && request.to.is_some() {
            return Err(MalformedRequest::BadRebuild("goes to the earliest offsets, with no 'to'"));
        }
        Ok(request)
    }

    /// A request of the streamlets `streamlets` to the earliest offsets.
    pub fn new(id: impl Into<String>, streamlets: Vec<String>) -> Self {
        ResetRequest { id: id.into(), streamlets, ..ResetRequest::default() }
    }

    /// The instant of `to.datetime`, in milliseconds since the Unix epoch (`None` for other
    /// requests; a parsed request's time always reads).
    pub fn datetime_millis(&self) -> Option<i64> {
        match &self.to {
            Some(To::Datetime(t)) => parse_instant(t),
            _ => None,
        }
    }

    /// The annotation value: compact JSON, as the CLI writes it.
    pub fn to_annotation(&self) -> String {
        // Serialising a struct of strings cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn check_plan(plan: &PlanOffsets, dry_run: bool) -> Result<(), MalformedRequest> {
    let bad = |why: String| Err(MalformedRequest::BadPlan(why));
    if dry_run {
        return bad("is carried out, not planned again".into());
    }
    if !is_request_id(&plan.id) {
        return bad(format!("names '{}', which is not a UUID", clip(&plan.id, 64)));
    }
    if plan.groups.is_empty() {
        return bad("lists no consumer group".into());
    }
    let count: usize = plan.groups.values().map(BTreeMap::len).sum();
    if count > MAX_PLAN_PARTITIONS {
        return bad(format!("lists {count} partitions, more than the {MAX_PLAN_PARTITIONS} a plan may"));
    }
    for (group, partitions) in &plan.groups {
        if group.is_empty() || group.len() > 255 || partitions.is_empty() {
            return bad(format!("lists '{}', which is no consumer group with partitions", clip(group, 64)));
        }
        if let Some((p, _)) =
            partitions.iter().find(|(p, (expected, new))| **p < 0 || *new < 0 || expected.is_some_and(|e| e < 0))
        {
            return bad(format!("has a negative partition or offset in group '{}' (partition {p})", clip(group, 64)));
        }
    }
    Ok(())
}

/// An RFC 3339 instant in milliseconds since the Unix epoch.
pub fn parse_instant(text: &str) -> Option<i64> {
    text.parse::<k8s_openapi::jiff::Timestamp>().ok().map(|t| t.as_millisecond())
}

/// The instant `duration` before `now` (milliseconds since the Unix epoch), as RFC 3339 in UTC:
/// what `flow reset --by-duration` writes as the request's `to.datetime`. `duration` is an ISO 8601
/// duration as Kafka's tool takes it (`P1DT2H`, `PT30M`) or a friendly one (`2h 30m`, `1d`, `90s`);
/// days, months and years count in the UTC calendar.
///
/// # Errors
/// A message naming the text when it is no positive duration, or the instant would be before 1970.
pub fn instant_before(now_millis: i64, duration: &str) -> Result<String, String> {
    use k8s_openapi::jiff::{Span, Timestamp, tz::TimeZone};
    let bad = || format!("'{}' is not a duration (such as PT2H, P1DT12H, 2h 30m or 90s)", clip(duration, 64));
    let span: Span = match duration.trim().parse() {
        Ok(span) => span,
        // Longer than a span holds, so longer than the time since 1970 too.
        Err(_) if too_long(duration) => return Err(format!("{duration} before now is before 1970")),
        Err(_) => return Err(bad()),
    };
    if span.is_negative() || span.is_zero() {
        return Err(format!("{} (it must be more than 0)", bad()));
    }
    let now = Timestamp::from_millisecond(now_millis).map_err(|e| e.to_string())?;
    let at = now.to_zoned(TimeZone::UTC).checked_sub(span).map_or(Timestamp::MIN, |at| at.timestamp());
    if at.as_millisecond() < 0 {
        return Err(format!("{duration} before now is before 1970"));
    }
    Ok(at.to_string())
}

/// Whether `duration`, which is no span, has the form of a duration and is only too long to be held
/// (a span holds at most 19,998 years, or its like in smaller units, all of them longer than the
/// time since 1970): with each run of whole digits taken as `1` it is a positive duration. Digits
/// after a decimal point are kept, for a fraction too fine is no duration at all.
fn too_long(duration: &str) -> bool {
    let trimmed = duration.trim();
    let (mut ones, mut in_digits, mut in_fraction) = (String::with_capacity(trimmed.len()), false, false);
    for c in trimmed.chars() {
        if c.is_ascii_digit() {
            if in_fraction {
                ones.push(c);
            } else if !in_digits {
                ones.push('1');
            }
            in_digits = true;
        } else {
            in_fraction = in_digits && matches!(c, '.' | ',');
            in_digits = false;
            ones.push(c);
        }
    }
    ones.parse::<k8s_openapi::jiff::Span>().is_ok_and(|s| s.is_positive())
}

/// Why `text` cannot be the instant of a reset to a time, as `flow reset --to-datetime` checks it:
/// not an RFC 3339 instant, before 1970 (Kafka's timestamps are milliseconds since
/// 1970-01-01T00:00:00Z, never negative), or later than the last instant [`parse_instant`] holds.
///
/// # Errors
/// The reason, to follow the text.
pub fn check_instant(text: &str) -> Result<(), String> {
    use k8s_openapi::jiff::Timestamp;
    use k8s_openapi::jiff::fmt::temporal::Pieces;
    match text.parse::<Timestamp>() {
        Ok(at) if at < Timestamp::UNIX_EPOCH => {
            Err("is before 1970-01-01T00:00:00Z, and Kafka's timestamps (milliseconds since then) cannot be".into())
        }
        Ok(_) => Ok(()),
        // A date, a time and an offset, in the last year a timestamp reaches: past its end.
        Err(_)
            if Pieces::parse(text)
                .is_ok_and(|p| p.time().is_some() && p.offset().is_some() && p.date().year() == 9999) =>
        {
            let last = Timestamp::from_second(Timestamp::MAX.as_second()).unwrap_or(Timestamp::MAX);
            Err(format!("is later than the last instant supported ({last})"))
        }
        _ => Err("is not an RFC 3339 instant (such as 2026-11-29T16:00:00Z)".into()),
    }
}

/// Whether `id` is a request id as `flow reset` writes it: a UUID in its hyphenated lower-case form
/// (`1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71`).
pub fn is_request_id(id: &str) -> bool {
    matches!(uuid::Uuid::try_parse(id), Ok(u) if u.hyphenated().to_string() == id)
}

/// At most `max` characters of `s`, with `…` when cut; never splits a UTF-8 character.
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";

    #[test]
    fn parses_the_cli_form() {
        let r = ResetRequest::parse(&format!(r#"{{"id":"{ID}","streamlets":["router"]}}"#)).unwrap();
        assert_eq!(r.id, ID);
        assert_eq!(r.streamlets, vec!["router"]);
        assert_eq!(ResetRequest::parse(&r.to_annotation()).unwrap(), r);
    }

    #[test]
    fn pending_until_the_done_annotation_names_the_request() {
        let text = ResetRequest::new(ID, vec![]).to_annotation();
        assert!(pending(Some(&text), None));
        assert!(pending(Some(&text), Some("0e5b1c2a-1111-4222-8333-444455556666")));
        assert!(!pending(Some(&text), Some(ID)));
        assert!(!pending(None, None));
        assert!(!pending(Some("not json"), None), "a malformed request is answered at once");
    }

    #[test]
    fn missing_list_means_all() {
        let r = ResetRequest::parse(&format!(r#"{{"id":"{ID}"}}"#)).unwrap();
        assert!(r.streamlets.is_empty());
    }

    #[test]
    fn refuses_each_malformed_kind() {
        assert!(matches!(ResetRequest::parse("not json"), Err(MalformedRequest::Shape(_))));
        assert!(matches!(ResetRequest::parse(r#"{"streamlets":[]}"#), Err(MalformedRequest::Shape(_))));
        assert!(matches!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","extra":1}}"#)),
            Err(MalformedRequest::Shape(_))
        ));
        assert!(matches!(ResetRequest::parse(r#"{"id":"u1"}"#), Err(MalformedRequest::IdNotUuid(_))));
        assert!(matches!(
            ResetRequest::parse(&format!(r#"{{"id":"{}"}}"#, ID.to_uppercase())),
            Err(MalformedRequest::IdNotUuid(_))
        ));
        let many: Vec<String> = (0..1000).map(|i| format!("\"s{i}\"")).collect();
        assert_eq!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","streamlets":[{}]}}"#, many.join(","))),
            Err(MalformedRequest::TooManyNames(1000))
        );
        assert_eq!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","streamlets":["Router","ok"]}}"#)),
            Err(MalformedRequest::BadNames(vec!["'Router'".into()]))
        );
    }

    #[test]
    fn a_reset_to_the_earliest_offsets_is_written_as_before() {
        let r = ResetRequest::new(ID, vec!["router".into()]);
        assert_eq!(r.to_annotation(), format!(r#"{{"id":"{ID}","streamlets":["router"]}}"#));
    }

    #[test]
    fn a_time_parses_and_is_checked() {
        let at = ResetRequest::parse(&format!(r#"{{"id":"{ID}","to":{{"datetime":"2026-11-29T16:00:00+01:00"}}}}"#))
            .unwrap();
        assert_eq!(at.datetime_millis(), Some(1_795_964_400_000));
        assert_eq!(ResetRequest::parse(&at.to_annotation()).unwrap(), at);
        assert!(matches!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","to":{{"datetime":"yesterday"}}}}"#)),
            Err(MalformedRequest::BadTime(_))
        ));
        assert!(matches!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","to":{{"later":1}}}}"#)),
            Err(MalformedRequest::Shape(_))
        ));
    }

    #[test]
    fn an_undo_names_a_uuid_and_only_it_takes_force() {
        let undo = ResetRequest::parse(&format!(r#"{{"id":"{ID}","to":{{"undo":"{ID}"}},"force":true}}"#)).unwrap();
        assert!(undo.force);
        assert_eq!(ResetRequest::parse(&undo.to_annotation()).unwrap(), undo);
        assert!(matches!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","to":{{"undo":"x"}}}}"#)),
            Err(MalformedRequest::UndoneIdNotUuid(_))
        ));
        assert!(matches!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","force":true}}"#)),
            Err(MalformedRequest::ForceWithoutUndo)
        ));
        let plain = ResetRequest::new(ID, vec![]);
        assert!(!plain.to_annotation().contains("force"), "written only when set");
    }

    #[test]
    fn a_plan_carries_offsets_and_is_checked() {
        let text = format!(
            r#"{{"id":"{ID}","to":{{"plan":{{"id":"{ID}","groups":{{"cart.router.in":{{"0":[20,0],"1":[null,0]}}}}}}}}}}"#
        );
        let r = ResetRequest::parse(&text).unwrap();
        let Some(To::Plan(plan)) = &r.to else { panic!("a plan: {r:?}") };
        assert_eq!(plan.groups["cart.router.in"], BTreeMap::from([(0, (Some(20), 0)), (1, (None, 0))]));
        assert_eq!(ResetRequest::parse(&r.to_annotation()).unwrap(), r);
        for bad in [
            format!(r#"{{"id":"{ID}","to":{{"plan":{{"id":"x","groups":{{"g":{{"0":[1,0]}}}}}}}}}}"#),
            format!(r#"{{"id":"{ID}","to":{{"plan":{{"id":"{ID}","groups":{{}}}}}}}}"#),
            format!(r#"{{"id":"{ID}","to":{{"plan":{{"id":"{ID}","groups":{{"g":{{"0":[1,-1]}}}}}}}}}}"#),
            format!(r#"{{"id":"{ID}","dryRun":true,"to":{{"plan":{{"id":"{ID}","groups":{{"g":{{"0":[1,0]}}}}}}}}}}"#),
        ] {
            assert!(matches!(ResetRequest::parse(&bad), Err(MalformedRequest::BadPlan(_))), "{bad}");
        }
        let dry = ResetRequest::parse(&format!(r#"{{"id":"{ID}","dryRun":true}}"#)).unwrap();
        assert!(dry.dry_run);
        assert_eq!(dry.to_annotation(), format!(r#"{{"id":"{ID}","streamlets":[],"dryRun":true}}"#));
    }

    #[test]
    fn a_rebuild_is_marked_and_takes_no_destination() {
        let r = ResetRequest { rebuild: true, ..ResetRequest::new(ID, vec!["router".into()]) };
        assert_eq!(r.to_annotation(), format!(r#"{{"id":"{ID}","streamlets":["router"],"rebuild":true}}"#));
        assert_eq!(ResetRequest::parse(&r.to_annotation()).unwrap(), r);
        assert!(!ResetRequest::new(ID, vec![]).to_annotation().contains("rebuild"), "written only when set");
        for bad in [
            format!(r#"{{"id":"{ID}","rebuild":true,"dryRun":true}}"#),
            format!(r#"{{"id":"{ID}","rebuild":true,"to":{{"undo":"{ID}"}}}}"#),
            format!(r#"{{"id":"{ID}","rebuild":true,"to":{{"datetime":"2026-11-29T16:00:00Z"}}}}"#),
        ] {
            assert!(matches!(ResetRequest::parse(&bad), Err(MalformedRequest::BadRebuild(_))), "{bad}");
        }
    }

    #[test]
    fn a_rebuild_from_streamlets_may_go_to_a_time_or_a_plan_and_be_planned() {
        let r = ResetRequest { rebuild: true, from: vec!["middle".into()], ..ResetRequest::new(ID, vec![]) };
        assert_eq!(r.to_annotation(), format!(r#"{{"id":"{ID}","streamlets":[],"rebuild":true,"from":["middle"]}}"#));
        assert_eq!(ResetRequest::parse(&r.to_annotation()).unwrap(), r);
        for good in [
            format!(r#"{{"id":"{ID}","rebuild":true,"from":["middle"],"dryRun":true}}"#),
            format!(r#"{{"id":"{ID}","rebuild":true,"from":["middle"],"to":{{"datetime":"2026-11-29T16:00:00Z"}}}}"#),
            format!(
                r#"{{"id":"{ID}","rebuild":true,"from":["middle"],"to":{{"plan":{{"id":"{ID}","groups":{{"g":{{"0":[1,0]}}}}}}}}}}"#
            ),
        ] {
            assert!(ResetRequest::parse(&good).is_ok(), "{good}");
        }
        for bad in [
            format!(r#"{{"id":"{ID}","from":["middle"]}}"#),
            format!(r#"{{"id":"{ID}","rebuild":true,"from":["middle"],"streamlets":["sink"]}}"#),
            format!(r#"{{"id":"{ID}","rebuild":true,"from":["middle"],"to":{{"undo":"{ID}"}}}}"#),
        ] {
            assert!(matches!(ResetRequest::parse(&bad), Err(MalformedRequest::BadRebuild(_))), "{bad}");
        }
        assert!(matches!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","rebuild":true,"from":["Middle"]}}"#)),
            Err(MalformedRequest::BadNames(_))
        ));
    }

    #[test]
    fn a_duration_is_an_instant_before_now() {
        // 2026-11-29T16:00:00Z
        let now = 1_795_968_000_000;
        assert_eq!(instant_before(now, "PT2H").unwrap(), "2026-11-29T14:00:00Z");
        assert_eq!(instant_before(now, "P1DT30M").unwrap(), "2026-11-28T15:30:00Z");
        assert_eq!(instant_before(now, "2h 30m").unwrap(), "2026-11-29T13:30:00Z");
        assert_eq!(instant_before(now + 250, "90s").unwrap(), "2026-11-29T15:58:30.25Z");
        for bad in ["yesterday", "", "-PT1H", "0s"] {
            assert!(instant_before(now, bad).is_err(), "{bad}");
        }
        assert_eq!(instant_before(now, "P1M").unwrap(), "2026-10-29T16:00:00Z");
        assert!(instant_before(now, "P100Y").unwrap_err().contains("before 1970"));
        let at = instant_before(now, "PT2H").unwrap();
        assert_eq!(parse_instant(&at), Some(now - 2 * 3600 * 1000));
    }

    #[test]
    fn clip_keeps_characters_whole() {
        assert_eq!(clip("äöü", 2), "äö…");
        assert_eq!(clip("ab", 5), "ab");
    }
}
