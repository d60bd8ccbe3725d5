//! `flow reset status <id>`: where a reset request stands, group by group (the [`Report`] of
//! `super::report`), found by its id in the namespaces the user may read; with `--watch`, followed
//! until it is finished and caught up.

use std::time::{Duration, Instant};

use flow_core::resource::RequestPhase;

use super::check_request_args;
use super::find::{Poller, Scope, Stop, flows, search};
use super::report::{self, Rates, Report};
use crate::cluster::{Cluster, ClusterArgs};
use crate::exit::{Failure, Output};
use crate::output::{self, Format};
use crate::reporter::Reporter;

/// Arguments of `flow reset status`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The request id, as `flow reset` printed it.
    id: String,
    /// Namespace to look in. Default: every namespace the kubeconfig's user may list, else (when
    /// the user may not list every namespace) the kubeconfig context's namespace.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    namespace: Option<String>,
    /// Look in every namespace, and fail when the user may not list them all.
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespace")]
    all_namespaces: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Look only at this pipeline (its AnkkaFlow's name).
    #[arg(long, value_name = "PIPELINE")]
    pipeline: Option<String>,
    /// Output format: text (a summary and a table), json or yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    output: Format,
    /// Keep watching until the request is done (or refused), printing each change; with -o yaml
    /// the output is one YAML stream, each document starting with `---`.
    #[arg(long)]
    watch: bool,
}

/// The first look for the request `args` name, in the scope they ask for, with `poller`: `-n`
/// one namespace, `-A` every namespace. With neither, every namespace, in one list that also
/// shows whether the user may list them all; when not (a namespace-scoped user, 403), the
/// kubeconfig's namespace, with a note for stderr.
async fn first_look(
    cluster: &Cluster,
    args: &Args,
    poller: &mut Poller<'_>,
) -> Result<(Report, Option<String>), Failure> {
    let pipeline = args.pipeline.as_deref();
    let (scope, note) = match &args.namespace {
        Some(ns) => (Scope::Namespace(ns.clone()), None),
        None if args.all_namespaces => (Scope::All, None),
        None => match poller.call(|| flows(cluster, &Scope::All, pipeline)).await {
            Ok(found) => return Ok((search(&found, &Scope::All, pipeline, &args.id)?, None)),
            Err(Stop::Final(kube::Error::Api(s))) if s.code == 403 => {
                let ns = cluster.namespace.clone();
                let note = format!(
                    "note: you may not list AnkkaFlows in every namespace, so only namespace '{ns}' (the kubeconfig's) \
                     was searched; name another with -n"
                );
                (Scope::Namespace(ns), Some(note))
            }
            Err(stop) => return Err(stop.failure(cluster)),
        },
    };
    let found = poller.call(|| flows(cluster, &scope, pipeline)).await.map_err(|s| s.failure(cluster))?;
    Ok((search(&found, &scope, pipeline, &args.id)?, note))
}

/// Runs `flow reset status`. With `--watch` it shows each change on `out` (redrawn in place on a
/// terminal) until the request has finished and every group it reset has caught up, or stdout's
/// reader is gone; the API server is asked every second, for the one AnkkaFlow the request was
/// found in, and a transient failure is tried again (said on stderr).
///
/// # Errors
/// No such request; the cluster cannot be reached or read (with `--watch`, a final failure only).
pub async fn run(args: Args, out: &Reporter) -> Result<Output, Failure> {
    // Checked before anything is read, as `flow reset undo` checks them.
    check_request_args(&args.id, args.pipeline.as_deref()).map_err(Failure::refused)?;
    let cluster = Cluster::connect(&args.cluster, "reset").await?;
    if !args.watch {
        let (r, note) = first_look(&cluster, &args, &mut Poller::once(&cluster)).await?;
        return Ok(Output { stdout: report::render(&r, args.output)?, stderr: note.into_iter().collect() });
    }
    let mut poller = Poller::retrying(&cluster, None, out);
    let (first, note) = first_look(&cluster, &args, &mut poller).await?;
    if let Some(note) = note {
        out.say(&note);
    }
    // From now on the one AnkkaFlow that holds the request.
    let (scope, pipeline) = (Scope::Namespace(first.namespace.clone()), first.pipeline.clone());
    let mut last: Option<(Report, Instant)> = None;
    let mut rates = Rates::new();
    let mut next = Some(first);
    loop {
        let r = match next.take() {
            Some(r) => r,
            None => {
                let found =
                    poller.call(|| flows(&cluster, &scope, Some(&pipeline))).await.map_err(|s| s.failure(&cluster))?;
                search(&found, &scope, Some(&pipeline), &args.id)?
            }
        };
        let now = Instant::now();
        if last.as_ref().map(|(l, _)| l) != Some(&r) {
            if let Some((prev, at)) = &last {
                report::update_rates(&mut rates, prev, *at, &r, now);
            }
            // A table replaces the last one; JSON and YAML documents follow one another.
            match args.output {
                Format::Text => out.redraw(&report::table(&r, &rates)),
                other => out.show(&output::render_in_stream(&r, other)?),
            }
            let ended = r.caught_up() || matches!(r.phase, RequestPhase::Refused | RequestPhase::Superseded);
            if ended || out.closed() {
                return Ok(Output::default());
            }
            let newly_finished = r.finished() && !last.as_ref().is_some_and(|(l, _)| l.finished());
            if newly_finished {
                // A reset is done while its streamlets are stopped; the lag only falls once they run.
                out.say(
                    "note: the reset is done; watching until every group it reset has caught up, which starts \
                     when its streamlets run again (Ctrl-C stops watching; the reset stays done)",
                );
            }
            last = Some((r, now));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
