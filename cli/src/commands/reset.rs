//! `flow reset <pipeline> [--streamlet <name>]... [--to-datetime <t> | --by-duration <d>] [-n <ns>]
//! [--replace] [--wait [--timeout <d>]]`, and `flow reset status <id>`.
//!
//! Checks the guards against the resource and its pods, then writes the request annotation. The
//! operator carries the request out, checking the same guards again.

use std::time::Duration;

use flow_adapters::kube as k;
use flow_core::names::CLI_FIELD_MANAGER;
use flow_core::request::{PlanOffsets, ResetRequest, To, check_instant, clip, instant_before};
use flow_core::resource::AnkkaFlow;
use flow_core::targets;
use kube::Api;
use serde::Serialize;

use crate::cluster::{Cluster, ClusterArgs};
use crate::exit::{Failure, Output};
use crate::output::{self, Format};
use crate::reporter::Reporter;

pub mod decide;
mod find;
pub mod plan;
pub mod report;
pub mod status;
pub mod undo;
pub mod wait;

/// Arguments of `flow reset`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
#[command(group(clap::ArgGroup::new("waits").args(["wait", "dry_run"]).multiple(true)))]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// The AnkkaFlow's name (the pipeline). A pipeline named `status` is reset with
    /// `flow reset -- status` or `flow reset --pipeline status`.
    #[arg(required_unless_present = "pipeline_option", conflicts_with = "pipeline_option")]
    pipeline: Option<String>,
    /// The AnkkaFlow's name, as an option (the same as the first argument).
    #[arg(long = "pipeline", id = "pipeline_option", value_name = "PIPELINE")]
    pipeline_option: Option<String>,
    /// Reset only this streamlet; repeatable. Default: every streamlet with an inlet.
    #[arg(long = "streamlet", value_name = "NAME")]
    streamlets: Vec<String>,
    /// Move each partition to its first offset whose record's timestamp is at or after this RFC 3339
    /// instant (2026-11-29T16:00:00Z, 2026-11-29T17:00:00+01:00) instead of its log start; a
    /// partition with no such record goes to its log end.
    #[arg(long, value_name = "RFC3339", conflicts_with = "by_duration")]
    to_datetime: Option<String>,
    /// Move each partition to the first offset at or after this long ago (PT2H, P1DT12H, 2h 30m);
    /// the CLI turns it into an instant when it writes the request.
    #[arg(long, value_name = "DURATION")]
    by_duration: Option<String>,
    /// Only plan: the operator inspects each group and says, per partition, the committed offset
    /// now, the new offset and the records to reprocess, with warnings; nothing changes. Waits for
    /// the plan and prints it (-o for JSON or YAML). The targets may run.
    #[arg(long, conflicts_with_all = ["plan", "wait"])]
    dry_run: bool,
    /// With --dry-run: also write the plan to this file, for --plan.
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    plan_out: Option<std::path::PathBuf>,
    /// Carry out exactly the plan in this file (written by --dry-run --plan-out): each group moves
    /// only while its committed offsets are still the ones planned.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["streamlets", "to_datetime", "by_duration"])]
    plan: Option<std::path::PathBuf>,
    /// Namespace of the AnkkaFlow. Default: the kubeconfig context's namespace.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    namespace: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Supersede a request that is still pending (the operator records that it was superseded).
    #[arg(long)]
    replace: bool,
    /// After requesting, wait until the operator has finished the request (progress on stderr),
    /// print its status, and exit with a code that says how it ended.
    #[arg(long)]
    wait: bool,
    /// With --wait or --dry-run: give up waiting after this long (30s, 5m, 1h30m); the request
    /// stays and the operator carries it on. Default: wait as long as it takes.
    #[arg(long, value_name = "DURATION", requires = "waits", value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    /// Output format: text (the request line), json or yaml (the request; with --wait, the final
    /// status as `flow reset status` prints it).
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    output: Format,
}

impl Args {
    /// The pipeline named, as argument or option.
    pub fn pipeline_name(&self) -> Option<&str> {
        self.pipeline.as_deref().or(self.pipeline_option.as_deref())
    }
}

/// The options that `flow rebuild` and `flow reset undo` share: where the pipeline is, and how the
/// request is written and followed (each command has its own `--wait`, which `--timeout` requires).
#[derive(clap::Args, Debug)]
pub struct RequestArgs {
    /// Namespace of the AnkkaFlow. Default: the kubeconfig context's namespace.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Supersede a request that is still pending.
    #[arg(long)]
    pub replace: bool,
    /// With --wait: give up waiting after this long (30s, 5m, 1h30m); the request stays and the
    /// operator carries it on.
    #[arg(long, value_name = "DURATION", requires = "waits", value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// Output format: text (the request line), json or yaml (the request; with --wait, the final
    /// status as `flow reset status` prints it).
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Format,
}

/// Subcommands of `flow reset`.
#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Show where a reset request stands, group by group.
    ///
    /// Reads the AnkkaFlow's status, which the operator keeps up to date: the request's phase, and
    /// for each consumer group its topic, partitions, records to reprocess, outcome and message.
    /// The id is enough: every namespace the kubeconfig's user may list is searched unless -n or
    /// --pipeline narrows it; a user who may not list every namespace gets the answer of the
    /// kubeconfig's namespace, with a note on stderr.
    Status(status::Args),
    /// Put back the offsets a done reset's consumer groups had before it.
    ///
    /// A request of its own, with its own id, events and status. The operator moves each group the
    /// reset moved back to its offsets before, only while the group still has the offsets the reset
    /// left (a group that consumed since is refused, unless --force); the streamlets must be
    /// stopped, as for any reset.
    Undo(undo::Args),
    /// Approve a reset request that awaits approval (docs/governance.md).
    ///
    /// Needs the `approve` permission on the AnkkaFlow, and may not be run by the user who requested
    /// the reset: the API server refuses both (the admission policies the chart ships).
    Approve(decide::Args),
    /// Deny a reset request that awaits approval: it ends `Denied`, having touched nothing.
    ///
    /// Needs the `approve` permission on the AnkkaFlow; the requester may deny (withdraw) their own.
    Deny(decide::Args),
}

/// What `flow reset`, `flow rebuild` and `flow reset undo` print with `-o json|yaml`: the request
/// written. Each command fills the fields it has.
#[derive(Serialize, Debug, Default)]
pub(crate) struct Requested<'a> {
    pub id: &'a str,
    pub namespace: &'a str,
    pub pipeline: &'a str,
    /// The streamlets named with `--streamlet` (empty: every streamlet with an inlet); not for an
    /// undo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streamlets: Option<&'a [String]>,
    /// The instant the groups go to (RFC 3339), with `--to-datetime` or `--by-duration`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<&'a str>,
    /// A rebuild.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rebuild: bool,
    /// The streamlets a rebuild is from (`flow rebuild --from`).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub from: &'a [String],
    /// The reset an undo undoes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undoes: Option<&'a str>,
    /// An undo's `--force`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// Runs the command; a wait or a watch says its progress on `out` as it goes.
///
/// # Errors
/// Every refusal of the guards, with its exact message, as a [`Failure`] with exit code 1; with
/// `--wait`, how the request ended when it did not end well (exit codes 3 to 5, `crate::exit`).
pub async fn run(mut args: Args, out: &Reporter) -> Result<Output, Failure> {
    match args.command.take() {
        Some(Sub::Status(status_args)) => return status::run(status_args, out).await,
        Some(Sub::Undo(undo_args)) => return undo::run(undo_args, out).await,
        Some(Sub::Approve(a)) => return decide::run(a, decide::Verdict::Approve).await,
        Some(Sub::Deny(a)) => return decide::run(a, decide::Verdict::Deny).await,
        None => {}
    }
    // clap requires the pipeline when no subcommand is given.
    let pipeline = args.pipeline_name().unwrap_or_default().to_string();
    // Checked before anything is read, so that a typo costs no round trip.
    check_pipeline_name(&pipeline).map_err(|why| Failure::refused(format!("{why}; nothing was requested")))?;
    let to = destination(args.to_datetime.as_deref(), args.by_duration.as_deref())?;
    let cluster = Cluster::connect(&args.cluster, "reset").await?;
    let ns = args.namespace.clone().unwrap_or_else(|| cluster.namespace.clone());
    let planned = match args.plan.as_deref() {
        None => None,
        Some(path) => {
            let (offsets, from) = plan::read(path, &ns, &pipeline)?;
            if !from.is_empty() {
                return Err(Failure::refused(format!(
                    "{} is a plan of a rebuild from {}: carry it out with flow rebuild {pipeline} --plan {}, which stops \
                     what it moves; nothing was requested",
                    path.display(),
                    from.join(", "),
                    path.display()
                )));
            }
            Some(offsets)
        }
    };
    let request = write_checked(&cluster, &ns, &pipeline, "flow reset", async |flow: &AnkkaFlow| {
        let mut request = checked_request(&cluster, &ns, &pipeline, &args, flow, planned.as_ref()).await?;
        request.to = match &planned {
            Some(p) => Some(To::Plan(p.clone())),
            None => to.clone(),
        };
        request.dry_run = args.dry_run;
        Ok(request)
    })
    .await?;
    if args.dry_run {
        // The plan is the answer: wait for it, whatever -o says.
        out.say(&format!("plan requested for '{pipeline}': {}", request.id));
        let plan_out = args.plan_out.clone();
        let render = move |r: &report::Report, format: Format| {
            let planned = plan::from_report(r);
            if let Some(path) = &plan_out {
                plan::write(&planned, path)?;
            }
            plan::render(&planned, format)
        };
        return wait::wait(
            &cluster,
            out,
            wait::Target::new(&ns, &pipeline, &request.id, args.timeout, args.output),
            &render,
        )
        .await;
    }
    let requested = Requested {
        id: &request.id,
        namespace: &ns,
        pipeline: &pipeline,
        streamlets: Some(&args.streamlets),
        to: match &request.to {
            Some(To::Datetime(t)) => Some(t),
            _ => None,
        },
        ..Requested::default()
    };
    let line = format!("reset requested for '{pipeline}': {}", request.id);
    let target = wait::Target::new(&ns, &pipeline, &request.id, args.timeout, args.output);
    answer(&cluster, out, &line, &requested, args.output, args.wait.then_some(target)).await
}

/// What a command answers once its request is written: without `--wait` (`target` none), the
/// request `line`, or `requested` for `-o json|yaml`; with it, the line at once on `out` (so that a
/// user, or a script, has the id while waiting: on stdout for text, on stderr when stdout carries
/// one JSON or YAML document), then the wait for `target`.
///
/// # Errors
/// How the wait ended when it did not end well.
pub(crate) async fn answer(
    cluster: &Cluster,
    out: &Reporter,
    line: &str,
    requested: &Requested<'_>,
    format: Format,
    target: Option<wait::Target<'_>>,
) -> Result<Output, Failure> {
    let Some(target) = target else {
        return Ok(Output::from(match format {
            Format::Text => format!("{line}\n"),
            other => output::render(requested, other)?,
        }));
    };
    match format {
        Format::Text => out.show(&format!("{line}\n")),
        Format::Json | Format::Yaml => out.say(line),
    }
    wait::wait(cluster, out, target, &report::render).await
}

/// Writes the request that `check` makes of AnkkaFlow `pipeline` of `ns` as read (after checking
/// its guards against it), conditional on the resource version read, so that the guards held for
/// what is written over. The operator's status writes also change the version: on a conflict, it
/// reads again and checks again, a few times. `command` is the command to run again when it never
/// gets through.
///
/// # Errors
/// No such pipeline, `check`'s refusal, the API server's, or a resource that kept changing.
pub(crate) async fn write_checked(
    cluster: &Cluster,
    ns: &str,
    pipeline: &str,
    command: &str,
    mut check: impl AsyncFnMut(&AnkkaFlow) -> Result<ResetRequest, Failure>,
) -> Result<ResetRequest, Failure> {
    let api: Api<AnkkaFlow> = Api::namespaced(cluster.client.clone(), ns);
    // Who writes it: the API server stamps it too (its mutating admission policy), and where it does
    // not, the validating one checks that it is the user (docs/governance.md).
    let me = k::whoami(&cluster.client).await.ok().flatten();
    for _ in 0..5 {
        let flow = match api.get_opt(pipeline).await {
            Ok(Some(f)) => f,
            Ok(None) => return Err(Failure::refused(format!("no pipeline '{pipeline}' in namespace '{ns}'"))),
            Err(e) => return Err(cluster.failure(e)),
        };
        let request = check(&flow).await?;
        let version = flow.metadata.resource_version.as_deref();
        match k::write_request(&api, pipeline, &request.to_annotation(), version, CLI_FIELD_MANAGER, me.as_deref())
            .await
        {
            Ok(()) => return Ok(request),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(cluster.failure(e)),
        }
    }
    Err(Failure::refused(format!(
        "pipeline '{pipeline}' kept changing while the request was being written; nothing was requested, run {command} again"
    )))
}

/// Refuses `name` unless it can be an AnkkaFlow's name, which Kubernetes takes only as a DNS subdomain
/// (RFC 1123): at most 253 characters, dot-separated parts of `[a-z0-9-]`, each beginning and ending
/// with a letter or digit. Checked before anything is read, so that the API server's own refusal of
/// a request it cannot even build (`A non-empty name is required`) is never taken for an unreachable
/// server. The rule is the one flow-core checks rendered names by.
pub(crate) fn check_pipeline_name(name: &str) -> Result<(), String> {
    if flow_core::names::is_dns_subdomain(name) {
        return Ok(());
    }
    Err(format!(
        "pipeline '{}' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a letter \
         or digit",
        clip(name, 64)
    ))
}

/// Refuses `id` unless it is a reset request id as `flow reset` prints it: a UUID, in lower case with
/// hyphens (`1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71`), so that a typo is not looked for in the cluster.
fn check_request_id(id: &str) -> Result<(), String> {
    if flow_core::request::is_request_id(id) {
        return Ok(());
    }
    Err(format!("'{}' is not a reset request id (a UUID, as flow reset printed it)", clip(id, 64)))
}

/// [`check_request_id`] of `id`, then [`check_pipeline_name`] of `pipeline` when given: the
/// arguments of the commands that name a request.
pub(crate) fn check_request_args(id: &str, pipeline: Option<&str>) -> Result<(), String> {
    check_request_id(id).and_then(|()| pipeline.map_or(Ok(()), check_pipeline_name))
}

/// Where `--to-datetime` or `--by-duration` send the groups; `None`: to the earliest offsets.
pub(crate) fn destination(to_datetime: Option<&str>, by_duration: Option<&str>) -> Result<Option<To>, Failure> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    destination_at(to_datetime, by_duration, now)
}

/// [`destination`] with `--by-duration` counted back from `now_millis` (since the Unix epoch).
fn destination_at(
    to_datetime: Option<&str>,
    by_duration: Option<&str>,
    now_millis: i64,
) -> Result<Option<To>, Failure> {
    if let Some(t) = to_datetime {
        check_instant(t)
            .map_err(|why| Failure::refused(format!("--to-datetime '{}' {why}; nothing was requested", clip(t, 64))))?;
        return Ok(Some(To::Datetime(t.to_string())));
    }
    if let Some(d) = by_duration {
        let at = instant_before(now_millis, d)
            .map_err(|why| Failure::refused(format!("--by-duration {why}; nothing was requested")))?;
        return Ok(Some(To::Datetime(at)));
    }
    Ok(None)
}

/// Refuses when an earlier request of `flow` is still pending, unless `replace`.
pub(crate) fn refuse_pending(flow: &AnkkaFlow, ns: &str, pipeline: &str, replace: bool) -> Result<(), Failure> {
    if let (Some(raw), done) = k::reset_annotations(flow)
        && let Ok(pending) = ResetRequest::parse(raw)
        && done != Some(pending.id.as_str())
        && !replace
    {
        return Err(Failure::refused(format!(
            "reset {} of '{}' is still pending; wait until it is done (kubectl -n {ns} get aflow {} -o wide shows it) \
             or supersede it with --replace",
            pending.id, pipeline, pipeline
        )));
    }
    Ok(())
}

/// Checks every guard against `flow` and its pods; returns the request to write.
async fn checked_request(
    cluster: &Cluster,
    ns: &str,
    pipeline: &str,
    args: &Args,
    flow: &AnkkaFlow,
    planned: Option<&PlanOffsets>,
) -> Result<ResetRequest, Failure> {
    let mut selected = targets::select(&flow.spec, &args.streamlets)
        .map_err(|e| Failure::refused(targets::cli_selection_message(&e)))?;
    // A plan moves only its groups: only their streamlets must be stopped.
    if let Some(p) = planned {
        for t in &mut selected {
            t.inlets.retain(|i| p.groups.contains_key(i.group.as_str()));
        }
        selected.retain(|t| !t.inlets.is_empty());
    }
    refuse_pending(flow, ns, pipeline, args.replace)?;
    let pods = k::running_pods(&cluster.client, ns, &flow.spec.pipeline).await.map_err(|e| cluster.failure(e))?;
    let running = targets::running(&flow.spec, &selected, &pods);
    // A dry run changes nothing, so its targets may run.
    if !running.is_empty() && !args.dry_run {
        return Err(Failure::refused(targets::cli_running_message(&running)));
    }
    Ok(ResetRequest::new(uuid::Uuid::new_v4().to_string(), args.streamlets.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-29T16:00:00Z.
    const NOW: i64 = 1_795_968_000_000;

    fn refusal(to_datetime: Option<&str>, by_duration: Option<&str>) -> String {
        destination_at(to_datetime, by_duration, NOW).expect_err("refused").problems.join("\n")
    }

    #[test]
    fn an_instant_before_1970_is_refused_by_name() {
        assert_eq!(
            refusal(Some("1969-12-31T23:59:59.999Z"), None),
            "--to-datetime '1969-12-31T23:59:59.999Z' is before 1970-01-01T00:00:00Z, and Kafka's timestamps \
             (milliseconds since then) cannot be; nothing was requested"
        );
        assert!(refusal(Some("1970-01-01T00:59:59+01:00"), None).contains("is before 1970-01-01T00:00:00Z"));
        assert!(refusal(Some("0000-01-01T00:00:00Z"), None).contains("is before 1970-01-01T00:00:00Z"));
        for first in ["1970-01-01T00:00:00Z", "1970-01-01T01:00:00+01:00"] {
            assert_eq!(destination_at(Some(first), None, NOW).ok(), Some(Some(To::Datetime(first.into()))), "{first}");
        }
    }

    #[test]
    fn an_instant_past_the_last_supported_says_so() {
        assert_eq!(
            refusal(Some("9999-12-31T23:59:59Z"), None),
            "--to-datetime '9999-12-31T23:59:59Z' is later than the last instant supported (9999-12-30T22:00:00Z); \
             nothing was requested"
        );
        let last = "9999-12-30T22:00:00Z";
        assert_eq!(destination_at(Some(last), None, NOW).ok(), Some(Some(To::Datetime(last.into()))));
        for bad in ["yesterday", "9999-12-31", "9999-12-31T23:59:59", "2026-11-29T16:00:00[Europe/Helsinki]"] {
            assert_eq!(
                refusal(Some(bad), None),
                format!(
                    "--to-datetime '{bad}' is not an RFC 3339 instant (such as 2026-11-29T16:00:00Z); nothing was \
                     requested"
                )
            );
        }
    }

    #[test]
    fn a_duration_too_long_to_hold_reaches_before_1970() {
        for long in ["P100000Y", "P15000Y", "99999999999999999999s", "PT9999999999999999999999H"] {
            assert_eq!(
                refusal(None, Some(long)),
                format!("--by-duration {long} before now is before 1970; nothing was requested")
            );
        }
        for bad in ["soon", "-P100000Y", "PT1.1234567891S", "P"] {
            assert_eq!(
                refusal(None, Some(bad)),
                format!(
                    "--by-duration '{bad}' is not a duration (such as PT2H, P1DT12H, 2h 30m or 90s); nothing was \
                     requested"
                ),
                "{bad}"
            );
        }
        assert_eq!(
            destination_at(None, Some("PT2H"), NOW).ok(),
            Some(Some(To::Datetime("2026-11-29T14:00:00Z".into())))
        );
    }

    #[test]
    fn a_pipeline_name_is_a_kubernetes_object_name() {
        for good in ["cart", "cart-eu", "cart.v2", "0", &"a".repeat(253)] {
            assert_eq!(check_pipeline_name(good), Ok(()), "{good}");
        }
        for bad in ["", "Cart", "cart_eu", "-cart", "cart-", "cart..v2", ".cart", "cart.", &"a".repeat(254)] {
            assert!(check_pipeline_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            check_pipeline_name(""),
            Err("pipeline '' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a \
                 letter or digit"
                .into())
        );
    }

    #[test]
    fn a_request_id_is_a_uuid_as_flow_reset_prints_it() {
        assert_eq!(check_request_id("1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71"), Ok(()));
        for bad in ["notauuid", "", "1B7C2F0E-9A4D-4D3E-8F55-2F1C0B6E9A71", "1b7c2f0e9a4d4d3e8f552f1c0b6e9a71"] {
            assert_eq!(
                check_request_id(bad),
                Err(format!("'{bad}' is not a reset request id (a UUID, as flow reset printed it)")),
                "{bad}"
            );
        }
    }
}
