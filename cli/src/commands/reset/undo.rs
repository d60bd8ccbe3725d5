//! `flow reset undo <id> [-n <ns>] [--pipeline <pipeline>] [--force] [--replace] [--wait [--timeout <d>]]`:
//! asks the operator to put back the offsets a done reset's consumer groups had before it.
//!
//! The undo is a reset request of its own (its own id, events and status) whose destination is
//! `{"undo":"<id>"}`: the operator reads the offsets from its ledger and moves each group only while
//! it still has the offsets the undone reset left (compare-and-set), unless `--force`.

use std::collections::BTreeSet;
use std::time::Duration;

use flow_adapters::kube as k;
use flow_core::names::CLI_FIELD_MANAGER;
use flow_core::request::{ResetRequest, To, clip};
use flow_core::resource::{AnkkaFlow, GroupStage, RequestPhase};
use flow_core::targets;
use kube::Api;
use serde::Serialize;

use super::status;
use crate::cluster::{Cluster, ClusterArgs};
use crate::exit::{Failure, Output};
use crate::output::{self, Format};

/// Arguments of `flow reset undo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The id of the reset to undo, as `flow reset` printed it.
    id: String,
    /// Namespace of the AnkkaFlow. Default: the kubeconfig context's namespace.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    namespace: Option<String>,
    /// Look only at this pipeline (its AnkkaFlow's name).
    #[arg(long, value_name = "PIPELINE")]
    pipeline: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Put the offsets back even for a group that consumed since the reset (its offsets are no
    /// longer the ones the reset left).
    #[arg(long)]
    force: bool,
    /// Supersede a request that is still pending.
    #[arg(long)]
    replace: bool,
    /// Wait until the operator has finished the undo, print its status, and exit with a code that
    /// says how it ended.
    #[arg(long)]
    wait: bool,
    /// With --wait: give up waiting after this long (30s, 5m, 1h30m).
    #[arg(long, value_name = "DURATION", requires = "wait", value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    /// Output format: text (the request line), json or yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    output: Format,
}

/// What `flow reset undo -o json|yaml` prints.
#[derive(Serialize, Debug)]
struct Requested<'a> {
    id: &'a str,
    namespace: &'a str,
    pipeline: &'a str,
    /// The reset it undoes.
    undoes: &'a str,
    force: bool,
}

/// Runs the command.
///
/// # Errors
/// Refusals (exit code 1) with their messages; with `--wait`, how the undo ended (exit codes 3
/// to 5).
pub async fn run(args: Args) -> Result<Output, Failure> {
    let undone = args.id.as_str();
    if !matches!(uuid::Uuid::try_parse(undone), Ok(u) if u.hyphenated().to_string() == undone) {
        return Err(Failure::refused(format!(
            "'{}' is not a reset request id (a UUID, as flow reset printed it); nothing was requested",
            clip(undone, 64)
        )));
    }
    let cluster = Cluster::connect(&args.cluster).await?;
    let ns = args.namespace.clone().unwrap_or_else(|| cluster.namespace.clone());
    let report = status::locate(&cluster, &ns, args.pipeline.as_deref(), undone).await?;
    let pipeline = report.pipeline.clone();
    if report.phase != RequestPhase::Done {
        return Err(Failure::refused(format!(
            "reset {undone} of '{pipeline}' is {}, not Done: only a done reset can be undone; nothing was requested",
            report.phase
        )));
    }
    // The groups it reset, when the status still lists them: only their streamlets must be stopped.
    let groups: BTreeSet<&str> =
        report.groups.iter().filter(|g| g.outcome == GroupStage::Reset).map(|g| g.group.as_str()).collect();
    let api: Api<AnkkaFlow> = Api::namespaced(cluster.client.clone(), &ns);
    for _ in 0..5 {
        let flow = match api.get_opt(&pipeline).await {
            Ok(Some(f)) => f,
            Ok(None) => return Err(Failure::refused(format!("no pipeline '{pipeline}' in namespace '{ns}'"))),
            Err(e) => return Err(cluster.failure(e)),
        };
        super::refuse_pending(&flow, &ns, &pipeline, args.replace)?;
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
        let request = ResetRequest {
            to: Some(To::Undo(undone.to_string())),
            force: args.force,
            ..ResetRequest::new(uuid::Uuid::new_v4().to_string(), vec![])
        };
        let version = flow.metadata.resource_version.as_deref();
        match k::write_request(&api, &pipeline, &request.to_annotation(), version, CLI_FIELD_MANAGER).await {
            Ok(()) => {
                let line = format!("undo of reset {undone} requested for '{pipeline}': {}\n", request.id);
                if !args.wait {
                    return Ok(Output::from(match args.output {
                        Format::Text => line,
                        other => output::render(
                            &Requested {
                                id: &request.id,
                                namespace: &ns,
                                pipeline: &pipeline,
                                undoes: undone,
                                force: args.force,
                            },
                            other,
                        )?,
                    }));
                }
                if args.output == Format::Text {
                    print!("{line}");
                } else {
                    eprint!("{line}");
                }
                return status::wait(&cluster, &ns, &pipeline, &request.id, args.timeout, args.output).await;
            }
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(cluster.failure(e)),
        }
    }
    Err(Failure::refused(format!(
        "pipeline '{pipeline}' kept changing while the request was being written; nothing was requested, run flow reset undo again"
    )))
}
