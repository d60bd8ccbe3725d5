//! The example pipeline `cart` of `examples/cart`: its topic, the consumer group of router's inlet,
//! the reset annotations, its resource as `flow generate` writes it, its cluster Secrets, and a
//! ready scenario around it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::bed::{bed, bin, fresh_dir, show, wait_until};
use crate::kube::{
    ensure_namespace, fresh_namespace, install_crd, kubectl_apply, pipeline_pods, running_pipeline_pods,
};
use crate::operator::Operator;
use crate::{kafka, standin};

/// Kafka topic router reads.
pub const TOPIC: &str = "shop.cart-events.v1";
/// Consumer group of router's inlet `in`.
pub const GROUP: &str = "cart.router.in";
/// The request annotation (defined once, in `flow_core::names`).
pub const REQUEST: &str = flow_core::names::ANNOTATION_RESET;
/// The done annotation (defined once, in `flow_core::names`).
pub const DONE: &str = flow_core::names::ANNOTATION_RESET_DONE;

/// The example pipeline `cart` in namespace `ns` with router's replicas, as YAML: the output of the
/// real `flow generate`, run in `examples/cart` exactly as docs/rebuild-from-the-start.md writes it
/// (`--conf prod.conf`, plus `--conf stop.conf` for 0 replicas; another count comes from a conf
/// file of its own laid over prod.conf).
pub fn cart_yaml(ns: &str, replicas: i32) -> String {
    let dir = bed().root.join("examples/cart");
    let mut args: Vec<String> =
        ["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "prod.conf"].map(String::from).to_vec();
    match replicas {
        1 => {}
        0 => args.extend(["--conf", "stop.conf"].map(String::from)),
        n => {
            let conf = bed().root.join("target/e2e-ledgers").join(format!("replicas-{n}-{}.conf", std::process::id()));
            std::fs::create_dir_all(conf.parent().expect("a parent directory")).expect("conf dir");
            std::fs::write(&conf, format!("flow.streamlets.router {{ replicas = {n} }}\n")).expect("conf file");
            args.extend(["--conf".to_string(), conf.display().to_string()]);
        }
    }
    args.extend(["--image", "router=registry.example.com/cart-router:1.2", "-n", ns].map(String::from));
    let o = Command::new(bin("flow")).args(&args).current_dir(&dir).output().expect("flow runs");
    assert!(o.status.success(), "flow {args:?} failed: {}", show(&o));
    String::from_utf8(o.stdout).expect("flow generate writes UTF-8")
}

/// The example pipeline `cart` in namespace `ns`, as the real `flow generate` writes it in
/// `examples/cart` with `--conf prod.conf` and then each of `confs` (files of a test's own, such as
/// [`conf_file`] writes); the CLI's output when it refuses.
pub fn cart_yaml_with(ns: &str, confs: &[&Path]) -> Result<String, Output> {
    let mut args: Vec<String> =
        ["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "prod.conf"].map(String::from).to_vec();
    for c in confs {
        args.extend(["--conf".to_string(), c.display().to_string()]);
    }
    args.extend(["--image", "router=registry.example.com/cart-router:1.2", "-n", ns].map(String::from));
    let o = Command::new(bin("flow")).args(&args).current_dir(bed().root.join("examples/cart")).output().expect("flow");
    if o.status.success() { Ok(String::from_utf8(o.stdout).expect("UTF-8")) } else { Err(o) }
}

/// Writes `text` as a deploy-time file of this test process (`target/e2e-ledgers/<name>-<pid>.conf`).
pub fn conf_file(name: &str, text: &str) -> PathBuf {
    let dir = bed().root.join("target/e2e-ledgers");
    std::fs::create_dir_all(&dir).expect("conf dir");
    let path = dir.join(format!("{name}-{}.conf", std::process::id()));
    std::fs::write(&path, text).expect("conf file");
    path
}

/// Applies the example's cluster Secrets `kafka-cluster-shop` and `kafka-cluster-default`
/// (namespace `ankka-flow`), pointing at the test bed's broker. As the test bed's administrator, it
/// allows every namespace and consumer groups shared between them (docs/tenancy.md): the end-to-end
/// tests run the example pipeline `cart` in many namespaces, one at a time, all mapping to the
/// consumer group `cart.router.in`, and the namespaces of earlier tests stay. The examples allow
/// `shop` alone; the tenancy tests install or change Secrets of their own to test the rules.
pub fn install_cluster_secret() {
    ensure_namespace("ankka-flow");
    for file in ["kafka-cluster-shop.yaml", "kafka-cluster-default.yaml"] {
        let text = std::fs::read_to_string(bed().root.join("examples/cart").join(file)).expect("secret yaml");
        let allowed = "flow.ankka.thinkmorestupidless.com/allowed-namespaces: shop";
        assert!(text.contains(allowed), "{file} declares its namespaces");
        let test_bed = "flow.ankka.thinkmorestupidless.com/allowed-namespaces: \"*\"\n    \
                        flow.ankka.thinkmorestupidless.com/allow-shared-consumer-groups: \"true\"";
        kubectl_apply(&text.replace("127.0.0.1:19092", &bed().kafka).replace(allowed, test_bed));
    }
}

/// A namespace `ns` with the cart pipeline applied at `replicas`, its topic refilled with 3 partitions
/// of 20 records that group `cart.router.in` has read and committed (offsets 20/20/20), and a running
/// operator started with the extra environment `env` and a fresh ledger.
pub fn cart_scenario(ns: &str, replicas: i32, env: &[(&str, &str)]) -> Operator {
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    kafka::recreate_topic(TOPIC, 3);
    kafka::produce(TOPIC, 3, 20);
    standin::read(GROUP, TOPIC, 60);
    let mut env = env.to_vec();
    env.push(("FLOW_WATCH_NAMESPACE", ns));
    let op = Operator::start(&fresh_dir(ns), &env);
    kubectl_apply(&cart_yaml(ns, replicas));
    let want = usize::try_from(replicas).unwrap_or(0);
    wait_until("the pipeline's pods", Duration::from_secs(60), || {
        (running_pipeline_pods(ns, "cart") == want && pipeline_pods(ns, "cart").len() == want).then_some(())
    });
    op
}
