//! `flow reset status <id>`: where a reset request stands, group by group, read from the resource's
//! status (written by the operator) and its annotations.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use flow_adapters::kube as k;
use flow_core::request::ResetRequest;
use flow_core::resource::{AnkkaFlow, GroupStatus};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde::Serialize;

use super::api_failure;
use crate::exit::Failure;

/// Output formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// A summary line and one row per consumer group.
    #[default]
    Table,
    /// The report as JSON.
    Json,
    /// The report as YAML.
    Yaml,
}

/// Arguments of `flow reset status`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The request id, as `flow reset` printed it.
    id: String,
    /// Namespace to look in. Default: every namespace the kubeconfig's user may list.
    #[arg(short = 'n', long = "namespace")]
    namespace: Option<String>,
    /// Look only at this pipeline (its AnkkaFlow's name).
    #[arg(long)]
    pipeline: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    output: Format,
    /// Keep watching until the request is done (or refused), printing each change.
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
    pub phase: String,
    /// Why it waits or was refused.
    pub detail: String,
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
        matches!(self.phase.as_str(), "Done" | "Refused" | "Superseded")
    }

    /// Finished, and every group it reset has caught up (its lag was seen at 0).
    fn caught_up(&self) -> bool {
        self.finished() && self.groups.iter().filter(|g| g.outcome == "Reset").all(|g| g.caught_up_at.is_some())
    }
}

/// Records per second each group's lag fell by, between two looks (`--watch`).
type Rates = BTreeMap<String, f64>;

/// What one resource says about request `id`, if anything.
fn report_from(flow: &AnkkaFlow, id: &str) -> Option<Report> {
    let base = |phase: &str| Report {
        id: id.to_string(),
        namespace: flow.namespace().unwrap_or_default(),
        pipeline: flow.name_any(),
        phase: phase.to_string(),
        detail: String::new(),
        requested_at: None,
        finished_at: None,
        groups: vec![],
    };
    let status = flow.status.as_ref();
    if let Some(r) = status.and_then(|s| s.reset.as_ref()).filter(|r| r.id == id) {
        return Some(Report {
            detail: r.detail.clone(),
            requested_at: r.requested_at.clone(),
            finished_at: r.finished_at.clone(),
            groups: r.groups.clone(),
            ..base(&r.phase)
        });
    }
    if let Some(h) = status.and_then(|s| s.reset_history.iter().find(|h| h.id == id)) {
        return Some(base(&h.phase));
    }
    let (raw, done) = k::reset_annotations(flow);
    match raw.map(ResetRequest::parse) {
        Some(Ok(r)) if r.id == id && done == Some(id) => Some(base("Done")),
        Some(Ok(r)) if r.id == id => Some(base("Requested")),
        _ => None,
    }
}

/// Finds request `id` among the AnkkaFlows `args` selects.
async fn find(client: &Client, args: &Args) -> Result<Report, Failure> {
    let api: Api<AnkkaFlow> = match &args.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let flows = match &args.pipeline {
        Some(p) => api.get_opt(p).await.map_err(api_failure)?.into_iter().collect(),
        None => api.list(&ListParams::default()).await.map_err(api_failure)?.items,
    };
    flows.iter().find_map(|f| report_from(f, &args.id)).ok_or_else(|| {
        let scope = match (&args.pipeline, &args.namespace) {
            (Some(p), Some(ns)) => format!("pipeline '{p}' in namespace '{ns}'"),
            (Some(p), None) => format!("pipeline '{p}'"),
            (None, Some(ns)) => format!("namespace '{ns}'"),
            (None, None) => "any namespace".to_string(),
        };
        Failure::refused(format!(
            "no reset request '{}' in {scope}: the id is the one `flow reset` printed; the last 10 requests of each pipeline are kept",
            args.id
        ))
    })
}

/// Renders `r` in `format`.
pub fn render(r: &Report, format: Format) -> Result<String, Failure> {
    match format {
        Format::Json => serde_json::to_string_pretty(r)
            .map(|s| s + "\n")
            .map_err(|e| Failure::refused(format!("cannot render JSON: {e}"))),
        Format::Yaml => serde_saphyr::to_string(r).map_err(|e| Failure::refused(format!("cannot render YAML: {e}"))),
        Format::Table => Ok(table(r, &Rates::new())),
    }
}

/// One line per group whose lag is measured: records left of those to reprocess, percent done and,
/// with a rate from `--watch`, the time to zero.
fn catch_up_lines(r: &Report, rates: &Rates) -> String {
    let mut out = String::new();
    for g in r.groups.iter().filter(|g| g.outcome == "Reset") {
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
                g.outcome.clone(),
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
pub async fn run(client: Client, args: Args) -> Result<String, Failure> {
    if !args.watch {
        return render(&find(&client, &args).await?, args.output);
    }
    let redraw = args.output == Format::Table && std::io::stdout().is_terminal();
    let mut last: Option<(Report, Instant)> = None;
    let mut rates = Rates::new();
    loop {
        let r = find(&client, &args).await?;
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
                Format::Table => table(&r, &rates),
                other => render(&r, other)?,
            };
            if redraw {
                print!("\x1b[2J\x1b[H");
            }
            print!("{text}");
            if r.caught_up() || matches!(r.phase.as_str(), "Refused" | "Superseded") {
                return Ok(String::new());
            }
            last = Some((r, now));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until request `id` of `pipeline` in `ns` is finished, then renders it as a table.
///
/// # Errors
/// The cluster cannot be read, or the request disappears.
pub async fn wait(client: Client, ns: &str, pipeline: &str, id: &str) -> Result<String, Failure> {
    let args = Args {
        id: id.to_string(),
        namespace: Some(ns.to_string()),
        pipeline: Some(pipeline.to_string()),
        output: Format::Table,
        watch: true,
    };
    loop {
        let r = find(&client, &args).await?;
        if r.finished() {
            return render(&r, Format::Table);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
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
            phase: "Done".into(),
            detail: String::new(),
            requested_at: Some("2026-11-29T16:00:00Z".into()),
            finished_at: Some("2026-11-29T16:00:01Z".into()),
            groups: vec![GroupStatus {
                group: "cart.router.in".into(),
                topic: "shop.cart-events.v1".into(),
                outcome: "Reset".into(),
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
            outcome: "Reset".into(),
            records_to_reprocess: 300,
            lag: Some(120),
            ..Default::default()
        };
        let r = |g: GroupStatus| Report {
            id: "u1".into(),
            namespace: "shop".into(),
            pipeline: "cart".into(),
            phase: "Done".into(),
            detail: String::new(),
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
}
