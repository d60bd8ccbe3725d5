//! `flow reset undo <id> [-n <ns>] [--pipeline <pipeline>] [--force] [--replace] [--wait [--timeout <d>]]`:
//! asks the operator to put back the offsets a done reset's consumer groups had before it.
//!
//! The undo is a reset request of its own (its own id, events and status) whose destination is
//! `{"undo":"<id>"}`: the operator reads the offsets from its ledger and moves each group only while
//! it still has the offsets the undone reset left (compare-and-set), unless `--force`.

use std::collections::BTreeSet;

use flow_adapters::kube as k;
use flow_core::request::{ResetRequest, To};
use flow_core::resource::{AnkkaFlow, GroupStage, RequestPhase};
use flow_core::targets;

use super::{RequestArgs, Requested, answer, check_request_args, find, wait, write_checked};
use crate::cluster::Cluster;
use crate::exit::{Failure, Output};
use crate::reporter::Reporter;

/// Arguments of `flow reset undo`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("waits").args(["wait"])))]
pub struct Args {
    /// The id of the reset to undo, as `flow reset` printed it.
    id: String,
    /// Look only at this pipeline (its AnkkaFlow's name).
    #[arg(long, value_name = "PIPELINE")]
    pipeline: Option<String>,
    /// Put the offsets back even for a group that consumed since the reset (its offsets are no
    /// longer the ones the reset left).
    #[arg(long)]
    force: bool,
    /// Wait until the operator has finished the undo, print its status, and exit with a code that
    /// says how it ended.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    request: RequestArgs,
}

/// Runs the command; with `--wait`, its progress is said on `out` as it goes.
///
/// # Errors
/// Refusals (exit code 1) with their messages; with `--wait`, how the undo ended (exit codes 3
/// to 5).
pub async fn run(args: Args, out: &Reporter) -> Result<Output, Failure> {
    let undone = args.id.as_str();
    check_request_args(undone, args.pipeline.as_deref())
        .map_err(|why| Failure::refused(format!("{why}; nothing was requested")))?;
    let opts = &args.request;
    let cluster = Cluster::connect(&opts.cluster, "undo").await?;
    let ns = opts.namespace.clone().unwrap_or_else(|| cluster.namespace.clone());
    let report = find::locate(&cluster, &ns, args.pipeline.as_deref(), undone).await?;
    let pipeline = report.pipeline.as_str();
    if report.phase != RequestPhase::Done {
        return Err(Failure::refused(format!(
            "reset {undone} of '{pipeline}' is {}, not Done: only a done reset can be undone; nothing was requested",
            report.phase
        )));
    }
    // The groups it reset, when the status still lists them: only their streamlets must be stopped.
    let groups: BTreeSet<&str> =
        report.groups.iter().filter(|g| g.outcome == GroupStage::Reset).map(|g| g.group.as_str()).collect();
    let request = write_checked(&cluster, &ns, pipeline, "flow reset undo", async |flow: &AnkkaFlow| {
        super::refuse_pending(flow, &ns, pipeline, opts.replace)?;
        if !groups.is_empty() {
            let mut selected = targets::select(&flow.spec, &[]).unwrap_or_default();
            for t in &mut selected {
                t.inlets.retain(|i| groups.contains(i.group.as_str()));
            }
            selected.retain(|t| !t.inlets.is_empty());
            let pods =
                k::running_pods(&cluster.client, &ns, &flow.spec.pipeline).await.map_err(|e| cluster.failure(e))?;
            let running = targets::running(&flow.spec, &selected, &pods);
            if !running.is_empty() {
                return Err(Failure::refused(targets::cli_running_message(&running)));
            }
        }
        Ok(ResetRequest {
            to: Some(To::Undo(undone.to_string())),
            force: args.force,
            ..ResetRequest::new(uuid::Uuid::new_v4().to_string(), vec![])
        })
    })
    .await?;
    let line = format!("undo of reset {undone} requested for '{pipeline}': {}", request.id);
    let requested = Requested {
        id: &request.id,
        namespace: &ns,
        pipeline,
        undoes: Some(undone),
        force: Some(args.force),
        ..Requested::default()
    };
    let target = wait::Target::new(&ns, pipeline, &request.id, opts.timeout, opts.output);
    answer(&cluster, out, &line, &requested, opts.output, args.wait.then_some(target)).await
}
