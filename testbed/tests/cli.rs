//! The CLI as a kubectl user drives it, on the real test bed: `kubectl flow` as a plugin,
//! `--kubeconfig` and `--context`, a namespace-scoped user, `--pipeline` without `-n`, a pipeline
//! named `status`, `--watch -o yaml` as one YAML stream, the exit codes and progress of
//! `flow reset --wait [--timeout]`, `flow reset status` listing every namespace once, and waiting
//! through an API server that drops its connections or stops answering (behind a TCP proxy of the
//! test's own in front of the real API server).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

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
    // Serial: it counts the API server's cluster-wide lists of AnkkaFlows, which other tests' commands make too.
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
    // Without -n, every namespace is searched in one list, the one that shows whether the user may.
    let lists = cluster_lists();
    let o = flow(&["reset", "status", &id]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(cluster_lists() - lists, 1.0, "flow reset status <id> lists AnkkaFlows of every namespace once");
    // Rebuild and undo name their own failures.
    let o = flow(&["rebuild", "cart", "-n", ns, "--kubeconfig", refused.to_str().expect("utf-8")]);
    assert!(text(&o.stderr).starts_with("rebuild failed: https://127.0.0.1:"), "{}", show(&o));
    let o = flow(&["reset", "undo", &id, "-n", ns, "--kubeconfig", refused.to_str().expect("utf-8")]);
    assert!(text(&o.stderr).starts_with("undo failed: https://127.0.0.1:"), "{}", show(&o));
    // -A asks for every namespace: refused, said plainly.
    let o = flow_with(&["reset", "status", &id, "-A"], &[("KUBECONFIG", viewer)]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(text(&o.stderr).starts_with("reset failed: ") && text(&o.stderr).contains("forbidden"), "{}", show(&o));

    // --watch -o yaml: one YAML stream, a document per change, ending with the final one. A
    // request for a streamlet that does not exist (past the CLI's guards) is refused for good.
    let bad = "11111111-2222-4333-8444-555555555555";
    let versions = Versions::watch(ns, "cart");
    wait_until("the watch shows the resource", Duration::from_secs(10), || (!versions.seen().is_empty()).then_some(()));
    write_request(ns, "cart", bad, &["nope"]);
    let o = flow(&["reset", "status", bad, "-n", ns, "--watch", "-o", "yaml"]);
    assert!(o.status.success(), "{}", show(&o));
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text(&o.stdout)).expect("a YAML stream");
    assert!(!docs.is_empty() && docs.iter().all(|d| d["id"] == bad), "{}", show(&o));
    assert_eq!(docs.last().map(|d| d["phase"].clone()), Some("Refused".into()), "{}", show(&o));
    assert!(text(&o.stdout).starts_with("---\n"), "{}", show(&o));
    // No version of the object had the done annotation name the refused request without its
    // status saying Refused (the done annotation alone reads as done).
    assert_eq!(versions.done_without(bad, "Refused"), Vec::<serde_json::Value>::new());
    drop(versions);

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

/// How many cluster-wide LISTs of AnkkaFlows the API server has answered so far (its own
/// `apiserver_request_total`, every code).
fn cluster_lists() -> f64 {
    kubectl_ok(&["get", "--raw", "/metrics"])
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| {
            l.contains("resource=\"ankkaflows\"") && l.contains("scope=\"cluster\"") && l.contains("verb=\"LIST\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// What [`Proxy`] does with the bytes between the client and the API server.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Mode {
    /// Passes them on.
    Forward,
    /// Closes every connection, and each new one at once: the API server is unreachable.
    Drop,
    /// Keeps every connection open and passes nothing on: the API server hangs.
    Freeze,
}

/// A TCP proxy on loopback in front of the test bed's API server (TLS passes through it untouched),
/// whose [`Mode`] the test switches.
struct Proxy {
    port: u16,
    mode: Arc<AtomicU8>,
}

impl Proxy {
    fn start() -> Proxy {
        let admin = std::fs::read_to_string(&bed().kubeconfig).expect("the admin kubeconfig");
        let upstream = admin
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: https://"))
            .expect("the API server's address")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("its address").port();
        let mode = Arc::new(AtomicU8::new(Mode::Forward as u8));
        let m = mode.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                if m.load(Ordering::SeqCst) == Mode::Drop as u8 {
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (from, to, m) = (from.try_clone().expect("clone"), to.try_clone().expect("clone"), m.clone());
                    std::thread::spawn(move || pump(from, to, &m));
                }
            }
        });
        Proxy { port, mode }
    }

    fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    /// A copy of the admin kubeconfig that reaches the API server through the proxy.
    fn kubeconfig(&self) -> PathBuf {
        let admin = std::fs::read_to_string(&bed().kubeconfig).expect("the admin kubeconfig");
        let text: String = admin
            .lines()
            .map(|l| match l.trim_start().strip_prefix("server: ") {
                Some(_) => format!("{}server: https://127.0.0.1:{}\n", &l[..l.len() - l.trim_start().len()], self.port),
                None => format!("{l}\n"),
            })
            .collect();
        let path = bed().root.join("target/e2e-ledgers").join(format!("proxied-{}.kubeconfig", std::process::id()));
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(&path, text).expect("kubeconfig");
        path
    }
}

/// Copies `from` to `to` as the proxy's mode says, until either side closes.
fn pump(mut from: TcpStream, mut to: TcpStream, mode: &AtomicU8) {
    from.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
    let mut buf = [0u8; 16 * 1024];
    loop {
        match mode.load(Ordering::SeqCst) {
            m if m == Mode::Drop as u8 => {
                let _ = from.shutdown(std::net::Shutdown::Both);
                let _ = to.shutdown(std::net::Shutdown::Both);
                return;
            }
            m if m == Mode::Freeze as u8 => std::thread::sleep(Duration::from_millis(50)),
            _ => match from.read(&mut buf) {
                Ok(0) => {
                    let _ = to.shutdown(std::net::Shutdown::Write);
                    return;
                }
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return,
            },
        }
    }
}

/// `flow <args>` started in the background with `kubeconfig`, its output collected.
fn spawn_flow(args: &[&str], kubeconfig: &Path) -> Child {
    Command::new(bin("flow"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flow starts")
}

/// Waits up to `limit` for `child` to end; its output.
fn finish(mut child: Child, limit: Duration) -> Output {
    wait_until("flow to end", limit, || child.try_wait().ok().flatten());
    child.wait_with_output().expect("its output")
}

/// The request id of the request annotation of `cart` in `ns`, once it is not `old`.
fn new_request(ns: &str, old: Option<&str>) -> String {
    wait_until("the request to be written", Duration::from_secs(30), || {
        let raw = annotation(ns, "cart", cart::REQUEST)?;
        let v: serde_json::Value = serde_json::from_str(&raw).ok()?;
        let id = v["id"].as_str()?.to_string();
        (Some(id.as_str()) != old).then_some(id)
    })
}

#[test]
fn waiting_rides_out_a_lost_api_server_and_never_outlasts_its_timeout() {
    // Serial: it counts the API server's cluster-wide lists of AnkkaFlows, which other tests' commands make too.
    let _serial = serial();
    let ns = "shop-cli-proxy";
    // Without an operator, a request stays Requested as long as the test wants.
    cart_scenario(ns, 0, &[]).stop();
    let proxy = Proxy::start();
    let kubeconfig = proxy.kubeconfig();

    // The API server drops every connection for a few seconds while `--wait` waits: said on
    // stderr, tried again, and the wait goes on to the end.
    let child = spawn_flow(&["reset", "cart", "-n", ns, "--wait", "--timeout", "120s"], &kubeconfig);
    let id = new_request(ns, None);
    std::thread::sleep(Duration::from_millis(1500));
    proxy.set(Mode::Drop);
    std::thread::sleep(Duration::from_secs(3));
    proxy.set(Mode::Forward);
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns)]);
    let o = finish(child, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let err = text(&o.stderr);
    let lost = format!("cannot reach Kubernetes: https://127.0.0.1:{}: ", proxy.port);
    assert!(err.lines().any(|l| l.starts_with(&lost) && l.ends_with("; trying again")), "{}", show(&o));
    assert!(err.lines().any(|l| l == format!("reset {id} of 'cart': Done, 1 of 1 consumer groups finished")), "{err}");
    op.stop();

    // `flow reset status --watch` without -n: one cluster-wide list to find the request, then only
    // its AnkkaFlow, every second, until the operator refuses it.
    let bad = "11111111-2222-4333-8444-666666666666";
    write_request(ns, "cart", bad, &["nope"]);
    let lists = cluster_lists();
    let child = spawn_flow(&["reset", "status", bad, "--watch", "-o", "json"], &bed().kubeconfig);
    std::thread::sleep(Duration::from_secs(3));
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns)]);
    let o = finish(child, Duration::from_secs(60));
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(cluster_lists() - lists, 1.0, "--watch lists every namespace once, not at every look");
    op.stop();

    // The API server stops answering mid-wait: `--timeout` still holds (exit 5 in time), though
    // the call in flight never gets its answer.
    let started = Instant::now();
    let child = spawn_flow(&["reset", "cart", "-n", ns, "--replace", "--wait", "--timeout", "5s"], &kubeconfig);
    let id = new_request(ns, Some(bad));
    // The answer to the write has passed by then; the polls that follow get none.
    std::thread::sleep(Duration::from_millis(500));
    proxy.set(Mode::Freeze);
    let o = finish(child, Duration::from_secs(60));
    let took = started.elapsed();
    proxy.set(Mode::Forward);
    assert_eq!(o.status.code(), Some(5), "{}", show(&o));
    assert!(took < Duration::from_secs(10), "a 5 s timeout took {took:?}: {}", show(&o));
    assert!(
        text(&o.stderr).contains(&format!("timed out after 5s waiting for reset {id} of 'cart' (")),
        "{}",
        show(&o)
    );
}

/// `kubeconfig` with its API server's URL given userinfo and a query, both holding a secret:
/// `https://bob:S3CRETPW@<host:port><path>?token=S3CRETQ`.
fn with_secrets_in_server_url(kubeconfig: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    let (mut replaced, mut out) = (0, String::new());
    for line in text.lines() {
        match line.trim_start().strip_prefix("server: ") {
            Some(url) => {
                replaced += 1;
                let url = url.trim_matches('"');
                let rest = url.strip_prefix("https://").expect("an https server");
                let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
                let indent = &line[..line.len() - line.trim_start().len()];
                out.push_str(&format!("{indent}server: \"https://bob:S3CRETPW@{authority}/{path}?token=S3CRETQ\"\n"));
            }
            None => out.push_str(&format!("{line}\n")),
        }
    }
    assert!(replaced > 0, "a server line in {}", kubeconfig.display());
    let path = bed().root.join("target/e2e-ledgers").join(format!("{name}-{}.kubeconfig", std::process::id()));
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(&path, out).expect("kubeconfig");
    path
}

/// Neither secret of [`with_secrets_in_server_url`] is in `o`'s stdout or stderr.
fn assert_no_secret(o: &Output) {
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(!all.contains("S3CRET") && !all.contains("bob"), "{}", show(o));
}

#[test]
fn credentials_in_the_api_servers_url_are_never_shown() {
    // Not answering (port 9 on loopback, as testbed/tests/unreachable.kubeconfig): the server is
    // named by scheme, host and port.
    let unreachable =
        bed().root.join("target/e2e-ledgers").join(format!("unreachable-{}.kubeconfig", std::process::id()));
    std::fs::create_dir_all(unreachable.parent().expect("parent")).expect("dir");
    std::fs::write(
        &unreachable,
        "apiVersion: v1\nkind: Config\ncurrent-context: none\nclusters:\n- name: none\n  cluster:\n    server: \
         https://127.0.0.1:9\n    insecure-skip-tls-verify: true\nusers:\n- name: none\n  user:\n    token: x\n\
         contexts:\n- name: none\n  context:\n    cluster: none\n    user: none\n",
    )
    .expect("kubeconfig");
    let unreachable = with_secrets_in_server_url(&unreachable, "secret-url-unreachable");
    let o = flow(&["reset", "cart", "-n", "x", "--kubeconfig", unreachable.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(text(&o.stderr).starts_with("cannot reach Kubernetes: https://127.0.0.1:9: "), "{}", show(&o));
    assert_no_secret(&o);

    // Answering with 401: the server is named too.
    let refused =
        with_secrets_in_server_url(&kubeconfig_with_token("secret-url-token", "not-a-token"), "secret-url-refused");
    let o = flow(&["reset", "cart", "-n", "x", "--kubeconfig", refused.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(text(&o.stderr).starts_with("reset failed: https://127.0.0.1:"), "{}", show(&o));
    assert!(text(&o.stderr).contains(" did not accept the kubeconfig's credentials"), "{}", show(&o));
    assert_no_secret(&o);

    // The same URL with good credentials still reaches the API server.
    let admin = with_secrets_in_server_url(&bed().kubeconfig, "secret-url-admin");
    let o = flow(&["reset", "cart", "-n", "shop-secret-url-none", "--kubeconfig", admin.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(text(&o.stderr).trim_end(), "no pipeline 'cart' in namespace 'shop-secret-url-none'", "{}", show(&o));
    assert_no_secret(&o);
}

/// `flow reset --wait` on a namespace no operator watches says so, once, instead of waiting in
/// silence at `Requested`; the timeout still ends it (exit code 5) and the request stays.
#[test]
fn a_wait_that_no_operator_takes_up_says_why() {
    let _side_by_side = side_by_side();
    let ns = "cli-no-operator";
    install_crd();
    fresh_namespace(ns);
    let (yaml, _) = inlets_pipeline_yaml(ns, "orphan", "orphan.input", "shop", 1, 1);
    kubectl_apply(&yaml);
    let o = flow(&["reset", "orphan", "-n", ns, "--wait", "--timeout", "20s"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{err}");
    let hint = "is still Requested after 15s: no operator has taken it up; is the operator running, and does it \
                watch namespace 'cli-no-operator'";
    assert_eq!(err.matches(hint).count(), 1, "said once: {err}");
    assert!(err.contains("timed out after 20s waiting for reset"), "{err}");
    kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
}
