//! `flow verify`, `flow generate` and `flow version` as a user runs them: the built binary, its exit
//! codes, and what goes to stdout and what to stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use flow_core::resource::AnkkaFlow;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixtures(example: &str) -> PathBuf {
    root().join("core/tests/fixtures").join(example)
}

fn flow(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flow")).args(args).current_dir(dir).output().expect("flow runs")
}

fn out(o: &Output) -> (Option<i32>, String, String) {
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

const CART_GENERATE: [&str; 12] = [
    "generate",
    "blueprint.conf",
    "--descriptors",
    "descriptors",
    "--images",
    "images.conf",
    "--conf",
    "overrides.conf",
    "--version",
    "0.3.1",
    "-n",
    "shop",
];

#[test]
fn verify_cart_prints_one_line_and_nothing_on_stderr() {
    let o = flow(&fixtures("cart"), &["verify", "blueprint.conf", "--descriptors", "descriptors"]);
    assert_eq!(out(&o), (Some(0), "verified: 2 streamlets, 3 topics\n".into(), String::new()));
}

#[test]
fn verify_graph_refuses_then_notes() {
    let dir = fixtures("graph");
    let o = flow(&dir, &["verify", "blueprint.conf", "--descriptors", "descriptors"]);
    assert_eq!(
        out(&o),
        (Some(1), String::new(), "streamlet 'graph': parameter 'secret' has no default and no value\n".into())
    );
    let o = flow(&dir, &["verify", "blueprint.conf", "--descriptors", "descriptors", "--conf", "overrides.conf"]);
    assert_eq!(
        out(&o),
        (
            Some(0),
            "verified: 2 streamlets, 2 topics\n".into(),
            "note: Topic 'graph-deltas' carries graph deltas and is compacted (cleanup.policy = compact).\n".into()
        )
    );
}

#[test]
fn generate_cart_writes_a_resource_that_reads_back() {
    let o = flow(&fixtures("cart"), &CART_GENERATE);
    let (code, stdout, stderr) = out(&o);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let r: AnkkaFlow = serde_saphyr::from_str(&stdout).expect("the YAML is an AnkkaFlow");
    assert_eq!(r.metadata.name.as_deref(), Some("cart"));
    assert_eq!(r.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(r.spec.version.as_deref(), Some("0.3.1"));
    assert_eq!(r.spec.streamlet("router").map(|s| s.replicas), Some(3));
    assert_eq!(r.spec.topic("valid-carts").and_then(|t| t.partitions), Some(12));
    assert!(stdout.contains("protocolVersion: \"1.0\""), "{stdout}");
}

#[test]
fn generate_refusals_exit_1_with_nothing_on_stdout() {
    let dir = fixtures("cart");
    let mut args = CART_GENERATE.to_vec();
    args.extend(["--pipeline", "Cart_EU"]);
    assert_eq!(
        out(&flow(&dir, &args)),
        (
            Some(1),
            String::new(),
            "pipeline id 'Cart_EU' must be 1-40 of [a-z0-9-], not starting or ending with '-'\n".into()
        )
    );
    let images = std::env::temp_dir().join(format!("flow-images-{}.conf", std::process::id()));
    std::fs::write(&images, "router = \"ghcr.io/example/cart-router:0.3.1\"\n").expect("images file");
    let images_arg = images.display().to_string();
    let mut args = CART_GENERATE.to_vec();
    args[5] = &images_arg;
    let (code, stdout, stderr) = out(&flow(&dir, &args));
    let _ = std::fs::remove_file(&images);
    assert_eq!((code, stdout.as_str()), (Some(1), ""));
    assert!(stderr.contains("Streamlet 'sink' has no image."), "{stderr}");
    let mut args = CART_GENERATE.to_vec();
    args.extend(["--image", "sink", "--conf", "missing.conf"]);
    assert_eq!(
        out(&flow(&dir, &args)),
        (Some(1), String::new(), "--conf missing.conf: no such file\n--image 'sink' is not name=reference\n".into())
    );
}

#[test]
fn generate_to_a_file_says_so_on_stderr() {
    let file = std::env::temp_dir().join(format!("flow-generate-{}.yaml", std::process::id()));
    let mut args = CART_GENERATE.to_vec();
    let f = file.display().to_string();
    args.extend(["--output-file", &f]);
    let o = flow(&fixtures("cart"), &args);
    assert_eq!(out(&o), (Some(0), String::new(), format!("wrote {f}\n")));
    let written = std::fs::read_to_string(&file).expect("the file is written");
    let _ = std::fs::remove_file(&file);
    assert_eq!(written, out(&flow(&fixtures("cart"), &CART_GENERATE)).1);
}

#[test]
fn version_defaults_to_git_describe_else_unversioned() {
    let tmp = std::env::temp_dir().join(format!("flow-unversioned-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("descriptors")).expect("dir");
    let cart = fixtures("cart");
    for f in ["blueprint.conf", "images.conf", "descriptors/cart-router.json", "descriptors/sink.json"] {
        std::fs::copy(cart.join(f), tmp.join(f)).expect("copy");
    }
    let args = ["generate", "blueprint.conf", "--descriptors", "descriptors", "--images", "images.conf"];
    let (code, stdout, stderr) = out(&flow(&tmp, &args));
    let _ = std::fs::remove_dir_all(&tmp);
    assert_eq!(code, Some(0), "{stderr}");
    let r: AnkkaFlow = serde_saphyr::from_str(&stdout).expect("YAML");
    let in_temp_dir = r.spec.version.clone();
    // The temporary directory is outside any git work tree (on the machines this runs on).
    assert_eq!(in_temp_dir.as_deref(), Some("unversioned"));
    assert_eq!(r.metadata.namespace, None);

    let (_, stdout, _) = out(&flow(&cart, &args));
    let r: AnkkaFlow = serde_saphyr::from_str(&stdout).expect("YAML");
    let in_repo = r.spec.version.unwrap_or_default();
    let git = Command::new("git")
        .args(["-C", &cart.display().to_string(), "describe", "--tags", "--always", "--dirty"])
        .output();
    let expected = match git {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => "unversioned".to_string(),
    };
    assert_eq!(in_repo, expected);
}

#[test]
fn file_and_directory_problems() {
    let dir = fixtures("cart");
    assert_eq!(
        out(&flow(&dir, &["verify", "nope.conf", "--descriptors", "images.conf"])),
        (
            Some(1),
            String::new(),
            "descriptors: 'images.conf' is not a directory\nblueprint: 'nope.conf' is not a file\n".into()
        )
    );
    assert_eq!(
        out(&flow(&root().join("examples"), &["verify", "cart/blueprint.conf", "--descriptors", "cart"])),
        (Some(1), String::new(), "descriptors: 'cart' holds no *.json files\n".into())
    );
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let dir = fixtures("cart");
    let (code, stdout, stderr) = out(&flow(&dir, &["verify"]));
    assert_eq!((code, stdout.as_str()), (Some(2), ""));
    assert!(stderr.contains("Usage: flow verify"), "{stderr}");
    let (code, stdout, stderr) = out(&flow(&dir, &["generate", "blueprint.conf", "--no-such-option"]));
    assert_eq!((code, stdout.as_str()), (Some(2), ""));
    assert!(stderr.contains("--no-such-option"), "{stderr}");
    for cmd in ["verify", "generate"] {
        let (code, stdout, stderr) = out(&flow(&dir, &[cmd, "--help"]));
        assert_eq!((code, stderr.as_str()), (Some(0), ""));
        assert!(stdout.contains(&format!("Usage: flow {cmd}")), "{stdout}");
    }
}

#[test]
fn version_line_names_the_version_the_protocol_and_the_commit() {
    let (code, stdout, stderr) = out(&flow(&root(), &["version"]));
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let commit = stdout.strip_prefix("flow 0.1.0, protocol 1.0, commit ").and_then(|c| c.strip_suffix('\n'));
    let commit = commit.unwrap_or_else(|| panic!("{stdout:?}"));
    // Built from a git checkout: the abbreviated commit id.
    assert!(commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()), "{commit:?}");
    let (code, stdout, _) = out(&flow(&root(), &["version", "-o", "json"]));
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(
        (code, v["version"].as_str(), v["protocol"].as_str(), v["commit"].as_str()),
        (Some(0), Some("0.1.0"), Some("1.0"), Some(commit))
    );
}

#[test]
fn the_example_pipeline_generates_as_the_seed_page_writes_it() {
    let dir = root().join("examples/cart");
    let args = [
        "generate",
        "blueprint.conf",
        "--descriptors",
        "flow",
        "--conf",
        "prod.conf",
        "--conf",
        "stop.conf",
        "--image",
        "router=registry.example.com/cart-router:1.2",
        "-n",
        "shop",
    ];
    let (code, stdout, stderr) = out(&flow(&dir, &args));
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let r: AnkkaFlow = serde_saphyr::from_str(&stdout).expect("YAML");
    let router = r.spec.streamlet("router").expect("router");
    assert_eq!((router.replicas, router.image.as_str()), (0, "registry.example.com/cart-router:1.2"));
    assert_eq!(r.spec.topic("cart-events").map(|t| t.name.as_str()), Some("shop.cart-events.v1"));
    let (code, stdout, _) =
        out(&flow(&dir, &["verify", "blueprint.conf", "--descriptors", "flow", "--conf", "prod.conf"]));
    assert_eq!((code, stdout.as_str()), (Some(0), "verified: 1 streamlets, 3 topics\n"));
}
