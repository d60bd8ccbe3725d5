//! The Helm chart `charts/ankka-flow`: `helm lint`, `helm template` with every option, the same
//! RBAC, settings and CRD as deploy/ (so that neither path can drift from the other), and a real
//! `helm install` on the test bed, after which the operator, run with the chart's settings as the
//! chart's ServiceAccount, carries out the scenario of docs/rebuild-from-the-start.md.
//!
//! Helm comes from `scripts/helm.sh`, which builds it from the Go module proxy into the test bed's
//! cache the first time. The operator runs as a local process (kwok runs no containers) that logs
//! in with a token the API server issues for the chart's ServiceAccount, so RBAC treats it exactly
//! as it would treat the chart's pod.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};
use std::time::Duration;

use flow_testbed::*;

fn helm(args: &[&str]) -> Output {
    Command::new(bed().root.join("scripts/helm.sh"))
        .args(args)
        .env("KUBECONFIG", &bed().kubeconfig)
        .output()
        .expect("scripts/helm.sh runs")
}

fn helm_ok(args: &[&str]) -> String {
    let o = helm(args);
    assert!(o.status.success(), "helm {args:?}: {}", show(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The Kubernetes version `helm lint` and `helm template` render for: the test bed's. (A Helm built
/// with `go install` assumes 1.20 otherwise.)
const KUBE_VERSION: &str = "1.36.3";

fn chart() -> String {
    bed().root.join("charts/ankka-flow").display().to_string()
}

/// `helm template` of the chart in namespace `ns` with `--set` values `sets`, as YAML documents.
fn render(ns: &str, sets: &[&str]) -> Vec<serde_json::Value> {
    let chart = chart();
    let mut args = vec!["template", "ankka-flow", chart.as_str(), "--namespace", ns, "--kube-version", KUBE_VERSION];
    for s in sets {
        args.extend(["--set", s]);
    }
    docs(&helm_ok(&args))
}

fn docs(yaml: &str) -> Vec<serde_json::Value> {
    let all: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    all.into_iter().filter(|d| !d.is_null()).collect()
}

fn deploy_docs() -> Vec<serde_json::Value> {
    docs(&std::fs::read_to_string(bed().root.join("deploy/operator.yaml")).expect("deploy/operator.yaml"))
}

fn of_kind<'a>(docs: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// Every (apiGroup, resource, verb) the rules of `objects` grant, by namespace ("" for a
/// ClusterRole).
fn grants(objects: &[&serde_json::Value]) -> BTreeMap<String, BTreeSet<(String, String, String)>> {
    let mut out: BTreeMap<String, BTreeSet<(String, String, String)>> = BTreeMap::new();
    for o in objects {
        let ns = o["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        for rule in o["rules"].as_array().into_iter().flatten() {
            let list = |k: &str| rule[k].as_array().cloned().unwrap_or_default();
            for g in list("apiGroups") {
                for r in list("resources") {
                    for v in list("verbs") {
                        let s = |x: &serde_json::Value| x.as_str().unwrap_or_default().to_string();
                        out.entry(ns.clone()).or_default().insert((s(&g), s(&r), s(&v)));
                    }
                }
            }
        }
    }
    out
}

/// The container of the only Deployment in `docs`.
fn container(docs: &[serde_json::Value]) -> serde_json::Value {
    let d = of_kind(docs, "Deployment");
    assert_eq!(d.len(), 1);
    d[0]["spec"]["template"]["spec"]["containers"][0].clone()
}

fn env_names(c: &serde_json::Value) -> BTreeSet<String> {
    c["env"].as_array().into_iter().flatten().filter_map(|e| e["name"].as_str().map(str::to_string)).collect()
}

#[test]
fn the_chart_lints_and_renders_every_option() {
    let chart = chart();
    helm_ok(&["lint", "--strict", "--kube-version", KUBE_VERSION, &chart]);
    let all = render(
        "ops",
        &[
            "watchNamespace=shop",
            "kafkaClustersNamespace=kafka-secrets",
            "ledger.persistence.enabled=true",
            "metrics.serviceMonitor.enabled=true",
            "metrics.podMonitor.enabled=true",
            "metrics.prometheusRule.enabled=true",
            "metrics.prometheusRule.for.AnkkaFlowNoLeader=10m",
            "image.repository=registry.example.com/ankka-flow-operator",
        ],
    );
    let kinds: BTreeSet<&str> = all.iter().filter_map(|d| d["kind"].as_str()).collect();
    for k in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "RoleBinding",
        "Role",
        "Deployment",
        "PersistentVolumeClaim",
        "Service",
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
    ] {
        assert!(kinds.contains(k), "no {k} in {kinds:?}");
    }
    // One watched namespace: the ClusterRole is bound there only, never cluster-wide.
    assert!(of_kind(&all, "ClusterRoleBinding").is_empty());
    let bindings: BTreeSet<&str> =
        of_kind(&all, "RoleBinding").iter().filter_map(|b| b["metadata"]["namespace"].as_str()).collect();
    assert_eq!(bindings, BTreeSet::from(["shop", "kafka-secrets", "ops"]));
    // Secrets only where the cluster Secrets are, the Lease only in the operator's namespace.
    let g = grants(&of_kind(&all, "Role"));
    assert_eq!(
        g["kafka-secrets"],
        BTreeSet::from([("".into(), "secrets".into(), "list".into()), ("".into(), "secrets".into(), "watch".into())])
    );
    assert!(g["ops"].iter().all(|(group, _, _)| group == "coordination.k8s.io"), "{g:?}");
    let c = container(&all);
    assert_eq!(c["image"], "registry.example.com/ankka-flow-operator:0.1.0");
    let env: BTreeMap<&str, &str> = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
        .collect();
    assert_eq!(env.get("FLOW_WATCH_NAMESPACE"), Some(&"shop"));
    assert_eq!(env.get("FLOW_KAFKA_CLUSTERS_NAMESPACE"), Some(&"kafka-secrets"));
    let rules = &of_kind(&all, "PrometheusRule")[0]["spec"]["groups"][0]["rules"];
    let alerts: BTreeMap<&str, &str> = rules
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["alert"].as_str()?, r["for"].as_str()?)))
        .collect();
    assert_eq!(alerts.get("AnkkaFlowNoLeader"), Some(&"10m"));
    assert_eq!(alerts.get("AnkkaFlowLagNotFalling"), Some(&"30m"));
    // A `latest` image is refused.
    let o = helm(&["template", "ankka-flow", &chart, "--kube-version", KUBE_VERSION, "--set", "image.tag=latest"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("not latest"), "{}", show(&o));
    // Kubernetes accepts what the chart renders by default (server-side dry run).
    let yaml =
        helm_ok(&["template", "ankka-flow", &chart, "--namespace", "ankka-flow", "--kube-version", KUBE_VERSION]);
    kubectl_stdin(&["apply", "--server-side", "--dry-run=server", "-f", "-"], &yaml);
}

/// The chart and deploy/ must grant the same rights, set the same settings and install the same
/// CRD: whoever changes one must change the other.
#[test]
fn the_chart_and_deploy_grant_the_same_rights_and_settings() {
    let chart = render("ankka-flow", &[]);
    let deploy = deploy_docs();
    for kind in ["ClusterRole", "Role"] {
        assert_eq!(
            grants(&of_kind(&chart, kind)),
            grants(&of_kind(&deploy, kind)),
            "the {kind} rules of charts/ankka-flow and deploy/operator.yaml differ"
        );
    }
    assert_eq!(of_kind(&chart, "ClusterRoleBinding").len(), of_kind(&deploy, "ClusterRoleBinding").len());
    let (c, d) = (container(&chart), container(&deploy));
    let missing: Vec<String> = env_names(&d).difference(&env_names(&c)).cloned().collect();
    assert!(missing.is_empty(), "deploy/operator.yaml sets {missing:?}, the chart does not");
    for key in ["securityContext", "livenessProbe", "readinessProbe", "ports"] {
        assert_eq!(c[key], d[key], "{key} differs between the chart and deploy/");
    }
    assert_eq!(c["resources"]["requests"], d["resources"]["requests"]);
    let pod = |docs: &[serde_json::Value]| of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"].clone();
    assert_eq!(pod(&chart)["securityContext"], pod(&deploy)["securityContext"]);
    // Both name the same image of this version.
    assert_eq!(c["image"], d["image"]);
    let crd = std::fs::read_to_string(bed().root.join("charts/ankka-flow/files/crd.yaml")).expect("chart CRD");
    let deploy_crd = std::fs::read_to_string(bed().root.join("deploy/crd.yaml")).expect("deploy CRD");
    assert!(crd == deploy_crd, "charts/ankka-flow/files/crd.yaml differs from deploy/crd.yaml: copy it over");
}

#[test]
fn helm_install_then_the_seed_scenario_as_the_charts_service_account() {
    let _serial = serial();
    let (release_ns, ns, name) = ("flow-helm", "shop-helm", "ankka-flow-helm");
    install_crd();
    install_cluster_secret();
    let chart = chart();
    let _ = helm(&["uninstall", "ankka-flow", "--namespace", release_ns, "--wait"]);
    fresh_namespace(release_ns);
    // The CRD is the test bed's (installed before, as every test does), so the chart leaves it out;
    // its CRD is checked by the dry run of the test above. The cluster Secrets stay where the test
    // bed keeps them.
    helm_ok(&[
        "install",
        "ankka-flow",
        &chart,
        "--namespace",
        release_ns,
        "--set",
        &format!("fullnameOverride={name}"),
        "--set",
        "crds.install=false",
        "--set",
        "kafkaClustersNamespace=ankka-flow",
        "--wait",
        "--timeout",
        "2m",
    ]);
    let status = helm_ok(&["status", "ankka-flow", "--namespace", release_ns, "-o", "json"]);
    let status: serde_json::Value = serde_json::from_str(&status).expect("JSON");
    assert_eq!(status["info"]["status"], "deployed", "{status}");

    // The chart's settings, as its Deployment holds them, for the operator run here.
    let deployment = kubectl_ok(&["-n", release_ns, "get", "deployment", name, "-o", "json"]);
    let deployment: serde_json::Value = serde_json::from_str(&deployment).expect("JSON");
    let mut env: Vec<(String, String)> = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?.to_string(), e["value"].as_str()?.to_string())))
        // The address and the ledger are this machine's; log lines for people.
        .filter(|(k, _)| {
            !["FLOW_METRICS_ADDRESS", "FLOW_LEDGER_DIR", "FLOW_LOG_FORMAT", "RUST_LOG"].contains(&k.as_str())
        })
        .collect();
    env.push(("FLOW_OPERATOR_NAMESPACE".into(), release_ns.into()));
    let token = kubectl_ok(&["-n", release_ns, "create", "token", name, "--duration", "10m"]);
    let kubeconfig = kubeconfig_with_token(name, token.trim());
    env.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();

    // docs/rebuild-from-the-start.md: the pipeline runs, is stopped through the resource, and is reset.
    let op = cart_scenario(ns, 1, &env);
    kubectl_apply(&cart_yaml(ns, 0));
    wait_until("the pipeline's pods to go", Duration::from_secs(60), || {
        pipeline_pods(ns, "cart").is_empty().then_some(())
    });
    let o = flow(&["reset", "cart", "-n", ns]);
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let id =
        out.strip_prefix("reset requested for 'cart': ").and_then(|s| s.strip_suffix('\n')).expect("the request line");
    let notes = wait_until("the ResetOffsets event", Duration::from_secs(60), || {
        let n = event_notes(ns, "ResetOffsets");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(notes, ["cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    wait_until("the done annotation", Duration::from_secs(30), || {
        (annotation(ns, "cart", cart::DONE).as_deref() == Some(id)).then_some(())
    });
    let starts: BTreeMap<i32, Option<i64>> =
        kafka::watermarks(cart::TOPIC).into_iter().map(|(p, (low, _))| (p, Some(low))).collect();
    assert_eq!(kafka::committed(cart::GROUP, cart::TOPIC, 3), starts);
    let log = op.log_text();
    assert!(log.contains("holding the lease"), "{log}");
    assert!(!log.to_lowercase().contains("forbidden"), "the chart's rights refused the operator something:\n{log}");
    op.stop();

    // Upgrade with a changed setting, then uninstall: the operator's objects go, the CRD and the
    // pipelines stay.
    helm_ok(&[
        "upgrade",
        "ankka-flow",
        &chart,
        "--namespace",
        release_ns,
        "--reuse-values",
        "--set",
        "logLevel=debug",
        "--wait",
    ]);
    let level = kubectl_ok(&[
        "-n",
        release_ns,
        "get",
        "deployment",
        name,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].env[?(@.name==\"RUST_LOG\")].value}",
    ]);
    assert_eq!(level, "debug");
    helm_ok(&["uninstall", "ankka-flow", "--namespace", release_ns, "--wait"]);
    assert!(!kubectl(&["get", "clusterrole", name]).status.success(), "the ClusterRole goes with the release");
    kubectl_ok(&["get", "crd", "ankkaflows.flow.ankka.thinkmorestupidless.com"]);
    kubectl_ok(&["-n", ns, "get", "aflow", "cart"]);
}
