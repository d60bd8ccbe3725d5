//! `flow-standin`: a stand-in for a streamlet's inlet, for tests and the demo.
//!
//! Playing a streamlet (`--namespace`, `--pipeline`, `--streamlet`, optionally `--inlet`), it does
//! the sidecar's part of the job: it reads the streamlet's rendered Secret
//! `flow-<pipeline>-<streamlet>` from the API server (the sidecar reads the same Secret, mounted as
//! files) and takes everything from its `streamlet.conf`: the inlet's topic, consumer group, client
//! id, bootstrap servers, connection settings and consumer settings (Java client settings, turned
//! into librdkafka's by flow-core's translation, the one the operator uses). Nothing of that comes
//! from its command line. Playing a consumer outside Kubernetes (`--group`, `--topic`), it is told
//! its group (also its `client.id`) and topic instead.
//!
//! It joins the inlet's consumer group, reads the topic, commits what it read, and prints a one-line
//! JSON summary on stdout:
//! `{"records":N,"first":{"<partition>":<offset>},"next":{"<partition>":<offset>}}` where `first` is
//! the first offset read per partition and `next` the committed position.
//!
//! Modes: `--expect N` reads until N records arrived (then commits and exits 0; exits 1 if they do
//! not arrive within `--timeout`); `--hold` stays in the group, reading and committing, until it is
//! sent SIGTERM or SIGINT, then commits what it read and leaves (a live member).
//!
//! Playing a streamlet that writes, `--forward` also writes each record it read to the streamlet's
//! outlet (`--outlet`, default its only outlet), whose topic, client id, bootstrap servers and
//! producer settings it takes from the same `streamlet.conf`, and flushes what it wrote before it
//! commits what it read, as a streamlet that processes each record at least once does. `--tag T`
//! puts `T` before each value it writes, so that a test can tell one run's records from another's;
//! `--values` adds `"values":{"<value>":<times read>}` to the summary.
//!
//! Playing a pod's container: `--close-delay-seconds N` keeps reading for N seconds after the
//! signal (a pod with a long termination grace period), and `--commit-on-close` then commits the
//! consumer's position on every assigned partition, synchronously, before it leaves the group (and
//! exits 1 if that commit fails). Progress lines go to stderr, each starting with `flow-standin: `,
//! so that a test can wait for them: see [`say`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

#[derive(Parser, Debug)]
#[command(name = "flow-standin", about = "Stand-in streamlet consumer for tests and the demo")]
struct Args {
    /// Play this streamlet's inlet: read its rendered Secret in this namespace (with
    /// `--pipeline` and `--streamlet`).
    #[arg(long, requires_all = ["pipeline", "streamlet"], conflicts_with_all = ["group", "topic"])]
    namespace: Option<String>,
    /// Pipeline id of the streamlet to play.
    #[arg(long, requires = "namespace")]
    pipeline: Option<String>,
    /// Name of the streamlet to play.
    #[arg(long, requires = "namespace")]
    streamlet: Option<String>,
    /// Which inlet of the streamlet to play (default: its only inlet).
    #[arg(long, requires = "namespace")]
    inlet: Option<String>,
    /// Kafka brokers (a consumer outside Kubernetes; a streamlet takes its own from its Secret).
    #[arg(long, env = "FLOW_TESTBED_KAFKA", default_value = "127.0.0.1:19092")]
    bootstrap_servers: String,
    /// Consumer group, also used as client.id: `<pipeline>.<streamlet>.<inlet>` (a consumer outside
    /// Kubernetes).
    #[arg(long, required_unless_present = "namespace", requires = "topic")]
    group: Option<String>,
    /// Topic to read (a consumer outside Kubernetes).
    #[arg(long, required_unless_present = "namespace", requires = "group")]
    topic: Option<String>,
    /// Read this many records, commit and exit.
    #[arg(long, conflicts_with = "hold")]
    expect: Option<u64>,
    /// Stay in the group until SIGTERM/SIGINT, then commit what was read and leave.
    #[arg(long)]
    hold: bool,
    /// Give up after this many seconds (with --expect).
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Group protocol: classic, or consumer (KIP-848).
    #[arg(long, default_value = "classic")]
    group_protocol: String,
    /// Where a group without committed offsets starts: earliest or latest.
    #[arg(long, default_value = "earliest")]
    auto_offset_reset: String,
    /// Records per second at most (0: unthrottled).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// On SIGTERM/SIGINT, commit the consumer's position on every assigned partition, synchronously,
    /// before leaving the group; a failed commit makes the exit status 1.
    #[arg(long)]
    commit_on_close: bool,
    /// After SIGTERM/SIGINT, keep reading (and committing as usual) this many seconds before closing.
    #[arg(long, default_value_t = 0)]
    close_delay_seconds: u64,
    /// Extra client properties, key=value; repeatable.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    properties: Vec<String>,
    /// Write each record read to the streamlet's outlet, as its streamlet.conf says (playing a
    /// streamlet only), flushed before what was read is committed.
    #[arg(long, requires = "namespace")]
    forward: bool,
    /// With --forward: which outlet (default: the streamlet's only outlet).
    #[arg(long, requires = "forward")]
    outlet: Option<String>,
    /// With --forward: put this text before each value written.
    #[arg(long, requires = "forward", default_value = "")]
    tag: String,
    /// Count each value read in the summary (`"values":{"<value>":<n>}`).
    #[arg(long)]
    values: bool,
}

/// One progress line on stderr. Tests wait for these; their wording is part of the tool's interface
/// (docs/testbed.md lists them).
fn say(line: &str) {
    eprintln!("flow-standin: {line}");
}

/// What the producer of `--forward` needs: its topic, client id and client properties.
struct Outlet {
    topic: String,
    client_id: String,
    /// Client properties in librdkafka's names, brokers included.
    properties: BTreeMap<String, String>,
}

/// What the consumer needs: its topic, group, client id and client properties.
struct Inlet {
    topic: String,
    group: String,
    client_id: String,
    /// Client properties in librdkafka's names, brokers included.
    properties: BTreeMap<String, String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut outlet = None;
    let inlet = match (&args.namespace, &args.pipeline, &args.streamlet) {
        (Some(ns), Some(pipeline), Some(streamlet)) => {
            let conf = rendered::conf(ns, pipeline, streamlet, args.timeout)?;
            let inlet = rendered::from_conf(&conf, args.inlet.as_deref())?;
            if args.forward {
                outlet = Some(rendered::outlet_from_conf(&conf, args.outlet.as_deref())?);
            }
            say(&format!(
                "playing {ns}/{pipeline}/{streamlet}: {} settings from Secret '{}'",
                if args.forward { "inlet and outlet" } else { "inlet" },
                rendered::secret_name(pipeline, streamlet)
            ));
            inlet
        }
        _ => {
            let (Some(group), Some(topic)) = (&args.group, &args.topic) else {
                bail!("give --namespace, --pipeline and --streamlet, or --group and --topic");
            };
            Inlet {
                topic: topic.clone(),
                group: group.clone(),
                client_id: group.clone(),
                properties: BTreeMap::from([
                    ("bootstrap.servers".to_string(), args.bootstrap_servers.clone()),
                    ("auto.offset.reset".to_string(), args.auto_offset_reset.clone()),
                ]),
            }
        }
    };
    let mut cfg = ClientConfig::new();
    // The sidecar's defaults, which the rendered settings may override (a consumer-config's
    // `auto.offset.reset = latest`, say); what the sidecar always sets comes after them.
    cfg.set("auto.offset.reset", "earliest").set("group.protocol", &args.group_protocol);
    if args.group_protocol == "classic" {
        cfg.set("session.timeout.ms", "6000").set("heartbeat.interval.ms", "500");
    }
    for (k, v) in &inlet.properties {
        cfg.set(k, v);
    }
    cfg.set("group.id", &inlet.group)
        .set("client.id", &inlet.client_id)
        .set("enable.auto.commit", "false")
        .set("allow.auto.create.topics", "false");
    for p in &args.properties {
        let (k, v) = p.split_once('=').context("--property takes KEY=VALUE")?;
        cfg.set(k, v);
    }
    let consumer: BaseConsumer = cfg.create().context("creating the consumer")?;
    let producer = outlet.as_ref().map(forwarding::producer).transpose()?;
    if let Some(o) = &outlet {
        say(&format!("writing to '{}' with client id '{}'", o.topic, o.client_id));
    }
    // What was read is committed only once what it was forwarded as is written.
    let commit = |consumer: &BaseConsumer| -> anyhow::Result<()> {
        if let Some(p) = &producer {
            forwarding::flush(p)?;
        }
        consumer.commit_consumer_state(CommitMode::Sync).map_err(anyhow::Error::from)
    };
    let mut values: BTreeMap<String, u64> = BTreeMap::new();
    let mut forwarded = 0u64;
    consumer.subscribe(&[&inlet.topic]).context("subscribing")?;
    say(&format!(
        "reading '{}' as group '{}' with client id '{}' (pid {})",
        inlet.topic,
        inlet.group,
        inlet.client_id,
        std::process::id()
    ));

    let signal = Arc::new(AtomicI32::new(0));
    stop_signals::watch(signal.clone());
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut records = 0u64;
    let mut first: BTreeMap<i32, i64> = BTreeMap::new();
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let started = Instant::now();
    let mut close_at: Option<Instant> = None;
    loop {
        if close_at.is_none() {
            let sig = signal.load(Ordering::SeqCst);
            if sig != 0 {
                let name = stop_signals::name(sig);
                let delay = args.close_delay_seconds;
                if delay > 0 {
                    say(&format!("{name} received: reading on for {delay} s before closing"));
                } else {
                    say(&format!("{name} received: closing"));
                }
                close_at = Some(Instant::now() + Duration::from_secs(delay));
            }
        }
        if close_at.is_some_and(|t| Instant::now() >= t) {
            break;
        }
        if let Some(n) = args.expect {
            if records >= n {
                break;
            }
            if Instant::now() > deadline {
                bail!("read {records} of {n} records from '{}' within {} s", inlet.topic, args.timeout);
            }
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => eprintln!("flow-standin: {e}"),
            Some(Ok(m)) => {
                if records == 0 {
                    say(&format!("first record: partition {} offset {}", m.partition(), m.offset()));
                }
                records += 1;
                first.entry(m.partition()).or_insert(m.offset());
                next.insert(m.partition(), m.offset() + 1);
                let value = m.payload().map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default();
                if let (Some(p), Some(o)) = (&producer, &outlet) {
                    forwarding::send(p, &o.topic, m.key(), &format!("{}{value}", args.tag))?;
                    forwarded += 1;
                }
                if args.values {
                    *values.entry(value).or_default() += 1;
                }
                if args.rate > 0 {
                    let due = started + Duration::from_secs_f64(records as f64 / args.rate as f64);
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    if records.is_multiple_of(args.rate.max(1)) {
                        commit(&consumer).ok();
                    }
                }
                if args.hold && records.is_multiple_of(100) {
                    commit(&consumer).ok();
                }
            }
        }
    }
    if close_at.is_some() && args.commit_on_close {
        if let Some(p) = &producer {
            forwarding::flush(p)?;
        }
        commit_position(&consumer)?;
    } else if records > 0 {
        match commit(&consumer) {
            // Everything read was committed already (throttled reads commit as they go).
            Err(e)
                if e.downcast_ref::<rdkafka::error::KafkaError>().and_then(|k| k.rdkafka_error_code())
                    == Some(rdkafka::types::RDKafkaErrorCode::NoOffset) => {}
            other => other.context("committing")?,
        }
    }
    consumer.unsubscribe();
    // Dropping the consumer closes it: it leaves the group and waits until that is done.
    drop(consumer);
    if close_at.is_some() {
        say("left the group");
    }
    let mut summary = serde_json::json!({ "records": records, "first": first, "next": next });
    if producer.is_some() {
        summary["forwarded"] = forwarded.into();
    }
    if args.values {
        summary["values"] = serde_json::json!(values);
    }
    println!("{summary}");
    Ok(())
}

/// The close commit: the position (next offset to read) of every assigned partition that has one,
/// committed synchronously, then reported as `committed on close: {"<partition>":<offset>,...}`.
fn commit_position(consumer: &BaseConsumer) -> anyhow::Result<()> {
    let position = consumer.position().context("reading the consumer's position")?;
    let mut tpl = TopicPartitionList::new();
    let mut shown = BTreeMap::new();
    for e in position.elements() {
        if let Offset::Offset(n) = e.offset() {
            tpl.add_partition_offset(e.topic(), e.partition(), Offset::Offset(n)).context("an offset")?;
            shown.insert(e.partition(), n);
        }
    }
    if shown.is_empty() {
        say("committed on close: nothing (no position yet)");
        return Ok(());
    }
    say(&format!("closing: committing {}", serde_json::json!(shown)));
    consumer.commit(&tpl, CommitMode::Sync).context("the commit on close")?;
    say(&format!("committed on close: {}", serde_json::json!(shown)));
    Ok(())
}

/// Writing what was read to the outlet (`--forward`).
mod forwarding {
    use std::time::Duration;

    use anyhow::Context;
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    use super::Outlet;

    /// The outlet's producer, with its rendered settings.
    pub fn producer(o: &Outlet) -> anyhow::Result<BaseProducer> {
        let mut cfg = ClientConfig::new();
        for (k, v) in &o.properties {
            cfg.set(k, v);
        }
        cfg.set("client.id", &o.client_id);
        cfg.create().context("creating the producer")
    }

    /// Queues one record; waits for room when the queue is full.
    pub fn send(p: &BaseProducer, topic: &str, key: Option<&[u8]>, value: &str) -> anyhow::Result<()> {
        loop {
            let mut record = BaseRecord::<[u8], str>::to(topic).payload(value);
            if let Some(k) = key {
                record = record.key(k);
            }
            match p.send(record) {
                Ok(()) => return Ok(()),
                Err((e, _)) if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) => {
                    p.poll(Duration::from_millis(50));
                }
                Err((e, _)) => return Err(e).context("writing to the outlet"),
            }
        }
    }

    /// Waits until everything queued is written.
    pub fn flush(p: &BaseProducer) -> anyhow::Result<()> {
        p.flush(Duration::from_secs(30)).context("flushing what was written to the outlet")
    }
}

/// The streamlet's rendered settings, read as the sidecar reads them.
mod rendered {
    use std::collections::{BTreeMap, HashMap};
    use std::time::{Duration, Instant};

    use anyhow::{Context, anyhow, bail};
    use flow_core::blueprint::tree::{self, Node, Object};
    use k8s_openapi::api::core::v1::Secret;

    use super::{Inlet, Outlet};

    /// The file of the Secret the sidecar reads its settings from.
    const CONF_KEY: &str = "streamlet.conf";

    /// `flow-<pipeline>-<streamlet>`.
    pub fn secret_name(pipeline: &str, streamlet: &str) -> String {
        flow_core::names::streamlet_object_name(pipeline, streamlet)
    }

    /// The text of `streamlet.conf` of the streamlet's rendered Secret, waiting up to `timeout_s`
    /// seconds for the Secret to appear.
    pub fn conf(ns: &str, pipeline: &str, streamlet: &str, timeout_s: u64) -> anyhow::Result<String> {
        read_conf(ns, &secret_name(pipeline, streamlet), Duration::from_secs(timeout_s))
    }

    /// `streamlet.conf` of Secret `ns`/`name`, from the API server (KUBECONFIG).
    fn read_conf(ns: &str, name: &str, timeout: Duration) -> anyhow::Result<String> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("a tokio runtime")?;
        rt.block_on(async {
            let client = kube::Client::try_default().await.context("cannot reach Kubernetes")?;
            let api: kube::Api<Secret> = kube::Api::namespaced(client, ns);
            let end = Instant::now() + timeout;
            loop {
                match api.get_opt(name).await.with_context(|| format!("reading Secret {ns}/{name}"))? {
                    Some(secret) => {
                        let data = secret.data.unwrap_or_default();
                        let bytes =
                            data.get(CONF_KEY).ok_or_else(|| anyhow!("Secret {ns}/{name} has no key {CONF_KEY}"))?;
                        return String::from_utf8(bytes.0.clone()).with_context(|| format!("{CONF_KEY} is not UTF-8"));
                    }
                    None if Instant::now() < end => tokio::time::sleep(Duration::from_millis(200)).await,
                    None => bail!("there is no Secret {ns}/{name} (has the operator rendered the streamlet?)"),
                }
            }
        })
    }

    fn object<'a>(o: &'a Object, key: &str, at: &str) -> anyhow::Result<&'a Object> {
        o.get(key).and_then(Node::as_object).ok_or_else(|| anyhow!("{CONF_KEY}: {at}{key} is not an object"))
    }

    fn text<'a>(o: &'a Object, key: &str, at: &str) -> anyhow::Result<&'a str> {
        o.get(key).and_then(Node::as_text).ok_or_else(|| anyhow!("{CONF_KEY}: {at}{key} is missing"))
    }

    /// A properties block as a map of strings.
    fn properties(o: &Object, key: &str, at: &str) -> anyhow::Result<BTreeMap<String, String>> {
        match o.get(key) {
            None => Ok(BTreeMap::new()),
            Some(node) => {
                let block = node.as_object().ok_or_else(|| anyhow!("{CONF_KEY}: {at}{key} is not an object"))?;
                tree::flatten(block).map_err(|e| anyhow!("{CONF_KEY}: {at}{key}: {e:?}"))
            }
        }
    }

    /// The inlet's settings from the text of `streamlet.conf`.
    pub fn from_conf(conf: &str, wanted: Option<&str>) -> anyhow::Result<Inlet> {
        let root = tree::parse(conf, &HashMap::new()).map_err(|e| anyhow!("{CONF_KEY} does not parse: {e}"))?;
        let flow = object(&root, "flow", "")?;
        let inlets = object(flow, "inlets", "flow.")?;
        let name = match wanted {
            Some(n) => n.to_string(),
            None => match inlets.keys().collect::<Vec<_>>().as_slice() {
                [only] => (*only).clone(),
                names => bail!("the streamlet has {} inlets ({names:?}): name one with --inlet", names.len()),
            },
        };
        let at = format!("flow.inlets.{name}.");
        let inlet = object(inlets, &name, "flow.inlets.")?;
        let bootstrap = object(inlet, "bootstrap", &at).and_then(|b| text(b, "servers", &format!("{at}bootstrap.")))?;
        // The sidecar's clients take connection-config, with the consumer settings laid over it;
        // Java client settings are turned into librdkafka's as the operator turns them.
        let mut java = properties(inlet, "connection-config", &at)?;
        java.extend(properties(inlet, "consumer-config", &at)?);
        let mut props = flow_core::connection::java::for_librdkafka(java).map_err(|e| anyhow!("{}", e.join("; ")))?;
        props.insert("bootstrap.servers".into(), bootstrap.to_string());
        Ok(Inlet {
            topic: text(inlet, "topic", &at)?.to_string(),
            group: text(inlet, "group", &at)?.to_string(),
            client_id: text(inlet, "client-id", &at)?.to_string(),
            properties: props,
        })
    }

    /// The settings of outlet `wanted` (or the only outlet) from the text of `streamlet.conf`.
    pub fn outlet_from_conf(conf: &str, wanted: Option<&str>) -> anyhow::Result<Outlet> {
        let root = tree::parse(conf, &HashMap::new()).map_err(|e| anyhow!("{CONF_KEY} does not parse: {e}"))?;
        let outlets = object(object(&root, "flow", "")?, "outlets", "flow.")?;
        let name = match wanted {
            Some(n) => n.to_string(),
            None => match outlets.keys().collect::<Vec<_>>().as_slice() {
                [only] => (*only).clone(),
                names => bail!("the streamlet has {} outlets ({names:?}): name one with --outlet", names.len()),
            },
        };
        let at = format!("flow.outlets.{name}.");
        let outlet = object(outlets, &name, "flow.outlets.")?;
        let bootstrap =
            object(outlet, "bootstrap", &at).and_then(|b| text(b, "servers", &format!("{at}bootstrap.")))?;
        // The sidecar's producers take connection-config, with the producer settings laid over it.
        let mut java = properties(outlet, "connection-config", &at)?;
        java.extend(properties(outlet, "producer-config", &at)?);
        let mut props = flow_core::connection::java::for_librdkafka(java).map_err(|e| anyhow!("{}", e.join("; ")))?;
        props.insert("bootstrap.servers".into(), bootstrap.to_string());
        Ok(Outlet {
            topic: text(outlet, "topic", &at)?.to_string(),
            client_id: text(outlet, "client-id", &at)?.to_string(),
            properties: props,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        const CONF: &str = r#"# Rendered by the ankka-flow operator for "router" of pipeline "cart". Do not edit.
flow {
  pipeline = "cart"
  streamlet = "router"
  config = {"review-threshold":250}
  inlets {
    "in" {
      topic = "shop.cart-events.v1"
      group = "cart.router.in"
      client-id = "cart.router.in"
      bootstrap.servers = "kafka.kafka.svc:9092"
      connection-config { "security.protocol" = "PLAINTEXT" }
      consumer-config { "auto.offset.reset" = "latest" }
      batch { max-records = 100, max-bytes = 1048576 }
    }
  }
  outlets {
    "valid" {
      topic = "cart.valid-carts"
      client-id = "cart.router.valid"
      bootstrap.servers = "kafka.kafka.svc:9092"
      connection-config { "security.protocol" = "PLAINTEXT" }
      producer-config { "linger.ms" = "5" }
    }
  }
}
"#;

        #[test]
        fn the_inlet_settings_come_from_the_file() {
            let i = from_conf(CONF, None).unwrap();
            assert_eq!(
                (i.topic.as_str(), i.group.as_str(), i.client_id.as_str()),
                ("shop.cart-events.v1", "cart.router.in", "cart.router.in")
            );
            assert_eq!(i.properties["bootstrap.servers"], "kafka.kafka.svc:9092");
            assert_eq!(i.properties["security.protocol"], "PLAINTEXT");
            assert_eq!(i.properties["auto.offset.reset"], "latest");
            assert!(from_conf(CONF, Some("other")).is_err());
        }

        #[test]
        fn the_outlet_settings_come_from_the_file() {
            let o = outlet_from_conf(CONF, None).unwrap();
            assert_eq!((o.topic.as_str(), o.client_id.as_str()), ("cart.valid-carts", "cart.router.valid"));
            assert_eq!(o.properties["bootstrap.servers"], "kafka.kafka.svc:9092");
            assert_eq!(o.properties["linger.ms"], "5");
            assert!(outlet_from_conf(CONF, Some("review")).is_err());
        }
    }
}

/// SIGTERM and SIGINT store their number in a flag, through tokio's signal support on a helper
/// thread, so the consumer loop stays synchronous and commits before it leaves.
mod stop_signals {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI32, Ordering};

    use tokio::signal::unix::{SignalKind, signal};

    /// Starts listening; the first of SIGTERM or SIGINT sets `flag` to its number (later ones are
    /// ignored: a pod's grace period is not cut short by a second signal).
    pub fn watch(flag: Arc<AtomicI32>) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        // Install the handlers before returning, so that a signal sent right after start is seen.
        let (mut term, mut int) = rt.block_on(async {
            (
                signal(SignalKind::terminate()).expect("SIGTERM handler"),
                signal(SignalKind::interrupt()).expect("SIGINT handler"),
            )
        });
        std::thread::spawn(move || {
            rt.block_on(async move {
                let sig = tokio::select! {
                    _ = term.recv() => SignalKind::terminate().as_raw_value(),
                    _ = int.recv() => SignalKind::interrupt().as_raw_value(),
                };
                flag.store(sig, Ordering::SeqCst);
                // Keep the handlers installed: further signals are absorbed, never fatal.
                loop {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
            });
        });
    }

    /// `SIGTERM` or `SIGINT`.
    pub fn name(sig: i32) -> &'static str {
        if sig == SignalKind::interrupt().as_raw_value() { "SIGINT" } else { "SIGTERM" }
    }
}
