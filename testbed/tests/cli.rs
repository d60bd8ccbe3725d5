//! The CLI as a kubectl user drives it, on the real test bed: `kubectl flow` as a plugin,
//! `--kubeconfig` and `--context`, a namespace-scoped user, `--pipeline` without `-n`, a pipeline
//! named `status`, `--watch -o yaml` as one YAML stream, and the exit codes and progress of
//! `flow reset --wait [--timeout]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use flow_testbed::*;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `flow <args>` with the environment `env` on top of the test bed's.
fn flow_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin("flow"));
    cmd.args(args).env("KUBECONFIG", &bed().kubeconfig);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("flow runs")
}

/// The id in `reset requested for '<pipeline>': <id>`.
fn requested_id(o: &Output, pipeline: &str) -> String {
    let out = text(&o.stdout);
    out.lines()
        .next()
        .and_then(|l| l.strip_prefix(&format!("reset requested for '{pipeline}': ")))
        .unwrap_or_else(|| panic!("no request line: {}", show(o)))
        .to_string()
}

/// A copy of the admin kubeconfig with a first, current context whose API server does not answer,
/// and the test bed's context renamed `bed` with `namespace` as its namespace.
fn two_context_kubeconfig(namespace: &str) -> PathBuf {
    let admin = std::fs::read_to_string(&bed().kubeconfig).expect("the admin kubeconfig");
    let text = admin
        .replace("current-context: flow-testbed", "current-context: broken")
        .replace("- name: flow-testbed\n  context:", "- name: bed\n  context:")
        .replace("    namespace: default", &format!("    namespace: {namespace}"))
        .replace(
            "contexts:\n",
            "contexts:\n- name: broken\n  context:\n    cluster: broken\n    user: admin\n",
        )
        .replace("clusters:\n", "clusters:\n- name: broken\n  cluster:\n    server: https://127.0.0.1:9\n    insecure-skip-tls-verify: true\n");
    let path = bed().root.join("target/e2e-ledgers").join(format!("two-contexts-{}.kubeconfig", std::process::id()));
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(&path, text).expect("kubeconfig");
    path
}

/// A kubeconfig for ServiceAccount `sa` of `ns`, with a token the API server issues, and `ns` as the
/// context's namespace.
fn service_account_kubeconfig(ns: &str, sa: &str) -> PathBuf {
    let token = kubectl_ok(&["-n", ns, "create", "token", sa, "--duration", "10m"]);
    let admin = std::fs::read_to_string(kubeconfig_with_token(sa, token.trim())).expect("kubeconfig");
    let path = bed().root.join("target/e2e-ledgers").join(format!("{sa}-{ns}-{}.kubeconfig", std::process::id()));
    std::fs::write(&path, admin.replace("    namespace: default", &format!("    namespace: {ns}")))
        .expect("kubeconfig");
    path
}

/// A directory holding `kubectl-flow`, a link to the built `flow`, for kubectl to find on PATH.
fn plugin_dir() -> PathBuf {
    let dir = bed().root.join("target/e2e-ledgers").join(format!("plugin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::os::unix::fs::symlink(bin("flow"), dir.join("kubectl-flow")).expect("symlink");
    dir
}

fn path_with(dir: &Path) -> String {
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())
}

#[test]
fn the_cli_behaves_as_a_kubectl_user_expects() {
    let _serial = serial();
    let ns = "shop-cli";
    let op = cart_scenario(ns, 0, &[]);

    // --wait: progress on stderr, the request line and the final table on stdout, exit 0.
    let o = flow(&["reset", "cart", "-n", ns, "--wait", "--timeout", "60s"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let id = requested_id(&o, "cart");
    let err = text(&o.stderr);
    assert!(err.lines().any(|l| l == format!("reset {id} of 'cart': Done, 1 of 1 consumer groups finished")), "{err}");
    assert!(text(&o.stdout).contains(&format!("reset {id} of {ns}/cart: Done")), "{}", show(&o));

    // `--pipeline` without -n: looked up by name across namespaces.
    let o = flow(&["reset", "status", &id, "--pipeline", "cart", "-o", "json"]);
    assert!(o.status.success(), "{}", show(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!((r["namespace"].as_str(), r["phase"].as_str()), (Some(ns), Some("Done")));

    // --kubeconfig and --context: the current context does not answer, the named one does.
    let two = two_context_kubeconfig(ns);
    let two = two.to_str().expect("utf-8");
    let o = flow(&["reset", "status", &id, "--kubeconfig", two]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(text(&o.stderr).starts_with("cannot reach Kubernetes: https://127.0.0.1:9: "), "{}", show(&o));
    let o = flow_with(
        &["reset", "status", &id, "--kubeconfig", two, "--context", "bed", "-o", "json"],
        &[("KUBECONFIG", "/nonexistent")],
    );
    assert!(o.status.success(), "{}", show(&o));
    // Credentials the API server refuses: the server is named.
    let refused = kubeconfig_with_token("refused", "not-a-token");
    let o = flow(&["reset", "status", &id, "-n", ns, "--kubeconfig", refused.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = text(&o.stderr);
    assert!(err.starts_with("reset failed: https://127.0.0.1:"), "{}", show(&o));
    assert!(err.contains(" did not accept the kubeconfig's credentials"), "{}", show(&o));

    // As `kubectl flow`, through kubectl's plugin mechanism.
    let plugins = plugin_dir();
    let o = Command::new("kubectl")
        .args(["flow", "reset", "status", &id, "-n", ns])
        .env("KUBECONFIG", &bed().kubeconfig)
        .env("PATH", path_with(&plugins))
        .output()
        .expect("kubectl runs");
    assert!(o.status.success(), "{}", show(&o));
    assert!(text(&o.stdout).starts_with(&format!("reset {id} of {ns}/cart: Done")), "{}", show(&o));
    let o = Command::new("kubectl")
        .args(["plugin", "list"])
        .env("PATH", path_with(&plugins))
        .output()
        .expect("kubectl runs");
    assert!(text(&o.stdout).contains("kubectl-flow"), "{}", show(&o));

    // A user who may read AnkkaFlows in this namespace only gets answers, with a note.
    kubectl_apply(&format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {{name: viewer, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: flow-viewer, namespace: {ns}}}
rules:
  - apiGroups: [flow.ankka.thinkmorestupidless.com]
    resources: [ankkaflows]
    verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: flow-viewer, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: flow-viewer}}
subjects: [{{kind: ServiceAccount, name: viewer, namespace: {ns}}}]
"#
    ));
    let viewer = service_account_kubeconfig(ns, "viewer");
    let viewer = viewer.to_str().expect("utf-8");
    let o = flow_with(&["reset", "status", &id, "-o", "json"], &[("KUBECONFIG", viewer)]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(
        text(&o.stderr),
        format!(
            "note: you may not list AnkkaFlows in every namespace, so only namespace '{ns}' (the kubeconfig's) was \
             searched; name another with -n\n"
        )
    );
    let o = flow_with(&["reset", "status", &id, "--pipeline", "cart"], &[("KUBECONFIG", viewer)]);
    assert!(o.status.success(), "{}", show(&o));
    // -A asks for every namespace: refused, said plainly.
    let o = flow_with(&["reset", "status", &id, "-A"], &[("KUBECONFIG", viewer)]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(text(&o.stderr).starts_with("reset failed: ") && text(&o.stderr).contains("forbidden"), "{}", show(&o));

    // --watch -o yaml: one YAML stream, a document per change, ending with the final one. A
    // request for a streamlet that does not exist (past the CLI's guards) is refused for good.
    let bad = "11111111-2222-4333-8444-555555555555";
    write_request(ns, "cart", bad, &["nope"]);
    let o = flow(&["reset", "status", bad, "-n", ns, "--watch", "-o", "yaml"]);
    assert!(o.status.success(), "{}", show(&o));
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text(&o.stdout)).expect("a YAML stream");
    assert!(!docs.is_empty() && docs.iter().all(|d| d["id"] == bad), "{}", show(&o));
    assert_eq!(docs.last().map(|d| d["phase"].clone()), Some("Refused".into()), "{}", show(&o));
    assert!(text(&o.stdout).starts_with("---\n"), "{}", show(&o));

    // A pipeline named `status` is reset like any other.
    apply_own_pipeline(ns, "status", &[("router", cart::TOPIC, 0)]);
    let o = flow(&["reset", "-n", ns, "--", "status"]);
    assert!(o.status.success(), "{}", show(&o));
    requested_id(&o, "status");
    let o = flow(&["reset", "--pipeline", "status", "-n", ns, "--replace"]);
    assert!(o.status.success(), "{}", show(&o));
    requested_id(&o, "status");

    // --timeout: without an operator the request is never picked up; exit 5, the request stays.
    op.stop();
    let o = flow(&["reset", "cart", "-n", ns, "--replace", "--wait", "--timeout", "2s"]);
    assert_eq!(o.status.code(), Some(5), "{}", show(&o));
    let id = requested_id(&o, "cart");
    let err = text(&o.stderr);
    assert!(err.lines().any(|l| l == format!("reset {id} of 'cart': Requested")), "{err}");
    assert!(
        err.contains(&format!("timed out after 2s waiting for reset {id} of 'cart' (Requested); the request stays")),
        "{err}"
    );
    assert_eq!(annotation(ns, "cart", cart::REQUEST).map(|a| a.contains(&id)), Some(true));
}
