//! The CLI's wall time, by hyperfine.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use flow_testbed::bed;

use crate::k8s::{apply, pipeline_yaml, wait_ready, wait_reconciled};
use crate::op::Op;
use crate::report::{Report, Timing};
use crate::{Ctx, NS, RELAY50};

/// CLI wall time: `flow generate` of the example and of the 50-streamlet blueprint, `flow reset`
/// refused by its guard (1 and 50 streamlets running), and `flow reset` that passes its guards and
/// writes the request (50 streamlets at 0, no operator).
pub fn cli(report: &mut Report, cx: &Ctx, op: &mut Op) {
    let b = bed();
    let flow = cx.flow_bin.display().to_string();
    let relay = b.root.join(RELAY50);
    let p = 3;
    let gen_cart = format!(
        "{flow} generate blueprint.conf --descriptors flow --conf prod.conf --image router=registry.example.com/cart-router:1.2 -n {NS}"
    );
    let gen_relay =
        format!("{flow} generate blueprint.conf --descriptors flow --conf prod.conf --images images.conf -n {NS}");
    let gen_relay_v = format!("{gen_relay} --version 1");
    report.cli.push((
        "`flow generate` of examples/cart (1 streamlet, 3 topics)".into(),
        hyperfine(&gen_cart, &b.root.join("examples/cart"), &cx.out_dir.join("hyperfine-generate-cart.json"), false),
    ));
    report.cli.push((
        "`flow generate` of testbed/bench/relay50 (50 streamlets, 51 topics)".into(),
        hyperfine(&gen_relay, &relay, &cx.out_dir.join("hyperfine-generate-relay50.json"), false),
    ));
    report.cli.push((
        "`flow generate` of relay50 with `--version 1` (no `git describe`)".into(),
        hyperfine(&gen_relay_v, &relay, &cx.out_dir.join("hyperfine-generate-relay50-version.json"), false),
    ));

    // Refused: 1 streamlet running.
    apply(&pipeline_yaml("bench-running", p, 1, 1, "1"));
    wait_reconciled(Duration::from_secs(120));
    let refused = Command::new(&cx.flow_bin).args(["reset", "bench-running", "-n", NS]).output().expect("flow runs");
    assert!(!refused.status.success(), "flow reset of a running pipeline must refuse");
    let msg = String::from_utf8_lossy(&refused.stderr).lines().next().unwrap_or_default().to_string();
    report.refusal_msg = msg.split(" Stop them first").next().unwrap_or_default().to_string();
    report.cli.push((
        "`flow reset` refused, 1 streamlet running (GET, pod list)".into(),
        hyperfine(
            &format!("{flow} reset bench-running -n {NS}"),
            &b.root,
            &cx.out_dir.join("hyperfine-reset-refused-1.json"),
            true,
        ),
    ));

    // Refused: 50 streamlets running (the blueprint as generated, replicas 1 each).
    let yaml = generate(cx, &relay, &["--conf", "prod.conf", "--version", "1"]);
    apply(&yaml);
    wait_ready("relay50", Duration::from_secs(300));
    let o = Command::new(&cx.flow_bin).args(["reset", "relay50", "-n", NS]).output().expect("flow runs");
    assert!(!o.status.success(), "flow reset of a running pipeline must refuse");
    report.cli.push((
        "`flow reset` refused, 50 streamlets running (GET, pod list of 50)".into(),
        hyperfine(
            &format!("{flow} reset relay50 -n {NS}"),
            &b.root,
            &cx.out_dir.join("hyperfine-reset-refused-50.json"),
            true,
        ),
    ));

    // Accepted: 50 streamlets at 0, with no operator running, so each run is the CLI alone: GET, pod
    // list, guards, and the conditional write of the request annotation. `--replace` supersedes the
    // previous run's request, which no operator takes up.
    op.stop();
    let yaml = generate(
        cx,
        &relay,
        &["--conf", "prod.conf", "--conf", "stop.conf", "--version", "1", "--pipeline", "relay50-idle"],
    );
    apply(&yaml);
    let o = Command::new(&cx.flow_bin).args(["reset", "relay50-idle", "-n", NS]).output().expect("flow runs");
    assert!(o.status.success(), "flow reset of a stopped pipeline: {}", String::from_utf8_lossy(&o.stderr));
    report.cli.push((
        "`flow reset --replace` accepted, 50 streamlets at 0 (GET, pod list, guards, annotation write)".into(),
        hyperfine(
            &format!("{flow} reset relay50-idle -n {NS} --replace"),
            &b.root,
            &cx.out_dir.join("hyperfine-reset-accepted-50.json"),
            false,
        ),
    ));
}

/// `flow generate` of the blueprint in `dir` with `extra` arguments, into namespace `bench`.
pub fn generate(cx: &Ctx, dir: &Path, extra: &[&str]) -> String {
    let o = Command::new(&cx.flow_bin)
        .args(["generate", "blueprint.conf", "--descriptors", "flow", "--images", "images.conf", "-n", NS])
        .args(extra)
        .current_dir(dir)
        .output()
        .expect("flow runs");
    assert!(o.status.success(), "flow generate: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// Runs hyperfine on `cmd` in `dir`; returns (median, mean, stddev, runs) in milliseconds.
pub fn hyperfine(cmd: &str, dir: &Path, json: &Path, ignore_failure: bool) -> Option<Timing> {
    let mut h = Command::new("hyperfine");
    h.args(["-N", "--warmup", "3", "--export-json", json.to_str().expect("utf-8 path")]).current_dir(dir);
    if ignore_failure {
        h.arg("-i");
    }
    let o = h.arg(cmd).env("KUBECONFIG", &bed().kubeconfig).output().expect("hyperfine runs");
    if !o.status.success() {
        eprintln!("hyperfine failed: {}", String::from_utf8_lossy(&o.stderr));
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).ok()?).ok()?;
    let r = &v["results"][0];
    let runs = r["times"].as_array().map_or(0, Vec::len);
    Some((r["median"].as_f64()? * 1000.0, r["mean"].as_f64()? * 1000.0, r["stddev"].as_f64()? * 1000.0, runs))
}
