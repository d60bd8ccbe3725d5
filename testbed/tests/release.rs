//! The release artifacts and the operator's image, as a user gets them: `scripts/dist.sh` (what
//! `make dist` runs, here with the debug build to stay quick) and `scripts/image.sh` (`make image`,
//! here with a stripped copy of the debug build). The image is unpacked from its OCI archive and the
//! operator run inside the image's own root file system, as user 65532, through chroot.

use std::path::{Path, PathBuf};
use std::process::Command;

use flow_testbed::*;

fn workspace_version() -> String {
    let cargo = std::fs::read_to_string(bed().root.join("Cargo.toml")).expect("Cargo.toml");
    cargo
        .lines()
        .find_map(|l| l.strip_prefix("version = \"").and_then(|v| v.strip_suffix('"')))
        .expect("the workspace version")
        .to_string()
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}", show(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = bed().root.join("target/e2e-ledgers").join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    d
}

#[test]
fn deploy_names_the_image_of_this_version() {
    let text = std::fs::read_to_string(bed().root.join("deploy/operator.yaml")).expect("deploy/operator.yaml");
    let images: Vec<&str> = text.lines().filter_map(|l| l.trim().strip_prefix("image: ")).collect();
    assert_eq!(images, [format!("ankka-flow-operator:{}", workspace_version())]);
}

/// The Containerfile's `COPY . .` gets the workspace's sources and nothing of the build outputs or
/// the git history: .containerignore leaves out target/ and .git and nothing the build reads.
#[test]
fn the_container_build_context_holds_the_sources_only() {
    let text = std::fs::read_to_string(bed().root.join(".containerignore")).expect(".containerignore");
    let patterns: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    for left_out in ["target", ".git"] {
        assert!(patterns.contains(&left_out), "{left_out} is sent to the builder: {patterns:?}");
    }
    // What `cargo build --locked -p flow-operator` reads: the workspace's manifest and lock file,
    // every member (cargo loads them all), and the build scripts' shared source.
    let cargo = std::fs::read_to_string(bed().root.join("Cargo.toml")).expect("Cargo.toml");
    let members = cargo
        .lines()
        .find_map(|l| l.strip_prefix("members = ["))
        .expect("the workspace members")
        .trim_end_matches(']')
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string());
    let needed: Vec<String> =
        ["Cargo.toml", "Cargo.lock", "build-support"].map(String::from).into_iter().chain(members).collect();
    for path in &needed {
        assert!(bed().root.join(path).exists(), "{path} is not in the repository");
        let top = path.split('/').next().unwrap_or_default();
        assert!(
            !patterns.iter().any(|p| *p == top || p.trim_end_matches('/') == top),
            "{path} is left out of the build context: {patterns:?}"
        );
    }
}

#[test]
fn dist_makes_archives_checksums_install_yaml_and_a_krew_manifest() {
    let version = workspace_version();
    run(Command::new(bed().root.join("scripts/dist.sh")).args([
        "--profile",
        "dev",
        "--image",
        "registry.example.com/ankka-flow-operator:9.9.9",
    ]));
    let dist = bed().root.join("target/dist");
    run(Command::new("sha256sum").args(["-c", "SHA256SUMS"]).current_dir(&dist));

    // The CLI archive: the binary, its kubectl plugin name, the man page and completions.
    let flow_tgz = format!("flow-{version}-linux-amd64.tar.gz");
    let listing = run(Command::new("tar").args(["-tzf", &flow_tgz]).current_dir(&dist));
    let mut files: Vec<&str> = listing.lines().collect();
    files.sort_unstable();
    assert_eq!(
        files,
        [
            "LICENSE",
            "completions/",
            "completions/_flow",
            "completions/flow.bash",
            "completions/flow.fish",
            "flow",
            "flow.1",
            "kubectl-flow"
        ]
    );
    let unpacked = scratch("dist-flow");
    run(Command::new("tar").args(["-xzf"]).arg(dist.join(&flow_tgz)).arg("-C").arg(&unpacked));
    let line = run(Command::new(unpacked.join("flow")).arg("version"));
    assert!(line.starts_with(&format!("flow {version}, protocol 1.0, commit ")), "{line}");
    let help = run(Command::new(unpacked.join("kubectl-flow")).args(["reset", "--help"]));
    assert!(help.contains("Usage: kubectl flow reset"), "{help}");
    let license = std::fs::read_to_string(unpacked.join("LICENSE")).expect("LICENSE");
    assert!(license.contains("Apache License") && license.contains("Version 2.0"));

    let operator_tgz = format!("flow-operator-{version}-linux-amd64.tar.gz");
    let listing = run(Command::new("tar").args(["-tzf", &operator_tgz]).current_dir(&dist));
    let mut files: Vec<&str> = listing.lines().collect();
    files.sort_unstable();
    assert_eq!(files, ["LICENSE", "flow-operator"]);

    // The krew manifest points at the CLI archive with its checksum, and runs `flow`.
    let krew = std::fs::read_to_string(dist.join("flow.krew.yaml")).expect("krew manifest");
    let krew: serde_json::Value = serde_saphyr::from_str(&krew).expect("YAML");
    let platform = &krew["spec"]["platforms"][0];
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).expect("SHA256SUMS");
    let sha = sums.lines().find(|l| l.ends_with(&flow_tgz)).and_then(|l| l.split_whitespace().next());
    assert_eq!(platform["sha256"].as_str(), sha);
    assert!(platform["uri"].as_str().is_some_and(|u| u.ends_with(&format!("/{flow_tgz}"))), "{krew}");
    assert_eq!((krew["metadata"]["name"].as_str(), platform["bin"].as_str()), (Some("flow"), Some("flow")));
    assert_eq!(krew["spec"]["version"].as_str(), Some(format!("v{version}").as_str()));

    // install.yaml: the CRD and the operator, naming the image given, accepted by the API server.
    let install = std::fs::read_to_string(dist.join("install.yaml")).expect("install.yaml");
    assert!(install.contains("kind: CustomResourceDefinition") && install.contains("kind: Deployment"));
    let images: Vec<&str> = install.lines().filter_map(|l| l.trim().strip_prefix("image: ")).collect();
    assert_eq!(images, ["registry.example.com/ankka-flow-operator:9.9.9"]);
    kubectl_ok(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        dist.join("install.yaml").to_str().expect("utf-8"),
    ]);
}

/// Reads blob `digest` (`sha256:<hex>`) of the OCI layout in `dir`.
fn blob(dir: &Path, digest: &str) -> PathBuf {
    let (alg, hex) = digest.split_once(':').expect("a digest");
    dir.join("blobs").join(alg).join(hex)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).expect("JSON")
}

#[test]
fn the_image_runs_the_operator_in_its_own_root_as_65532() {
    let work = scratch("image");
    let binary = work.join("flow-operator");
    run(Command::new("strip").arg("-o").arg(&binary).arg(bin("flow-operator")));
    let out = work.join("out");
    run(Command::new(bed().root.join("scripts/image.sh")).arg("--binary").arg(&binary).arg("--out").arg(&out));
    let env = std::fs::read_to_string(out.join("image.env")).expect("image.env");
    let archive = env.lines().find_map(|l| l.strip_prefix("ARCHIVE=")).expect("ARCHIVE");

    // Unpack the OCI archive as a runtime would: index, manifest, config, then the layers in order.
    let layout = work.join("layout");
    std::fs::create_dir_all(&layout).expect("dir");
    run(Command::new("tar").arg("-xf").arg(archive).arg("-C").arg(&layout));
    let index = json(&layout.join("index.json"));
    let manifest = json(&blob(&layout, index["manifests"][0]["digest"].as_str().expect("a manifest")));
    let config = json(&blob(&layout, manifest["config"]["digest"].as_str().expect("a config")));
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(config["config"]["Entrypoint"], serde_json::json!(["/usr/local/bin/flow-operator"]));
    assert_eq!(config["architecture"], "amd64");
    let root = work.join("root");
    std::fs::create_dir_all(&root).expect("dir");
    for layer in manifest["layers"].as_array().expect("layers") {
        run(Command::new("tar")
            .arg("-xf")
            .arg(blob(&layout, layer["digest"].as_str().expect("digest")))
            .arg("-C")
            .arg(&root));
    }

    // Exactly the binary, the libraries it loads, and the few files it reads.
    let listing = run(Command::new("find").arg(".").args(["-type", "f"]).current_dir(&root));
    let mut files: Vec<&str> = listing.lines().collect();
    files.sort_unstable();
    let libs = run(Command::new("ldd").arg(&binary));
    for lib in libs.lines().filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/'))) {
        assert!(files.contains(&format!(".{lib}").as_str()), "{lib} is missing from {files:?}");
    }
    let extra: Vec<&&str> = files
        .iter()
        .filter(|f| !f.starts_with("./lib") && !f.starts_with("./usr/lib"))
        .filter(|f| {
            ![
                "./usr/local/bin/flow-operator",
                "./etc/passwd",
                "./etc/group",
                "./etc/nsswitch.conf",
                "./etc/ssl/certs/ca-certificates.crt",
            ]
            .contains(f)
        })
        .collect();
    assert!(extra.is_empty(), "files the operator does not need: {extra:?}");

    // The operator runs there, as its user, with nothing of this machine's root (nor its
    // environment: the program is found before the environment is cleared).
    let chroot = ["/usr/sbin/chroot", "/usr/bin/chroot"].into_iter().find(|p| Path::new(p).exists()).expect("chroot");
    let o = Command::new(chroot)
        .args(["--userspec=65532:65532", "--"])
        .arg(&root)
        .args(["/usr/local/bin/flow-operator", "--version"])
        .env_clear()
        .output()
        .expect("chroot runs");
    let line = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    assert!(line.starts_with(&format!("flow-operator {}, commit ", workspace_version())), "{line}");
    let o = Command::new(chroot)
        .args(["--userspec=65532:65532", "--"])
        .arg(&root)
        .args(["/usr/local/bin/flow-operator", "crd"])
        .env_clear()
        .output()
        .expect("chroot runs");
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("kind: CustomResourceDefinition"),
        "{}",
        show(&o)
    );
}
