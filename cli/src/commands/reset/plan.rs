//! `flow reset --dry-run` (the plan, as a table, JSON or YAML, and `--plan-out <file>`) and
//! `flow reset --plan <file>` (the request that carries a plan out).
//!
//! The operator makes the plan: it inspects each group over the topic's own connection, as for a
//! reset, and writes the plan into the resource's status. The CLI only reads the status, so it
//! needs no Kafka credentials (see docs/reset-plan.md).

use std::collections::BTreeMap;
use std::path::Path;

use flow_core::request::{MAX_PLAN_PARTITIONS, PlanOffsets};
use flow_core::reset::LISTED_OFFSETS;
use flow_core::resource::{AnkkaFlowSpec, GroupStage};
use serde::{Deserialize, Serialize};

use super::report::Report;
use crate::exit::Failure;
use crate::output::{self, Format};

/// A dry run's plan: what `flow reset --dry-run -o json|yaml` prints and `--plan-out` writes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The dry run's request id.
    pub id: String,
    /// Namespace of the AnkkaFlow.
    pub namespace: String,
    /// The AnkkaFlow's name.
    pub pipeline: String,
    /// Where the groups would go when not to the earliest offsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The plan of a rebuild from these streamlets (`flow rebuild --from`); empty for a reset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    /// Of a rebuild from streamlets: every streamlet it stops, and why (writers before readers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closure: Vec<ClosureStreamlet>,
    /// Of a rebuild from streamlets: the pipeline's streamlets it leaves alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untouched: Vec<String>,
    /// Per consumer group.
    pub groups: Vec<PlannedGroup>,
}

/// A streamlet a rebuild from streamlets stops, and why.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClosureStreamlet {
    /// The streamlet.
    pub streamlet: String,
    /// `named with --from`, or `downstream of middle (reads 'chain.cooked')`.
    pub why: String,
}

/// One group of a plan.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlannedGroup {
    /// The consumer group.
    pub group: String,
    /// The topic it reads.
    pub topic: String,
    /// `Planned`, or `Failed` when it could not be planned (see `message`).
    pub outcome: GroupStage,
    /// What the plan does, or why it failed.
    pub message: String,
    /// Where it would go when not where the plan's `to` says (a group of a rebuild from streamlets
    /// downstream of them goes to the end of its topic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Records the group would read again, summed over its partitions.
    pub records_to_reprocess: i64,
    /// Records of its topic it would not read, summed over its partitions: for a group a rebuild
    /// from streamlets puts at the end, what the topic held before the replay.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub records_to_skip: i64,
    /// How many partitions it would move.
    pub partition_count: u32,
    /// Per partition (listed only for groups of up to 16 partitions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PlannedPartition>,
    /// What to know before carrying the plan out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One partition of a planned group.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlannedPartition {
    /// The partition.
    pub partition: i32,
    /// The group's committed offset now (`null`: none).
    pub committed: Option<i64>,
    /// Where it would go.
    pub new_offset: i64,
    /// Records it would read again: the high watermark minus the new offset.
    pub records_to_reprocess: i64,
    /// Records it would not read: the new offset minus the committed one, for a group a rebuild
    /// from streamlets puts at the end; absent for a partition without a committed offset (the
    /// group's total counts it from the log start, which the plan does not list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_to_skip: Option<i64>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The plan the final report of a dry run holds.
pub fn from_report(r: &Report) -> Plan {
    let groups = r
        .groups
        .iter()
        .map(|g| {
            let partitions = g
                .offsets_after
                .iter()
                .filter_map(|(p, new)| {
                    let partition = p.parse().ok()?;
                    let high = g.high_watermarks.get(p).copied().unwrap_or(*new);
                    let committed = g.offsets_before.get(p).copied();
                    let skipped = if g.records_to_skip > 0 { committed.map(|c| (new - c).max(0)) } else { None };
                    Some(PlannedPartition {
                        partition,
                        committed,
                        new_offset: *new,
                        records_to_reprocess: (high - new).max(0),
                        records_to_skip: skipped,
                    })
                })
                .collect::<Vec<_>>();
            let mut partitions = partitions;
            partitions.sort_by_key(|p| p.partition);
            PlannedGroup {
                group: g.group.clone(),
                topic: g.topic.clone(),
                outcome: g.outcome,
                message: g.message.clone(),
                to: g.to.clone(),
                records_to_reprocess: g.records_to_reprocess,
                records_to_skip: g.records_to_skip,
                partition_count: g.partitions,
                partitions,
                warnings: g.warnings.clone(),
            }
        })
        .collect();
    Plan {
        id: r.id.clone(),
        namespace: r.namespace.clone(),
        pipeline: r.pipeline.clone(),
        to: r.to.clone(),
        from: vec![],
        closure: vec![],
        untouched: vec![],
        groups,
    }
}

impl Plan {
    /// The same plan, of a rebuild from the named streamlets of `closure` in `spec`: it lists what
    /// the rebuild stops, and why, and what it leaves alone.
    #[must_use]
    pub fn of_rebuild(mut self, closure: &flow_core::closure::Closure, spec: &AnkkaFlowSpec) -> Plan {
        self.from = closure.from().to_vec();
        self.closure = closure
            .reasons(str::to_string)
            .into_iter()
            .map(|(streamlet, why)| ClosureStreamlet { streamlet, why })
            .collect();
        let stopped = closure.streamlets();
        let mut untouched: Vec<String> =
            spec.streamlets.iter().map(|s| s.name.clone()).filter(|s| !stopped.contains(s)).collect();
        untouched.sort();
        self.untouched = untouched;
        self
    }
}

/// Renders `plan` in `format`: a table per partition, the groups' totals and their warnings, or
/// JSON or YAML.
///
/// # Errors
/// The plan cannot be serialised (not expected).
pub fn render(plan: &Plan, format: Format) -> Result<String, Failure> {
    if format != Format::Text {
        return output::render(plan, format);
    }
    let to = plan.to.as_deref().unwrap_or("earliest");
    let rebuild = !plan.from.is_empty();
    let mut out = if rebuild {
        format!(
            "plan {} of {}/{}: rebuild from {}, to {to} (nothing was changed)\n",
            plan.id,
            plan.namespace,
            plan.pipeline,
            plan.from.join(", ")
        )
    } else {
        format!("plan {} of {}/{}: to {to} (nothing was changed)\n", plan.id, plan.namespace, plan.pipeline)
    };
    if rebuild {
        out.push_str("stops together, moves each group below, then starts again together:\n");
        let rows: Vec<[String; 2]> =
            plan.closure.iter().map(|c| [format!("  {}", c.streamlet), c.why.clone()]).collect();
        out.push_str(&output::columns(["  STREAMLET", "WHY"], &rows));
        if !plan.untouched.is_empty() {
            out.push_str(&format!("untouched: {}\n", plan.untouched.join(", ")));
        }
    }
    let mut rows: Vec<[String; 7]> = vec![];
    for g in plan.groups.iter().filter(|g| g.outcome == GroupStage::Planned) {
        for p in &g.partitions {
            rows.push([
                g.group.clone(),
                g.topic.clone(),
                p.partition.to_string(),
                p.committed.map_or_else(|| "-".to_string(), |c| c.to_string()),
                p.new_offset.to_string(),
                p.records_to_reprocess.to_string(),
                match (g.records_to_skip, p.records_to_skip) {
                    (0, _) => "0".to_string(),
                    (_, Some(n)) => n.to_string(),
                    (_, None) => "-".to_string(),
                },
            ]);
        }
        if g.partitions.is_empty() {
            rows.push([
                g.group.clone(),
                g.topic.clone(),
                format!("all {}", g.partition_count),
                String::new(),
                String::new(),
                g.records_to_reprocess.to_string(),
                g.records_to_skip.to_string(),
            ]);
        }
    }
    let heads = ["GROUP", "TOPIC", "PARTITION", "COMMITTED", "NEW", "TO REPROCESS", "TO SKIP"];
    if rebuild {
        out.push_str(&output::columns(heads, &rows));
    } else {
        // The records to skip are a rebuild's from streamlets only: a reset's plan reads as it
        // always did.
        let six = |r: &[String; 7]| std::array::from_fn::<String, 6, _>(|i| r[i].clone());
        let rows: Vec<[String; 6]> = rows.iter().map(six).collect();
        out.push_str(&output::columns(std::array::from_fn(|i| heads[i]), &rows));
    }
    for g in &plan.groups {
        out.push_str(&format!("{}: {}\n", g.group, g.message));
        for w in &g.warnings {
            out.push_str(&format!("warning: {}: {w}\n", g.group));
        }
    }
    Ok(out)
}

/// Writes `plan` to `path` as JSON, for `flow reset --plan`.
///
/// # Errors
/// A planned group whose partitions the status does not list (more than 16), or the file cannot
/// be written.
pub fn write(plan: &Plan, path: &Path) -> Result<(), Failure> {
    if let Some(g) = plan.groups.iter().find(|g| g.outcome == GroupStage::Planned && g.partitions.is_empty()) {
        return Err(Failure::refused(format!(
            "cannot write the plan to {}: group {} has {} partitions, and a plan file holds groups of up to \
             {LISTED_OFFSETS} partitions (the status lists no more); reset without a plan",
            path.display(),
            g.group,
            g.partition_count
        )));
    }
    let text = output::render(plan, Format::Json)?;
    std::fs::write(path, text)
        .map_err(|e| Failure::refused(format!("cannot write the plan to {}: {e}", path.display())))
}

/// Reads the plan file `path` for pipeline `pipeline` in `ns`; returns what the request carries, and
/// the streamlets the plan's rebuild is from (empty for a reset's plan).
///
/// # Errors
/// The file cannot be read, is not a plan, is another pipeline's, or plans nothing.
pub fn read(path: &Path, ns: &str, pipeline: &str) -> Result<(PlanOffsets, Vec<String>), Failure> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| Failure::refused(format!("cannot read the plan {shown}: {e}")))?;
    let plan: Plan = serde_json::from_str(&text)
        .map_err(|e| Failure::refused(format!("{shown} is not a plan of flow reset --dry-run --plan-out: {e}")))?;
    if plan.namespace != ns || plan.pipeline != pipeline {
        return Err(Failure::refused(format!(
            "{shown} is a plan of pipeline '{}' in namespace '{}', not of '{pipeline}' in '{ns}'; nothing was requested",
            plan.pipeline, plan.namespace
        )));
    }
    let groups: BTreeMap<String, BTreeMap<i32, (Option<i64>, i64)>> = plan
        .groups
        .iter()
        .filter(|g| g.outcome == GroupStage::Planned && !g.partitions.is_empty())
        .map(|g| (g.group.clone(), g.partitions.iter().map(|p| (p.partition, (p.committed, p.new_offset))).collect()))
        .collect();
    if groups.is_empty() {
        return Err(Failure::refused(format!("{shown} plans no consumer group; nothing was requested")));
    }
    let count: usize = groups.values().map(BTreeMap::len).sum();
    if count > MAX_PLAN_PARTITIONS {
        return Err(Failure::refused(format!(
            "{shown} plans {count} partitions, more than the {MAX_PLAN_PARTITIONS} one request may carry; nothing was \
             requested"
        )));
    }
    Ok((PlanOffsets { id: plan.id, groups }, plan.from))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(group: &str, topic: &str, new: i64, skip: i64, to: Option<&str>) -> PlannedGroup {
        PlannedGroup {
            group: group.into(),
            topic: topic.into(),
            outcome: GroupStage::Planned,
            message: format!("would move 1 partition(s) of '{topic}'"),
            to: to.map(str::to_string),
            records_to_reprocess: 60 - new,
            records_to_skip: skip,
            partition_count: 1,
            partitions: vec![PlannedPartition {
                partition: 0,
                committed: Some(30),
                new_offset: new,
                records_to_reprocess: 60 - new,
                records_to_skip: (skip > 0).then_some(skip),
            }],
            warnings: vec![],
        }
    }

    fn plan(from: &[&str]) -> Plan {
        Plan {
            id: "p1".into(),
            namespace: "shop".into(),
            pipeline: "chain".into(),
            to: None,
            from: from.iter().map(|s| s.to_string()).collect(),
            closure: if from.is_empty() {
                vec![]
            } else {
                vec![
                    ClosureStreamlet { streamlet: "middle".into(), why: "named with --from".into() },
                    ClosureStreamlet {
                        streamlet: "sink".into(),
                        why: "downstream of middle (reads 'chain.cooked')".into(),
                    },
                ]
            },
            untouched: if from.is_empty() { vec![] } else { vec!["source".into()] },
            groups: vec![
                group("chain.middle.in", "chain.raw", 0, 0, None),
                group(
                    "chain.sink.in",
                    "chain.cooked",
                    60,
                    30,
                    Some("the end (it reads only what middle writes again)"),
                ),
            ],
        }
    }

    #[test]
    fn a_rebuilds_plan_lists_what_it_stops_and_what_each_group_skips() {
        let text = render(&plan(&["middle"]), Format::Text).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "plan p1 of shop/chain: rebuild from middle, to earliest (nothing was changed)");
        assert_eq!(lines[1], "stops together, moves each group below, then starts again together:");
        assert!(lines[3].starts_with("  middle") && lines[3].ends_with("named with --from"), "{text}");
        assert!(lines[4].contains("downstream of middle (reads 'chain.cooked')"), "{text}");
        assert_eq!(lines[5], "untouched: source");
        assert!(lines[6].ends_with("TO REPROCESS   TO SKIP"), "{text}");
        assert!(lines[8].starts_with("chain.sink.in") && lines[8].ends_with("60    0              30"), "{text}");
        // A reset's plan reads as it always did.
        let reset = render(&plan(&[]), Format::Text).unwrap();
        assert!(reset.starts_with("plan p1 of shop/chain: to earliest (nothing was changed)\nGROUP"), "{reset}");
        assert!(!reset.contains("TO SKIP"));
        let json = render(&plan(&["middle"]), Format::Json).unwrap();
        let back: Plan = serde_json::from_str(&json).unwrap();
        assert_eq!(back, plan(&["middle"]), "the file a plan is written to reads back whole");
        assert!(json.contains("\"recordsToSkip\": 30") && json.contains("\"from\""), "{json}");
    }
}
