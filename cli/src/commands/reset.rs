//! `flow reset <pipeline> [--streamlet <name>]... [-n <ns>] [--replace] [--wait]` (reference.md §5.3),
//! and `flow reset status <id>`.
//!
//! Checks the guards against the resource and its pods, then writes the request annotation. The
//! operator carries the request out, checking the same guards again.

use flow_adapters::kube as k;
use flow_core::names::CLI_FIELD_MANAGER;
use flow_core::request::ResetRequest;
use flow_core::resource::AnkkaFlow;
use flow_core::targets;
use kube::{Api, Client, Config};

use crate::exit::Failure;

pub mod status;

/// Arguments of `flow reset`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// The AnkkaFlow's name (the pipeline).
    #[arg(required = true)]
    pipeline: Option<String>,
    /// Reset only this streamlet; repeatable. Default: every streamlet with an inlet.
    #[arg(long = "streamlet", value_name = "NAME")]
    streamlets: Vec<String>,
    /// Namespace of the AnkkaFlow. Default: the kubeconfig context's namespace.
    #[arg(short = 'n', long = "namespace")]
    namespace: Option<String>,
    /// Supersede a request that is still pending (the operator records that it was superseded).
    #[arg(long)]
    replace: bool,
    /// After requesting, wait until the operator has finished the request and print its status.
    #[arg(long)]
    wait: bool,
}

/// Subcommands of `flow reset`.
#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Show where a reset request stands, group by group.
    ///
    /// Reads the AnkkaFlow's status, which the operator keeps up to date: the request's phase, and
    /// for each consumer group its topic, partitions, records to reprocess, outcome and message.
    /// The id is enough: every namespace the kubeconfig's user may list is searched unless -n or
    /// --pipeline narrows it.
    Status(status::Args),
}

pub(crate) fn api_failure(e: kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) => Failure::refused(format!("reset failed: {}", s.message)),
        other => Failure::refused(format!("cannot reach Kubernetes: {other}")),
    }
}

/// Runs the command.
///
/// # Errors
/// Every refusal of reference.md §5.3, with its exact message, as a [`Failure`] with exit code 1.
pub async fn run(args: Args) -> Result<String, Failure> {
    let config = Config::infer().await.map_err(|e| Failure::refused(format!("cannot reach Kubernetes: {e}")))?;
    let ns = args.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(|e| Failure::refused(format!("cannot reach Kubernetes: {e}")))?;
    let mut args = args;
    let pipeline = match (args.command.take(), &args.pipeline) {
        (Some(Sub::Status(status_args)), _) => return status::run(client, status_args).await,
        // clap requires the pipeline when no subcommand is given.
        (None, pipeline) => pipeline.clone().unwrap_or_default(),
    };
    let api: Api<AnkkaFlow> = Api::namespaced(client.clone(), &ns);
    // The write is conditional on the resource version read, so the guards are checked against what
    // is written over. The operator's status writes also change the version: on a conflict, read again
    // and check again, a few times.
    for _ in 0..5 {
        let flow = match api.get_opt(&pipeline).await {
            Ok(Some(f)) => f,
            Ok(None) => return Err(Failure::refused(format!("no pipeline '{pipeline}' in namespace '{ns}'"))),
            Err(e) => return Err(api_failure(e)),
        };
        let request = checked_request(&client, &ns, &pipeline, &args, &flow).await?;
        let version = flow.metadata.resource_version.as_deref();
        match k::write_request(&api, &pipeline, &request.to_annotation(), version, CLI_FIELD_MANAGER).await {
            Ok(()) => {
                let line = format!("reset requested for '{pipeline}': {}\n", request.id);
                if !args.wait {
                    return Ok(line);
                }
                // The request line first, at once, so that a user (or script) has the id while waiting.
                print!("{line}");
                return status::wait(client, &ns, &pipeline, &request.id).await;
            }
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(api_failure(e)),
        }
    }
    Err(Failure::refused(format!(
        "pipeline '{pipeline}' kept changing while the request was being written; nothing was requested, run flow reset again"
    )))
}

/// Checks every guard against `flow` and its pods; returns the request to write.
async fn checked_request(
    client: &Client,
    ns: &str,
    pipeline: &str,
    args: &Args,
    flow: &AnkkaFlow,
) -> Result<ResetRequest, Failure> {
    let selected = targets::select(&flow.spec, &args.streamlets)
        .map_err(|e| Failure::refused(targets::cli_selection_message(&e)))?;
    if let (Some(raw), done) = k::reset_annotations(flow)
        && let Ok(pending) = ResetRequest::parse(raw)
        && done != Some(pending.id.as_str())
        && !args.replace
    {
        return Err(Failure::refused(format!(
            "reset {} of '{}' is still pending; wait until it is done (kubectl -n {ns} get aflow {} -o wide shows it) \
             or supersede it with --replace",
            pending.id, pipeline, pipeline
        )));
    }
    let pods = k::running_pods(client, ns, &flow.spec.pipeline).await.map_err(api_failure)?;
    let running = targets::running(&flow.spec, &selected, &pods);
    if !running.is_empty() {
        return Err(Failure::refused(targets::cli_running_message(&running)));
    }
    Ok(ResetRequest { id: uuid::Uuid::new_v4().to_string(), streamlets: args.streamlets.clone() })
}
