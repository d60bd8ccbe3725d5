//! `flow rebuild <pipeline> [--streamlet <name>]... [-n <ns>] [--replace] [--wait [--timeout <d>]]`:
//! the whole of docs/rebuild-from-the-start.md in one request.
//!
//! Writes a reset request marked `rebuild`. The operator holds the targets at 0 replicas by what it
//! renders (the resource's spec is left alone), waits until their pods are gone and their consumer
//! groups are empty, resets the groups to the earliest offsets, then lets the streamlets run at the
//! resource's replicas again. With `--wait` the command follows it until every group it reset has
//! caught up (see docs/rebuild.md).

use std::time::Duration;

use flow_adapters::kube as k;
use flow_core::names::CLI_FIELD_MANAGER;
use flow_core::request::ResetRequest;
use flow_core::resource::AnkkaFlow;
use flow_core::targets;
use kube::Api;
use serde::Serialize;

use super::reset::{refuse_pending, status};
use crate::cluster::{Cluster, ClusterArgs};
use crate::exit::{Failure, Output};
use crate::output::{self, Format};

/// Arguments of `flow rebuild`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The AnkkaFlow's name (the pipeline).
    pipeline: String,
    /// Rebuild only this streamlet; repeatable. Default: every streamlet with an inlet.
    #[arg(long = "streamlet", value_name = "NAME")]
    streamlets: Vec<String>,
    /// Namespace of the AnkkaFlow. Default: the kubeconfig context's namespace.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    namespace: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Supersede a request that is still pending.
    #[arg(long)]
    replace: bool,
    /// After requesting, follow the rebuild until every consumer group it reset has caught up (the
    /// burn-down on stderr), print its status, and exit with a code that says how it ended.
    #[arg(long)]
    wait: bool,
    /// With --wait: give up waiting after this long (30s, 5m, 1h30m); the rebuild stays and the
    /// operator carries it on.
    #[arg(long, value_name = "DURATION", requires = "wait", value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    /// Output format: text (the request line), json or yaml (the request; with --wait, the final
    /// status as `flow reset status` prints it).
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    output: Format,
}

/// What `flow rebuild -o json|yaml` prints.
#[derive(Serialize, Debug)]
struct Requested<'a> {
    id: &'a str,
    namespace: &'a str,
    pipeline: &'a str,
    /// The streamlets named with `--streamlet` (empty: every streamlet with an inlet).
    streamlets: &'a [String],
    rebuild: bool,
}

/// Runs the command.
///
/// # Errors
/// A pipeline or streamlet that does not exist, a pending request (without `--replace`), as a
/// [`Failure`] with exit code 1; with `--wait`, how the rebuild ended when it did not end well.
pub async fn run(args: Args) -> Result<Output, Failure> {
    let cluster = Cluster::connect(&args.cluster).await?;
    let ns = args.namespace.clone().unwrap_or_else(|| cluster.namespace.clone());
    let pipeline = args.pipeline.clone();
    let api: Api<AnkkaFlow> = Api::namespaced(cluster.client.clone(), &ns);
    // Conditional on the resource version read, as `flow reset`: retried a few times on a conflict.
    for _ in 0..5 {
        let flow = match api.get_opt(&pipeline).await {
            Ok(Some(f)) => f,
            Ok(None) => return Err(Failure::refused(format!("no pipeline '{pipeline}' in namespace '{ns}'"))),
            Err(e) => return Err(cluster.failure(e)),
        };
        targets::select(&flow.spec, &args.streamlets)
            .map_err(|e| Failure::refused(targets::cli_selection_message(&e)))?;
        refuse_pending(&flow, &ns, &pipeline, args.replace)?;
        // The targets may run: the operator stops them itself.
        let request = ResetRequest {
            rebuild: true,
            ..ResetRequest::new(uuid::Uuid::new_v4().to_string(), args.streamlets.clone())
        };
        let version = flow.metadata.resource_version.as_deref();
        match k::write_request(&api, &pipeline, &request.to_annotation(), version, CLI_FIELD_MANAGER).await {
            Ok(()) => {
                let line = format!("rebuild requested for '{pipeline}': {}\n", request.id);
                if !args.wait {
                    return Ok(Output::from(match args.output {
                        Format::Text => line,
                        other => output::render(
                            &Requested {
                                id: &request.id,
                                namespace: &ns,
                                pipeline: &pipeline,
                                streamlets: &args.streamlets,
                                rebuild: true,
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
                return status::wait_caught_up(&cluster, &ns, &pipeline, &request.id, args.timeout, args.output).await;
            }
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(cluster.failure(e)),
        }
    }
    Err(Failure::refused(format!(
        "pipeline '{pipeline}' kept changing while the request was being written; nothing was requested, run flow rebuild again"
    )))
}
