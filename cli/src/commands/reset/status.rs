//! `flow reset status <id>`: where a reset request stands, group by group, read from the resource's
//! status (written by the operator) and its annotations; and the waiting of `flow reset --wait`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use flow_adapters::kube as k;
use flow_core::request::ResetRequest;
use flow_core::resource::{AnkkaFlow, GroupStage, GroupStatus, RequestPhase};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde::Serialize;

use crate::cluster::{Cluster, ClusterArgs};
use crate::exit::{self, Failure, Output};
use crate::output::{self, Format};

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

/// Where a request stands: what `-o json|yaml` prints.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The request id.
    pub id: String,
    /// Namespace of the AnkkaFlow.
    pub namespace: String,
    /// The AnkkaFlow's name.
    pub pipeline: String,
    /// `Requested` (the operator has not picked it up yet), `Waiting`, `Resetting`, `Done`,
    /// `Refused` or `Superseded`.
    pub phase: RequestPhase,
    /// Why it waits or was refused.
    pub detail: String,
    /// The instant the groups go to (RFC 3339), for a reset to a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// When the operator first saw it (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<String>,
    /// When it finished (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Per consumer group.
    pub groups: Vec<GroupStatus>,
}

impl Report {
    fn finished(&self) -> bool {
        self.phase.finished()
    }

    /// Finished, and every group it reset has caught up (its lag was seen at 0).
    fn caught_up(&self) -> bool {
        self.finished()
            && self.groups.iter().filter(|g| g.outcome == GroupStage::Reset).all(|g| g.caught_up_at.is_some())
    }

    /// One line for stderr while `--wait` waits: the phase, how many groups are finished, and why
    /// it waits.
    fn progress(&self) -> String {
        let mut line = format!("reset {} of '{}': {}", self.id, self.pipeline, self.phase);
        if !self.groups.is_empty() {
            let finished =
                self.groups.iter().filter(|g| matches!(g.outcome, GroupStage::Reset | GroupStage::Failed)).count();
            line.push_str(&format!(", {finished} of {} consumer groups finished", self.groups.len()));
        }
        if !self.detail.is_empty() {
            line.push_str(&format!(" ({})", self.detail));
        }
        line
    }

    /// How a finished request ended, as the exit code of `flow reset --wait` and the line for
    /// stderr; `None` while it is not finished, and for a request done with every group reset.
    fn ending(&self, ns: &str) -> Option<(u8, String)> {
        let (id, pipeline) = (&self.id, &self.pipeline);
        match self.phase {
            RequestPhase::Refused => {
                Some((exit::RESET_REFUSED, format!("reset {id} of '{pipeline}' was refused: {}", self.detail)))
            }
            RequestPhase::Superseded => {
                Some((exit::RESET_REFUSED, format!("reset {id} of '{pipeline}' was superseded by a newer request")))
            }
            RequestPhase::Done => {
                let failed: Vec<&str> =
                    self.groups.iter().filter(|g| g.outcome == GroupStage::Failed).map(|g| g.group.as_str()).collect();
                (!failed.is_empty()).then(|| {
                    (
                        exit::GROUPS_FAILED,
                        format!(
                            "reset {id} of '{pipeline}' is done, but {} of {} consumer groups could not be reset: {}; \
                             kubectl -n {ns} get events --field-selector involvedObject.kind=AnkkaFlow,reason=ResetOffsetsFailed \
                             says why",
                            failed.len(),
                            self.groups.len(),
                            failed.join(", ")
                        ),
                    )
                })
            }
            _ => None,
        }
    }
}

/// Records per second each group's lag fell by, between two looks (`--watch`).
type Rates = BTreeMap<String, f64>;

/// What one resource says about request `id`, if anything.
fn report_from(flow: &AnkkaFlow, id: &str) -> Option<Report> {
    let base = |phase: RequestPhase| Report {
        id: id.to_string(),
        namespace: flow.namespace().unwrap_or_default(),
        pipeline: flow.name_any(),
        phase,
        detail: String::new(),
        to: None,
        requested_at: None,
        finished_at: None,
        groups: vec![],
    };
    let status = flow.status.as_ref();
    if let Some(r) = status.and_then(|s| s.reset.as_ref()).filter(|r| r.id == id) {
        return Some(Report {
            detail: r.detail.clone(),
            to: r.to.clone(),
            requested_at: r.requested_at.clone(),
            finished_at: r.finished_at.clone(),
            groups: r.groups.clone(),
            ..base(r.phase)
        });
    }
    if let Some(h) = status.and_then(|s| s.reset_history.iter().find(|h| h.id == id)) {
        return Some(base(h.phase));
    }
    let (raw, done) = k::reset_annotations(flow);
    match raw.map(ResetRequest::parse) {
        Some(Ok(r)) if r.id == id && done == Some(id) => Some(base(RequestPhase::Done)),
        Some(Ok(r)) if r.id == id => Some(base(RequestPhase::Requested)),
        _ => None,
    }
}

/// Where to look for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Scope {
    /// One namespace.
    Namespace(String),
    /// Every namespace.
    All,
}

/// The AnkkaFlows in `scope` (only `pipeline`, when given).
async fn flows(cluster: &Cluster, scope: &Scope, pipeline: Option<&str>) -> Result<Vec<AnkkaFlow>, kube::Error> {
    let api: Api<AnkkaFlow> = match scope {
        Scope::Namespace(ns) => Api::namespaced(cluster.client.clone(), ns),
        Scope::All => Api::all(cluster.client.clone()),
    };
    match (scope, pipeline) {
        (Scope::Namespace(_), Some(p)) => Ok(api.get_opt(p).await?.into_iter().collect()),
        // Across namespaces a name is no key: select by it.
        (Scope::All, Some(p)) => {
            Ok(api.list(&ListParams::default().fields(&format!("metadata.name={p}"))).await?.items)
        }
        (_, None) => Ok(api.list(&ListParams::default()).await?.items),
    }
}

/// The scope `args` ask for. Without `-n` or `-A`, every namespace; but when the user may not list
/// AnkkaFlows in every namespace (a namespace-scoped user), the kubeconfig's namespace, with a note
/// for stderr.
async fn scope(cluster: &Cluster, args: &Args) -> Result<(Scope, Option<String>), Failure> {
    if let Some(ns) = &args.namespace {
        return Ok((Scope::Namespace(ns.clone()), None));
    }
    if args.all_namespaces {
        return Ok((Scope::All, None));
    }
    match flows(cluster, &Scope::All, args.pipeline.as_deref()).await {
        Ok(_) => Ok((Scope::All, None)),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            let ns = cluster.namespace.clone();
            let note = format!(
                "note: you may not list AnkkaFlows in every namespace, so only namespace '{ns}' (the kubeconfig's) \
                 was searched; name another with -n"
            );
            Ok((Scope::Namespace(ns), Some(note)))
        }
        Err(e) => Err(cluster.failure(e)),
    }
}

/// Finds request `id` in `scope`.
async fn find(cluster: &Cluster, scope: &Scope, pipeline: Option<&str>, id: &str) -> Result<Report, Failure> {
    let flows = flows(cluster, scope, pipeline).await.map_err(|e| cluster.failure(e))?;
    flows.iter().find_map(|f| report_from(f, id)).ok_or_else(|| {
        let scope = match (pipeline, scope) {
            (Some(p), Scope::Namespace(ns)) => format!("pipeline '{p}' in namespace '{ns}'"),
            (Some(p), Scope::All) => format!("pipeline '{p}'"),
            (None, Scope::Namespace(ns)) => format!("namespace '{ns}'"),
            (None, Scope::All) => "any namespace".to_string(),
        };
        Failure::refused(format!(
            "no reset request '{id}' in {scope}: the id is the one `flow reset` printed; the last 10 requests of each pipeline are kept"
        ))
    })
}

/// Finds request `id` among the AnkkaFlows of namespace `ns` (only `pipeline`, when given).
///
/// # Errors
/// No AnkkaFlow there knows the id, or the API failed.
pub async fn locate(cluster: &Cluster, ns: &str, pipeline: Option<&str>, id: &str) -> Result<Report, Failure> {
    find(cluster, &Scope::Namespace(ns.to_string()), pipeline, id).await
}

/// Renders `r` in `format`.
///
/// # Errors
/// The report cannot be serialised (not expected).
pub fn render(r: &Report, format: Format) -> Result<String, Failure> {
    match format {
        Format::Text => Ok(table(r, &Rates::new())),
        other => output::render(r, other),
    }
}

/// One line per group whose lag is measured: records left of those to reprocess, percent done and,
/// with a rate from `--watch`, the time to zero.
fn catch_up_lines(r: &Report, rates: &Rates) -> String {
    let mut out = String::new();
    for g in r.groups.iter().filter(|g| g.outcome == GroupStage::Reset) {
        let Some(left) = g.lag else { continue };
        if let Some(at) = &g.caught_up_at {
            out.push_str(&format!("catch-up: {} caught up at {at}\n", g.group));
            continue;
        }
        let total = g.records_to_reprocess.max(left).max(1);
        let done = 100 * (total - left) / total;
        out.push_str(&format!("catch-up: {} {left} of {total} records left ({done}% done)", g.group));
        if let Some(rate) = rates.get(&g.group).filter(|r| **r > 0.0) {
            out.push_str(&format!(", {rate:.1} records/s, about {:.0} s to zero", left as f64 / rate));
        }
        out.push('\n');
    }
    out
}

fn table(r: &Report, rates: &Rates) -> String {
    let mut out = format!("reset {} of {}/{}: {}", r.id, r.namespace, r.pipeline, r.phase);
    if !r.detail.is_empty() {
        out.push_str(&format!(" ({})", r.detail));
    }
    out.push('\n');
    if let Some(t) = &r.to {
        out.push_str(&format!("to: {t}\n"));
    }
    if let Some(t) = &r.requested_at {
        out.push_str(&format!("requested: {t}"));
        if let Some(f) = &r.finished_at {
            out.push_str(&format!("  finished: {f}"));
        }
        out.push('\n');
    }
    if r.groups.is_empty() {
        return out;
    }
    let rows: Vec<[String; 6]> = r
        .groups
        .iter()
        .map(|g| {
            [
                g.group.clone(),
                g.topic.clone(),
                g.partitions.to_string(),
                g.records_to_reprocess.to_string(),
                g.outcome.to_string(),
                g.message.clone(),
            ]
        })
        .collect();
    let header = ["GROUP", "TOPIC", "PARTITIONS", "RECORDS", "OUTCOME", "MESSAGE"].map(String::from);
    let widths: Vec<usize> =
        (0..6).map(|i| rows.iter().chain([&header]).map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    out.push_str(&catch_up_lines(r, rates));
    out
}

/// Runs `flow reset status`. With `--watch` it prints each change (redrawn in place on a terminal)
/// until the request has finished and every group it reset has caught up.
///
/// # Errors
/// No such request; the cluster cannot be reached or read.
pub async fn run(args: Args) -> Result<Output, Failure> {
    let cluster = Cluster::connect(&args.cluster).await?;
    let (scope, note) = scope(&cluster, &args).await?;
    let pipeline = args.pipeline.as_deref();
    if !args.watch {
        let stdout = render(&find(&cluster, &scope, pipeline, &args.id).await?, args.output)?;
        return Ok(Output { stdout, stderr: note.into_iter().collect() });
    }
    if let Some(note) = note {
        eprintln!("{note}");
    }
    let redraw = args.output == Format::Text && std::io::stdout().is_terminal();
    let mut last: Option<(Report, Instant)> = None;
    let mut rates = Rates::new();
    loop {
        let r = find(&cluster, &scope, pipeline, &args.id).await?;
        let now = Instant::now();
        if last.as_ref().map(|(l, _)| l) != Some(&r) {
            if let Some((prev, at)) = &last {
                let secs = now.duration_since(*at).as_secs_f64().max(0.001);
                for g in &r.groups {
                    let before = prev.groups.iter().find(|p| p.group == g.group).and_then(|p| p.lag);
                    if let (Some(b), Some(l)) = (before, g.lag) {
                        rates.insert(g.group.clone(), (b - l) as f64 / secs);
                    }
                }
            }
            let text = match args.output {
                Format::Text => table(&r, &rates),
                other => output::render_in_stream(&r, other)?,
            };
            if redraw {
                print!("\x1b[2J\x1b[H");
            }
            print!("{text}");
            if r.caught_up() || matches!(r.phase, RequestPhase::Refused | RequestPhase::Superseded) {
                return Ok(Output::default());
            }
            let newly_finished = r.finished() && !last.as_ref().is_some_and(|(l, _)| l.finished());
            if newly_finished {
                // A reset is done while its streamlets are stopped; the lag only falls once they run.
                eprintln!(
                    "note: the reset is done; watching until every group it reset has caught up, which starts \
                     when its streamlets run again (Ctrl-C stops watching; the reset stays done)"
                );
            }
            last = Some((r, now));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until request `id` of `pipeline` in `ns` is finished, printing its progress on stderr
/// whenever it changes, then renders its status in `format`.
///
/// # Errors
/// The cluster cannot be read, or the request disappears; and, with its own exit code, a request
/// that was refused or superseded, one done with groups that failed, and `timeout` running out.
pub async fn wait(
    cluster: &Cluster,
    ns: &str,
    pipeline: &str,
    id: &str,
    timeout: Option<Duration>,
    format: Format,
) -> Result<Output, Failure> {
    wait_with(cluster, ns, pipeline, id, timeout, format, render).await
}

/// As [`wait`], rendering the final report with `render`.
///
/// # Errors
/// As [`wait`], and `render`'s.
pub async fn wait_with(
    cluster: &Cluster,
    ns: &str,
    pipeline: &str,
    id: &str,
    timeout: Option<Duration>,
    format: Format,
    render: impl Fn(&Report, Format) -> Result<String, Failure>,
) -> Result<Output, Failure> {
    let scope = Scope::Namespace(ns.to_string());
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut shown = String::new();
    loop {
        let r = find(cluster, &scope, Some(pipeline), id).await?;
        let line = r.progress();
        if line != shown {
            eprintln!("{line}");
            shown = line;
        }
        if r.finished() {
            let stdout = render(&r, format)?;
            return match r.ending(ns) {
                None => Ok(Output::from(stdout)),
                Some((code, problem)) => Err(Failure::with_code(code, stdout, problem)),
            };
        }
        if let (Some(deadline), Some(timeout)) = (deadline, timeout)
            && Instant::now() >= deadline
        {
            return Err(Failure::with_code(
                exit::TIMED_OUT,
                render(&r, format)?,
                format!(
                    "timed out after {} waiting for reset {id} of '{pipeline}' ({}); the request stays and the \
                     operator carries it on: flow reset status {id} -n {ns} --watch",
                    humantime::format_duration(timeout),
                    r.phase
                ),
            ));
        }
        let pause = deadline.map_or(Duration::from_secs(1), |d| {
            d.saturating_duration_since(Instant::now()).min(Duration::from_secs(1))
        });
        tokio::time::sleep(pause).await;
    }
}

/// Waits until request `id` of `pipeline` in `ns` is finished and every group it reset has caught
/// up (`flow rebuild --wait`), printing its progress on stderr whenever it changes: the phase, then
/// each group's burn-down (records left, rate, time to zero). Renders its status in `format`.
///
/// # Errors
/// As [`wait`]; a timeout names the catch-up when the request itself is done.
pub async fn wait_caught_up(
    cluster: &Cluster,
    ns: &str,
    pipeline: &str,
    id: &str,
    timeout: Option<Duration>,
    format: Format,
) -> Result<Output, Failure> {
    let scope = Scope::Namespace(ns.to_string());
    let deadline = timeout.map(|t| Instant::now() + t);
    let (mut shown, mut shown_burn_down) = (String::new(), String::new());
    let mut last: Option<(Report, Instant)> = None;
    let mut rates = Rates::new();
    loop {
        let r = find(cluster, &scope, Some(pipeline), id).await?;
        let now = Instant::now();
        if let Some((prev, at)) = &last
            && prev != &r
        {
            let secs = now.duration_since(*at).as_secs_f64().max(0.001);
            for g in &r.groups {
                let before = prev.groups.iter().find(|p| p.group == g.group).and_then(|p| p.lag);
                if let (Some(b), Some(l)) = (before, g.lag)
                    && b != l
                {
                    rates.insert(g.group.clone(), (b - l) as f64 / secs);
                }
            }
        }
        // The progress line when it changes, then each change of the burn-down.
        let line = r.progress();
        if line != shown {
            eprintln!("{line}");
            shown = line;
        }
        let burn_down = catch_up_lines(&r, &rates);
        if burn_down != shown_burn_down {
            eprint!("{burn_down}");
            shown_burn_down = burn_down;
        }
        if r.finished() {
            if let Some((code, problem)) = r.ending(ns) {
                return Err(Failure::with_code(code, render(&r, format)?, problem));
            }
            if r.caught_up() {
                return Ok(Output::from(render(&r, format)?));
            }
        }
        if let (Some(deadline), Some(timeout)) = (deadline, timeout)
            && Instant::now() >= deadline
        {
            let waited = if r.finished() { "for the catch-up of" } else { "for" };
            return Err(Failure::with_code(
                exit::TIMED_OUT,
                render(&r, format)?,
                format!(
                    "timed out after {} waiting {waited} rebuild {id} of '{pipeline}' ({}); the request stays and \
                     the operator carries it on: flow reset status {id} -n {ns} --watch",
                    humantime::format_duration(timeout),
                    r.phase
                ),
            ));
        }
        if last.as_ref().is_none_or(|(l, _)| l != &r) {
            last = Some((r, now));
        }
        let pause = deadline.map_or(Duration::from_secs(1), |d| {
            d.saturating_duration_since(Instant::now()).min(Duration::from_secs(1))
        });
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_up_groups() {
        let r = Report {
            id: "u1".into(),
            namespace: "shop".into(),
            pipeline: "cart".into(),
            phase: RequestPhase::Done,
            detail: String::new(),
            to: None,
            requested_at: Some("2026-11-29T16:00:00Z".into()),
            finished_at: Some("2026-11-29T16:00:01Z".into()),
            groups: vec![GroupStatus {
                group: "cart.router.in".into(),
                topic: "shop.cart-events.v1".into(),
                outcome: GroupStage::Reset,
                message: "3 partition(s) of 'shop.cart-events.v1' to earliest".into(),
                partitions: 3,
                records_to_reprocess: 300,
                ..Default::default()
            }],
        };
        let t = table(&r, &Rates::new());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "reset u1 of shop/cart: Done");
        assert_eq!(lines[1], "requested: 2026-11-29T16:00:00Z  finished: 2026-11-29T16:00:01Z");
        assert!(lines[2].starts_with("GROUP            TOPIC"), "{}", lines[2]);
        assert!(lines[3].starts_with("cart.router.in   shop.cart-events.v1   3            300"), "{}", lines[3]);
        let json: serde_json::Value = serde_json::from_str(&render(&r, Format::Json).unwrap()).unwrap();
        assert_eq!(json["groups"][0]["recordsToReprocess"], 300);
    }

    #[test]
    fn catch_up_shows_records_left_percent_and_time_to_zero() {
        let mut g = GroupStatus {
            group: "cart.router.in".into(),
            outcome: GroupStage::Reset,
            records_to_reprocess: 300,
            lag: Some(120),
            ..Default::default()
        };
        let r = |g: GroupStatus| Report {
            id: "u1".into(),
            namespace: "shop".into(),
            pipeline: "cart".into(),
            phase: RequestPhase::Done,
            detail: String::new(),
            to: None,
            requested_at: None,
            finished_at: None,
            groups: vec![g],
        };
        let rates = Rates::from([("cart.router.in".to_string(), 40.0)]);
        assert_eq!(
            catch_up_lines(&r(g.clone()), &rates),
            "catch-up: cart.router.in 120 of 300 records left (60% done), 40.0 records/s, about 3 s to zero\n"
        );
        assert!(!r(g.clone()).caught_up());
        g.lag = Some(0);
        g.caught_up_at = Some("2026-11-29T16:00:09Z".into());
        assert_eq!(
            catch_up_lines(&r(g.clone()), &Rates::new()),
            "catch-up: cart.router.in caught up at 2026-11-29T16:00:09Z\n"
        );
        assert!(r(g).caught_up());
    }

    fn report(phase: RequestPhase, outcomes: &[GroupStage]) -> Report {
        Report {
            id: "u1".into(),
            namespace: "shop".into(),
            pipeline: "cart".into(),
            phase,
            detail: String::new(),
            to: None,
            requested_at: None,
            finished_at: None,
            groups: outcomes
                .iter()
                .enumerate()
                .map(|(i, o)| GroupStatus { group: format!("cart.s{i}.in"), outcome: *o, ..Default::default() })
                .collect(),
        }
    }

    #[test]
    fn how_a_waited_for_request_ended_is_its_exit_code() {
        assert_eq!(
            report(RequestPhase::Resetting, &[GroupStage::Reset, GroupStage::Pending]).ending("shop"),
            None,
            "not finished"
        );
        assert_eq!(
            report(RequestPhase::Done, &[GroupStage::Reset, GroupStage::Reset]).ending("shop"),
            None,
            "done well: exit 0"
        );
        let (code, line) = report(RequestPhase::Done, &[GroupStage::Reset, GroupStage::Failed]).ending("shop").unwrap();
        assert_eq!(code, exit::GROUPS_FAILED);
        assert!(
            line.starts_with("reset u1 of 'cart' is done, but 1 of 2 consumer groups could not be reset: cart.s1.in;")
        );
        let mut refused = report(RequestPhase::Refused, &[]);
        refused.detail = "streamlet [router] still has 1 pod(s)".into();
        assert_eq!(
            refused.ending("shop"),
            Some((exit::RESET_REFUSED, "reset u1 of 'cart' was refused: streamlet [router] still has 1 pod(s)".into()))
        );
        assert_eq!(report(RequestPhase::Superseded, &[]).ending("shop").unwrap().0, exit::RESET_REFUSED);
    }

    #[test]
    fn progress_counts_finished_groups() {
        assert_eq!(report(RequestPhase::Requested, &[]).progress(), "reset u1 of 'cart': Requested");
        assert_eq!(
            report(RequestPhase::Resetting, &[GroupStage::Reset, GroupStage::Committing, GroupStage::Failed])
                .progress(),
            "reset u1 of 'cart': Resetting, 2 of 3 consumer groups finished"
        );
    }
}
