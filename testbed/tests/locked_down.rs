//! A locked-down cluster, on the test bed's real API server (its Pod Security and ResourceQuota
//! admission, its ReplicaSet controller; kwok plays the node): streamlet pods admitted under Pod
//! Security `restricted` as rendered by default, and under a ResourceQuota that requires limits
//! with resources from deploy-time configuration; what a quota namespace shows when the pods
//! carry none; pod settings `flow verify` and `flow generate` refuse (the operator's refusal of a
//! resource written by hand is in hostile/pods.rs); the operator's own pod, from deploy/ and from
//! the chart, admitted under `restricted`. Then the rights of people through the
//! aggregated ClusterRoles of deploy/operator.yaml, with the governance policy of
//! deploy/governance.yaml installed as the chart installs it: a user bound only to the built-in
//! `edit` applies a pipeline and requests a reset (the verb `reset` the policy checks), one bound
//! to `view` reads the status and cannot request one.
//! People are played by impersonation (kubeconfigs with `as:`, which kubectl and the `flow` CLI
//! both honour), as the test bed's administrator may.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use flow_testbed::*;

/// A quota that makes every container name its requests and limits of CPU and memory (the API
/// server's quota admission refuses a pod that does not).
const QUOTA: &str = "apiVersion: v1
kind: ResourceQuota
metadata: {name: compute}
spec:
  hard: {requests.cpu: \"4\", requests.memory: 4Gi, limits.cpu: \"8\", limits.memory: 8Gi}
";

/// Resources for both containers of every streamlet, and 2 routers.
const RESOURCES_CONF: &str = "flow.pod.containers {
  sidecar.resources { requests { cpu = 50m, memory = 64Mi }, limits { cpu = 200m, memory = 128Mi } }
  process.resources { requests { cpu = 100m, memory = 128Mi }, limits { cpu = 500m, memory = 256Mi } }
}
flow.streamlets.router { replicas = 2 }
";

/// Every other pod setting, as a platform team would write it.
const SCHEDULING_CONF: &str = "flow.pod {
  labels { team = shop, example.com/tier = gold }
  annotations { \"example.com/owner\" = \"cart team\" }
  imagePullSecrets = [{ name = regcred }]
  nodeSelector { kubernetes.io/os = linux }
  tolerations = [{ key = dedicated, operator = Equal, value = flow, effect = NoSchedule }]
  affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution = [
    { weight = 50, podAffinityTerm { topologyKey = kubernetes.io/hostname, labelSelector.matchLabels { team = shop } } }
  ]
  priorityClassName = flow-e2e-streamlets
  securityContext { runAsUser = 10001, runAsGroup = 10001, fsGroup = 10001, seccompProfile.type = RuntimeDefault }
}
flow.streamlets.router.pod.containers.process.securityContext.runAsUser = 10002
";

/// Messages of the events with `reason` about any object of `ns` (a ReplicaSet's `FailedCreate`).
fn events(ns: &str, reason: &str) -> Vec<String> {
    kubectl_ok(&[
        "-n",
        ns,
        "get",
        "events",
        "--field-selector",
        &format!("reason={reason}"),
        "-o",
        "jsonpath={range .items[*]}{.involvedObject.name}: {.message}{\"\\n\"}{end}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

fn wait_running(ns: &str, name: &str, n: usize) {
    wait_until(&format!("{n} running pods of {name} in {ns}"), Duration::from_secs(90), || {
        (running_pipeline_pods(ns, name) == n && pipeline_pods(ns, name).len() == n).then_some(())
    });
}

fn pod_json(ns: &str, name: &str) -> serde_json::Value {
    let label = format!("flow.ankka.thinkmorestupidless.com/pipeline={name}");
    let pods = kubectl_ok(&["-n", ns, "get", "pods", "-l", &label, "-o", "json"]);
    let pods: serde_json::Value = serde_json::from_str(&pods).expect("JSON");
    pods["items"][0].clone()
}

#[test]
fn streamlet_pods_are_admitted_under_restricted_and_a_quota_that_requires_limits() {
    let _side_by_side = side_by_side();
    let cart = Cart::own("locked-down");
    let name = cart.name.as_str();
    install_crd();
    install_cluster_secret();
    let (restricted, quota, bare) = ("flow-restricted", "flow-quota", "flow-quota-bare");
    restricted_namespace(restricted);
    restricted_namespace(quota);
    fresh_namespace(bare);
    for ns in [quota, bare] {
        kubectl_stdin(&["-n", ns, "apply", "-f", "-"], QUOTA);
    }
    kubectl_apply(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: flow-e2e-streamlets}\nvalue: 1000\n",
    );
    kafka::recreate_topic(&cart.topic, 3);
    let watched = format!("{restricted},{quota},{bare}");
    let _op = Operator::start(
        &fresh_dir("locked-down"),
        &[("FLOW_WATCH_NAMESPACE", watched.as_str()), ("FLOW_LEASE_NAME", "ankka-flow-operator-locked-down")],
    );

    // Admission is real: a pod that does not fit `restricted` is refused in that namespace.
    let o = kubectl(&["-n", restricted, "run", "probe", "--image=registry.example.com/probe:1", "--restart=Never"]);
    assert!(!o.status.success(), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("violates PodSecurity \"restricted:latest\""), "{}", show(&o));

    // 1. The default rendering, no pod settings: every pod admitted under `restricted`.
    kubectl_apply(
        &cart
            .yaml_with(restricted, &[&conf_file("two-routers", "flow.streamlets.router { replicas = 2 }")])
            .expect("generate"),
    );
    wait_running(restricted, name, 2);
    kubectl_ok(&["-n", restricted, "wait", "--for=condition=Ready", &format!("aflow/{name}"), "--timeout=60s"]);
    let pod = pod_json(restricted, name);
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    for c in pod["spec"]["containers"].as_array().expect("containers") {
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false, "{c}");
        assert_eq!(c["securityContext"]["capabilities"]["drop"], serde_json::json!(["ALL"]), "{c}");
    }

    // 2. Every other setting, through deploy-time configuration, in the same namespace.
    let scheduling = conf_file("scheduling", SCHEDULING_CONF);
    kubectl_apply(&cart.yaml_with(restricted, &[&scheduling]).expect("generate"));
    wait_until("the router's pods with the settings", Duration::from_secs(90), || {
        let pod = pod_json(restricted, name);
        (pipeline_pods(restricted, name).len() == 1
            && running_pipeline_pods(restricted, name) == 1
            && pod["spec"]["priorityClassName"] == "flow-e2e-streamlets")
            .then_some(())
    });
    let pod = pod_json(restricted, name);
    assert_eq!(pod["metadata"]["labels"]["example.com/tier"], "gold");
    assert_eq!(pod["metadata"]["annotations"]["example.com/owner"], "cart team");
    assert_eq!(pod["spec"]["imagePullSecrets"], serde_json::json!([{"name": "regcred"}]));
    assert_eq!(pod["spec"]["nodeSelector"], serde_json::json!({"kubernetes.io/os": "linux"}));
    assert_eq!(pod["spec"]["priority"], 1000);
    assert_eq!(pod["spec"]["securityContext"]["runAsUser"], 10001);
    assert_eq!(pod["spec"]["securityContext"]["fsGroup"], 10001);
    assert_eq!(pod["spec"]["containers"][1]["securityContext"]["runAsUser"], 10002);
    assert_eq!(events(restricted, "FailedCreate"), Vec::<String>::new(), "every pod admitted under restricted");

    // 3. A namespace under `restricted` and a quota that requires limits: resources from
    //    deploy-time configuration; every pod admitted, and the quota counts them.
    let resources = conf_file("resources", RESOURCES_CONF);
    kubectl_apply(&cart.yaml_with(quota, &[&resources]).expect("generate"));
    wait_running(quota, name, 2);
    kubectl_ok(&["-n", quota, "wait", "--for=condition=Ready", &format!("aflow/{name}"), "--timeout=60s"]);
    assert_eq!(events(quota, "FailedCreate"), Vec::<String>::new(), "every pod admitted under the quota");
    let used = wait_until("the quota to count the pods", Duration::from_secs(30), || {
        let used = kubectl_ok(&["-n", quota, "get", "resourcequota", "compute", "-o", "jsonpath={.status.used}"]);
        let used: serde_json::Value = serde_json::from_str(&used).ok()?;
        (used["limits.cpu"] == "1400m").then_some(used)
    });
    assert_eq!(used["limits.memory"], "768Mi", "{used}");
    assert_eq!(used["requests.cpu"], "300m", "{used}");
    eprintln!("locked-down: {quota}: 2 router pods admitted under restricted and the quota, which counts {used}");

    // 4. The same quota without resources in the pods: the Deployment is applied, its ReplicaSet
    //    cannot create a pod, and the pipeline says so.
    kubectl_apply(&cart.yaml_with(bare, &[]).expect("generate"));
    let detail = wait_until("the pipeline to say its pods cannot be created", Duration::from_secs(90), || {
        let d = kubectl_ok(&["-n", bare, "get", "aflow", name, "-o", "jsonpath={.status.phase} {.status.detail}"]);
        d.contains("its pods cannot be created").then_some(d)
    });
    assert!(detail.starts_with("Degraded router: its pods cannot be created: "), "{detail}");
    assert!(detail.contains("must specify limits.cpu"), "{detail}");
    let failed = events(bare, "FailedCreate");
    assert!(
        !failed.is_empty() && failed.iter().all(|e| e.contains("exceeded quota") || e.contains("must specify")),
        "{failed:?}"
    );
    let ready = kubectl_ok(&[
        "-n",
        bare,
        "get",
        "aflow",
        name,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].message}",
    ]);
    assert!(ready.contains("must specify limits.cpu"), "the Ready condition carries it too: {ready}");
    eprintln!("locked-down: {bare}: without resources: {detail}");
    // With the resources, the next rollout is admitted.
    kubectl_apply(&cart.yaml_with(bare, &[&resources]).expect("generate"));
    wait_running(bare, name, 2);
    kubectl_ok(&["-n", bare, "wait", "--for=condition=Ready", &format!("aflow/{name}"), "--timeout=90s"]);
}

#[test]
fn pod_settings_outside_restricted_are_refused_by_verify_and_generate() {
    let ns = "flow-refused-pods";

    // flow verify and flow generate refuse, naming the setting and what to write instead.
    let root = conf_file(
        "root",
        "flow.pod.securityContext.runAsUser = 0\nflow.streamlets.router.pod.containers.sidecar.securityContext.privileged = true\n",
    );
    let o = Command::new(bin("flow"))
        .args(["verify", "blueprint.conf", "--descriptors", "flow", "--conf", "prod.conf", "--conf"])
        .arg(&root)
        .current_dir(bed().root.join("examples/cart"))
        .output()
        .expect("flow");
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    for line in [
        "flow.pod.securityContext.runAsUser: 0 is root, which Pod Security 'restricted' forbids: write a UID other than 0, or leave runAsUser out to run as the image's own user",
        "flow.streamlets.router.pod.containers.sidecar.securityContext.privileged: Pod Security 'restricted' forbids privileged containers: leave it out",
    ] {
        assert!(err.lines().any(|l| l == line), "{line} not in {err}");
    }
    let o = cart_yaml_with(ns, &[&root]).expect_err("generate refuses");
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty(), "nothing is written");
}

/// A kubeconfig that acts as `user` (the test bed's administrator impersonating it).
fn kubeconfig_as(user: &str) -> PathBuf {
    let admin = std::fs::read_to_string(&bed().kubeconfig).expect("the admin kubeconfig");
    let mut text = String::new();
    for line in admin.lines() {
        text.push_str(line);
        text.push('\n');
        if let Some(rest) = line.strip_suffix(line.trim_start())
            && line.trim_start().starts_with("token: ")
        {
            text.push_str(&format!("{rest}as: {user}\n"));
        }
    }
    assert!(text.contains(&format!("as: {user}")), "the admin kubeconfig has a token line");
    let dir = bed().root.join("target/e2e-ledgers");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(format!("as-{user}-{}.kubeconfig", std::process::id()));
    std::fs::write(&path, text).expect("kubeconfig");
    path
}

/// deploy/governance.yaml (the admission policy that makes requesting a reset the verb `reset`),
/// removed again when dropped: it is cluster-wide.
struct Governance;

impl Governance {
    fn install() -> Governance {
        kubectl_ok(&["apply", "-f", &bed().root.join("deploy/governance.yaml").to_string_lossy()]);
        Governance
    }
}

impl Drop for Governance {
    fn drop(&mut self) {
        let file = bed().root.join("deploy/governance.yaml");
        let _ = kubectl(&["delete", "--ignore-not-found", "-f", &file.to_string_lossy()]);
    }
}

fn run_as(kubeconfig: &Path, program: &str, args: &[&str]) -> Output {
    let program = if program == "flow" { bin("flow") } else { PathBuf::from(program) };
    Command::new(program).args(args).env("KUBECONFIG", kubeconfig).output().expect("runs")
}

fn apply_as(kubeconfig: &Path, yaml: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(["apply", "-f", "-"])
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child.stdin.take().expect("stdin").write_all(yaml.as_bytes()).expect("write");
    child.wait_with_output().expect("kubectl finishes")
}

#[test]
fn edit_may_apply_a_pipeline_and_reset_it_view_may_read_it_and_not_reset() {
    // Serial: it installs deploy/governance.yaml, whose admission policy guards every namespace's resets.
    let _serial = serial();
    let ns = "shop-people";
    install_operator_rights();
    install_cluster_secret();
    fresh_namespace(ns);
    let _governance = Governance::install();
    // Bound to the built-in roles only, in this namespace only.
    kubectl_ok(&["-n", ns, "create", "rolebinding", "dev-edit", "--clusterrole=edit", "--user=dev"]);
    kubectl_ok(&["-n", ns, "create", "rolebinding", "viewer-view", "--clusterrole=view", "--user=viewer"]);
    // The controller manager aggregates the AnkkaFlow rules into the built-in roles.
    wait_until("the built-in roles to hold the AnkkaFlow rights", Duration::from_secs(30), || {
        let can = |user: &str, verb: &str| {
            String::from_utf8_lossy(&kubectl(&["auth", "can-i", verb, "ankkaflows", "-n", ns, "--as", user]).stdout)
                .trim()
                == "yes"
        };
        (can("dev", "patch") && can("dev", "reset") && can("viewer", "get")).then_some(())
    });
    let dev = kubeconfig_as("dev");
    let viewer = kubeconfig_as("viewer");
    let can = |user: &str, verb: &str, resource: &str, sub: Option<&str>, namespace: &str| {
        let mut args = vec!["auth", "can-i", verb, resource, "-n", namespace, "--as", user];
        args.extend(sub.map(|s| ["--subresource", s]).into_iter().flatten());
        String::from_utf8_lossy(&kubectl(&args).stdout).trim() == "yes"
    };
    for (user, verb, sub, allowed) in [
        ("dev", "create", None, true),
        ("dev", "patch", None, true),
        ("dev", "delete", None, true),
        ("dev", "reset", None, true),
        ("dev", "approve", None, false),
        ("viewer", "reset", None, false),
        ("dev", "get", Some("status"), true),
        ("viewer", "list", None, true),
        ("viewer", "watch", None, true),
        ("viewer", "get", Some("status"), true),
        ("viewer", "patch", None, false),
        ("viewer", "create", None, false),
        ("viewer", "patch", Some("status"), false),
        ("dev", "patch", Some("status"), false),
    ] {
        assert_eq!(can(user, verb, "ankkaflows", sub, ns), allowed, "{user} {verb} ankkaflows {sub:?}");
    }
    // Neither gains anything elsewhere, the Kafka cluster Secrets included.
    for user in ["dev", "viewer"] {
        assert!(!can(user, "get", "secrets", None, "ankka-flow"), "{user} may read the cluster Secrets");
        assert!(!can(user, "get", "ankkaflows", None, "default"), "{user} may read AnkkaFlows outside {ns}");
    }

    kafka::recreate_topic(cart::TOPIC, 3);
    kafka::produce(cart::TOPIC, 3, 20);
    standin::read(cart::GROUP, cart::TOPIC, 60);
    let operator_kubeconfig = shipped_rights_kubeconfig();
    let op = Operator::start(
        &fresh_dir(ns),
        &[("FLOW_WATCH_NAMESPACE", ns), ("KUBECONFIG", operator_kubeconfig.to_str().expect("utf-8"))],
    );

    // dev applies the pipeline, stops it, and requests the reset, as the seed page says.
    let o = apply_as(&dev, &cart_yaml(ns, 1));
    assert!(o.status.success(), "{}", show(&o));
    wait_running(ns, "cart", 1);
    let o = apply_as(&dev, &cart_yaml(ns, 0));
    assert!(o.status.success(), "{}", show(&o));
    wait_until("the pipeline's pods to go", Duration::from_secs(60), || {
        pipeline_pods(ns, "cart").is_empty().then_some(())
    });
    let o = run_as(&dev, "flow", &["reset", "cart", "-n", ns]);
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let id =
        out.strip_prefix("reset requested for 'cart': ").and_then(|s| s.strip_suffix('\n')).expect("the request line");
    wait_done(ns, "cart", id, Duration::from_secs(60));
    assert_eq!(
        event_notes(ns, "ResetOffsets"),
        ["cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]
    );

    // viewer reads the pipeline and the reset's status, with kubectl and with the CLI.
    let o = run_as(&viewer, "kubectl", &["-n", ns, "get", "aflow", "cart", "-o", "jsonpath={.status.reset.phase}"]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "Done");
    let o = run_as(&viewer, "flow", &["reset", "status", id, "-n", ns]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Done"), "{}", show(&o));
    // ... and cannot request a reset: the API server's 403, said plainly, exit 1, nothing written.
    let before = annotation(ns, "cart", cart::REQUEST);
    let o = run_as(&viewer, "flow", &["reset", "cart", "-n", ns]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(err.starts_with("reset failed: "), "{err}");
    assert!(err.contains("User \"viewer\" cannot patch resource \"ankkaflows\""), "{err}");
    assert!(err.contains("edit or admin in the namespace may also request a reset"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(o.stdout.is_empty());
    assert_eq!(annotation(ns, "cart", cart::REQUEST), before, "nothing was requested");
    // Nor may the viewer change the pipeline by hand.
    let o = apply_as(&viewer, &cart_yaml(ns, 1));
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("forbidden"), "{}", show(&o));
    assert!(!op.log_text().to_lowercase().contains("forbidden"), "{}", op.log_text());
}

/// The pod of the only Deployment in `yaml` (several documents), as a Pod named `name`.
fn operator_pod(yaml: &str, name: &str) -> serde_json::Value {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml).expect("YAML");
    let d = docs.iter().find(|d| d["kind"] == "Deployment").expect("a Deployment");
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": d["spec"]["template"]["metadata"]["labels"]},
        "spec": d["spec"]["template"]["spec"],
    })
}

#[test]
fn the_operators_own_pod_passes_restricted_from_deploy_and_from_the_chart() {
    let _lock = side_by_side(); // isolated: its own namespace, server-side dry runs only
    let ns = "flow-operator-restricted";
    restricted_namespace(ns);
    kubectl_ok(&["-n", ns, "create", "serviceaccount", "ankka-flow-operator"]);
    let deploy = std::fs::read_to_string(bed().root.join("deploy/operator.yaml")).expect("deploy/operator.yaml");
    let helm = |sets: &[&str]| {
        let chart = bed().root.join("charts/ankka-flow");
        let mut args = vec![
            "template",
            "ankka-flow",
            chart.to_str().expect("utf-8"),
            "--namespace",
            ns,
            "--kube-version",
            "1.36.3",
        ];
        for s in sets {
            args.extend(["--set", s]);
        }
        let o = Command::new(bed().root.join("scripts/helm.sh")).args(&args).output().expect("helm runs");
        assert!(o.status.success(), "{}", show(&o));
        String::from_utf8(o.stdout).expect("UTF-8")
    };
    for (what, yaml) in [
        ("deploy/operator.yaml", deploy),
        ("the chart", helm(&[])),
        (
            "the chart with an fsGroup for a volume",
            helm(&["podSecurityContext.fsGroup=65532", "ledger.persistence.enabled=true"]),
        ),
    ] {
        let pod = operator_pod(&yaml, "operator-probe");
        // Neither names a UID unless asked (OpenShift's restricted-v2 assigns its own).
        let sc = &pod["spec"]["securityContext"];
        assert!(sc["runAsUser"].is_null() && sc["runAsGroup"].is_null(), "{what}: {sc}");
        let o = kubectl_with_stdin(&["-n", ns, "create", "--dry-run=server", "-f", "-"], &pod.to_string());
        assert!(o.status.success(), "{what}: the API server refused the operator's pod: {}", show(&o));
        assert!(!String::from_utf8_lossy(&o.stderr).contains("PodSecurity"), "{what}: {}", show(&o));
        eprintln!("locked-down: {what}: the operator's pod is admitted under restricted ({sc})");
    }
}
