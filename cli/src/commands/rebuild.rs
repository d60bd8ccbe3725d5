//! `flow rebuild <pipeline> [--streamlet <name>]... [-n <ns>] [--replace] [--wait [--timeout <d>]]`:
//! the whole of docs/rebuild-from-the-start.md in one request; and
//! `flow rebuild <pipeline> --from <name>... [--to-datetime <t> | --by-duration <d>]
//! [--dry-run [--plan-out <file>] | --plan <file>]`: a rebuild of the named streamlets and everything
//! downstream of them, so that each replayed record reaches each streamlet once.
//!
//! Writes a reset request marked `rebuild`. The operator holds the targets at 0 replicas by what it
//! renders (the resource's spec is left alone), waits until their pods are gone and their consumer
//! groups are empty, resets the groups (a rebuild from streamlets: the named ones to the start or the
//! time, those downstream of them to the end of their topic, see `flow_core::closure`), then lets
//! the streamlets run at the resource's replicas again. With `--wait` the command follows it until
//! every group it reset has caught up (see docs/rebuild.md).

use std::collections::BTreeSet;

use flow_core::closure::{self, Closure};
use flow_core::request::{PlanOffsets, ResetRequest, To};
use flow_core::resource::{AnkkaFlow, AnkkaFlowSpec};
use flow_core::targets;

use super::reset::report::Report;
use super::reset::{
    RequestArgs, Requested, answer, check_pipeline_name, destination, plan, refuse_pending, wait, write_checked,
};
use crate::cluster::Cluster;
use crate::exit::{Failure, Output};
use crate::output::Format;
use crate::reporter::Reporter;

/// Arguments of `flow rebuild`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("waits").args(["wait", "dry_run"]).multiple(true)))]
pub struct Args {
    /// The AnkkaFlow's name (the pipeline).
    pipeline: String,
    /// Rebuild only this streamlet; repeatable. Default: every streamlet with an inlet.
    #[arg(long = "streamlet", value_name = "NAME")]
    streamlets: Vec<String>,
    /// Rebuild this streamlet and every streamlet downstream of it; repeatable. The named
    /// streamlets read their input again from the start (or --to-datetime, --by-duration); each
    /// downstream one reads, from the end of the topic it reads, only what the replay writes.
    #[arg(long = "from", value_name = "NAME", conflicts_with = "streamlets")]
    from: Vec<String>,
    /// With --from: the named streamlets read their input again from the first record at or after
    /// this RFC 3339 instant instead of from the start.
    #[arg(long, value_name = "RFC3339", requires = "from", conflicts_with = "by_duration")]
    to_datetime: Option<String>,
    /// With --from: the same, from this long ago (PT2H, P1DT12H, 2h 30m).
    #[arg(long, value_name = "DURATION", requires = "from")]
    by_duration: Option<String>,
    /// With --from: only plan. Lists what the rebuild stops and why, and per group and partition
    /// where it goes, the records it reads again and those it skips; nothing changes and nothing
    /// stops. Waits for the plan and prints it (-o for JSON or YAML).
    #[arg(long, requires = "from", conflicts_with_all = ["plan", "wait"])]
    dry_run: bool,
    /// With --dry-run: also write the plan to this file, for --plan.
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    plan_out: Option<std::path::PathBuf>,
    /// Carry out exactly the plan of a rebuild in this file (written by --from ... --dry-run
    /// --plan-out): the rebuild is from the streamlets the plan names, and is refused as a whole
    /// if a group's committed offsets, or the end of a topic a group goes to, moved since.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["streamlets", "from", "to_datetime", "by_duration"])]
    plan: Option<std::path::PathBuf>,
    /// After requesting, follow the rebuild until every consumer group it reset has caught up (the
    /// burn-down on stderr), print its status, and exit with a code that says how it ended.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    request: RequestArgs,
}

/// Runs the command; with `--wait` or `--dry-run`, its progress is said on `out` as it goes.
///
/// # Errors
/// A pipeline or streamlet that does not exist, a rebuild from streamlets that is refused, a plan
/// that does not fit, a pending request (without `--replace`), as a [`Failure`] with exit code 1;
/// with `--wait`, how the rebuild ended when it did not end well.
pub async fn run(args: Args, out: &Reporter) -> Result<Output, Failure> {
    let opts = &args.request;
    // Checked before anything is read, so that a typo costs no round trip.
    check_pipeline_name(&args.pipeline).map_err(|why| Failure::refused(format!("{why}; nothing was requested")))?;
    let instant = destination(args.to_datetime.as_deref(), args.by_duration.as_deref())?;
    let cluster = Cluster::connect(&opts.cluster, "rebuild").await?;
    let ns = opts.namespace.clone().unwrap_or_else(|| cluster.namespace.clone());
    let pipeline = args.pipeline.as_str();
    let (planned, from) = match args.plan.as_deref() {
        None => (None, args.from.clone()),
        Some(path) => {
            let (offsets, from) = plan::read(path, &ns, pipeline)?;
            if from.is_empty() {
                return Err(Failure::refused(format!(
                    "{} is the plan of a reset, not of a rebuild from streamlets: carry it out with flow reset \
                     {pipeline} --plan {}; nothing was requested",
                    path.display(),
                    path.display()
                )));
            }
            (Some(offsets), from)
        }
    };
    let mut seen: Option<(Closure, AnkkaFlowSpec)> = None;
    let request = write_checked(&cluster, &ns, pipeline, "flow rebuild", async |flow: &AnkkaFlow| {
        if from.is_empty() {
            targets::select(&flow.spec, &args.streamlets)
                .map_err(|e| Failure::refused(targets::cli_selection_message(&e)))?;
        } else {
            let c = closure::of(&flow.spec, &from).map_err(|p| Failure::refused(closure::cli_message(&from, &p)))?;
            if let (Some(p), Some(path)) = (&planned, &args.plan) {
                fits(&c, p, path, pipeline)?;
            }
            seen = Some((c, flow.spec.clone()));
        }
        refuse_pending(flow, &ns, pipeline, opts.replace)?;
        // The targets may run: the operator stops them itself.
        Ok(ResetRequest {
            rebuild: true,
            from: from.clone(),
            dry_run: args.dry_run,
            to: planned.clone().map(To::Plan).or_else(|| instant.clone()),
            ..ResetRequest::new(uuid::Uuid::new_v4().to_string(), args.streamlets.clone())
        })
    })
    .await?;
    if args.dry_run {
        // The plan is the answer: wait for it, whatever -o says.
        out.say(&format!("plan requested for '{pipeline}': {}", request.id));
        let plan_out = args.plan_out.clone();
        let render = move |r: &Report, format: Format| {
            let mut planned = plan::from_report(r);
            if let Some((c, spec)) = &seen {
                planned = planned.of_rebuild(c, spec);
            }
            if let Some(path) = &plan_out {
                plan::write(&planned, path)?;
            }
            plan::render(&planned, format)
        };
        let target = wait::Target::new(&ns, pipeline, &request.id, opts.timeout, opts.output);
        return wait::wait(&cluster, out, target, &render).await;
    }
    let line = format!("rebuild requested for '{pipeline}': {}", request.id);
    let to = match &request.to {
        Some(To::Datetime(t)) => Some(t.as_str()),
        _ => None,
    };
    let requested = Requested {
        id: &request.id,
        namespace: &ns,
        pipeline,
        streamlets: Some(&args.streamlets),
        to,
        rebuild: true,
        from: &request.from,
        ..Requested::default()
    };
    let target = wait::Target {
        until: wait::Until::CaughtUp,
        ..wait::Target::new(&ns, pipeline, &request.id, opts.timeout, opts.output)
    };
    answer(&cluster, out, &line, &requested, opts.output, args.wait.then_some(target)).await
}

/// Refuses a plan (read from `path`) that does not move exactly the groups the rebuild moves now,
/// before anything is written (the operator checks it again).
fn fits(closure: &Closure, planned: &PlanOffsets, path: &std::path::Path, pipeline: &str) -> Result<(), Failure> {
    let moved: BTreeSet<String> =
        closure.targets().iter().flat_map(|t| &t.inlets).map(|i| i.group.to_string()).collect();
    let listed: BTreeSet<String> = planned.groups.keys().cloned().collect();
    if moved == listed {
        return Ok(());
    }
    let mut why = Vec::new();
    let missing: Vec<&str> = moved.difference(&listed).map(String::as_str).collect();
    if !missing.is_empty() {
        why.push(format!("it has no offsets for {}", missing.join(", ")));
    }
    let extra: Vec<&str> = listed.difference(&moved).map(String::as_str).collect();
    if !extra.is_empty() {
        why.push(format!("it has offsets for {}, which the rebuild does not move", extra.join(", ")));
    }
    Err(Failure::refused(format!(
        "{} is not a plan of the rebuild from {} as pipeline '{pipeline}' stands now: {}; make a new plan with flow \
         rebuild {pipeline} --from {} --dry-run --plan-out {}; nothing was requested",
        path.display(),
        closure.from().join(", "),
        why.join("; "),
        closure.from().join(" --from "),
        path.display()
    )))
}
