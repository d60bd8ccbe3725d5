//! `flow reset approve <id>` and `flow reset deny <id>`: the decision about a reset request that
//! awaits approval (docs/governance.md).
//!
//! The decision is an annotation of the AnkkaFlow, `approved <id>` or `denied <id>`, with who
//! decided. The API server checks, by the admission policies the chart and `deploy/` ship, that the
//! user has the `approve` permission on the AnkkaFlow, is not the requester, and is who the
//! annotation names; the operator checks the requester again and acts on the decision.

use flow_adapters::kube as k;
use flow_core::names::CLI_FIELD_MANAGER;
use flow_core::request::ResetRequest;
use flow_core::reset::Decision;
use flow_core::resource::AnkkaFlow;
use kube::Api;
use serde::Serialize;

use super::{check_request_args, find};
use crate::cluster::{Cluster, ClusterArgs};
use crate::exit::{Failure, Output};
use crate::output::{self, Format};

/// Arguments of `flow reset approve` and `flow reset deny`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The request id, as `flow reset` printed it.
    id: String,
    /// Namespace of the AnkkaFlow. Default: the kubeconfig context's namespace.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    namespace: Option<String>,
    /// Look only at this pipeline (its AnkkaFlow's name).
    #[arg(long, value_name = "PIPELINE")]
    pipeline: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Output format: text (one line), json or yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    output: Format,
}

/// Which decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `flow reset approve`.
    Approve,
    /// `flow reset deny`.
    Deny,
}

/// What `-o json|yaml` prints.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Decided<'a> {
    id: &'a str,
    namespace: &'a str,
    pipeline: &'a str,
    decision: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    decided_by: Option<&'a str>,
}

/// Runs the command.
///
/// # Errors
/// No such request, one that is no longer pending, or the API server's refusal (the admission
/// policies': no `approve` permission, or the requester approving their own request).
pub async fn run(args: Args, verdict: Verdict) -> Result<Output, Failure> {
    let command = match verdict {
        Verdict::Approve => "reset approve",
        Verdict::Deny => "reset deny",
    };
    // Checked before anything is read, as `flow reset undo` checks them.
    check_request_args(&args.id, args.pipeline.as_deref())
        .map_err(|why| Failure::refused(format!("{why}; nothing was written")))?;
    let cluster = Cluster::connect(&args.cluster, command).await?;
    let ns = args.namespace.clone().unwrap_or_else(|| cluster.namespace.clone());
    let found = find::locate(&cluster, &ns, args.pipeline.as_deref(), &args.id).await?;
    let pipeline = found.pipeline.clone();
    let api: Api<AnkkaFlow> = Api::namespaced(cluster.client.clone(), &ns);
    let flow = api.get(&pipeline).await.map_err(|e| cluster.failure(e))?;
    let (raw, done) = k::reset_annotations(&flow);
    let pending = raw.and_then(|r| ResetRequest::parse(r).ok()).filter(|r| r.id == args.id);
    if pending.is_none() || done == Some(args.id.as_str()) || found.finished() {
        return Err(Failure::refused(format!(
            "reset {} of '{pipeline}' is not pending ({}): there is nothing to decide; nothing was written",
            args.id, found.phase
        )));
    }
    // The API server stamps who decided too (its mutating admission policy); where it does not, the
    // validating one checks that this name is the user's.
    let me = k::whoami(&cluster.client).await.ok().flatten();
    let decision = match verdict {
        Verdict::Approve => Decision::Approved(args.id.clone()),
        Verdict::Deny => Decision::Denied(args.id.clone()),
    };
    let version = flow.metadata.resource_version.as_deref();
    k::write_decision(&api, &pipeline, &decision.text(), me.as_deref(), version, CLI_FIELD_MANAGER).await.map_err(
        |e| match e {
            kube::Error::Api(s) if s.code == 409 => Failure::refused(format!(
                "pipeline '{pipeline}' changed while the decision was being written; nothing was written, run flow \
                 {command} {} again",
                args.id
            )),
            other => cluster.failure(other),
        },
    )?;
    let word = match verdict {
        Verdict::Approve => "approved",
        Verdict::Deny => "denied",
    };
    let by = me.as_deref().map_or_else(String::new, |u| format!(" by {u}"));
    Ok(Output::from(match args.output {
        Format::Text => format!("reset {} of '{pipeline}' {word}{by}\n", args.id),
        other => output::render(
            &Decided { id: &args.id, namespace: &ns, pipeline: &pipeline, decision: word, decided_by: me.as_deref() },
            other,
        )?,
    }))
}
