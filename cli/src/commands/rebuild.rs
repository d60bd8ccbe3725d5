//! `flow rebuild <pipeline> [--streamlet <name>]... [-n <ns>] [--replace] [--wait [--timeout <d>]]`:
//! the whole of docs/rebuild-from-the-start.md in one request.
//!
//! Writes a reset request marked `rebuild`. The operator holds the targets at 0 replicas by what it
//! renders (the resource's spec is left alone), waits until their pods are gone and their consumer
//! groups are empty, resets the groups to the earliest offsets, then lets the streamlets run at the
//! resource's replicas again. With `--wait` the command follows it until every group it reset has
//! caught up (see docs/rebuild.md).

use flow_core::request::ResetRequest;
use flow_core::resource::AnkkaFlow;
use flow_core::targets;

use super::reset::{RequestArgs, Requested, answer, refuse_pending, wait, write_checked};
use crate::cluster::Cluster;
use crate::exit::{Failure, Output};

/// Arguments of `flow rebuild`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The AnkkaFlow's name (the pipeline).
    pipeline: String,
    /// Rebuild only this streamlet; repeatable. Default: every streamlet with an inlet.
    #[arg(long = "streamlet", value_name = "NAME")]
    streamlets: Vec<String>,
    /// After requesting, follow the rebuild until every consumer group it reset has caught up (the
    /// burn-down on stderr), print its status, and exit with a code that says how it ended.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    request: RequestArgs,
}

/// Runs the command.
///
/// # Errors
/// A pipeline or streamlet that does not exist, a pending request (without `--replace`), as a
/// [`Failure`] with exit code 1; with `--wait`, how the rebuild ended when it did not end well.
pub async fn run(args: Args) -> Result<Output, Failure> {
    let opts = &args.request;
    let cluster = Cluster::connect(&opts.cluster, "rebuild").await?;
    let ns = opts.namespace.clone().unwrap_or_else(|| cluster.namespace.clone());
    let pipeline = args.pipeline.as_str();
    let request = write_checked(&cluster, &ns, pipeline, "flow rebuild", async |flow: &AnkkaFlow| {
        targets::select(&flow.spec, &args.streamlets)
            .map_err(|e| Failure::refused(targets::cli_selection_message(&e)))?;
        refuse_pending(flow, &ns, pipeline, opts.replace)?;
        // The targets may run: the operator stops them itself.
        Ok(ResetRequest {
            rebuild: true,
            ..ResetRequest::new(uuid::Uuid::new_v4().to_string(), args.streamlets.clone())
        })
    })
    .await?;
    let line = format!("rebuild requested for '{pipeline}': {}\n", request.id);
    let requested = Requested {
        id: &request.id,
        namespace: &ns,
        pipeline,
        streamlets: Some(&args.streamlets),
        rebuild: true,
        ..Requested::default()
    };
    let target = wait::Target {
        until: wait::Until::CaughtUp,
        ..wait::Target::new(&ns, pipeline, &request.id, opts.timeout, opts.output)
    };
    answer(&cluster, &line, &requested, opts.output, args.wait.then_some(target)).await
}
