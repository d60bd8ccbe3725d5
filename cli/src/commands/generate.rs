//! `flow generate <blueprint.conf> ... [-o yaml|json] [--output-file <file>]`: the `AnkkaFlow`
//! resource, for `kubectl apply -f -`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use flow_core::blueprint::{self, GenerateInput};

use super::inputs::{BlueprintArgs, read};
use crate::exit::{Failure, Output};

/// Arguments of `flow generate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    blueprint: BlueprintArgs,
    /// Images file: HOCON mapping streamlet name to image reference (router = "ghcr.io/acme/router:1.2").
    #[arg(long, value_name = "FILE")]
    images: Option<PathBuf>,
    /// The image of one streamlet, as <name>=<reference>; repeatable; wins over --images.
    #[arg(long = "image", value_name = "NAME=REF")]
    image: Vec<String>,
    /// Pipeline id (1-40 of [a-z0-9-]). Default: blueprint.name, else the blueprint's file name up
    /// to its first '.'.
    #[arg(long, value_name = "ID")]
    pipeline: Option<String>,
    /// Value of spec.version. Default: `git describe --tags --always --dirty` in the blueprint's
    /// directory, else "unversioned".
    #[arg(long, value_name = "VERSION")]
    version: Option<String>,
    /// Namespace of the resource (metadata.namespace). Default: none, so kubectl's namespace applies.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    namespace: Option<String>,
    /// Output format of the resource: yaml or json.
    #[arg(short = 'o', long = "output", value_name = "FORMAT", default_value = "yaml", value_parser = resource_format)]
    output: ResourceFormat,
    /// Write the resource to this file (and say so on stderr) instead of stdout.
    #[arg(long = "output-file", value_name = "FILE")]
    output_file: Option<PathBuf>,
    /// Delete the pipeline's managed topics when the resource is deleted (spec.onDelete.managedTopics:
    /// Delete). Default: keep them.
    #[arg(long)]
    delete_managed_topics: bool,
}

/// The formats of the generated resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceFormat {
    /// YAML (the default).
    Yaml,
    /// JSON.
    Json,
}

/// Parses `-o`. Before it meant the output format, `-o` named the output file; a value that is no
/// format is refused with the new spelling, so that an old command line never writes a file named
/// `json` or prints YAML where a file was expected.
fn resource_format(value: &str) -> Result<ResourceFormat, String> {
    match value {
        "yaml" => Ok(ResourceFormat::Yaml),
        "json" => Ok(ResourceFormat::Json),
        other => Err(format!(
            "'{other}' is not an output format: -o takes yaml or json; to write the resource to a file, use \
             --output-file {other}"
        )),
    }
}

/// `git -C <dir> describe --tags --always --dirty`, trimmed; `unversioned` when git fails, is
/// missing, or prints nothing.
fn git_version(blueprint: &Path) -> String {
    let dir = match blueprint.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["describe", "--tags", "--always", "--dirty"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unversioned".to_string())
}

/// Runs the command: the resource on stdout (or in `--output-file`), notes on stderr.
///
/// # Errors
/// Every problem `verify` finds, then images, pipeline id and namespace problems (exit 1); nothing
/// is written then. A file that cannot be written is a failure too.
pub fn run(args: Args) -> Result<Output, Failure> {
    let input = GenerateInput {
        verify: args.blueprint.read(),
        images_file: args.images.as_deref().map(|p| read(p, p.display().to_string())),
        images: args.image,
        pipeline: args.pipeline,
        version: args.version.unwrap_or_else(|| git_version(&args.blueprint.blueprint)),
        namespace: args.namespace,
        delete_managed_topics: args.delete_managed_topics,
    };
    let generated = blueprint::generate(&input).map_err(Failure::all)?;
    let text = match args.output {
        ResourceFormat::Yaml => {
            blueprint::to_yaml(&generated.resource).map_err(|e| Failure::refused(format!("yaml: {e}")))?
        }
        ResourceFormat::Json => serde_json::to_string_pretty(&generated.resource)
            .map(|s| s + "\n")
            .map_err(|e| Failure::refused(format!("json: {e}")))?,
    };
    let mut stderr: Vec<String> = generated.notes.iter().map(ToString::to_string).collect();
    match args.output_file {
        None => Ok(Output { stdout: text, stderr }),
        Some(file) => {
            std::fs::write(&file, text)
                .map_err(|e| Failure::refused(format!("output: cannot write '{}': {e}", file.display())))?;
            stderr.push(format!("wrote {}", file.display()));
            Ok(Output { stdout: String::new(), stderr })
        }
    }
}
