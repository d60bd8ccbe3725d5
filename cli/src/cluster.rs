//! Logging in to Kubernetes the way kubectl does: `--kubeconfig`, `--context` and `-n` on every
//! command that talks to the cluster, and errors that name the API server and the cause.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};

use crate::exit::Failure;

/// The options of every command that talks to the cluster.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// The kubeconfig file to use. Default: $KUBECONFIG (several files joined with ':' are merged,
    /// as kubectl does), else ~/.kube/config, else the pod's service account when run in a pod.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use. Default: its current context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Act as this user, as kubectl's --as does (the kubeconfig's user needs the `impersonate`
    /// permission): to try what another user may do.
    #[arg(long = "as", value_name = "USER")]
    pub impersonate: Option<String>,
    /// With --as: act as a member of this group too; repeatable.
    #[arg(long = "as-group", value_name = "GROUP", requires = "impersonate")]
    pub impersonate_groups: Vec<String>,
}

/// How long one API call may wait for its answer (and for its connection) before it fails: the CLI
/// never watches, so no answer takes longer, and a hung API server costs at most this per call
/// (kube's client waits for an answer without limit by default).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A client, the namespace of the kubeconfig context, and the API server's address for messages.
pub struct Cluster {
    /// The client.
    pub client: Client,
    /// The context's namespace (`default` when it names none).
    pub namespace: String,
    /// The API server's URL, its scheme, host, port and path only ([`without_credentials`]).
    pub server: String,
    /// The command, for the prefix of the API server's refusals: `<command> failed: <message>`.
    command: &'static str,
}

impl Cluster {
    /// Logs in as `args` say, the way kubectl does, for `command` (`reset`, `rebuild`, `undo`),
    /// which names the API server's refusals.
    ///
    /// # Errors
    /// `cannot reach Kubernetes: <reason>` when there is no usable kubeconfig (or in-cluster
    /// service account), the context is unknown, or the client cannot be built.
    pub async fn connect(args: &ClusterArgs, command: &'static str) -> Result<Cluster, Failure> {
        let unreachable = |reason: String| Failure::refused(format!("cannot reach Kubernetes: {reason}"));
        let kubeconfig = load_kubeconfig(args.kubeconfig.as_deref()).map_err(unreachable)?;
        let config = match kubeconfig {
            Some(kubeconfig) => {
                if let Some(context) = &args.context
                    && !kubeconfig.contexts.iter().any(|c| &c.name == context)
                {
                    return Err(unreachable(format!("no context '{context}' in the kubeconfig")));
                }
                let options = KubeConfigOptions { context: args.context.clone(), ..Default::default() };
                Config::from_custom_kubeconfig(kubeconfig, &options).await.map_err(|e| unreachable(causes(&e)))?
            }
            // A context only exists in a kubeconfig, so the in-cluster fallback does not apply.
            None if args.context.is_some() => {
                return Err(unreachable(
                    "no kubeconfig found ($KUBECONFIG, ~/.kube/config) to take a context from".into(),
                ));
            }
            None => Config::incluster().map_err(|e| {
                unreachable(format!(
                    "no kubeconfig found ($KUBECONFIG, ~/.kube/config) and no pod service account: {}",
                    causes(&e)
                ))
            })?,
        };
        let mut config = config;
        if let Some(user) = &args.impersonate {
            config.auth_info.impersonate = Some(user.clone());
            config.auth_info.impersonate_groups =
                (!args.impersonate_groups.is_empty()).then(|| args.impersonate_groups.clone());
        }
        config.connect_timeout = Some(CALL_TIMEOUT);
        config.read_timeout = Some(CALL_TIMEOUT);
        // Counted from when a request is sent, not from when its pooled connection went idle.
        config.reset_reader_on_write = true;
        let namespace = config.default_namespace.clone();
        // The client gets the URL without its userinfo and query too, so that no error of its can
        // quote them (kube's client uses neither: it authenticates with the kubeconfig's user, and
        // joins only the path of the server's URL to a request's).
        config.cluster_url = without_credentials(&config.cluster_url)
            .map_err(|e| unreachable(format!("the kubeconfig's server is not a usable URL: {e}")))?;
        let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
        let client = Client::try_from(config).map_err(|e| unreachable(format!("{server}: {}", causes(&e))))?;
        Ok(Cluster { client, namespace, server, command })
    }

    /// The failure of an API call: the API server's own answer as `<command> failed: <message>`
    /// (`reset failed: ...` for `flow reset`), or `cannot reach Kubernetes: <server>: <cause>` when no
    /// answer came.
    pub fn failure(&self, e: kube::Error) -> Failure {
        Failure::refused(self.problem(&e))
    }

    /// The line [`Cluster::failure`] says for `e`.
    pub fn problem(&self, e: &kube::Error) -> String {
        let command = self.command;
        match e {
            // 401: the server is not at fault but the credentials, and the user needs to know which server.
            kube::Error::Api(s) if s.code == 401 => {
                format!("{command} failed: {} did not accept the kubeconfig's credentials ({})", self.server, s.message)
            }
            // An admission policy's refusal (403 too) says the whole refusal in its own words.
            kube::Error::Api(s) if admission_message(&s.message) != s.message => {
                format!("{command} failed: {}", admission_message(&s.message))
            }
            // 403 of RBAC: the API server names the user, verb and resource; say which roles hold the right.
            kube::Error::Api(s) if s.code == 403 => format!("{command} failed: {}; {FORBIDDEN_HINT}", s.message),
            kube::Error::Api(s) => format!("{command} failed: {}", s.message),
            other => format!("cannot reach Kubernetes: {}: {}", self.server, causes(other)),
        }
    }
}

/// What a refusal (403) adds to the API server's words: which of Kubernetes' built-in roles hold the
/// AnkkaFlow rights once the operator is installed (its aggregated ClusterRoles, docs/operator.md).
pub const FORBIDDEN_HINT: &str = "the AnkkaFlow rights come with Kubernetes' built-in roles: view reads pipelines and their status, edit or admin in the namespace may also request a reset";

/// An admission policy's own message, without the API server's wrapping of it
/// (`<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with binding '<binding>'
/// denied request: <message>`): the policy's message says the whole refusal (docs/governance.md).
fn admission_message(message: &str) -> &str {
    match message.split_once("ValidatingAdmissionPolicy '") {
        Some((_, policy)) => policy.split_once(" denied request: ").map_or(message, |(_, said)| said),
        None => message,
    }
}

/// Whether an API call's failure may pass by itself, so that a command that waits tries again: no
/// answer came (the connection was refused, reset or timed out), or the answer says to try again
/// later (429 Too Many Requests, a 5xx). A refusal (401, 403, 404, ...) and an answer that cannot be
/// read are final.
pub fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// The API server's URL with only the parts that name where it is, taken from `url`: its scheme, host,
/// port and path. Userinfo (`https://user:password@...`), a query (`?token=...`) and a fragment are
/// left out, for they may hold credentials and no message may show one (docs/cli.md, "Talking to the
/// cluster").
fn without_credentials(url: &http::Uri) -> Result<http::Uri, http::Error> {
    let mut parts = http::uri::Parts::default();
    parts.scheme = url.scheme().cloned();
    parts.authority = match (url.host(), url.port_u16()) {
        (Some(host), Some(port)) => Some(format!("{host}:{port}").parse()?),
        (Some(host), None) => Some(host.parse()?),
        (None, _) => None,
    };
    parts.path_and_query = url.path_and_query().map(|p| p.path().parse()).transpose()?;
    Ok(http::Uri::from_parts(parts)?)
}

/// The kubeconfig as kubectl loads it: the `--kubeconfig` file (which must exist), else the files
/// listed in `$KUBECONFIG` that exist, merged (kubectl skips missing ones), else `~/.kube/config`
/// when it exists. `None` when there is none.
fn load_kubeconfig(explicit: Option<&Path>) -> Result<Option<Kubeconfig>, String> {
    let read = |path: &Path| {
        Kubeconfig::read_from(path).map_err(|e| match e {
            KubeconfigError::ReadConfig(io, _) => format!("cannot read kubeconfig {}: {io}", path.display()),
            other => format!("kubeconfig {}: {}", path.display(), causes(&other)),
        })
    };
    if let Some(path) = explicit {
        return read(path).map(Some);
    }
    let listed: Vec<PathBuf> = match std::env::var_os("KUBECONFIG") {
        Some(value) => std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty()).collect(),
        None => Vec::new(),
    };
    let candidates = if listed.is_empty() {
        std::env::home_dir().map(|home| vec![home.join(".kube").join("config")]).unwrap_or_default()
    } else {
        listed
    };
    let mut merged: Option<Kubeconfig> = None;
    for path in candidates.iter().filter(|p| p.exists()) {
        let next = read(path)?;
        merged = Some(match merged {
            Some(m) => m.merge(next).map_err(|e| format!("kubeconfig {}: {}", path.display(), causes(&e)))?,
            None => next,
        });
    }
    Ok(merged)
}

/// An error and its sources, joined with `: `, leaving out a source whose text an outer error
/// already shows (`client error (Connect): client error (Connect)`, or an outer text that ends with
/// its source's).
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut texts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        if !texts.iter().any(|t| t.contains(&text)) {
            texts.push(text);
        }
        next = err.source();
    }
    texts.join(": ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_admission_policy_says_its_own_refusal() {
        let wrapped = "ankkaflows.flow.ankka.thinkmorestupidless.com \"cart\" is forbidden: ValidatingAdmissionPolicy \
                       'ankka-flow-reset-guard' with binding 'ankka-flow-reset-guard' denied request: user carol may \
                       not request a reset";
        assert_eq!(super::admission_message(wrapped), "user carol may not request a reset");
        assert_eq!(super::admission_message("pods \"x\" is forbidden: no"), "pods \"x\" is forbidden: no");
    }

    use super::*;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn causes_keep_each_text_once() {
        let e = E(
            "ServiceError: client error (Connect)",
            Some(Box::new(E(
                "client error (Connect)",
                Some(Box::new(E("tcp connect error", Some(Box::new(E("Connection refused (os error 111)", None)))))),
            ))),
        );
        assert_eq!(
            causes(&e),
            "ServiceError: client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
        let e = E("failed to read kubeconfig: no such file", Some(Box::new(E("no such file", None))));
        assert_eq!(causes(&e), "failed to read kubeconfig: no such file");
    }

    fn shown(url: &str) -> String {
        without_credentials(&url.parse().expect("a URL")).expect("usable").to_string()
    }

    #[test]
    fn the_server_is_shown_by_scheme_host_port_and_path_only() {
        assert_eq!(shown("https://bob:S3CRETPW@127.0.0.1:1"), "https://127.0.0.1:1/");
        assert_eq!(shown("https://127.0.0.1:6443/base/?token=S3CRETQ"), "https://127.0.0.1:6443/base/");
        assert_eq!(shown("https://bob@k8s.example.com/prefix?a=1&token=S3CRETQ"), "https://k8s.example.com/prefix");
        assert_eq!(shown("https://bob:pw%40x@[::1]:6443"), "https://[::1]:6443/");
        assert_eq!(shown("http://10.0.0.1:8080/"), "http://10.0.0.1:8080/");
    }

    /// A kubeconfig at a port where nothing listens, with credentials in its server's URL.
    fn kubeconfig_with_secrets(name: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("flow-cli-{name}-{}.kubeconfig", std::process::id()));
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://bob:S3CRETPW@127.0.0.1:1/k8s?token=S3CRETQ#S3CRETF\", insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n",
        )
        .expect("kubeconfig written");
        path
    }

    #[tokio::test(flavor = "current_thread")]
    async fn no_credential_of_the_server_url_reaches_a_message_or_its_causes() {
        let path = kubeconfig_with_secrets("causes");
        let args = ClusterArgs { kubeconfig: Some(path.clone()), ..Default::default() };
        let cluster = Cluster::connect(&args, "reset").await;
        let _ = std::fs::remove_file(&path);
        let cluster = cluster.unwrap_or_else(|f| panic!("connects: {f:?}"));
        assert_eq!(cluster.server, "https://127.0.0.1:1/k8s");
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(cluster.client.clone(), "x");
        let e = api.get("y").await.expect_err("nothing listens at port 1");
        let said = cluster.problem(&e);
        assert!(said.starts_with("cannot reach Kubernetes: https://127.0.0.1:1/k8s: "), "{said}");
        // Every text of the error and its sources, and its Debug form, as well as the line said.
        let mut texts = vec![said, format!("{e:?}")];
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = next {
            texts.push(err.to_string());
            next = err.source();
        }
        for text in texts {
            for secret in ["bob", "S3CRET"] {
                assert!(!text.contains(secret), "{secret} in {text}");
            }
        }
    }
}
