//! What a kubectl user expects of `flow`, for the parts that need no cluster: `-o` is the output
//! format, shell completion and a man page, the `kubectl flow` name, image names and references
//! checked, and errors that name the API server. (The parts that need a cluster are in
//! testbed/tests/cli.rs.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use flow_core::resource::AnkkaFlow;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn cart() -> PathBuf {
    root().join("examples/cart")
}

fn run(program: &Path, dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o: Output = Command::new(program)
        .args(args)
        .current_dir(dir)
        // No kubeconfig of the machine's may answer.
        .env("KUBECONFIG", root().join("testbed/tests/unreachable.kubeconfig"))
        .output()
        .expect("flow runs");
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn flow(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    run(Path::new(env!("CARGO_BIN_EXE_flow")), dir, args)
}

const GENERATE: [&str; 9] = [
    "generate",
    "blueprint.conf",
    "--descriptors",
    "flow",
    "--conf",
    "prod.conf",
    "--image",
    "router=registry.example.com/cart-router:1.2",
    "-n",
];

fn generate(extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = GENERATE.to_vec();
    args.push("shop");
    args.extend(extra);
    flow(&cart(), &args)
}

#[test]
fn generate_o_json_is_the_same_resource_as_yaml() {
    let (code, yaml, err) = generate(&[]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let (code, json, err) = generate(&["-o", "json"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let from_yaml: AnkkaFlow = serde_saphyr::from_str(&yaml).expect("YAML");
    let from_json: AnkkaFlow = serde_json::from_str(&json).expect("JSON");
    assert_eq!(serde_json::to_value(&from_json).unwrap(), serde_json::to_value(&from_yaml).unwrap());
    assert_eq!(generate(&["-o", "yaml"]).1, yaml);
}

#[test]
fn the_old_o_file_is_refused_and_writes_nothing() {
    let dir = std::env::temp_dir().join(format!("flow-o-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("cart.yaml");
    let f = file.display().to_string();
    let (code, out, err) = generate(&["-o", &f]);
    assert_eq!((code, out.as_str()), (Some(2), ""), "{err}");
    assert!(
        err.contains(&format!("-o takes yaml or json; to write the resource to a file, use --output-file {f}")),
        "{err}"
    );
    assert!(!file.exists(), "-o never names a file");
    let (code, out, err) = generate(&["-o", "json", "--output-file", &f]);
    assert_eq!((code, out.as_str(), err), (Some(0), "", format!("wrote {f}\n")));
    let written = std::fs::read_to_string(&file).expect("written");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(written, generate(&["-o", "json"]).1);
}

#[test]
fn an_image_for_no_streamlet_and_a_malformed_reference_are_refused() {
    let mut args = GENERATE.to_vec();
    args.extend(["shop", "--image", "routr=registry.example.com/cart-router:1.2"]);
    assert_eq!(
        flow(&cart(), &args),
        (
            Some(1),
            String::new(),
            "--image 'routr=registry.example.com/cart-router:1.2' names streamlet 'routr', which the blueprint does \
             not have; the streamlets that take an image are: router.\n"
                .into()
        )
    );
    let args = [
        "generate",
        "blueprint.conf",
        "--descriptors",
        "flow",
        "--image",
        "router=registry.example.com/Cart-Router:1.2",
    ];
    assert_eq!(
        flow(&cart(), &args),
        (
            Some(1),
            String::new(),
            "Streamlet 'router' has image 'registry.example.com/Cart-Router:1.2', which is not an image reference: \
             repository name must be lowercase.\n"
                .into()
        )
    );
}

#[test]
fn verify_and_reset_speak_o_too() {
    let (code, out, _) = flow(&cart(), &["verify", "blueprint.conf", "--descriptors", "flow", "-o", "json"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!((v["streamlets"].as_u64(), v["topics"].as_u64()), (Some(1), Some(3)));
    let (code, out, _) = flow(&cart(), &["verify", "blueprint.conf", "--descriptors", "flow", "-o", "yaml"]);
    assert_eq!((code, out.as_str()), (Some(0), "streamlets: 1\ntopics: 3\n"));
    assert_eq!(flow(&cart(), &["reset", "cart", "-o", "xml"]).0, Some(2));
}

#[test]
fn completion_scripts_and_the_man_page() {
    let (code, bash, err) = flow(&root(), &["completion", "bash"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    // The script is valid bash and completes the commands and the cluster options.
    let check = Command::new("bash").args(["-n", "-c", &bash]).output().expect("bash runs");
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    for word in ["generate", "reset", "status", "--kubeconfig", "--context", "--all-namespaces"] {
        assert!(bash.contains(word), "{word} is not completed");
    }
    for shell in ["zsh", "fish"] {
        let (code, script, _) = flow(&root(), &["completion", shell]);
        assert!(code == Some(0) && script.contains("kubeconfig"), "{shell}");
    }
    assert_eq!(flow(&root(), &["completion", "tcsh"]).0, Some(2));
    let (code, page, _) = flow(&root(), &["man"]);
    assert_eq!(code, Some(0));
    assert!(page.contains(".TH flow 1"), "{page}");
    for word in ["verify", "generate", "reset", "completion"] {
        assert!(page.contains(word), "{word} is not in the man page");
    }
}

#[test]
fn run_as_kubectl_flow_it_calls_itself_so() {
    let dir = std::env::temp_dir().join(format!("flow-plugin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let plugin = dir.join("kubectl-flow");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_flow"), &plugin).expect("symlink");
    let (code, out, _) = run(&plugin, &root(), &["reset", "--help"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(0));
    assert!(out.contains("Usage: kubectl flow reset"), "{out}");
    assert!(flow(&root(), &["reset", "--help"]).1.contains("Usage: flow reset"));
}

#[test]
fn an_unreachable_api_server_is_named_with_the_cause() {
    let (code, out, err) = flow(&cart(), &["reset", "cart"]);
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert!(err.starts_with("cannot reach Kubernetes: https://127.0.0.1:9: "), "{err}");
    assert!(err.contains("Connection refused"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // --kubeconfig wins over KUBECONFIG; --context picks a context of it.
    let missing = root().join("no-such.kubeconfig");
    let (code, _, err) = flow(&cart(), &["reset", "cart", "--kubeconfig", missing.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.starts_with("cannot reach Kubernetes: ") && err.contains("no-such.kubeconfig"), "{err}");
    let (code, _, err) =
        flow(&cart(), &["reset", "status", "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71", "--context", "elsewhere"]);
    assert_eq!(code, Some(1));
    assert_eq!(err.trim_end(), "cannot reach Kubernetes: no context 'elsewhere' in the kubeconfig");
    let (code, _, err) = flow(&cart(), &["reset", "cart", "--wait", "--timeout", "soon"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn kubeconfig_files_that_do_not_exist_are_skipped_as_kubectl_does() {
    let listed =
        std::env::join_paths([root().join("no-such.kubeconfig"), root().join("testbed/tests/unreachable.kubeconfig")])
            .expect("paths");
    let o = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["reset", "cart"])
        .current_dir(cart())
        .env("KUBECONFIG", &listed)
        .output()
        .expect("flow runs");
    let err = String::from_utf8_lossy(&o.stderr);
    // The listed file that exists was used: its server is the one that does not answer.
    assert!(err.starts_with("cannot reach Kubernetes: https://127.0.0.1:9: "), "{err}");
    let o = Command::new(env!("CARGO_BIN_EXE_flow"))
        .args(["reset", "cart"])
        .current_dir(cart())
        .env("KUBECONFIG", root().join("no-such.kubeconfig"))
        .env("HOME", root().join("no-such-home"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("flow runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("cannot reach Kubernetes: no kubeconfig found"), "{err}");
}

#[test]
fn a_bad_pipeline_name_or_request_id_is_refused_before_the_cluster_is_asked() {
    // The kubeconfig's API server does not answer: a refusal that names no server asked none.
    let name = "pipeline '' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a \
                letter or digit; nothing was requested";
    for args in [&["reset", "", "-n", "x"][..], &["reset", "--pipeline", "", "-n", "x"], &["rebuild", "", "-n", "x"]] {
        let (code, out, err) = flow(&root(), args);
        assert_eq!((code, out.as_str(), err.trim_end()), (Some(1), "", name), "{args:?}");
    }
    let id = "'notauuid' is not a reset request id (a UUID, as flow reset printed it)";
    let (code, _, err) = flow(&root(), &["reset", "status", "notauuid"]);
    assert_eq!((code, err.trim_end()), (Some(1), id));
    let (code, _, err) = flow(&root(), &["reset", "undo", "notauuid"]);
    assert_eq!((code, err.trim_end()), (Some(1), format!("{id}; nothing was requested").as_str()));
    let (code, _, err) = flow(&root(), &["reset", "approve", "notauuid"]);
    assert_eq!((code, err.trim_end()), (Some(1), format!("{id}; nothing was written").as_str()));
    let (code, _, err) =
        flow(&root(), &["reset", "status", "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71", "--pipeline", "Cart"]);
    assert_eq!(code, Some(1));
    assert!(err.starts_with("pipeline 'Cart' is not a Kubernetes object name"), "{err}");
}
