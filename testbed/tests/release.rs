//! The release artifacts and the operator's image, as a user gets them, and every script the release
//! workflow (.github/workflows/release.yml) runs: `scripts/dist.sh` (what `make dist` runs, and the
//! workflow per platform, here with the debug build to stay quick), `scripts/image.sh` (`make
//! image`, here with a stripped copy of the debug build), `scripts/image-publish.sh` (one image of
//! the platforms' archives, pushed here to an OCI layout on disk), `scripts/chart-package.sh` and
//! `scripts/release-version.sh`. The image is unpacked from its OCI archive and the operator run
//! inside the image's own root file system, as user 65532, through chroot. What cannot run here
//! (the registry, cosign's keyless signatures, the macOS and musl builds) is in the workflow alone,
//! which `make lint` checks with actionlint.

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

/// A script of `scripts/`, run from the repository's root.
fn script(name: &str) -> Command {
    let mut cmd = Command::new(bed().root.join("scripts").join(name));
    cmd.current_dir(&bed().root);
    cmd
}

/// Runs `cmd`, which must fail; its stderr.
fn fails(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(!o.status.success(), "{cmd:?} succeeded: {}", show(&o));
    String::from_utf8_lossy(&o.stderr).into_owned()
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
    // Isolated: it asks the test bed's API server to accept install.yaml (a dry run), so never beside
    // a test that runs alone and changes the CRD (the chart's hands it to Helm).
    let _lock = side_by_side();
    let version = workspace_version();
    let dist = scratch("dist");
    run(script("dist.sh")
        .args(["--profile", "dev", "--image", "registry.example.com/ankka-flow-operator:9.9.9", "--out"])
        .arg(&dist));
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
    // Forced: other tests' field managers (Helm, kubectl label) may own fields of the live CRD, and
    // what is asked here is only whether the API server accepts every object (nothing is written).
    kubectl_ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
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
    run(script("image.sh").arg("--binary").arg(&binary).arg("--out").arg(&out));
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
    // The OCI labels registries and scanners read; created is the commit's time, so that the same
    // commit gives the same image.
    let labels = &config["config"]["Labels"];
    let label = |k: &str| labels[format!("org.opencontainers.image.{k}")].as_str().unwrap_or_default().to_string();
    let head = run(Command::new("git").args(["rev-parse", "HEAD"]).current_dir(&bed().root));
    let committed = run(Command::new("git")
        .args(["log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ"])
        .env("TZ", "UTC")
        .current_dir(&bed().root));
    assert_eq!(
        (label("title"), label("version"), label("revision"), label("created"), label("licenses")),
        (
            "ankka-flow-operator".into(),
            workspace_version(),
            head.trim().into(),
            committed.trim().into(),
            "Apache-2.0".into()
        ),
        "{labels}"
    );
    for k in ["description", "source", "url", "documentation", "vendor"] {
        assert!(!label(k).is_empty(), "no org.opencontainers.image.{k}: {labels}");
    }
    assert_eq!(config["created"].as_str(), Some(committed.trim()));
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

/// The platforms' images joined into one and pushed (here to an OCI layout on disk, in the release
/// workflow to the registry): an image index listing each platform's image, whose digest is the one
/// printed and written; two images of one platform are refused.
#[test]
fn image_publish_pushes_one_index_of_the_platforms_images() {
    let work = scratch("image-publish");
    let build = |binary: &Path, out: &str| -> PathBuf {
        let stripped = work.join(format!("{out}.bin"));
        run(Command::new("strip").arg("-o").arg(&stripped).arg(binary));
        let out = work.join(out);
        run(script("image.sh").arg("--binary").arg(&stripped).arg("--out").arg(&out));
        let env = std::fs::read_to_string(out.join("image.env")).expect("image.env");
        PathBuf::from(env.lines().find_map(|l| l.strip_prefix("ARCHIVE=")).expect("ARCHIVE"))
    };
    let operator = build(&bin("flow-operator"), "operator");
    let layout = work.join("layout");
    let digest_file = work.join("digest");
    let printed = run(script("image-publish.sh")
        .arg("--to")
        .arg(format!("oci:{}:{}", layout.display(), workspace_version()))
        .arg("--digestfile")
        .arg(&digest_file)
        .arg(&operator));
    let digest = std::fs::read_to_string(&digest_file).expect("the digest file");
    assert_eq!(printed.trim(), digest.trim());
    let index = json(&layout.join("index.json"));
    let top = &index["manifests"][0];
    assert_eq!(top["digest"].as_str(), Some(digest.trim()));
    assert_eq!(top["mediaType"], "application/vnd.oci.image.index.v1+json");
    assert_eq!(top["annotations"]["org.opencontainers.image.ref.name"].as_str(), Some(workspace_version().as_str()));
    let list = json(&blob(&layout, digest.trim()));
    let platforms: Vec<String> = list["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap_or("?"),
                m["platform"]["architecture"].as_str().unwrap_or("?")
            )
        })
        .collect();
    assert_eq!(platforms, ["linux/amd64"]);
    // Every image it lists is there, with its config.
    let manifest = json(&blob(&layout, list["manifests"][0]["digest"].as_str().expect("digest")));
    assert!(blob(&layout, manifest["config"]["digest"].as_str().expect("config")).exists());

    // Another image of linux/amd64 (another binary in it): one platform, two images, refused.
    let other = build(&bin("flow"), "other");
    let e = fails(
        script("image-publish.sh")
            .arg("--to")
            .arg(format!("oci:{}:x", work.join("twice").display()))
            .args([&operator, &other]),
    );
    assert!(e.contains("more than one archive for linux/amd64"), "{e}");
    let e = fails(script("image-publish.sh").arg(&operator));
    assert!(e.contains("--to is needed"), "{e}");
}

/// The CLI archive of a target, named for its platform; the manifests over the archives of every
/// platform: the krew manifest lists each with its checksum, SHA256SUMS every file, install.yaml the
/// image by digest.
#[test]
fn dist_packs_a_target_and_the_manifests_name_every_platform() {
    let version = workspace_version();
    let dist = scratch("dist-platforms");
    // The debug build of this machine's target, where a build for that target puts it.
    let triple = "x86_64-unknown-linux-gnu";
    let target_dir = bed().root.join("target").join(triple).join("debug");
    std::fs::create_dir_all(&target_dir).expect("dir");
    std::fs::copy(bin("flow"), target_dir.join("flow")).expect("copy flow");
    run(script("dist.sh").args(["cli", "--target", triple, "--profile", "dev", "--out"]).arg(&dist));
    let linux = format!("flow-{version}-linux-amd64.tar.gz");
    let listing = run(Command::new("tar").args(["-tzf", &linux]).current_dir(&dist));
    assert!(listing.lines().any(|l| l == "flow") && listing.lines().any(|l| l == "flow.1"), "{listing}");

    // What the other platforms' jobs would add, and the chart (the manifests read only their names
    // and bytes).
    for platform in ["linux-arm64", "darwin-amd64", "darwin-arm64"] {
        std::fs::write(dist.join(format!("flow-{version}-{platform}.tar.gz")), platform).expect("write");
    }
    std::fs::write(dist.join(format!("ankka-flow-{version}.tgz")), "chart").expect("write");
    let image = "ghcr.io/acme/ankka-flow-operator:9.9.9@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    run(script("dist.sh")
        .args(["manifests", "--image", image, "--url", "https://downloads.example.com/v9", "--out"])
        .arg(&dist));
    run(Command::new("sha256sum").args(["-c", "SHA256SUMS"]).current_dir(&dist));
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).expect("SHA256SUMS");
    let sum_of = |file: &str| {
        sums.lines()
            .find(|l| l.ends_with(&format!("  {file}")))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_string)
    };
    let mut listed: Vec<&str> = sums.lines().filter_map(|l| l.split_whitespace().nth(1)).collect();
    listed.sort_unstable();
    let mut files: Vec<String> = std::fs::read_dir(&dist)
        .expect("dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f != "SHA256SUMS")
        .collect();
    files.sort_unstable();
    assert_eq!(listed, files, "SHA256SUMS covers every file");

    let krew: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dist.join("flow.krew.yaml")).expect("krew")).expect("YAML");
    let platforms: Vec<(String, String, String, String)> = krew["spec"]["platforms"]
        .as_array()
        .expect("platforms")
        .iter()
        .map(|p| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            (
                s(&p["selector"]["matchLabels"]["os"]),
                s(&p["selector"]["matchLabels"]["arch"]),
                s(&p["uri"]),
                s(&p["sha256"]),
            )
        })
        .collect();
    let want: Vec<(String, String, String, String)> =
        [("darwin", "amd64"), ("darwin", "arm64"), ("linux", "amd64"), ("linux", "arm64")]
            .iter()
            .map(|(os, arch)| {
                let file = format!("flow-{version}-{os}-{arch}.tar.gz");
                (
                    os.to_string(),
                    arch.to_string(),
                    format!("https://downloads.example.com/v9/{file}"),
                    sum_of(&file).expect("a sum"),
                )
            })
            .collect();
    assert_eq!(platforms, want);
    let install = std::fs::read_to_string(dist.join("install.yaml")).expect("install.yaml");
    let images: Vec<&str> = install.lines().filter_map(|l| l.trim().strip_prefix("image: ")).collect();
    assert_eq!(images, [image]);

    // A target of no release platform, and the operator for another target, are refused.
    let e = fails(script("dist.sh").args(["cli", "--target", "riscv64gc-unknown-linux-gnu", "--out"]).arg(&dist));
    assert!(e.contains("no release platform for target riscv64gc-unknown-linux-gnu"), "{e}");
    let e = fails(script("dist.sh").args(["operator", "--target", "aarch64-unknown-linux-gnu", "--out"]).arg(&dist));
    assert!(e.contains("the operator is built for this machine only"), "{e}");
    let e = fails(script("dist.sh").args(["manifests", "--out"]).arg(scratch("dist-empty")));
    assert!(e.contains("run scripts/dist.sh cli first"), "{e}");
}

/// The chart as the release pushes it: its image the release's, without any --set.
#[test]
fn chart_package_names_the_release_image() {
    let out = scratch("chart-package");
    let printed = run(script("chart-package.sh")
        .args(["--image-repository", "ghcr.io/acme/ankka-flow-operator", "--out"])
        .arg(&out));
    let package = PathBuf::from(printed.trim());
    let want = out.canonicalize().expect("out").join(format!("ankka-flow-{}.tgz", workspace_version()));
    assert_eq!(package, want);
    let rendered = run(script("helm.sh")
        .args(["template", "ankka-flow", "--namespace", "ankka-flow", "--kube-version", "1.36.3"])
        .arg(&package));
    let images: Vec<&str> = rendered.lines().filter_map(|l| l.trim().strip_prefix("image: ")).collect();
    assert_eq!(images, [format!("ghcr.io/acme/ankka-flow-operator:{}", workspace_version())]);
    // The repository in the repository is left as it is.
    let values = std::fs::read_to_string(bed().root.join("charts/ankka-flow/values.yaml")).expect("values.yaml");
    assert!(values.contains("\n  repository: ankka-flow-operator\n"));
    // A registry with a port is a repository; a tag or a digest is not.
    run(script("chart-package.sh").args(["--image-repository", "localhost:5000/acme/op", "--out"]).arg(&out));
    for bad in ["ghcr.io/acme/op:1.0", "ghcr.io/acme/op@sha256:00"] {
        let e = fails(script("chart-package.sh").args(["--image-repository", bad]));
        assert!(e.contains("without a tag or digest"), "{e}");
    }
}

#[test]
fn release_version_takes_the_tag_of_the_workspace_version_only() {
    let version = workspace_version();
    let printed = run(script("release-version.sh").arg(format!("v{version}")));
    assert_eq!(printed, format!("version={version}\n"));
    for tag in ["v9.9.9".to_string(), version.clone()] {
        let e = fails(script("release-version.sh").arg(&tag));
        assert!(e.contains(&format!("the tag {tag} is not v{version}")), "{e}");
    }
}

/// Every script the release workflow runs is run by a test of this file.
#[test]
fn every_script_of_the_release_workflow_is_tested_here() {
    let workflow = std::fs::read_to_string(bed().root.join(".github/workflows/release.yml")).expect("release.yml");
    let this = include_str!("release.rs");
    let mut named = std::collections::BTreeSet::new();
    for (at, _) in workflow.match_indices("scripts/") {
        let rest = &workflow[at + "scripts/".len()..];
        let end =
            rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')).unwrap_or(rest.len());
        if rest[..end].ends_with(".sh") {
            named.insert(rest[..end].to_string());
        }
    }
    assert!(named.len() >= 5, "{named:?}");
    for name in named {
        assert!(
            bed().root.join("scripts").join(&name).is_file(),
            "the workflow runs scripts/{name}, which does not exist"
        );
        let call = format!("script(\"{name}\")");
        assert!(this.contains(&call), "the workflow runs scripts/{name}, which no test here runs");
    }
}
