//! The Helm chart `charts/ankka-flow`: `helm lint`, `helm template` with every option, the same
//! RBAC, settings and CRD as deploy/ (so that neither path can drift from the other), and a real
//! `helm install` on the test bed (watching one namespace, with the chart's own CRD), after which
//! the operator, run with the chart's settings as the chart's ServiceAccount, whose rights hold in
//! the watched namespace only, carries out the scenario of docs/rebuild-from-the-start.md.
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
    let read = |f: &str| std::fs::read_to_string(bed().root.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    docs(&format!("{}\n---\n{}", read("deploy/operator.yaml"), read("deploy/governance.yaml")))
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
    // Watched namespaces that are also the release's and the cluster Secrets' namespaces, where
    // the chart puts Roles and RoleBindings of its own.
    let all = render(
        "ops",
        &[
            "watchNamespaces={shop,ops,kafka-secrets,shop}",
            "kafkaClustersNamespace=kafka-secrets",
            "ledger.persistence.enabled=true",
            "metrics.serviceMonitor.enabled=true",
            "metrics.podMonitor.enabled=true",
            "metrics.prometheusRule.enabled=true",
            "metrics.prometheusRule.for.AnkkaFlowNoLeader=10m",
            "metrics.lagPerPartition=true",
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
    // No two objects of one kind share a name in one namespace (the API server would take the
    // second for the first).
    let mut seen = BTreeSet::new();
    for d in &all {
        let key = (d["kind"].to_string(), d["metadata"]["namespace"].to_string(), d["metadata"]["name"].to_string());
        assert!(seen.insert(key.clone()), "rendered twice: {key:?}");
    }
    // Watched namespaces: the ClusterRole is bound in each of them only, never cluster-wide, each
    // once; the Roles' own bindings stay where the Secrets and the Lease are.
    assert!(of_kind(&all, "ClusterRoleBinding").is_empty());
    let bindings: BTreeSet<(&str, &str, &str)> = of_kind(&all, "RoleBinding")
        .iter()
        .filter_map(|b| {
            Some((
                b["metadata"]["namespace"].as_str()?,
                b["metadata"]["name"].as_str()?,
                b["roleRef"]["kind"].as_str()?,
            ))
        })
        .collect();
    assert_eq!(
        bindings,
        BTreeSet::from([
            ("kafka-secrets", "ankka-flow-operator", "Role"),
            ("kafka-secrets", "ankka-flow-operator-watched", "ClusterRole"),
            ("ops", "ankka-flow-operator", "Role"),
            ("ops", "ankka-flow-operator-watched", "ClusterRole"),
            ("shop", "ankka-flow-operator-watched", "ClusterRole"),
        ])
    );
    // Secrets only where the cluster Secrets are; the Lease, and the record of the topics the
    // operator created (ConfigMaps), only in the operator's namespace.
    let g = grants(&of_kind(&all, "Role"));
    assert_eq!(
        g["kafka-secrets"],
        BTreeSet::from([("".into(), "secrets".into(), "list".into()), ("".into(), "secrets".into(), "watch".into())])
    );
    assert!(
        g["ops"].iter().all(
            |(group, resource, _)| group == "coordination.k8s.io" || (group.is_empty() && resource == "configmaps")
        ),
        "{g:?}"
    );
    let c = container(&all);
    assert_eq!(c["image"], "registry.example.com/ankka-flow-operator:0.1.0");
    let env: BTreeMap<&str, &str> = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
        .collect();
    assert_eq!(env.get("FLOW_WATCH_NAMESPACE"), Some(&"shop,ops,kafka-secrets"));
    assert_eq!(env.get("FLOW_KAFKA_CLUSTERS_NAMESPACE"), Some(&"kafka-secrets"));
    assert_eq!(env.get("FLOW_LAG_PER_PARTITION"), Some(&"true"));
    let rules = &of_kind(&all, "PrometheusRule")[0]["spec"]["groups"][0]["rules"];
    let alerts: BTreeMap<&str, &str> = rules
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["alert"].as_str()?, r["for"].as_str()?)))
        .collect();
    assert_eq!(alerts.get("AnkkaFlowNoLeader"), Some(&"10m"));
    assert_eq!(alerts.get("AnkkaFlowLagNotFalling"), Some(&"15m"));
    assert_eq!(alerts.get("AnkkaFlowConsumerGroupBehind"), Some(&"10m"));
    // A `latest` or untagged image is refused, the operator's and the sidecar's, and so is the
    // old single `watchNamespace` (which would otherwise be ignored, leaving the rights cluster-wide).
    for (set, says) in [
        ("image.tag=latest", "not latest"),
        ("sidecarImage=ghcr.io/thinkmorestupidless/ankka-flow-sidecar:latest", "not latest"),
        ("sidecarImage=registry.example.com:5000/ankka-flow-sidecar", "name a version tag"),
        ("watchNamespace=shop", "watchNamespaces, a list"),
        // Pod settings that would not pass Pod Security `restricted`.
        ("podSecurityContext.runAsUser=0", "0 is root"),
        ("podSecurityContext.runAsNonRoot=false", "restricted needs true"),
        ("podSecurityContext.seccompProfile.type=Unconfined", "forbidden by Pod Security restricted"),
    ] {
        let o = helm(&["template", "ankka-flow", &chart, "--kube-version", KUBE_VERSION, "--set", set]);
        assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains(says), "{set}: {}", show(&o));
    }
    // The operator's pod passes Pod Security `restricted` and names no UID, GID or fsGroup unless
    // asked (OpenShift's restricted-v2 assigns its own); asked, the ids are laid over the rest.
    let pod_security = |docs: &[serde_json::Value]| {
        of_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["securityContext"].clone()
    };
    assert_eq!(
        pod_security(&render("ankka-flow", &[])),
        serde_json::json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        pod_security(&render(
            "ankka-flow",
            &["podSecurityContext.fsGroup=65532", "podSecurityContext.runAsUser=65532"]
        )),
        serde_json::json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 65532, "runAsUser": 65532})
    );
    // People's rights join Kubernetes' built-in roles; they can be left out.
    let aggregated = |docs: &[serde_json::Value]| -> BTreeMap<String, BTreeSet<String>> {
        of_kind(docs, "ClusterRole")
            .iter()
            .filter_map(|r| {
                let labels = r["metadata"]["labels"].as_object()?;
                let to: BTreeSet<String> = labels
                    .iter()
                    .filter(|(_, v)| *v == "true")
                    .filter_map(|(k, _)| k.strip_prefix("rbac.authorization.k8s.io/aggregate-to-").map(str::to_string))
                    .collect();
                (!to.is_empty()).then(|| (r["metadata"]["name"].as_str().unwrap_or_default().to_string(), to))
            })
            .collect()
    };
    let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<BTreeSet<String>>();
    assert_eq!(
        aggregated(&render("ankka-flow", &[])),
        BTreeMap::from([
            ("ankka-flow-view".to_string(), set(&["view", "edit", "admin", "cluster-reader"])),
            ("ankka-flow-edit".to_string(), set(&["edit", "admin"])),
            ("ankka-flow-reset".to_string(), set(&["admin"])),
        ])
    );
    assert_eq!(
        aggregated(&render("ankka-flow", &[])),
        aggregated(&deploy_docs()),
        "the chart and deploy/ aggregate alike"
    );
    // Left out, the built-in roles get nothing but the governance's reset role for admin; without
    // governance, nothing.
    assert_eq!(
        aggregated(&render("ankka-flow", &["rbac.aggregateToDefaultRoles=false"])),
        BTreeMap::from([("ankka-flow-reset".to_string(), set(&["admin"]))])
    );
    assert!(
        aggregated(&render("ankka-flow", &["rbac.aggregateToDefaultRoles=false", "governance.enabled=false"]))
            .is_empty()
    );
    // Editors may request resets (the verb the governance policy checks) unless the chart says not.
    let edit_verbs = |docs: &[serde_json::Value]| -> BTreeSet<String> {
        of_kind(docs, "ClusterRole")
            .iter()
            .filter(|r| r["metadata"]["name"] == "ankka-flow-edit")
            .flat_map(|r| r["rules"].as_array().cloned().unwrap_or_default())
            .flat_map(|rule| rule["verbs"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    assert!(edit_verbs(&render("ankka-flow", &[])).contains("reset"));
    assert_eq!(edit_verbs(&render("ankka-flow", &[])), edit_verbs(&deploy_docs()));
    let without = edit_verbs(&render("ankka-flow", &["governance.resetForEditors=false"]));
    assert!(without.contains("patch") && !without.contains("reset"), "{without:?}");
    // By default the sidecar is a released version, never `latest`, as in deploy/; a digest is fine.
    let sidecar = |docs: &[serde_json::Value]| {
        container(docs)["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == "FLOW_SIDECAR_IMAGE")
            .and_then(|e| e["value"].as_str().map(str::to_string))
    };
    let default = sidecar(&render("ankka-flow", &[])).expect("a sidecar image by default");
    let tag = default.rsplit_once(':').map(|(_, t)| t).expect("a tag");
    assert!(tag.split('.').count() == 3 && tag.split('.').all(|n| n.parse::<u32>().is_ok()), "{default}");
    assert_eq!(Some(default), sidecar(&deploy_docs()), "the chart and deploy/ name the same sidecar");
    let pinned = "ghcr.io/thinkmorestupidless/ankka-flow-sidecar@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert_eq!(sidecar(&render("ankka-flow", &[&format!("sidecarImage={pinned}")])).as_deref(), Some(pinned));
    // Kubernetes accepts what the chart renders by default (server-side dry run), checked while no
    // other test changes the cluster (the install test below hands the CRD to a release and back).
    let _serial = serial();
    ensure_namespace("ankka-flow");
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
    for f in ["governance.yaml", "governance-stamps.yaml"] {
        let chart = std::fs::read_to_string(bed().root.join("charts/ankka-flow/files").join(f)).expect("chart copy");
        let deploy = std::fs::read_to_string(bed().root.join("deploy").join(f)).expect("deploy file");
        assert!(chart == deploy, "charts/ankka-flow/files/{f} differs from deploy/{f}: copy it over");
    }
    let policies = |docs: &[serde_json::Value]| {
        of_kind(docs, "ValidatingAdmissionPolicy").iter().map(|p| p["spec"].clone()).collect::<Vec<_>>()
    };
    assert_eq!(policies(&chart), policies(&deploy), "the chart installs the governance policy deploy/ does");
}

/// The CRD, as the API server holds it.
fn crd() -> serde_json::Value {
    serde_json::from_str(&kubectl_ok(&["get", "crd", CRD, "-o", "json"])).expect("JSON")
}

const CRD: &str = "ankkaflows.flow.ankka.thinkmorestupidless.com";

/// The marks by which Helm takes an existing object into a release (its ownership metadata).
const HELM_OWNED: [&str; 3] =
    ["meta.helm.sh/release-name", "meta.helm.sh/release-namespace", "helm.sh/resource-policy"];

/// Gives the test bed its CRD back when dropped, also after a failure: the release uninstalled (the
/// CRD stays, as the chart keeps it), Helm's ownership marks removed, and the repository's CRD applied.
struct CrdBack(&'static str);

impl Drop for CrdBack {
    fn drop(&mut self) {
        let _ = helm(&["uninstall", "ankka-flow", "--namespace", self.0, "--wait"]);
        let marks: Vec<String> = HELM_OWNED.iter().map(|k| format!("{k}-")).collect();
        let _ =
            kubectl(&[&["annotate", "crd", CRD][..], &marks.iter().map(String::as_str).collect::<Vec<_>>()].concat());
        let _ = kubectl(&["label", "crd", CRD, "app.kubernetes.io/managed-by-"]);
        install_crd();
    }
}

#[test]
fn helm_install_watching_one_namespace_then_the_seed_scenario_as_the_charts_service_account() {
    // Serial: a Helm release that takes the CRD over, and the cart example.
    let _serial = serial();
    let (release_ns, ns, name) = ("flow-helm", "shop-helm", "ankka-flow-helm");
    install_crd();
    install_cluster_secret();
    let chart = chart();
    let _ = helm(&["uninstall", "ankka-flow", "--namespace", release_ns, "--wait"]);
    fresh_namespace(release_ns);
    // The release's namespace enforces Pod Security `restricted`: `--wait` below sees the
    // operator's pod only if admission lets it in.
    kubectl_ok(&["label", "namespace", release_ns, "pod-security.kubernetes.io/enforce=restricted"]);
    // The watched namespace exists before the release, which binds the operator's rights there.
    fresh_namespace(ns);
    let _crd_back = CrdBack(release_ns);
    // The chart installs its own CRD (crds.install=true, the default). The test bed's CRD exists
    // already (every test installs it, and deleting it would delete every AnkkaFlow of the test
    // bed), so it is handed to the release the way Helm takes over an existing object: with the
    // release's ownership marks. Helm then applies the chart's CRD over it.
    kubectl_ok(&["label", "--overwrite", "crd", CRD, "app.kubernetes.io/managed-by=Helm"]);
    kubectl_ok(&[
        "annotate",
        "--overwrite",
        "crd",
        CRD,
        "meta.helm.sh/release-name=ankka-flow",
        &format!("meta.helm.sh/release-namespace={release_ns}"),
    ]);
    // The cluster Secrets stay where the test bed keeps them.
    helm_ok(&[
        "install",
        "ankka-flow",
        &chart,
        "--namespace",
        release_ns,
        "--set",
        &format!("fullnameOverride={name}"),
        "--set",
        &format!("watchNamespaces={{{ns}}}"),
        "--set",
        "kafkaClustersNamespace=ankka-flow",
        "--wait",
        "--timeout",
        "2m",
    ]);
    let status = helm_ok(&["status", "ankka-flow", "--namespace", release_ns, "-o", "json"]);
    let status: serde_json::Value = serde_json::from_str(&status).expect("JSON");
    assert_eq!(status["info"]["status"], "deployed", "{status}");
    let running = kubectl_ok(&[
        "-n",
        release_ns,
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/name=ankka-flow-operator",
        "--field-selector=status.phase=Running",
        "-o",
        "name",
    ]);
    assert_eq!(running.lines().count(), 1, "the operator's pod, admitted under restricted: {running}");
    // The CRD is the chart's now: its keep policy is on it, and it is established.
    let live = crd();
    assert_eq!(live["metadata"]["annotations"]["helm.sh/resource-policy"], "keep", "{live}");
    assert_eq!(live["metadata"]["annotations"]["meta.helm.sh/release-namespace"], release_ns);
    crd_established();

    // The chart's ServiceAccount may reconcile AnkkaFlows of the watched namespace, and nowhere else.
    let user = format!("system:serviceaccount:{release_ns}:{name}");
    let can = |args: &[&str]| {
        let o = kubectl(&[&["auth", "can-i"][..], args, &["--as", user.as_str()]].concat());
        String::from_utf8_lossy(&o.stdout).trim() == "yes"
    };
    assert!(can(&["list", "ankkaflows", "-n", ns]) && can(&["patch", "ankkaflows/status", "-n", ns]));
    assert!(can(&["create", "deployments", "-n", ns]) && can(&["create", "events.events.k8s.io", "-n", ns]));
    assert!(!can(&["list", "ankkaflows", "--all-namespaces"]), "{user} may list AnkkaFlows cluster-wide");
    assert!(!can(&["list", "ankkaflows", "-n", "default"]), "{user} may list AnkkaFlows outside {ns}");
    assert!(!can(&["create", "deployments", "-n", "default"]));
    assert!(can(&["list", "secrets", "-n", "ankka-flow"]) && !can(&["list", "secrets", "-n", ns]));

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

    // docs/rebuild-from-the-start.md: the pipeline runs, is stopped through the resource, and is
    // reset. (As in `cart_scenario`, but in the namespace the release watches.)
    kafka::recreate_topic(cart::TOPIC, 3);
    kafka::produce(cart::TOPIC, 3, 20);
    standin::read(cart::GROUP, cart::TOPIC, 60);
    let op = Operator::start(&fresh_dir(ns), &env);
    kubectl_apply(&cart_yaml(ns, 1));
    wait_until("the pipeline's pods", Duration::from_secs(60), || {
        (running_pipeline_pods(ns, "cart") == 1 && pipeline_pods(ns, "cart").len() == 1).then_some(())
    });
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
    assert!(
        !kubectl(&["-n", ns, "get", "rolebinding", &format!("{name}-watched")]).status.success(),
        "the binding in the watched namespace goes with the release"
    );
    kubectl_ok(&["get", "crd", CRD]);
    kubectl_ok(&["-n", ns, "get", "aflow", "cart"]);
    // The CRD becomes the test bed's again as it was before (`CrdBack`).
}
