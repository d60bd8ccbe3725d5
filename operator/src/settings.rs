//! Command line and environment settings of the operator (docs/operator.md, "Settings").

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use flow_core::connection::TokenEndpoints;
use flow_core::reset::{ApprovalPolicy, approval_required};

/// The Ankka Flow operator.
///
/// Watches AnkkaFlow resources in every namespace (or those of --watch-namespace), renders one Deployment per streamlet, and carries
/// out reset requests written by `flow reset`. Kubernetes access comes from the in-cluster service
/// account or, outside a cluster, from KUBECONFIG.
#[derive(Parser, Debug)]
#[command(name = "flow-operator", version = concat!(env!("CARGO_PKG_VERSION"), ", commit ", env!("FLOW_GIT_COMMIT")))]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub settings: Settings,
}

/// Other things the binary can do.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the AnkkaFlow CustomResourceDefinition as YAML (what deploy/crd.yaml holds).
    Crd,
}

/// The operator's namespace when `FLOW_OPERATOR_NAMESPACE` is not set.
pub const DEFAULT_NAMESPACE: &str = "ankka-flow";

/// The instance name when `HOSTNAME` is not set.
pub const DEFAULT_INSTANCE: &str = "ankka-flow-operator";

/// How the operator runs.
#[derive(clap::Args, Debug, Clone)]
pub struct Settings {
    /// Watch only these namespaces, separated by commas (default, or an empty value: every
    /// namespace). The operator then lists and watches AnkkaFlows in these namespaces alone, so rights
    /// bound there suffice, and finds consumer groups shared between pipelines among them only. Each
    /// name must be a namespace name; a value naming none (`,,`, spaces) is refused.
    #[arg(
        long = "watch-namespace",
        env = "FLOW_WATCH_NAMESPACE",
        value_name = "NS[,NS...]",
        value_parser = watch_namespaces
    )]
    pub watch_namespaces: Option<WatchNamespaces>,
    /// Image of the sidecar container that runs beside every streamlet's process (and alone for a
    /// built-in streamlet): the platform's streamlet runtime. Unset or empty, every pipeline is
    /// refused (`SidecarImageMissing`), since no streamlet can run without it.
    #[arg(long, env = "FLOW_SIDECAR_IMAGE")]
    pub sidecar_image: Option<String>,
    /// Namespace of the Kafka cluster Secrets (`kafka-cluster-<name>`). Default: the operator's own
    /// namespace (`FLOW_OPERATOR_NAMESPACE`, else `ankka-flow`).
    #[arg(long, env = "FLOW_KAFKA_CLUSTERS_NAMESPACE")]
    pub kafka_clusters_namespace: Option<String>,
    /// Directory of the reset ledger (sled). Keep it on a volume that outlives the pod.
    #[arg(long, env = "FLOW_LEDGER_DIR", default_value = "/var/lib/ankka-flow/ledger")]
    pub ledger_dir: PathBuf,
    /// Every pipeline is reconciled again at least this often, in seconds. It is also the longest
    /// a pipeline's objects are left as last applied: a ServiceAccount, Role, RoleBinding or
    /// streamlet Secret edited by hand is put back within this time.
    #[arg(long, env = "FLOW_OPERATOR_RESYNC_SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub resync_seconds: u64,
    /// Seconds before the first retry of a reconcile that failed (an apply refused, the API server
    /// or Kafka unreachable); the delay doubles with each failed attempt in a row.
    #[arg(long, env = "FLOW_OPERATOR_RETRY_MIN_BACKOFF_SECONDS", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub retry_min_backoff_seconds: u64,
    /// The longest delay between retries of a reconcile that keeps failing, in seconds; at least
    /// `--retry-min-backoff-seconds`.
    #[arg(long, env = "FLOW_OPERATOR_RETRY_MAX_BACKOFF_SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub retry_max_backoff_seconds: u64,
    /// Reconciles that work with the Kubernetes API at once (the shared reconcile slots). A
    /// reconcile waiting for Kafka holds none.
    #[arg(long, env = "FLOW_OPERATOR_MAX_CONCURRENT_RECONCILES", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,
    /// Kafka calls of one reset request that run at once (each on its own group; one group's calls
    /// always run one after another). Bounds the load a large pipeline puts on the brokers.
    #[arg(long, env = "FLOW_RESET_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub reset_concurrency: u16,
    /// Kafka calls the operator runs at once over one connection (the brokers with the client
    /// settings): its bulkhead. A call waits at most the request deadline for its turn, so a failing
    /// cluster holds back its own calls only, never another cluster's.
    #[arg(long, env = "FLOW_KAFKA_CALLS_PER_CLUSTER", default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    pub kafka_calls_per_cluster: u16,
    /// Deadline of each Kafka request, in seconds.
    #[arg(long, env = "FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub kafka_request_timeout_seconds: u64,
    /// `reportingInstance` of events and, unless `--lease-identity` says otherwise, this instance's
    /// identity in the leader election (the pod name in a cluster).
    #[arg(long, env = "HOSTNAME", default_value = DEFAULT_INSTANCE)]
    pub instance: String,
    /// Take part in leader election: only the holder of the Lease reconciles. Turn it off only when
    /// exactly one operator can ever run.
    #[arg(
        long,
        env = "FLOW_LEADER_ELECTION",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub leader_election: bool,
    /// Name of the Lease that elects the leader. Every operator that must not act at the same time
    /// as this one uses the same name.
    #[arg(long, env = "FLOW_LEASE_NAME", default_value = "ankka-flow-operator")]
    pub lease_name: String,
    /// The operator's own namespace: its Lease, and the records of the topics it created for each
    /// AnkkaFlow (ConfigMaps `flow-topics-<uid>`).
    #[arg(long, env = "FLOW_OPERATOR_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
    pub lease_namespace: String,
    /// This instance's name in the Lease (default: `--instance`, that is the pod name; with neither
    /// set, `ankka-flow-operator` plus a suffix unique to this process).
    #[arg(long, env = "FLOW_LEASE_IDENTITY")]
    pub lease_identity: Option<String>,
    /// Seconds a Lease stays valid after its holder's last renewal; the holder renews a third of
    /// this before the end. Another instance takes over at most this long after the holder dies.
    #[arg(
        long,
        env = "FLOW_LEASE_DURATION_SECONDS",
        default_value_t = 15,
        value_parser = clap::value_parser!(u64).range(3..=3600)
    )]
    pub lease_duration_seconds: u64,
    /// Address of the /metrics and /healthz endpoint (port 0: any free port, logged at start).
    #[arg(long, env = "FLOW_METRICS_ADDRESS", default_value = "0.0.0.0:9090")]
    pub metrics_address: std::net::SocketAddr,
    /// Seconds between lag samples (metrics, and the catch-up of reset groups in the status).
    #[arg(long, env = "FLOW_LAG_INTERVAL_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lag_interval_seconds: u64,
    /// Also serve each consumer group's lag per partition (`ankka_flow_consumer_group_partition_lag`
    /// and `..._partition_lag_seconds`), besides the per-group series that are always served. A
    /// series per partition of every inlet's topic: 200 inlets on a 500-partition topic make
    /// 200,000 series, so turn it on for small pipelines or with a scrape limit in mind
    /// (docs/observe.md, "Cardinality").
    #[arg(
        long,
        env = "FLOW_LAG_PER_PARTITION",
        default_value_t = false,
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub lag_per_partition: bool,
    /// Seconds to wait after a consumer group's reset reads back at its log start offsets before
    /// reading the group's offsets once more. A consumer that was still closing during the reset (a pod
    /// past its deletion, a consumer outside Kubernetes) may commit its old position right after the
    /// reset: that read catches it and reports the group failed instead of reset, and it names any
    /// partition added to the topic during the reset. 0 skips the second read (and both checks).
    #[arg(long, env = "FLOW_RESET_SETTLE_SECONDS", default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub reset_settle_seconds: u64,
    /// Seconds a consumer group of a reset retries transient Kafka failures (no broker reachable, no
    /// answer in time, a coordinator moving), from its first one, before the group fails: long enough
    /// to ride out a broker restart. Members in a group are waited for however long they stay.
    #[arg(
        long,
        env = "FLOW_RESET_RETRY_SECONDS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub reset_retry_seconds: u64,
    /// OAuth token endpoints (URLs, separated by commas) that a topic naming its own brokers, and no
    /// Kafka cluster, may have the operator call with OAUTHBEARER. A topic's token endpoint that is not
    /// listed refuses its pipeline before any connection: the operator calls only the endpoints of
    /// cluster Secrets and these. Compared exactly.
    #[arg(
        long = "oauth-token-endpoints",
        env = "FLOW_OAUTH_TOKEN_ENDPOINTS",
        value_delimiter = ',',
        value_name = "URL[,URL...]"
    )]
    pub oauth_token_endpoints: Vec<String>,
    /// Namespaces whose reset requests wait for approval (separated by commas; `*` for every
    /// namespace): a user with the `approve` permission on the AnkkaFlow, other than the requester,
    /// runs `flow reset approve <id>` (docs/governance.md). A pipeline's annotation
    /// `flow.ankka.thinkmorestupidless.com/reset-approval: required` asks for it too.
    #[arg(
        long = "reset-approval-namespaces",
        env = "FLOW_RESET_APPROVAL_NAMESPACES",
        value_delimiter = ',',
        value_name = "NS[,NS...]"
    )]
    pub reset_approval_namespaces: Vec<String>,
    /// Seconds a request waits for approval before it expires (phase Expired, nothing touched).
    #[arg(
        long,
        env = "FLOW_RESET_APPROVAL_TIMEOUT_SECONDS",
        default_value_t = 86_400,
        value_parser = clap::value_parser!(u64).range(1..=2_592_000)
    )]
    pub reset_approval_timeout_seconds: u64,
    /// Whether dry runs (which change nothing) are approved without a person where approval applies.
    #[arg(
        long,
        env = "FLOW_RESET_AUTO_APPROVE_DRY_RUNS",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub reset_auto_approve_dry_runs: bool,
    /// Where approval applies, a saved plan (`flow reset --plan`) that reprocesses at most this many
    /// records, counted from the plan, is approved without a person. Unset: none is.
    #[arg(long, env = "FLOW_RESET_AUTO_APPROVE_MAX_RECORDS")]
    pub reset_auto_approve_max_records: Option<u64>,
    /// Log format on stderr.
    #[arg(long, env = "FLOW_LOG_FORMAT", value_enum, default_value = "json")]
    pub log_format: LogFormat,
}

impl Settings {
    /// The sidecar image, `None` when unset or empty.
    pub fn sidecar_image(&self) -> Option<&str> {
        self.sidecar_image.as_deref().map(str::trim).filter(|s| !s.is_empty())
    }

    /// The approval rules for the reset requests of a pipeline in `namespace` whose approval
    /// annotation is `annotation`.
    pub fn approval_policy(&self, namespace: &str, annotation: Option<&str>) -> ApprovalPolicy {
        ApprovalPolicy {
            required: approval_required(&self.reset_approval_namespaces, namespace, annotation),
            auto_approve_dry_runs: self.reset_auto_approve_dry_runs,
            auto_approve_max_records: self.reset_auto_approve_max_records,
            timeout: std::time::Duration::from_secs(self.reset_approval_timeout_seconds),
        }
    }

    /// The token endpoints of `--oauth-token-endpoints`.
    pub fn token_endpoints(&self) -> TokenEndpoints {
        TokenEndpoints::new(self.oauth_token_endpoints.iter().cloned())
    }

    /// The operator's own namespace (`--lease-namespace`, else `ankka-flow`): its Lease, and the
    /// records of the topics it created (`crate::owners`), which no tenant can write.
    pub fn operator_namespace(&self) -> &str {
        Some(self.lease_namespace.trim()).filter(|s| !s.is_empty()).unwrap_or(DEFAULT_NAMESPACE)
    }

    /// Where the Kafka cluster Secrets are: `--kafka-clusters-namespace`, else the operator's own
    /// namespace (`--lease-namespace`), else `ankka-flow`; an empty value counts as unset.
    pub fn clusters_namespace(&self) -> &str {
        [self.kafka_clusters_namespace.as_deref(), Some(self.lease_namespace.as_str())]
            .into_iter()
            .flatten()
            .map(str::trim)
            .find(|s| !s.is_empty())
            .unwrap_or(DEFAULT_NAMESPACE)
    }

    /// The delay before retrying a reconcile after its `attempt`-th failure in a row (1-based):
    /// `--retry-min-backoff-seconds` doubled per earlier attempt (the exponent capped at 20), at most
    /// `--retry-max-backoff-seconds`.
    pub fn retry_backoff(&self, attempt: u32) -> std::time::Duration {
        let doubled = self.retry_min_backoff_seconds.saturating_mul(1 << attempt.saturating_sub(1).min(20));
        std::time::Duration::from_secs(doubled.min(self.retry_max_backoff_seconds))
    }

    /// Settings that are valid alone but not together, as a message naming them.
    pub fn inconsistency(&self) -> Option<String> {
        (self.retry_min_backoff_seconds > self.retry_max_backoff_seconds).then(|| {
            format!(
                "--retry-min-backoff-seconds (FLOW_OPERATOR_RETRY_MIN_BACKOFF_SECONDS) is {} s, more than \
                 --retry-max-backoff-seconds (FLOW_OPERATOR_RETRY_MAX_BACKOFF_SECONDS), {} s",
                self.retry_min_backoff_seconds, self.retry_max_backoff_seconds
            )
        })
    }
}

/// The namespaces of `--watch-namespace`, as [`watch_namespaces`] read them: sorted, each once.
/// Empty only for a value that is exactly empty, which means every namespace, as unset does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchNamespaces(Vec<String>);

impl WatchNamespaces {
    /// The namespaces; none for every namespace.
    pub fn names(&self) -> &[String] {
        &self.0
    }
}

/// Reads `--watch-namespace`: namespace names separated by commas, each trimmed. The value that is
/// exactly empty means every namespace, as unset does (the chart leaves the variable out when its
/// `watchNamespaces` is empty). Any other value must name at least one namespace, and each name
/// between the commas must be a namespace name, a DNS label as Kubernetes requires of one
/// (docs/operator.md, "Settings"): a value such as `,,` or ` ` read as naming none would widen the
/// operator to every namespace, so it is refused, as is an empty name between two others
/// (`shop,,payments`), which the chart refuses as well.
fn watch_namespaces(value: &str) -> Result<WatchNamespaces, String> {
    if value.is_empty() {
        return Ok(WatchNamespaces::default());
    }
    let mut names = Vec::new();
    for name in value.split(',').map(str::trim) {
        if name.is_empty() {
            return Err("an empty namespace name: list namespaces separated by commas, or leave \
                        --watch-namespace (FLOW_WATCH_NAMESPACE) unset for every namespace"
                .to_string());
        }
        if !flow_core::names::is_dns_label(name) {
            return Err(format!(
                "'{name}' is not a namespace name (a DNS label: at most 63 lowercase letters, digits \
                 and '-', starting and ending with a letter or digit)"
            ));
        }
        names.push(name.to_string());
    }
    names.sort();
    names.dedup();
    Ok(WatchNamespaces(names))
}

/// Log line format.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// Logs go to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: logs collected from a pod or a file stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, WatchNamespaces};

    #[test]
    fn clusters_namespace_defaults_to_the_operators_own() {
        let cli = Cli::parse_from(["flow-operator", "--lease-namespace", "flow-system"]);
        assert_eq!(cli.settings.clusters_namespace(), "flow-system");
        let cli = Cli::parse_from(["flow-operator", "--kafka-clusters-namespace", "kafka"]);
        assert_eq!(cli.settings.clusters_namespace(), "kafka");
    }

    #[test]
    fn an_empty_clusters_namespace_is_unset() {
        let cli = Cli::parse_from(["flow-operator", "--kafka-clusters-namespace", "", "--lease-namespace", "ops"]);
        assert_eq!(cli.settings.clusters_namespace(), "ops");
        let cli = Cli::parse_from(["flow-operator", "--kafka-clusters-namespace", " ", "--lease-namespace", ""]);
        assert_eq!(cli.settings.clusters_namespace(), "ankka-flow");
    }

    #[test]
    fn the_retry_backoff_doubles_from_the_minimum_up_to_the_maximum() {
        let cli = Cli::parse_from(["flow-operator"]);
        let delays: Vec<u64> = (1..=11).map(|k| cli.settings.retry_backoff(k).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        let cli = Cli::parse_from([
            "flow-operator",
            "--retry-min-backoff-seconds",
            "3",
            "--retry-max-backoff-seconds",
            "3600",
        ]);
        assert_eq!(cli.settings.retry_backoff(1).as_secs(), 3);
        assert_eq!(cli.settings.retry_backoff(4).as_secs(), 24);
        // The exponent stops at 20: 3 * 2^20 s is past the maximum, and nothing overflows.
        assert_eq!(cli.settings.retry_backoff(u32::MAX).as_secs(), 3600);
        assert_eq!(cli.settings.inconsistency(), None);
    }

    #[test]
    fn a_minimum_backoff_above_the_maximum_is_refused_naming_both() {
        let cli = Cli::parse_from([
            "flow-operator",
            "--retry-min-backoff-seconds",
            "60",
            "--retry-max-backoff-seconds",
            "30",
        ]);
        let e = cli.settings.inconsistency().expect("inconsistent");
        assert!(
            e.contains("FLOW_OPERATOR_RETRY_MIN_BACKOFF_SECONDS")
                && e.contains("FLOW_OPERATOR_RETRY_MAX_BACKOFF_SECONDS"),
            "{e}"
        );
    }

    #[test]
    fn an_empty_sidecar_image_is_unset() {
        let cli = Cli::parse_from(["flow-operator", "--sidecar-image", ""]);
        assert_eq!(cli.settings.sidecar_image(), None);
        let cli = Cli::parse_from(["flow-operator", "--sidecar-image", "ghcr.io/x/sidecar:1"]);
        assert_eq!(cli.settings.sidecar_image(), Some("ghcr.io/x/sidecar:1"));
    }

    #[test]
    fn settings_out_of_range_are_refused_at_start_naming_the_setting() {
        let cli = Cli::parse_from(["flow-operator"]);
        assert_eq!(cli.settings.reset_retry_seconds, 300);
        for (flag, value) in [
            ("--reset-retry-seconds", "0"),
            ("--resync-seconds", "0"),
            ("--max-concurrent-reconciles", "0"),
            ("--kafka-request-timeout-seconds", "0"),
            ("--lag-interval-seconds", "0"),
            ("--reset-settle-seconds", "3601"),
            ("--reset-concurrency", "0"),
            ("--kafka-calls-per-cluster", "0"),
            ("--retry-min-backoff-seconds", "0"),
            ("--retry-max-backoff-seconds", "0"),
        ] {
            let e = Cli::try_parse_from(["flow-operator", flag, value]).expect_err(flag).to_string();
            assert!(e.contains(flag) && e.contains(value), "{flag}: {e}");
        }
    }

    #[test]
    fn watch_namespaces_unset_or_empty_mean_every_namespace_and_names_are_trimmed() {
        assert_eq!(Cli::parse_from(["flow-operator"]).settings.watch_namespaces, None);
        let names = |value: &str| {
            Cli::parse_from(["flow-operator", "--watch-namespace", value]).settings.watch_namespaces.expect(value)
        };
        assert!(names("").names().is_empty());
        assert_eq!(names("shop"), WatchNamespaces(vec!["shop".into()]));
        assert_eq!(names("a, b"), WatchNamespaces(vec!["a".into(), "b".into()]));
        assert_eq!(names(" payments ,shop,payments"), WatchNamespaces(vec!["payments".into(), "shop".into()]));
        let longest = "n".repeat(63);
        assert_eq!(names(&longest), WatchNamespaces(vec![longest.clone()]));
    }

    #[test]
    fn a_watch_namespace_naming_none_or_not_a_namespace_is_refused_naming_the_value() {
        let too_long = "n".repeat(64);
        for (value, why) in [
            (",,", "an empty namespace name"),
            (" , ", "an empty namespace name"),
            ("  ", "an empty namespace name"),
            (",", "an empty namespace name"),
            ("a,,b", "an empty namespace name"),
            ("shop,", "an empty namespace name"),
            ("Bad_NS", "'Bad_NS' is not a namespace name"),
            ("shop,Bad_NS", "'Bad_NS' is not a namespace name"),
            ("-shop", "'-shop' is not a namespace name"),
            ("shop-", "'shop-' is not a namespace name"),
            ("shop.eu", "'shop.eu' is not a namespace name"),
            (too_long.as_str(), "is not a namespace name"),
        ] {
            // With `=`, as from FLOW_WATCH_NAMESPACE: a value starting with '-' is not a flag.
            let arg = format!("--watch-namespace={value}");
            let e = Cli::try_parse_from(["flow-operator", arg.as_str()]).expect_err(value);
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{value:?}");
            let e = e.to_string();
            assert!(
                e.contains("--watch-namespace") && e.contains(&format!("'{value}'")) && e.contains(why),
                "{value:?}: {e}"
            );
        }
    }

    #[test]
    fn lag_per_partition_is_off_unless_asked_for() {
        assert!(!Cli::parse_from(["flow-operator"]).settings.lag_per_partition);
        assert!(Cli::parse_from(["flow-operator", "--lag-per-partition", "true"]).settings.lag_per_partition);
        assert!(!Cli::parse_from(["flow-operator", "--lag-per-partition", "false"]).settings.lag_per_partition);
        assert!(Cli::try_parse_from(["flow-operator", "--lag-per-partition", "maybe"]).is_err());
    }

    #[test]
    fn the_reset_settle_defaults_to_one_second_and_zero_turns_it_off() {
        let cli = Cli::parse_from(["flow-operator"]);
        assert_eq!(cli.settings.reset_settle_seconds, 1);
        let cli = Cli::parse_from(["flow-operator", "--reset-settle-seconds", "0"]);
        assert_eq!(cli.settings.reset_settle_seconds, 0);
    }
}
