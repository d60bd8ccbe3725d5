//! What a dry run warns about in its plan of a group: history that retention trimmed before the
//! group read it, a compacted topic, a log start that retention keeps moving, and a group whose
//! consumers still run.

use super::vocabulary::Inspection;
use super::wording::named;

/// The warnings of a group's plan, from what its inspection saw (the topic's configuration
/// included).
pub fn warnings(topic: &str, seen: &Inspection) -> Vec<String> {
    let mut out = Vec::new();
    let trimmed: Vec<String> = seen
        .committed
        .iter()
        .filter_map(|(p, c)| {
            let start = *seen.log_start.get(p)?;
            let c = (*c)?;
            (c < start).then(|| format!("{p} ({} record(s))", start - c))
        })
        .collect();
    if !trimmed.is_empty() {
        out.push(format!(
            "retention deleted records the group never read: the log start passed its committed offset in partition(s) \
             {}; those records are gone and cannot be reprocessed",
            named(&trimmed)
        ));
    }
    let config = |key: &str| seen.topic_configs.get(key).map(String::as_str);
    if let Some(policy) = config("cleanup.policy").filter(|p| p.contains("compact")) {
        out.push(format!(
            "topic '{topic}' is compacted (cleanup.policy={policy}): it keeps only the latest record of each key, so \
             fewer records are reprocessed than were produced"
        ));
    }
    let deletes = config("cleanup.policy").is_some_and(|p| p.contains("delete"));
    let limits: Vec<String> = ["retention.ms", "retention.bytes"]
        .into_iter()
        .filter_map(|k| config(k).filter(|v| *v != "-1").map(|v| format!("{k}={v}")))
        .collect();
    let moved: Vec<String> =
        seen.log_start.iter().filter(|(_, start)| **start > 0).map(|(p, start)| format!("{p} (at {start})")).collect();
    if deletes && !limits.is_empty() && !moved.is_empty() {
        out.push(format!(
            "the log start is moving: retention ({}) has deleted records of partition(s) {} and keeps deleting; by the \
             time the reset runs fewer records may be left to reprocess than planned",
            limits.join(", "),
            named(&moved)
        ));
    }
    if seen.members > 0 {
        out.push(format!(
            "the group has {} active member(s): its streamlet runs, so its committed offsets move until it stops, and \
             a plan carried out then refuses the group",
            seen.members
        ));
    }
    out
}
