//! `flow reset <pipeline> [--streamlet <name>]... [-n <ns>]` (reference.md §5.3).
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

/// Arguments of `flow reset`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The AnkkaFlow's name (the pipeline).
    pipeline: String,
    /// Reset only this streamlet; repeatable. Default: every streamlet with an inlet.
    #[arg(long = "streamlet", value_name = "NAME")]
    streamlets: Vec<String>,
    /// Namespace of the AnkkaFlow. Default: the kubeconfig context's namespace.
    #[arg(short = 'n', long = "namespace")]
    namespace: Option<String>,
    /// Supersede a request that is still pending (the operator records that it was superseded).
    #[arg(long)]
    replace: bool,
}

fn api_failure(e: kube::Error) -> Failure {
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
    let api: Api<AnkkaFlow> = Api::namespaced(client.clone(), &ns);
    // The write is conditional on the resource version read, so the guards are checked against what
    // is written over. The operator's status writes also change the version: on a conflict, read again
    // and check again, a few times.
    for _ in 0..5 {
        let flow = match api.get_opt(&args.pipeline).await {
            Ok(Some(f)) => f,
            Ok(None) => {
                return Err(Failure::refused(format!("no pipeline '{}' in namespace '{ns}'", args.pipeline)));
            }
            Err(e) => return Err(api_failure(e)),
        };
        let request = checked_request(&client, &ns, &args, &flow).await?;
        let version = flow.metadata.resource_version.as_deref();
        match k::write_request(&api, &args.pipeline, &request.to_annotation(), version, CLI_FIELD_MANAGER).await {
            Ok(()) => return Ok(format!("reset requested for '{}': {}\n", args.pipeline, request.id)),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(api_failure(e)),
        }
    }
    Err(Failure::refused(format!(
        "pipeline '{}' kept changing while the request was being written; nothing was requested, run flow reset again",
        args.pipeline
    )))
}

/// Checks every guard against `flow` and its pods; returns the request to write.
async fn checked_request(client: &Client, ns: &str, args: &Args, flow: &AnkkaFlow) -> Result<ResetRequest, Failure> {
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
            pending.id, args.pipeline, args.pipeline
        )));
    }
    let pods = k::running_pods(client, ns, &flow.spec.pipeline).await.map_err(api_failure)?;
    let running = targets::running(&flow.spec, &selected, &pods);
    if !running.is_empty() {
        return Err(Failure::refused(targets::cli_running_message(&running)));
    }
    Ok(ResetRequest { id: uuid::Uuid::new_v4().to_string(), streamlets: args.streamlets.clone() })
}
