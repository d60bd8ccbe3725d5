//! The example pipeline `cart` of `examples/cart`, as shipped or under names of a test's own
//! ([`Cart`]): its topic, the consumer group of router's inlet, the reset annotations, its resource
//! as `flow generate` writes it, its cluster Secrets, and a ready scenario around it.

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

/// The example pipeline `cart` of `examples/cart`, as shipped or under names of a test's own: its
/// pipeline name, the unmanaged topic router reads (on cluster `shop`), and the consumer group of
/// router's inlet `in`. Its managed topics are `<name>.valid-carts` and `<name>.review-carts`.
///
/// [`Cart::own`] is what an isolated test uses (docs/testbed.md, "Writing an end-to-end test"): the
/// example's files copied under `target/e2e-ledgers/`, with the blueprint's `name` and the input's
/// `topic.name` rewritten, so that its topics and group are the test's alone. [`Cart::shipped`] is
/// the example exactly as a user's page runs it, for the tests that follow such a page.
#[derive(Clone, Debug)]
pub struct Cart {
    /// The pipeline's name (`cart` as shipped, `cart-<x>` of one's own).
    pub name: String,
    /// The Kafka topic router reads, on cluster `shop`.
    pub topic: String,
    /// The consumer group of router's inlet `in`, `<name>.router.in`.
    pub group: String,
    /// Where `flow generate` runs: `examples/cart`, or the test's copy of it.
    dir: PathBuf,
}

impl Cart {
    /// The example as shipped: pipeline `cart`, topic [`TOPIC`], group [`GROUP`], run in
    /// `examples/cart` itself.
    pub fn shipped() -> Cart {
        Cart { name: "cart".into(), topic: TOPIC.into(), group: GROUP.into(), dir: bed().root.join("examples/cart") }
    }

    /// The example under names of test `x` alone: pipeline `cart-<x>`, topic
    /// `shop.<x>-cart-events.v1`, group `cart-<x>.router.in`, managed topics `cart-<x>.*`. Its
    /// blueprint, descriptors and conf files are copied from `examples/cart` into a directory of this
    /// process (`target/e2e-ledgers/cart-<x>-<pid>/`), changing the blueprint's `name` and the
    /// input's `topic.name` only.
    pub fn own(x: &str) -> Cart {
        let name = format!("cart-{x}");
        let topic = format!("shop.{x}-cart-events.v1");
        let example = bed().root.join("examples/cart");
        let dir = bed().root.join("target/e2e-ledgers").join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("flow")).expect("the copy's directory");
        for file in ["prod.conf", "stop.conf", "flow/cart-router.json"] {
            std::fs::copy(example.join(file), dir.join(file)).unwrap_or_else(|e| panic!("copying {file}: {e}"));
        }
        let shipped = std::fs::read_to_string(example.join("blueprint.conf")).expect("the example's blueprint");
        let mut blueprint = shipped;
        let renames = [
            ("  name = cart\n".to_string(), format!("  name = {name}\n")),
            (format!("\"{TOPIC}\""), format!("\"{topic}\"")),
        ];
        for (from, to) in &renames {
            assert!(blueprint.contains(from.as_str()), "examples/cart/blueprint.conf has `{}`", from.trim());
            blueprint = blueprint.replacen(from.as_str(), to, 1);
        }
        std::fs::write(dir.join("blueprint.conf"), blueprint).expect("the copy's blueprint");
        Cart { group: format!("{name}.router.in"), name, topic, dir }
    }

    /// The directory `flow generate` runs in: `examples/cart`, or this test's copy of it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pipeline in namespace `ns` with router's replicas, as YAML: the output of the real
    /// `flow generate`, run exactly as docs/rebuild-from-the-start.md writes it (`--conf prod.conf`,
    /// plus `--conf stop.conf` for 0 replicas; another count comes from a conf file of its own laid
    /// over prod.conf).
    pub fn yaml(&self, ns: &str, replicas: i32) -> String {
        let extra = match replicas {
            1 => vec![],
            0 => vec![PathBuf::from("stop.conf")],
            n => vec![conf_file(&format!("replicas-{n}"), &format!("flow.streamlets.router {{ replicas = {n} }}\n"))],
        };
        let confs: Vec<&Path> = extra.iter().map(PathBuf::as_path).collect();
        self.yaml_with(ns, &confs).unwrap_or_else(|o| panic!("flow generate failed: {}", show(&o)))
    }

    /// The pipeline in namespace `ns`, as the real `flow generate` writes it with `--conf prod.conf`
    /// and then each of `confs` (files of a test's own, such as [`conf_file`] writes; relative ones
    /// are of the example's directory); the CLI's output when it refuses.
    pub fn yaml_with(&self, ns: &str, confs: &[&Path]) -> Result<String, Output> {
        let mut args: Vec<String> =
            ["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "prod.conf"].map(String::from).to_vec();
        for c in confs {
            args.extend(["--conf".to_string(), c.display().to_string()]);
        }
        args.extend(["--image", "router=registry.example.com/cart-router:1.2", "-n", ns].map(String::from));
        let o = Command::new(bin("flow")).args(&args).current_dir(&self.dir).output().expect("flow runs");
        if o.status.success() { Ok(String::from_utf8(o.stdout).expect("flow generate writes UTF-8")) } else { Err(o) }
    }

    /// A namespace `ns` with the pipeline applied at `replicas`, its topic refilled with 3 partitions
    /// of 20 records that its group has read and committed (offsets 20/20/20), and a running
    /// operator watching `ns` alone, started with the extra environment `env` and a fresh ledger.
    pub fn scenario(&self, ns: &str, replicas: i32, env: &[(&str, &str)]) -> Operator {
        install_crd();
        install_cluster_secret();
        fresh_namespace(ns);
        kafka::recreate_topic(&self.topic, 3);
        kafka::produce(&self.topic, 3, 20);
        standin::read(&self.group, &self.topic, 60);
        let mut env = env.to_vec();
        env.push(("FLOW_WATCH_NAMESPACE", ns));
        let op = Operator::start(&fresh_dir(ns), &env);
        kubectl_apply(&self.yaml(ns, replicas));
        self.wait_pods(ns, replicas);
        op
    }

    /// Waits until the pipeline in `ns` has exactly `replicas` pods, all Running.
    pub fn wait_pods(&self, ns: &str, replicas: i32) {
        let want = usize::try_from(replicas).unwrap_or(0);
        wait_until("the pipeline's pods", Duration::from_secs(60), || {
            (running_pipeline_pods(ns, &self.name) == want && pipeline_pods(ns, &self.name).len() == want).then_some(())
        });
    }
}

/// The example pipeline `cart` as shipped ([`Cart::shipped`]) in namespace `ns` with router's
/// replicas, as YAML ([`Cart::yaml`]).
pub fn cart_yaml(ns: &str, replicas: i32) -> String {
    Cart::shipped().yaml(ns, replicas)
}

/// The example pipeline `cart` as shipped in namespace `ns`, with `confs` ([`Cart::yaml_with`]).
pub fn cart_yaml_with(ns: &str, confs: &[&Path]) -> Result<String, Output> {
    Cart::shipped().yaml_with(ns, confs)
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

/// [`Cart::scenario`] of the example as shipped: topic [`TOPIC`], group [`GROUP`], pipeline `cart`.
pub fn cart_scenario(ns: &str, replicas: i32, env: &[(&str, &str)]) -> Operator {
    Cart::shipped().scenario(ns, replicas, env)
}
