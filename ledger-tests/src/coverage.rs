//! What a generated history reached: the states that matter, read off the world's facts, which the
//! coverage test of `tests/reset_machine.rs` counts over a fixed sample of histories.

use crate::world::{Committer, Fact, Marker, World, marker};

/// What one history reached, read off the world's facts.
pub fn reached(world: &World) -> Vec<&'static str> {
    let facts = &world.facts;
    let mut out = vec![];
    let commit = |f: &Fact| match f {
        Fact::Commit(c) => Some(c.clone()),
        _ => None,
    };
    let resets: Vec<usize> = (0..facts.len())
        .filter(|i| commit(&facts[*i]).is_some_and(|c| matches!(marker(&c.metadata), Some(Marker::Reset(_)))))
        .collect();
    if !resets.is_empty() {
        out.push("a reset commit landed");
    }
    if facts.iter().any(|f| matches!(f, Fact::Done { id } if world.requests[id].targets().is_some())) {
        out.push("a request with groups was done");
    }
    if facts.iter().any(|f| matches!(f, Fact::Crash { .. })) {
        out.push("the operator crashed mid-drive");
    }
    if facts.iter().any(|f| matches!(f, Fact::Abandoned)) {
        out.push("a write failed and the drive was abandoned");
    }
    if facts.iter().any(|f| matches!(f, Fact::Recover { .. })) {
        out.push("an intent was recovered");
    }
    let intent_then = |pred: &dyn Fn(&Fact) -> bool| {
        facts.iter().enumerate().any(|(i, f)| matches!(f, Fact::Intent { .. }) && facts[i..].iter().any(pred))
    };
    if intent_then(&|f| matches!(f, Fact::LedgerLost)) {
        out.push("the ledger was lost after an intent");
    }
    if intent_then(&|f| matches!(f, Fact::Commit(c) if c.by == Committer::Consumer)) {
        out.push("a consumer committed after an intent");
    }
    if resets.iter().any(|i| facts[*i..].iter().any(|f| matches!(f, Fact::Commit(c) if c.by == Committer::Consumer))) {
        out.push("a consumer committed after a landed reset (D1)");
    }
    let reasons: Vec<(&str, &str)> = facts
        .iter()
        .filter_map(|f| match f {
            Fact::Event(e) => Some((e.reason.as_str(), e.key.as_str())),
            _ => None,
        })
        .collect();
    if reasons.iter().any(|(r, k)| *r == "ResetRefused" && k.contains(" waits: ")) {
        out.push("a request waited");
    }
    if reasons.iter().any(|(r, _)| *r == "ResetOffsetsFailed") {
        out.push("a group failed");
    }
    if reasons.iter().any(|(r, k)| *r == "ResetRefused" && k.starts_with("malformed/")) {
        out.push("a malformed request was refused");
    }
    if reasons.iter().any(|(r, k)| *r == "ResetRefused" && k.ends_with("/refused")) {
        out.push("a request naming no inlets was refused");
    }
    let notes = || {
        facts.iter().filter_map(|f| match f {
            Fact::Event(e) => Some(e),
            _ => None,
        })
    };
    if facts.iter().any(|f| matches!(f, Fact::Recreated { .. })) {
        out.push("the resource was created again");
    }
    if reasons.iter().any(|(r, _)| *r == "ResetSuperseded") {
        out.push("a request was superseded");
    }
    if notes().any(|e| e.reason == "ResetOffsetsFailed" && e.note.contains("a consumer overwrote the reset")) {
        out.push("a consumer overwrote a reset during the settle (F1)");
    }
    if notes().any(|e| e.reason == "ResetPartitionsAdded") {
        out.push("a partition added during a reset was named (B5)");
    }
    if facts.iter().any(|f| matches!(f, Fact::Commit(c) if c.late)) {
        out.push("a write the broker held was carried out late");
    }
    if facts.iter().any(|f| matches!(f, Fact::SharedRefused { .. })) {
        out.push("a request was refused for a shared group");
    }
    if facts.iter().any(|f| matches!(f, Fact::Pinned { .. })) {
        out.push("a group's call went behind its held write, not over its lane");
    }
    out
}
