//! Kafka calls that fail, hang or lie: cases C1 to C3 of docs/field-cases.md.

use std::time::{Duration, Instant};

use flow_testbed::cart::DONE;
use flow_testbed::*;

use crate::world::*;

/// C1 without the auto-create broker: the inlet's topic does not exist. A final failure naming the
/// topic (at the first attempt), the broker's topics unchanged, nothing committed.
#[test]
fn c1_a_missing_topic_is_a_failure_naming_it_and_creates_nothing() {
    let case = Case::new("case-c1");
    let (ns, p, topic) = (case.ns, case.ns, "case.c1-events-v2");
    case.topic(topic, 1, 0);
    kafka::remove_topic(topic);
    let g = case.fresh_group("router");
    case.apply(&[s("router", topic, 0)]);
    let mut before = kafka::topics();
    before.sort();

    let t0 = Instant::now();
    let id = flow_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert!(t0.elapsed() < Duration::from_secs(12), "a missing topic is final, not retried: {:?}", t0.elapsed());
    assert_eq!(notes(ns, p, "ResetOffsetsFailed"), [format!("{g}: topic '{topic}' does not exist")]);
    assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new());
    let mut after = kafka::topics();
    after.sort();
    assert!(!after.contains(&topic.to_string()), "the topic was created");
    let created: Vec<&String> = after.iter().filter(|t| !before.contains(t) && t.starts_with("case.c1")).collect();
    assert!(created.is_empty(), "{created:?}");
    assert_eq!(group_state(&g).0, "Dead", "nothing committed");
}

/// C2: a cluster Secret pointing at a port nothing listens on. The group fails with a transport
/// reason once the retry time has passed (`FLOW_RESET_RETRY_SECONDS`, 20 s here), not before, and another pipeline reset at the same time by the same operator
/// is done long before.
#[test]
fn c2_an_unreachable_cluster_fails_in_bounded_time_and_other_pipelines_keep_working() {
    // Transient failures are retried for 20 s here (300 s by default).
    let case = Case::with_env("case-c2", &[("FLOW_RESET_RETRY_SECONDS", "20")]);
    let ns = case.ns;
    let (bad_p, good_p) = ("case-c2-broken", "case-c2-good");
    let (bad_t, good_t) = ("case.c2-broken", "case.c2-good");
    let (bad_g, good_g) = (group(bad_p, "router"), group(good_p, "router"));
    let _secret = SecretGuard("kafka-cluster-broken");
    kubectl_apply(
        "apiVersion: v1
kind: Secret
metadata:
  name: kafka-cluster-broken
  namespace: ankka-flow
  labels:
    flow.ankka.thinkmorestupidless.com/kafka-cluster: broken
  annotations:
    flow.ankka.thinkmorestupidless.com/allowed-namespaces: case-c2
stringData:
  bootstrap.servers: 127.0.0.1:1
  connection-config: |
    security.protocol=PLAINTEXT
",
    );
    case.topic(good_t, 3, 20);
    groups::forget(&good_g);
    groups::commit(&good_g, good_t, &[(0, 20), (1, 20), (2, 20)]);
    apply_pipeline(ns, bad_p, &[Streamlet { name: "router", topic: bad_t, cluster: "broken", replicas: 0 }]);
    apply_pipeline(ns, good_p, &[s("router", good_t, 0)]);

    let t0 = Instant::now();
    let bad_id = flow_reset(ns, bad_p, &[]);
    let good_id = flow_reset(ns, good_p, &[]);
    wait_done(ns, good_p, &good_id, Duration::from_secs(30));
    let good_took = t0.elapsed();
    assert_eq!(annotation(ns, bad_p, DONE), None, "the broken cluster's reset is still retrying");
    assert_eq!(kafka::committed(&good_g, good_t, 3), all(3, 0));
    assert_eq!(notes(ns, good_p, "ResetOffsets"), [format!("{good_g}: 3 partition(s) of '{good_t}' to earliest")]);

    wait_done(ns, bad_p, &bad_id, Duration::from_secs(180));
    let bad_took = t0.elapsed();
    eprintln!("C2: good pipeline done after {good_took:?}, broken one failed after {bad_took:?}");
    assert!(bad_took >= Duration::from_secs(20), "failed before the retry time: {bad_took:?}");
    assert!(bad_took < Duration::from_secs(180), "{bad_took:?}");
    let failed = notes(ns, bad_p, "ResetOffsetsFailed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    let reason = failed[0].strip_prefix(&format!("{bad_g}: ")).unwrap_or_else(|| panic!("{failed:?}"));
    let transport = ["Timed out", "timed out", "transport", "Transport", "Connection refused", "brokers are down"];
    assert!(transport.iter().any(|w| reason.contains(w)), "not a transport reason: {reason}");
    assert_eq!(notes(ns, bad_p, "ResetOffsets"), Vec::<String>::new());
}

/// C3: a 500-partition topic is reset in seconds, every partition at its log start, in one request.
/// Measured from the request to the done annotation.
#[test]
fn c3_a_500_partition_topic_is_reset_in_seconds() {
    let case = Case::new("case-c3");
    let (ns, p, topic) = (case.ns, case.ns, "case.c3-events");
    let g = case.topic(topic, 500, 2).group_at("router", topic, 500, 2);
    case.apply(&[s("router", topic, 0)]);

    let t0 = Instant::now();
    let id = flow_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(120));
    let took = t0.elapsed();
    eprintln!("C3: 500 partitions reset in {took:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert_eq!(kafka::committed(&g, topic, 500), all(500, 0));
    assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{g}: 500 partition(s) of '{topic}' to earliest")]);
    assert_eq!(group_status(ns, p, &g)["partitions"], 500);
}
