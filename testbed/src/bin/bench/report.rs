//! The results: the markdown table the run prints and writes.

use crate::flows::FlowsRow;
use crate::measure::{max, median, min};
use crate::resets::ResetRow;
use crate::{Args, large, settle};

/// A hyperfine result: median, mean and standard deviation in ms, and the number of runs.
pub type Timing = (f64, f64, f64, usize);

#[derive(Default)]
pub struct Report {
    pub head: Vec<String>,
    pub idle_rss: Option<u64>,
    pub resets: Vec<ResetRow>,
    pub flows: Vec<FlowsRow>,
    pub cli: Vec<(String, Option<Timing>)>,
    pub refusal_msg: String,
    pub probe: Option<(f64, f64)>,
    pub trace: Option<String>,
    pub settle: Vec<settle::Round>,
    pub large: Vec<large::LargeRow>,
}

impl Report {
    pub fn line(&mut self, s: &str) {
        self.head.push(s.to_string());
    }

    pub fn render(&self, args: &Args) -> String {
        let mut t = String::from("## flow-bench results\n\n");
        for l in &self.head {
            t.push_str(l);
            t.push_str("\n\n");
        }
        if !self.resets.is_empty() {
            t.push_str(&format!(
                "### Reset latency (median ms of {} runs unless noted, [min-max] of the runs)\n\nAll inlets of a pipeline read one topic `bench.p<partitions>`; each inlet has its own group with \
                 offsets committed on every partition. `flow reset`: from starting the CLI to the done annotation, and from the request annotation to the done annotation \
                 (both seen by a watch of the resource). Kafka's tool: \
                 `kafka-consumer-groups --reset-offsets --to-earliest --execute`, with every group in one call, and once per group in a row. \
                 The floor: the Kafka work alone through the operator's adapter (describe every group in one call, list the log start offsets, \
                 commit every group at once and read each back), {} rounds with the groups' commits spread over up to {} connected clients (a broker \
                 answers one connection's requests one at a time), {} rounds over one connected client, and one round on a new client.\n\n",
                args.reps, args.floor_reps, args.floor_connections, args.floor_reps
            ));
            t.push_str("| groups | partitions | `flow reset` to done | request to done | Kafka tool, all groups in one call | Kafka tool, once per group | floor | floor, one connection | floor, new client | flow / floor | all-groups tool / floor | flow / all-groups tool | flow / per-group tool |\n");
            t.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
            for r in &self.resets {
                let reps = |n: usize| {
                    if n == args.reps { String::new() } else { format!(" ({n} run{})", if n == 1 { "" } else { "s" }) }
                };
                let spread = |n: usize, lo: f64, hi: f64| {
                    if n > 1 { format!(" [{lo:.0}-{hi:.0}]") } else { String::new() }
                };
                let floor = median(&r.floor.spread);
                t.push_str(&format!(
                    "| {} | {} | {:.0}{}{} | {:.0}{} | {:.0}{} | {:.0}{} | {:.1} [{:.1}-{:.1}] | {:.1} [{:.1}-{:.1}] | {:.1} | {:.0} | {:.0} | {:.2} | {:.2} |\n",
                    r.groups,
                    r.partitions,
                    r.flow,
                    spread(r.flow_reps, r.flow_min, r.flow_max),
                    reps(r.flow_reps),
                    r.request,
                    spread(r.flow_reps, r.request_min, r.request_max),
                    r.all,
                    spread(args.reps, r.all_min, r.all_max),
                    r.per_group,
                    reps(r.per_group_reps),
                    floor,
                    min(&r.floor.spread),
                    max(&r.floor.spread),
                    median(&r.floor.one),
                    min(&r.floor.one),
                    max(&r.floor.one),
                    r.floor.cold,
                    r.flow / floor,
                    r.all / floor,
                    r.flow / r.all,
                    r.flow / r.per_group
                ));
            }
            t.push('\n');
        }
        let mib = |k: u64| format!("{:.1}", k as f64 / 1024.0);
        t.push_str("### Operator\n\n| measure | value |\n|---|---:|\n");
        if let Some(k) = self.idle_rss {
            t.push_str(&format!("| RSS, idle, no AnkkaFlow in its namespace | {} MiB |\n", mib(k)));
        }
        if let Some((call, dropped)) = self.probe {
            t.push_str(&format!(
                "| one fresh Kafka client with a group id: create + committed offsets / drop (median of 5) | {call:.0} ms / {dropped:.0} ms |\n"
            ));
        }
        if !self.flows.is_empty() {
            t.push_str(&format!(
                "\n### Operator with many AnkkaFlows (one streamlet at replicas 1 each, so one kwok pod each)\n\n\
                 A fresh operator per count. Times in ms from the start of the one `kubectl apply` (server-side, one multi-document file), \
                 and for the restart from starting the new process (every resource's `spec.version` changed while it was stopped). \
                 Reconciled: every `status.observedGeneration` = generation; Ready: every `status.phase` Ready (all pods ready), \
                 both seen through a `kubectl get --watch`. RSS read after the CPU window, which starts 5 s after all Ready, after the apply and after the restart alike; CPU is the operator's user + system time.\n\n\
                 | measure | {} |\n|---|{}\n",
                self.flows.iter().map(|f| format!("{} AnkkaFlows", f.flows)).collect::<Vec<_>>().join(" | "),
                "---:|".repeat(self.flows.len())
            ));
            let row = |name: &str, f: &dyn Fn(&FlowsRow) -> String| {
                format!("| {name} | {} |\n", self.flows.iter().map(f).collect::<Vec<_>>().join(" | "))
            };
            t.push_str(&row("pods Running", &|f| f.pods.to_string()));
            t.push_str(&row("RSS of the fresh operator before the apply (MiB)", &|f| mib(f.idle_rss)));
            t.push_str(&row("`kubectl apply` itself (ms)", &|f| format!("{:.0}", f.apply_ms)));
            t.push_str(&row("apply → all reconciled (ms)", &|f| format!("{:.0}", f.reconciled)));
            t.push_str(&row("apply → all Ready (ms)", &|f| format!("{:.0}", f.ready)));
            t.push_str(&row("operator CPU from its start until all Ready (s)", &|f| format!("{:.1}", f.cpu_to_ready)));
            t.push_str(&row("RSS with all Ready (MiB)", &|f| mib(f.rss)));
            t.push_str(&row("peak RSS so far (MiB)", &|f| mib(f.hwm)));
            t.push_str(&row(&format!("operator CPU over {} s with all Ready (s)", args.cpu_window), &|f| {
                format!("{:.2}", f.cpu_window)
            }));
            t.push_str(&row("Kafka requests per lag interval with all Ready (lag sampler), total", &|f| {
                format!("{:.0}", f.lag_requests.iter().map(|(_, n)| n).sum::<f64>())
            }));
            t.push_str(&row("the same by request type", &|f| {
                f.lag_requests.iter().map(|(r, n)| format!("{r} {n:.0}")).collect::<Vec<_>>().join(", ")
            }));
            t.push_str(&row("reconciles until all reconciled after the apply", &|f| format!("{:.0}", f.reconciles)));
            t.push_str(&row("re-apply with a new `spec.version` while stopped (ms)", &|f| {
                format!("{:.0}", f.reapply_ms)
            }));
            t.push_str(&row("**restart → all reconciled (ms)**", &|f| format!("**{:.0}**", f.restart_reconciled)));
            t.push_str(&row("reconciles from the restart until all reconciled", &|f| {
                format!("{:.0}", f.restart_reconciles)
            }));
            t.push_str(&row("restart → all Ready (ms)", &|f| format!("{:.0}", f.restart_ready)));
            t.push_str(&row("operator CPU from the restart until all Ready (s)", &|f| format!("{:.1}", f.restart_cpu)));
            t.push_str(&row("RSS after the restart (MiB)", &|f| mib(f.restart_rss)));
            t.push_str(&row("peak RSS after the restart (MiB)", &|f| mib(f.restart_hwm)));
            t.push_str(&row("`kubectl delete aflow --all` → nothing left (ms)", &|f| format!("{:.0}", f.delete_ms)));
        }
        if !self.cli.is_empty() {
            let hf = |v: &Option<Timing>| {
                v.map_or("not measured".to_string(), |(med, mean, sd, runs)| {
                    format!("{med:.1} ms (mean {mean:.1} ± {sd:.1}, {runs} runs)")
                })
            };
            t.push_str("\n### CLI wall time (hyperfine -N --warmup 3)\n\n| command | median |\n|---|---:|\n");
            for (what, v) in &self.cli {
                t.push_str(&format!("| {what} | {} |\n", hf(v)));
            }
            t.push_str(&format!("\nThe refusal reads: {}\n", self.refusal_msg.replace('|', "\\|")));
        }
        if !self.settle.is_empty() {
            t.push_str(
                "\n### The settle: a consumer's commit on close against its leave\n\n\
                 `flow-standin --hold --commit-on-close` reads a topic, gets SIGTERM, commits its position and leaves; one connected client polls \
                 the group meanwhile (describe, then the committed offsets). ms from the SIGTERM, median [min-max] of the rounds. \
                 \"empty - commit\" is how long before the group showed no member the close commit showed; a negative value would be a commit \
                 that could land over a reset.\n\n\
                 | group protocol | rounds | close commit seen | group empty seen | empty - commit (min) | process ended | polls per round |\n\
                 |---|---:|---:|---:|---:|---:|---:|\n",
            );
            for protocol in ["classic", "consumer"] {
                let rounds: Vec<&settle::Round> = self.settle.iter().filter(|r| r.protocol == protocol).collect();
                if rounds.is_empty() {
                    continue;
                }
                let of = |f: &dyn Fn(&settle::Round) -> f64| rounds.iter().map(|r| f(r)).collect::<Vec<f64>>();
                let cell = |v: Vec<f64>| format!("{:.1} [{:.1}-{:.1}]", median(&v), min(&v), max(&v));
                t.push_str(&format!(
                    "| {protocol} | {} | {} | {} | {:.1} | {} | {:.0} |\n",
                    rounds.len(),
                    cell(of(&|r| r.committed)),
                    cell(of(&|r| r.empty)),
                    min(&of(&|r| r.empty - r.committed)),
                    cell(of(&|r| r.exited)),
                    median(&of(&|r| r.polls as f64)),
                ));
            }
        }
        if !self.large.is_empty() {
            t.push('\n');
            t.push_str(&large::render(&self.large));
        }
        if let Some(trace) = &self.trace {
            t.push('\n');
            t.push_str(trace);
        }
        t
    }
}
