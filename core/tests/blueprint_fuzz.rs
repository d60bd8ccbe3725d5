//! Property tests of `verify` and `generate`: random and mutated blueprints, descriptors, `--conf`
//! and images files never make them panic, every outcome is a resource that round-trips through
//! YAML or a list of refusals from the catalogue, and verify and generate agree.

use std::collections::HashMap;

use flow_core::blueprint::{
    DescriptorSource, GenerateInput, Problem, Source, SourceError, VerifyInput, generate, to_yaml, verify,
};
use flow_core::resource::AnkkaFlow;
use proptest::prelude::*;

const CART_BP: &str = include_str!("fixtures/cart/blueprint.conf");
const GRAPH_BP: &str = include_str!("fixtures/graph/blueprint.conf");
const ROUTER: &str = include_str!("fixtures/cart/descriptors/cart-router.json");
const SINK: &str = include_str!("fixtures/cart/descriptors/sink.json");
const MAPPER: &str = include_str!("fixtures/graph/descriptors/mapper.json");
const CART_IMAGES: &str = include_str!("fixtures/cart/images.conf");
const CART_OVERRIDES: &str = include_str!("fixtures/cart/overrides.conf");
const GRAPH_OVERRIDES: &str = include_str!("fixtures/graph/overrides.conf");

/// Characters that matter to HOCON and JSON, and some that matter to names.
const ALPHABET: &[char] = &[
    '{', '}', '[', ']', ',', ':', '=', '"', '.', '\n', ' ', '$', '?', '#', '/', '\\', '+', '-', '_', 'a', 'z', 'A',
    '0', '9', 'é', '\u{0}', 't', 'n', 'u', 'l',
];

/// Random edits of a text: insert, delete or replace characters, or cut it.
fn mutated(base: &'static str) -> impl Strategy<Value = String> {
    prop::collection::vec((0..4u8, any::<prop::sample::Index>(), prop::sample::select(ALPHABET)), 0..8).prop_map(
        move |edits| {
            let mut chars: Vec<char> = base.chars().collect();
            for (op, at, c) in edits {
                let len = chars.len();
                match op {
                    0 => chars.insert(at.index(len + 1), c),
                    1 if len > 0 => {
                        chars.remove(at.index(len));
                    }
                    2 if len > 0 => chars[at.index(len)] = c,
                    3 => chars.truncate(at.index(len + 1)),
                    _ => {}
                }
            }
            chars.into_iter().collect()
        },
    )
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "router", "sink", "mapper", "graph", "r2", "Bad", "-x", "a.b", "in", "valid", "deltas", "nope",
    ])
    .prop_map(str::to_string)
}

fn descriptor_ref() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "cart-router",
        "sink",
        "mapper",
        "builtin/neo4j-merge-sink",
        "builtin/nope",
        "unknown",
        "Cart-Router",
    ])
    .prop_map(str::to_string)
}

fn path() -> impl Strategy<Value = String> {
    (name(), name(), 0..6u8).prop_map(|(s, p, shape)| match shape {
        0 => s,
        1 => format!(".{s}.{p}"),
        2 => format!("{s}..{p}"),
        _ => format!("{s}.{p}"),
    })
}

fn scalar() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "1",
        "0",
        "-3",
        "6",
        "2147483648",
        "1.5",
        "true",
        "false",
        "null",
        "\"x\"",
        "shop",
        "Bad_Name",
        "\"\"",
        "4 MiB",
        "[1, 2]",
        "{ a = 1 }",
        "30s",
        "lots",
    ])
    .prop_map(str::to_string)
}

fn topic() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(path(), 0..3),
        prop::collection::vec(path(), 0..3),
        prop::option::of(scalar()),
        prop::option::of(scalar()),
        prop::option::of(scalar()),
        prop::option::of(scalar()),
        prop::option::of(scalar()),
    )
        .prop_map(|(producers, consumers, managed, cluster, partitions, name, batch)| {
            let list = |v: &[String]| v.iter().map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join(", ");
            let mut t = format!("producers = [{}], consumers = [{}]", list(&producers), list(&consumers));
            for (k, v) in [
                ("managed", managed),
                ("cluster", cluster),
                ("partitions", partitions),
                ("topic.name", name),
                ("consumer-config.flow.batch.max-bytes", batch),
            ] {
                if let Some(v) = v {
                    t.push_str(&format!(", {k} = {v}"));
                }
            }
            t
        })
}

/// A blueprint built from parts that are right or wrong in every way the rules look at.
fn structured_blueprint() -> impl Strategy<Value = String> {
    (
        prop::collection::btree_map(name(), descriptor_ref(), 0..5),
        prop::collection::btree_map(name(), topic(), 0..5),
        prop::option::of(scalar()),
    )
        .prop_map(|(streamlets, topics, bp_name)| {
            let s: Vec<String> = streamlets.iter().map(|(k, v)| format!("\"{k}\" = \"{v}\"")).collect();
            let t: Vec<String> = topics.iter().map(|(k, v)| format!("\"{k}\" {{ {v} }}")).collect();
            let n = bp_name.map(|n| format!("name = {n}\n")).unwrap_or_default();
            format!("blueprint {{\n{n}streamlets {{ {} }}\ntopics {{ {} }}\n}}", s.join("\n"), t.join("\n"))
        })
}

fn conf() -> impl Strategy<Value = String> {
    prop_oneof![
        mutated(CART_OVERRIDES),
        mutated(GRAPH_OVERRIDES),
        (name(), scalar(), name(), scalar()).prop_map(|(s, r, p, v)| format!(
            "flow.streamlets.\"{s}\" {{ replicas = {r}, config {{ \"{p}\" = {v} }} }}\nflow.topics.\"{p}\".partitions = {r}"
        )),
        "\\PC{0,40}",
    ]
}

fn blueprint() -> impl Strategy<Value = String> {
    prop_oneof![mutated(CART_BP), mutated(GRAPH_BP), structured_blueprint(), "\\PC{0,80}"]
}

fn descriptor_files() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec(
        (
            prop::sample::select(vec!["a.json", "b.json", "c.json", "d.json"]),
            prop_oneof![
                mutated(ROUTER),
                mutated(SINK),
                mutated(MAPPER),
                Just(ROUTER.to_string()),
                Just(SINK.to_string())
            ],
        ),
        0..4,
    )
    .prop_map(|v| v.into_iter().map(|(n, t)| (n.to_string(), t)).collect())
}

fn input(bp: String, descriptors: Vec<(String, String)>, confs: Vec<String>) -> VerifyInput {
    let mut files: Vec<Source> = descriptors.into_iter().map(|(n, t)| Source::text(n, t)).collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files.dedup_by(|a, b| a.name == b.name);
    VerifyInput {
        descriptors: DescriptorSource::Directory { dir: "descriptors".into(), files },
        blueprint: Source::text("blueprint.conf", bp),
        confs: confs.into_iter().enumerate().map(|(i, c)| Source::text(format!("{i}.conf"), c)).collect(),
        env: HashMap::new(),
    }
}

fn check_problems(problems: &[Problem]) -> Result<(), TestCaseError> {
    prop_assert!(!problems.is_empty(), "a refusal names at least one problem");
    for p in problems {
        let text = p.to_string();
        prop_assert!(!text.trim().is_empty());
        // One line per problem; only the format error spans two, as the existing CLI writes it.
        let lines = text.lines().count();
        prop_assert!(lines == 1 || matches!(p, Problem::InvalidFormat(_)) && lines == 2, "{text:?}");
    }
    Ok(())
}

fn check_generated(g: &GenerateInput) -> Result<(), TestCaseError> {
    match generate(g) {
        Ok(out) => {
            prop_assert!(verify(&g.verify).is_ok(), "generate succeeded where verify refused");
            let yaml = to_yaml(&out.resource).map_err(TestCaseError::fail)?;
            let back: AnkkaFlow =
                serde_saphyr::from_str(&yaml).map_err(|e| TestCaseError::fail(format!("{e}\n{yaml}")))?;
            prop_assert_eq!(
                serde_json::to_value(&back).map_err(|e| TestCaseError::fail(e.to_string()))?,
                serde_json::to_value(&out.resource).map_err(|e| TestCaseError::fail(e.to_string()))?
            );
            let names: Vec<&str> = out.resource.spec.streamlets.iter().map(|s| s.name.as_str()).collect();
            let mut sorted = names.clone();
            sorted.sort();
            prop_assert_eq!(names, sorted);
            for t in &out.resource.spec.topics {
                prop_assert!(t.batch.is_some());
                prop_assert!(!t.consumer_config.keys().any(|k| k.starts_with("flow.")));
            }
        }
        Err(problems) => {
            check_problems(&problems)?;
            // What verify refuses, generate refuses too, first and in the same order.
            if let Err(v) = verify(&g.verify) {
                prop_assert!(problems.starts_with(&v), "{:?}\nvs {:?}", problems, v);
            }
        }
    }
    Ok(())
}

proptest! {
    // 300 cases by default; PROPTEST_CASES=<n> for a longer run.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300)
    ))]

    #[test]
    fn verify_and_generate_never_panic(
        bp in blueprint(),
        descriptors in descriptor_files(),
        confs in prop::collection::vec(conf(), 0..3),
        images in prop::option::of(prop_oneof![mutated(CART_IMAGES), "\\PC{0,30}"]),
        image_args in prop::collection::vec("[a-z=:/.]{0,12}", 0..3),
        pipeline in prop::option::of("[a-zA-Z0-9_-]{0,45}"),
    ) {
        let v = input(bp, descriptors, confs);
        match verify(&v) {
            Ok(ok) => {
                prop_assert!(ok.summary().starts_with("verified: "));
                prop_assert!(ok.notes.iter().all(|n| n.to_string().starts_with("note: ")));
            }
            Err(p) => check_problems(&p)?,
        }
        let g = GenerateInput {
            verify: v,
            images_file: images.map(|t| Source::text("images.conf", t)),
            images: image_args,
            pipeline,
            version: "1.0".into(),
            namespace: Some("shop".into()),
            delete_managed_topics: false,
        };
        check_generated(&g)?;
    }

    #[test]
    fn unreadable_files_are_refusals(missing in prop::sample::select(vec![0usize, 1, 2])) {
        let gone = || Err(SourceError::Unreadable("gone".into()));
        let mut v = input(CART_BP.into(), vec![("r.json".into(), ROUTER.into()), ("s.json".into(), SINK.into())], vec![CART_OVERRIDES.into()]);
        match missing {
            0 => v.blueprint.text = gone(),
            1 => v.confs[0].text = gone(),
            _ => if let DescriptorSource::Directory { files, .. } = &mut v.descriptors { files[0].text = gone() },
        }
        let p = verify(&v).err().unwrap_or_default();
        check_problems(&p)?;
    }

    #[test]
    fn the_fixtures_with_a_few_edits_still_behave(edits in mutated(CART_BP)) {
        let v = input(edits, vec![("r.json".into(), ROUTER.into()), ("s.json".into(), SINK.into())], vec![CART_OVERRIDES.into()]);
        let g = GenerateInput {
            verify: v,
            images_file: Some(Source::text("images.conf", CART_IMAGES)),
            images: vec![],
            pipeline: None,
            version: "0.3.1".into(),
            namespace: None,
            delete_managed_topics: true,
        };
        check_generated(&g)?;
    }
}
