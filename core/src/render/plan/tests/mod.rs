//! The examples rendered byte for byte, every refusal, and the plan's order.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Container;
use serde_json::json;

use super::validate::stage_secret_name;
use super::*;
use crate::blueprint::{DescriptorSource, GenerateInput, Source, VerifyInput, generate};
use crate::connection::Cluster;
use crate::names::objects::streamlet_labels;
use crate::names::{LABEL_MANAGED_BY, LABEL_NAME, LABEL_PIPELINE, LABEL_STREAMLET};
use crate::render::secret::{CONF_KEY, DESCRIPTOR_KEY};
use crate::render::status::ObservedDeployment;
use crate::render::topics::LiveTopic;
use crate::render::workload::ANNOTATION_CONFIG_HASH;
use crate::resource::OnDelete;

mod credentials;
mod examples;
mod order;
mod refusals;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{FIX}/{path}")).unwrap()
}

/// The resource `flow generate` writes for an example, as the API server returns it.
fn generated(example: &str) -> AnkkaFlow {
    let dir = format!("{FIX}/{example}/descriptors");
    let mut files: Vec<Source> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| Source::text(p.file_name().unwrap().to_string_lossy(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let input = GenerateInput {
        verify: VerifyInput {
            descriptors: DescriptorSource::Directory { dir: "descriptors".into(), files },
            blueprint: Source::text("blueprint.conf", fixture(&format!("{example}/blueprint.conf"))),
            confs: vec![Source::text("overrides.conf", fixture(&format!("{example}/overrides.conf")))],
            env: HashMap::new(),
        },
        images_file: Some(Source::text("images.conf", fixture(&format!("{example}/images.conf")))),
        images: vec![],
        pipeline: None,
        version: "0.3.1".into(),
        namespace: Some("shop".into()),
        delete_managed_topics: false,
    };
    let mut flow = generate(&input).unwrap().resource;
    flow.metadata.uid = Some("0c1d5d4e-uid".into());
    flow.metadata.generation = Some(2);
    flow
}

fn secret(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Cluster `name` whose Secret holds `kv` and allows namespace `shop`, as the examples' do.
fn cluster(name: &str, kv: &[(&str, &str)]) -> (String, Cluster) {
    let allowed = secret(&[(crate::connection::ANNOTATION_ALLOWED_NAMESPACES, "shop")]);
    (name.to_string(), Cluster::from_secret(name, &secret(kv), &allowed))
}

/// `kafka-cluster-shop` and `kafka-cluster-default` of the examples.
fn clusters() -> Clusters {
    BTreeMap::from([
        cluster(
            "shop",
            &[("bootstrap.servers", "kafka.kafka.svc:9092"), ("connection-config", "security.protocol=PLAINTEXT\n")],
        ),
        cluster("default", &[("bootstrap.servers", "kafka.kafka.svc:9092"), ("partitions", "3"), ("replicas", "1")]),
    ])
}

fn neo4j_secret(keys: &[&str], version: &str) -> BTreeMap<String, StageSecret> {
    BTreeMap::from([(
        "neo4j-shop".to_string(),
        StageSecret::Found { keys: keys.iter().map(|k| k.to_string()).collect(), resource_version: version.into() },
    )])
}

const SIDECAR: &str = "ghcr.io/thinkmorestupidless/ankka-flow-sidecar:0.3.1";

fn decide_with(flow: &AnkkaFlow, sidecar: Option<&str>, stage: &BTreeMap<String, StageSecret>) -> Decision {
    decide(&Inputs {
        flow,
        sidecar_image: sidecar,
        clusters: &clusters(),
        token_endpoints: &Default::default(),
        stage_secrets: stage,
    })
    .unwrap()
}

fn valid(flow: &AnkkaFlow, stage: &BTreeMap<String, StageSecret>) -> ValidPipeline {
    match decide_with(flow, Some(SIDECAR), stage) {
        Decision::Apply(v) => *v,
        other => panic!("not valid: {other:?}"),
    }
}

fn refused(flow: &AnkkaFlow, sidecar: Option<&str>, stage: &BTreeMap<String, StageSecret>) -> Refusal {
    match decide_with(flow, sidecar, stage) {
        Decision::Refuse(r) => *r,
        other => panic!("not refused: {other:?}"),
    }
}

fn texts(r: &Refusal) -> Vec<String> {
    r.problems.iter().map(ToString::to_string).collect()
}

fn rendered<'a>(v: &'a ValidPipeline, name: &str) -> &'a RenderedStreamlet {
    v.streamlets().find(|s| s.name == name).unwrap()
}

fn string_data<'a>(s: &'a Secret, key: &str) -> &'a str {
    s.string_data.as_ref().unwrap()[key].as_str()
}

fn nothing() -> BTreeMap<String, StageSecret> {
    BTreeMap::new()
}

fn observed<'a>(
    topics: &'a BTreeMap<String, KafkaTopic>,
    deployments: &'a BTreeMap<String, ObservedDeployment>,
    secrets: &'a BTreeSet<String>,
) -> Observed<'a> {
    Observed { topics, deployments, secrets, applied: None, record: &RECORD, now: NOW, reapply_after: REAPPLY_AFTER }
}

/// The topic id Kafka gives topic `name` in these tests.
fn id_of(name: &str) -> String {
    let sum: i64 = name.bytes().map(i64::from).sum();
    owners::topic_id(i64::try_from(name.len()).unwrap() + 1, sum).unwrap()
}

/// The record of these tests: the operator created the managed topics of the `cart` example,
/// with the ids of [`id_of`].
static RECORD: std::sync::LazyLock<Record> = std::sync::LazyLock::new(|| {
    let mut r = Record::default();
    for name in ["cart.review-carts", "cart.valid-carts"] {
        r.created(name, &id_of(name));
    }
    r
});

/// Topic `name` as Kafka describes it, with the id of [`id_of`].
fn live(name: &str, partitions: i32, replication: i32, configs: &[(&str, &str)]) -> KafkaTopic {
    KafkaTopic::Exists(LiveTopic { partitions, replication, configs: secret(configs), topic_id: Some(id_of(name)) })
}

/// The time of the reconciles of these tests.
const NOW: k8s_openapi::jiff::Timestamp = k8s_openapi::jiff::Timestamp::constant(1_796_400_000, 0);

/// The reapply interval of these tests (the operator's default resync).
const REAPPLY_AFTER: std::time::Duration = std::time::Duration::from_secs(300);
