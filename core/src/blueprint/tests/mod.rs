//! The fixtures of `core/tests/fixtures` and every message of `flow verify` and `flow generate`
//! (docs/cli.md, "Messages of verify and generate").

use std::collections::HashMap;

use serde_json::json;

use super::*;
use crate::resource::{AnkkaFlow, ManagedTopicsPolicy};

mod blueprint_checks;
mod conf;
mod descriptors;
mod examples;
mod generate;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{FIX}/{path}")).unwrap()
}

fn descriptors(example: &str) -> DescriptorSource {
    let dir = format!("{FIX}/{example}/descriptors");
    let mut files: Vec<Source> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| Source::text(p.file_name().unwrap().to_string_lossy(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    DescriptorSource::Directory { dir: "descriptors".into(), files }
}

fn input(example: &str, blueprint: &str, confs: &[&str]) -> VerifyInput {
    VerifyInput {
        descriptors: descriptors(example),
        blueprint: Source::text("blueprint.conf", blueprint),
        confs: confs.iter().enumerate().map(|(i, c)| Source::text(format!("conf{i}.conf"), *c)).collect(),
        env: HashMap::new(),
    }
}

fn cart(confs: &[&str]) -> VerifyInput {
    input("cart", &fixture("cart/blueprint.conf"), confs)
}

fn gen_input(verify: VerifyInput, images: Option<&str>) -> GenerateInput {
    GenerateInput {
        verify,
        images_file: images.map(|t| Source::text("images.conf", t)),
        images: vec![],
        pipeline: None,
        version: "0.3.1".into(),
        namespace: Some("shop".into()),
        delete_managed_topics: false,
    }
}

fn texts<T: ToString>(items: &[T]) -> Vec<String> {
    items.iter().map(ToString::to_string).collect()
}

/// Problems of verifying `blueprint` with the cart descriptors and `confs`.
fn problems(blueprint: &str, confs: &[&str]) -> Vec<String> {
    match verify(&input("cart", blueprint, confs)) {
        Ok(v) => panic!("verified: {}", v.summary()),
        Err(p) => texts(&p),
    }
}

fn notes(blueprint: &str, confs: &[&str]) -> Vec<String> {
    match verify(&input("cart", blueprint, confs)) {
        Ok(v) => texts(&v.notes),
        Err(p) => panic!("{p:?}"),
    }
}

fn generated(g: &GenerateInput) -> AnkkaFlow {
    let out = generate(g).unwrap_or_else(|p| panic!("{:?}", texts(&p)));
    let yaml = to_yaml(&out.resource).unwrap();
    let back: AnkkaFlow = serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&out.resource).unwrap(),
        "YAML round trip\n{yaml}"
    );
    back
}

fn gen_problems(g: &GenerateInput) -> Vec<String> {
    match generate(g) {
        Ok(_) => panic!("generated"),
        Err(p) => texts(&p),
    }
}

const ROUTER_SINK: &str = "blueprint.streamlets { router = cart-router, sink = sink }\n";
