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
use flow_core::resource::GroupStage;
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
    /// Per consumer group.
    pub groups: Vec<PlannedGroup>,
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
    /// Records the group would read again, summed over its partitions.
    pub records_to_reprocess: i64,
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
                    Some(PlannedPartition {
                        partition,
                        committed: g.offsets_before.get(p).copied(),
                        new_offset: *new,
                        records_to_reprocess: (high - new).max(0),
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
                records_to_reprocess: g.records_to_reprocess,
                partition_count: g.partitions,
                partitions,
                warnings: g.warnings.clone(),
            }
        })
        .collect();
    Plan { id: r.id.clone(), namespace: r.namespace.clone(), pipeline: r.pipeline.clone(), to: r.to.clone(), groups }
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
    let mut out = format!(
        "plan {} of {}/{}: to {} (nothing was changed)\n",
        plan.id,
        plan.namespace,
        plan.pipeline,
        plan.to.as_deref().unwrap_or("earliest")
    );
    let mut rows: Vec<[String; 6]> = vec![];
    for g in plan.groups.iter().filter(|g| g.outcome == GroupStage::Planned) {
        for p in &g.partitions {
            rows.push([
                g.group.clone(),
                g.topic.clone(),
                p.partition.to_string(),
                p.committed.map_or_else(|| "-".to_string(), |c| c.to_string()),
                p.new_offset.to_string(),
                p.records_to_reprocess.to_string(),
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
            ]);
        }
    }
    out.push_str(&output::columns(["GROUP", "TOPIC", "PARTITION", "COMMITTED", "NEW", "TO REPROCESS"], &rows));
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

/// Reads the plan file `path` for pipeline `pipeline` in `ns`; returns what the request carries.
///
/// # Errors
/// The file cannot be read, is not a plan, is another pipeline's, or plans nothing.
pub fn read(path: &Path, ns: &str, pipeline: &str) -> Result<PlanOffsets, Failure> {
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
    Ok(PlanOffsets { id: plan.id, groups })
}
