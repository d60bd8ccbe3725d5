//! Kafka enforces tenancy, on the test bed broker's ACL listener (`FLOW_TESTBED_KAFKA_ACL`, SASL_SSL
//! with PLAIN, behind the broker's `StandardAuthorizer`; its users in docs/testbed.md).
//!
//! The cluster Secret `kafka-cluster-acls` holds the operator's credential (user `operator`) and
//! gives the streamlets of `acls-shop` and `acls-tenant` credentials of their own
//! (`streamlet-credentials.<namespace>`: users `shop-streamlets` and `tenant-streamlets`), and
//! requires them (`require-streamlet-credentials`), so `acls-other`, which it allows without
//! credentials, is refused. Each principal gets exactly the ACLs of docs/secured-kafka.md, granted
//! with Kafka's own `kafka-acls` (`AclCommand`) through the PLAINTEXT listener, whose ANONYMOUS
//! principal is a super user, and removed when the test ends.
//!
//! One test, in phases:
//! 1. The rendered `streamlet.conf` of each namespace carries its own credential and nothing of the
//!    operator's; `acls-other` is refused and gets no streamlet Secret.
//! 2. Each tenant's streamlet, played by the stand-in from its rendered Secret, reads its own topic
//!    and commits in its own group. The tenant's credential, taken from its `streamlet.conf` as
//!    anyone who can read Secrets there could, can neither describe nor reset the shop's group with
//!    `kafka-consumer-groups`, nor read the shop's topic with `kafka-console-consumer` (the shop's
//!    offsets read back unchanged); on its own group the same tool works.
//! 3. With exactly the documented ACLs, the operator creates the managed topics, plans and carries
//!    out a reset (read back at the log start), and its lag sampler reports the lag.
//! 4. Without the operator's Read on the tenant's groups, a reset fails at once with one
//!    `ResetOffsetsFailed` naming the authorization failure, and nothing is committed (read back).
//! 5. Deleting the shop's pipeline deletes its managed topics. No password shows in the operator's
//!    log, the events, the statuses or the metrics.

use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::time::{Duration, Instant};

use flow_core::blueprint::tree::{self, Node};
use flow_testbed::*;

/// The ACL listener's users (docs/testbed.md), test credentials on loopback.
const OPERATOR: User = User { name: "operator", password: "operator-secret" };
const SHOP_USER: User = User { name: "shop-streamlets", password: "shop-streamlets-secret" };
const TENANT_USER: User = User { name: "tenant-streamlets", password: "tenant-streamlets-secret" };

#[derive(Clone, Copy)]
struct User {
    name: &'static str,
    password: &'static str,
}

/// A tenant: its namespace, its pipeline (consumer groups and managed topics `<pipeline>.*`), the
/// unmanaged topic its router reads, and its streamlets' user.
#[derive(Clone, Copy)]
struct Tenant {
    ns: &'static str,
    pipeline: &'static str,
    topic: &'static str,
    user: User,
}

const SHOP: Tenant = Tenant { ns: "acls-shop", pipeline: "acl-shop", topic: "acls.shop-events", user: SHOP_USER };
const TENANT: Tenant =
    Tenant { ns: "acls-tenant", pipeline: "acl-tenant", topic: "acls.tenant-events", user: TENANT_USER };
/// A namespace the Secret allows, but gives no streamlet credentials: it is refused, so its topic is
/// never read and its `user` never used.
const OTHER: Tenant = Tenant {
    ns: "acls-other",
    pipeline: "acl-other",
    topic: "acls.tenant-events",
    user: User { name: "", password: "" },
};

const CLUSTER: &str = "acls";
/// `kafka-consumer-groups`' option for its settings file.
const GROUPS: &str = "--command-config";
const PARTITIONS: i32 = 3;
const PER_PARTITION: u32 = 10;

impl Tenant {
    fn group(&self) -> String {
        format!("{}.router.in", self.pipeline)
    }

    fn prefix(&self) -> String {
        format!("{}.", self.pipeline)
    }

    /// The Kafka names of its managed topics.
    fn managed(&self) -> [String; 2] {
        [format!("{}.valid", self.pipeline), format!("{}.review", self.pipeline)]
    }
}

/// One `kafka-acls` call: a principal's operations on resources, all prefixed or all literal.
struct Acl {
    principal: &'static str,
    operations: &'static [&'static str],
    /// `(--topic | --group, name)`.
    resources: Vec<(&'static str, String)>,
    prefixed: bool,
}

impl Acl {
    fn args(&self, action: &str) -> Vec<String> {
        let mut a = vec!["--bootstrap-server".to_string(), bed().kafka.clone(), action.into()];
        if action == "--remove" {
            a.push("--force".into());
        }
        a.extend(["--allow-principal".to_string(), format!("User:{}", self.principal)]);
        for op in self.operations {
            a.extend(["--operation".to_string(), op.to_string()]);
        }
        for (kind, name) in &self.resources {
            a.extend([kind.to_string(), name.clone()]);
        }
        if self.prefixed {
            a.extend(["--resource-pattern-type".to_string(), "prefixed".to_string()]);
        }
        a
    }
}

/// The operator's ACLs for the pipelines of `tenants`: exactly docs/secured-kafka.md's three
/// commands (its consumer groups; its managed topics, Delete included for `onDelete: Delete`; the
/// unmanaged topics it reads).
fn operator_acls(tenants: &[Tenant]) -> Vec<Acl> {
    vec![
        Acl {
            principal: OPERATOR.name,
            operations: &["Describe", "Read"],
            resources: tenants.iter().map(|t| ("--group", t.prefix())).collect(),
            prefixed: true,
        },
        Acl {
            principal: OPERATOR.name,
            operations: &["Describe", "DescribeConfigs", "Read", "Create", "Delete"],
            resources: tenants.iter().map(|t| ("--topic", t.prefix())).collect(),
            prefixed: true,
        },
        Acl {
            principal: OPERATOR.name,
            operations: &["Describe", "DescribeConfigs", "Read"],
            resources: tenants.iter().map(|t| ("--topic", t.topic.to_string())).collect(),
            prefixed: false,
        },
    ]
}

/// The ACLs of a tenant's streamlets, as docs/secured-kafka.md lists them: Read on its consumer
/// groups and on the topics its inlets read; Read and Write on its managed topics.
fn streamlet_acls(t: &Tenant) -> Vec<Acl> {
    vec![
        Acl { principal: t.user.name, operations: &["Read"], resources: vec![("--group", t.prefix())], prefixed: true },
        Acl {
            principal: t.user.name,
            operations: &["Read", "Write"],
            resources: vec![("--topic", t.prefix())],
            prefixed: true,
        },
        Acl {
            principal: t.user.name,
            operations: &["Read"],
            resources: vec![("--topic", t.topic.to_string())],
            prefixed: false,
        },
    ]
}

/// Runs Kafka tool `tool` (a `testbed/kafka-tool` name or class); its exit status and its stdout
/// and stderr together.
fn kafka_tool(tool: &str, args: &[String]) -> (bool, String) {
    let o = Command::new(bed().root.join("testbed/kafka-tool")).arg(tool).args(args).output().expect("kafka-tool runs");
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn acl_command(args: Vec<String>) -> String {
    let (ok, out) = kafka_tool("acls", &args);
    assert!(ok && !out.contains("Error"), "kafka-acls {args:?}: {out}");
    out
}

/// The ACLs of the ACL listener's users, as `kafka-acls --list` shows them.
fn listed_acls() -> String {
    let mut args = vec!["--bootstrap-server".to_string(), bed().kafka.clone(), "--list".into()];
    for u in [OPERATOR, SHOP_USER, TENANT_USER] {
        args.extend(["--principal".to_string(), format!("User:{}", u.name)]);
    }
    acl_command(args)
}

/// The ACLs of this test: granted when made, removed when dropped (and before, should a run that
/// was killed have left them).
struct Granted(Vec<Acl>);

impl Granted {
    fn grant(acls: Vec<Acl>) -> Granted {
        if listed_acls().contains("principal=User:") {
            for a in &acls {
                acl_command(a.args("--remove"));
            }
            let left = listed_acls();
            assert!(
                !left.contains("principal=User:"),
                "ACLs of the test bed's ACL users are left: remove them: {left}"
            );
        }
        for a in &acls {
            acl_command(a.args("--add"));
        }
        Granted(acls)
    }
}

impl Drop for Granted {
    fn drop(&mut self) {
        for a in &self.0 {
            let _ = kafka_tool("acls", &a.args("--remove"));
        }
    }
}

/// Deletes the cluster Secret when dropped.
struct ClusterSecret;

impl Drop for ClusterSecret {
    fn drop(&mut self) {
        let _ = kubectl(&[
            "-n",
            "ankka-flow",
            "delete",
            "secret",
            &format!("kafka-cluster-{CLUSTER}"),
            "--ignore-not-found",
        ]);
    }
}

fn env(key: &str) -> String {
    std::env::var(key)
        .unwrap_or_else(|_| panic!("{key} is not set: load the test bed's settings with `eval \"$(testbed/tb env)\"`"))
}

/// One line of Java properties text, the value's backslashes and newlines (PEM) escaped.
fn property(key: &str, value: &str) -> String {
    format!("{key}={}", value.replace('\\', "\\\\").replace('\n', "\\n"))
}

/// The Java client settings of `user` on the ACL listener: SASL_SSL, PLAIN, the CA inline (KIP-651).
fn java_settings(user: User) -> Vec<String> {
    let ca =
        std::fs::read_to_string(std::path::Path::new(&env("FLOW_TESTBED_KAFKA_PKI")).join("ca.crt")).expect("ca.crt");
    vec![
        property("security.protocol", "SASL_SSL"),
        property("sasl.mechanism", "PLAIN"),
        property(
            "sasl.jaas.config",
            &format!(
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="{}" password="{}";"#,
                user.name, user.password
            ),
        ),
        property("ssl.truststore.type", "PEM"),
        property("ssl.truststore.certificates", &ca),
    ]
}

fn cluster_secret() -> ClusterSecret {
    let block = |lines: Vec<String>| -> String { lines.iter().map(|l| format!("    {l}\n")).collect() };
    kubectl_apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: kafka-cluster-{CLUSTER}\n  namespace: ankka-flow\n  labels:\n    \
         flow.ankka.thinkmorestupidless.com/kafka-cluster: {CLUSTER}\n  annotations:\n    \
         flow.ankka.thinkmorestupidless.com/allowed-namespaces: {}, {}, {}\n    \
         flow.ankka.thinkmorestupidless.com/require-streamlet-credentials: \"true\"\nstringData:\n  \
         bootstrap.servers: {}\n  connection-config: |\n{}  streamlet-credentials.{}: |\n{}  streamlet-credentials.{}: |\n{}",
        SHOP.ns,
        TENANT.ns,
        OTHER.ns,
        env("FLOW_TESTBED_KAFKA_ACL"),
        block(java_settings(OPERATOR)),
        SHOP.ns,
        block(java_settings(SHOP.user)),
        TENANT.ns,
        block(java_settings(TENANT.user)),
    ));
    ClusterSecret
}

/// Pipeline `t.pipeline` in `t.ns`, from the real `flow generate`: streamlet `router` (the cart
/// example's descriptor, 0 replicas) reading `t.topic` and writing two managed topics, all on
/// cluster `acls`; its managed topics go with it (`--delete-managed-topics`).
fn apply_pipeline(t: &Tenant) {
    let dir = fresh_dir(&format!("acls-{}", t.pipeline));
    std::fs::create_dir_all(dir.join("flow")).expect("blueprint dir");
    std::fs::copy(bed().root.join("examples/cart/flow/cart-router.json"), dir.join("flow/cart-router.json"))
        .expect("descriptor");
    let managed = |id: &str, port: &str, partitions: i32| {
        format!(
            "    {id} {{\n      producers = [router.{port}]\n      cluster = {CLUSTER}\n      partitions = {partitions}\n      \
             replicas = 1\n    }}\n"
        )
    };
    std::fs::write(
        dir.join("blueprint.conf"),
        format!(
            "blueprint {{\n  name = {}\n  streamlets {{ router = cart-router }}\n  topics {{\n    events {{\n      managed = \
             false\n      topic.name = \"{}\"\n      cluster = {CLUSTER}\n      consumers = [router.in]\n      consumer-config \
             {{ auto.offset.reset = earliest }}\n    }}\n{}{}  }}\n}}\n",
            t.pipeline,
            t.topic,
            managed("valid", "valid", 2),
            managed("review", "review", 1),
        ),
    )
    .expect("blueprint");
    std::fs::write(dir.join("replicas.conf"), "flow.streamlets.router { replicas = 0 }\n").expect("conf");
    let o = Command::new(bin("flow"))
        .args(["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "replicas.conf"])
        .args(["--image", "router=registry.example.com/cart-router:1.2", "-n", t.ns, "--delete-managed-topics"])
        .current_dir(&dir)
        .output()
        .expect("flow runs");
    assert!(o.status.success(), "flow generate: {}", show(&o));
    kubectl_apply(&String::from_utf8(o.stdout).expect("UTF-8"));
}

/// The rendered `streamlet.conf` of `t`'s router, once the operator has rendered it.
fn streamlet_conf(t: &Tenant) -> String {
    let name = format!("flow-{}-router", t.pipeline);
    wait_until(&format!("Secret {}/{name}", t.ns), Duration::from_secs(60), || {
        kubectl(&["-n", t.ns, "get", "secret", &name]).status.success().then_some(())
    });
    secret_file(t.ns, &name, "streamlet.conf")
}

/// The `connection-config` of inlet `in` in a `streamlet.conf`: the Java client settings a
/// streamlet (or whoever reads its Secret) connects with.
fn inlet_connection(conf: &str) -> BTreeMap<String, String> {
    let root = tree::parse(conf, &HashMap::new()).expect("streamlet.conf parses");
    let obj =
        |n: &Node, k: &str| n.as_object().and_then(|o| o.get(k)).cloned().unwrap_or_else(|| panic!("{k}: {conf}"));
    let block = ["inlets", "in", "connection-config"].iter().fold(obj(&Node::Object(root), "flow"), |n, k| obj(&n, k));
    tree::flatten(block.as_object().expect("an object")).expect("a properties block")
}

fn offsets(at: i64) -> BTreeMap<i32, Option<i64>> {
    (0..PARTITIONS).map(|p| (p, Some(at))).collect()
}

#[test]
fn kafka_enforces_tenancy_with_each_namespaces_own_credential_and_the_documented_acls() {
    // Serial: it changes Kafka's ACLs, which every client of the ACL listener sees.
    let _serial = serial();
    install_crd();
    ensure_namespace("ankka-flow");
    for t in [SHOP, TENANT] {
        kafka::recreate_topic(t.topic, PARTITIONS);
        kafka::produce(t.topic, PARTITIONS, PER_PARTITION);
        groups::forget(&t.group());
        for m in t.managed() {
            kafka::remove_topic(&m);
        }
    }
    let mut acls = operator_acls(&[SHOP, TENANT]);
    acls.extend(streamlet_acls(&SHOP));
    acls.extend(streamlet_acls(&TENANT));
    let _acls = Granted::grant(acls);
    let _secret = cluster_secret();
    for t in [SHOP, TENANT, OTHER] {
        // A run that failed leaves its pipelines with their finalizer (`onDelete: Delete`), which
        // no operator removes now: the namespace would never go.
        let left = kubectl(&["-n", t.ns, "get", "aflow", "-o", "name"]);
        for name in String::from_utf8_lossy(&left.stdout).lines() {
            kubectl_ok(&["-n", t.ns, "patch", name, "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
        }
        fresh_namespace(t.ns);
    }
    let watch = format!("{},{},{}", SHOP.ns, TENANT.ns, OTHER.ns);
    let host = format!("flow-operator-acls-{}", std::process::id());
    let op = Operator::start(
        &fresh_dir("acls-operator"),
        &[
            ("FLOW_WATCH_NAMESPACE", &watch),
            ("FLOW_LEASE_NAME", "ankka-flow-operator-acls"),
            ("HOSTNAME", &host),
            ("FLOW_LAG_INTERVAL_SECONDS", "1"),
        ],
    );
    for t in [SHOP, TENANT, OTHER] {
        apply_pipeline(&t);
    }

    // 1. Each namespace's streamlet.conf holds its own credential, and nothing of the operator's.
    for t in [SHOP, TENANT] {
        let conf = streamlet_conf(&t);
        let settings = inlet_connection(&conf);
        assert!(
            settings["sasl.jaas.config"].contains(&format!(r#"username="{}""#, t.user.name)),
            "{}: {settings:?}",
            t.ns
        );
        assert!(!conf.contains(OPERATOR.password) && !conf.contains(r#"username=\"operator\""#), "{conf}");
    }
    let refused = format!(
        "Kafka cluster '{CLUSTER}' requires the streamlets of each namespace to have credentials of their own, and \
         Secret 'kafka-cluster-{CLUSTER}' has none for namespace '{}': an administrator adds its key \
         'streamlet-credentials.{}'",
        OTHER.ns, OTHER.ns
    );
    wait_until("acls-other refused", Duration::from_secs(60), || {
        event_notes(OTHER.ns, "Refused").contains(&refused).then_some(())
    });
    assert_eq!(event_notes(OTHER.ns, "Refused"), [refused]);
    assert!(
        !kubectl(&["-n", OTHER.ns, "get", "secret", &format!("flow-{}-router", OTHER.pipeline)]).status.success(),
        "a refused namespace gets no streamlet Secret"
    );

    // 3, first part. With exactly the documented ACLs the operator creates the managed topics.
    for t in [SHOP, TENANT] {
        wait_until(&format!("{}: TopicCreated twice", t.ns), Duration::from_secs(60), || {
            (event_notes(t.ns, "TopicCreated").len() == 2).then_some(())
        });
        let live = kafka::topics();
        for m in t.managed() {
            assert!(live.contains(&m), "{m} in {live:?}");
        }
    }

    // 2. Each tenant's streamlet reads its own topic in its own group, with its own credential.
    for t in [SHOP, TENANT] {
        let read = standin::read_as_streamlet(t.ns, t.pipeline, "router", u64::from(PER_PARTITION) * 3);
        assert_eq!(read["records"], 30, "{}: {read}", t.ns);
        assert_eq!(kafka::committed(&t.group(), t.topic, PARTITIONS), offsets(i64::from(PER_PARTITION)), "{}", t.ns);
    }
    // The tenant's credential, as anyone who reads its streamlet Secret has it, in a file for
    // Kafka's own tools.
    let stolen = inlet_connection(&streamlet_conf(&TENANT));
    let stolen_file = fresh_dir("acls-stolen").join("tenant.properties");
    std::fs::write(&stolen_file, stolen.iter().map(|(k, v)| property(k, v) + "\n").collect::<String>())
        .expect("command config");
    // `flag`: the tool's option for its settings file (`kafka-console-consumer` calls it
    // `--consumer.config`, `kafka-consumer-groups` `--command-config`).
    let with_stolen = |flag: &str, args: &[&str]| -> Vec<String> {
        let mut a = vec!["--bootstrap-server".to_string(), env("FLOW_TESTBED_KAFKA_ACL")];
        a.extend([flag.to_string(), stolen_file.display().to_string()]);
        a.extend(args.iter().map(|s| s.to_string()));
        a
    };
    let shop_group = SHOP.group();
    let (describe_ok, describe) =
        kafka_tool("consumer-groups", &with_stolen(GROUPS, &["--describe", "--group", &shop_group]));
    assert!(describe.contains("GroupAuthorizationException"), "describing the shop's group: {describe}");
    let (reset_ok, reset) = kafka_tool(
        "consumer-groups",
        &with_stolen(
            GROUPS,
            &["--reset-offsets", "--to-earliest", "--execute", "--group", &shop_group, "--topic", SHOP.topic],
        ),
    );
    assert!(reset.contains("GroupAuthorizationException"), "resetting the shop's group: {reset}");
    let (spy_ok, spy) = kafka_tool(
        "console-consumer",
        &with_stolen(
            "--consumer.config",
            &[
                "--topic",
                SHOP.topic,
                "--group",
                &format!("{}spy", TENANT.prefix()),
                "--from-beginning",
                "--max-messages",
                "1",
                "--timeout-ms",
                "15000",
            ],
        ),
    );
    assert!(spy.contains("TopicAuthorizationException"), "reading the shop's topic: {spy}");
    for (what, ok, out) in [("describe", describe_ok, &describe), ("reset", reset_ok, &reset), ("read", spy_ok, &spy)] {
        let line = out.lines().find(|l| l.contains("Exception")).unwrap_or_default();
        eprintln!(
            "acls: the tenant's credential, {what} of the shop's ({}): {line}",
            if ok { "exit status 0" } else { "exit status not 0" }
        );
    }
    let (ok, listed) = kafka_tool("consumer-groups", &with_stolen(GROUPS, &["--list"]));
    assert!(ok && listed.lines().any(|l| l == TENANT.group()) && !listed.contains(&shop_group), "{listed}");
    assert_eq!(
        kafka::committed(&shop_group, SHOP.topic, PARTITIONS),
        offsets(i64::from(PER_PARTITION)),
        "the shop's group read back unchanged"
    );
    // On its own group the same tool and credential work: Kafka's Read on a group lets its
    // streamlets commit, so whoever reads a namespace's Secrets can move that namespace's groups.
    let (ok, own) = kafka_tool(
        "consumer-groups",
        &with_stolen(
            GROUPS,
            &["--reset-offsets", "--to-offset", "5", "--execute", "--group", &TENANT.group(), "--topic", TENANT.topic],
        ),
    );
    assert!(ok && !own.contains("Exception"), "{own}");
    assert_eq!(kafka::committed(&TENANT.group(), TENANT.topic, PARTITIONS), offsets(5));

    // 3. The reset, its dry run, and the lag sampler, with exactly the documented ACLs.
    let plan = flow(&["reset", SHOP.pipeline, "-n", SHOP.ns, "--dry-run"]);
    let plan_text = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert!(plan.status.success() && plan_text.contains("would move 3 partition(s)"), "{}", show(&plan));
    let id = flow_reset(SHOP.ns, SHOP.pipeline, &[]);
    wait_done(SHOP.ns, SHOP.pipeline, &id, Duration::from_secs(120));
    assert_eq!(
        event_notes(SHOP.ns, "ResetOffsets"),
        [format!("{shop_group}: {PARTITIONS} partition(s) of '{}' to earliest", SHOP.topic)]
    );
    assert_eq!(kafka::committed(&shop_group, SHOP.topic, PARTITIONS), offsets(0));
    let metrics = metrics_address(&op);
    // one series per group: lag per partition is opt-in (FLOW_LAG_PER_PARTITION)
    wait_until("the lag of both tenants' groups", Duration::from_secs(60), || {
        let (_, body) = http_get(&metrics, "/metrics");
        (lag_in_metrics(&body, &shop_group) == (30, 1) && lag_in_metrics(&body, &TENANT.group()) == (15, 1))
            .then_some(())
    });

    // 4. One ACL missing: the operator's Read on the tenant's groups (Describe stays). The reset
    // fails at once, naming the authorization failure, and commits nothing.
    acl_command(
        Acl {
            principal: OPERATOR.name,
            operations: &["Read"],
            resources: vec![("--group", TENANT.prefix())],
            prefixed: true,
        }
        .args("--remove"),
    );
    let started = Instant::now();
    let id = flow_reset(TENANT.ns, TENANT.pipeline, &[]);
    wait_done(TENANT.ns, TENANT.pipeline, &id, Duration::from_secs(120));
    let took = started.elapsed();
    let failed = event_notes(TENANT.ns, "ResetOffsetsFailed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].starts_with(&format!("{}: ", TENANT.group()))
            && failed[0].to_ascii_lowercase().contains("group authorization failed"),
        "{failed:?}"
    );
    assert_eq!(event_notes(TENANT.ns, "ResetOffsets"), Vec::<String>::new());
    assert_eq!(kafka::committed(&TENANT.group(), TENANT.topic, PARTITIONS), offsets(5), "nothing committed");
    assert!(took < Duration::from_secs(30), "the failure took {took:?}");
    eprintln!(
        "acls: the reset without Read on the group was done (failed) {took:?} after it was requested: {failed:?}"
    );

    // 5. The managed topics go with the pipeline (Delete on them), and no password shows anywhere
    // the operator writes.
    let (_, body) = http_get(&metrics, "/metrics");
    kubectl_ok(&["-n", SHOP.ns, "delete", "aflow", SHOP.pipeline, "--wait=true", "--timeout=60s"]);
    wait_until("the shop's managed topics deleted", Duration::from_secs(60), || {
        let live = kafka::topics();
        SHOP.managed().iter().all(|m| !live.contains(m)).then_some(())
    });
    let mut shown = op.log_text() + &body;
    for t in [SHOP, TENANT, OTHER] {
        shown += &kubectl_ok(&["-n", t.ns, "get", "events", "-o", "json"]);
        shown += &kubectl_ok(&["-n", t.ns, "get", "aflow", "-o", "json"]);
    }
    for u in [OPERATOR, SHOP_USER, TENANT_USER] {
        assert!(
            !shown.contains(u.password),
            "{}'s password shows in the operator's log, events, status or metrics",
            u.name
        );
    }
}
