//! The file reading of `flow verify` and `flow generate`: everything core needs, read up front and
//! handed over as text (or as the reason there is none), so that core stays pure and reports every
//! problem in one pass.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use flow_core::blueprint::{DescriptorSource, Source, SourceError, VerifyInput};

/// The arguments `verify` and `generate` share.
#[derive(clap::Args, Debug)]
pub struct BlueprintArgs {
    /// The blueprint (HOCON), conventionally blueprint.conf.
    #[arg(value_name = "BLUEPRINT")]
    pub blueprint: PathBuf,
    /// Directory of streamlet descriptors: every *.json directly in it, in file-name order. Not
    /// needed when every streamlet is a built-in (builtin/<name>).
    #[arg(long, value_name = "DIR")]
    pub descriptors: Option<PathBuf>,
    /// Deploy-time configuration: HOCON with flow.topics.<id> { ... } and
    /// flow.streamlets.<name> { replicas = <n>, config { ... } }. Repeatable; a later file wins,
    /// objects merge key by key.
    #[arg(long = "conf", value_name = "FILE")]
    pub confs: Vec<PathBuf>,
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

/// Reads one file as UTF-8 text. `name` is what messages call it.
pub fn read(path: &Path, name: String) -> Source {
    let text = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => std::fs::read_to_string(path).map_err(|e| SourceError::Unreadable(e.to_string())),
        Ok(_) => Err(SourceError::NotAFile),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(SourceError::Missing),
        Err(e) => Err(SourceError::Unreadable(e.to_string())),
    };
    Source { name, text }
}

/// Every `*.json` file directly in `dir`, sorted by file name.
fn descriptors(dir: &Path) -> DescriptorSource {
    if !dir.is_dir() {
        return DescriptorSource::NotADirectory(shown(dir));
    }
    let mut files: Vec<(String, PathBuf)> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
            .filter_map(|p| Some((p.file_name()?.to_string_lossy().into_owned(), p)))
            .collect(),
        // A directory that cannot be listed offers no descriptor files.
        Err(_) => Vec::new(),
    };
    files.sort();
    DescriptorSource::Directory {
        dir: shown(dir),
        files: files.into_iter().map(|(name, path)| read(&path, name)).collect(),
    }
}

/// The process environment, for `${VAR}` in HOCON files (variables that are not UTF-8 are left out).
fn environment() -> HashMap<String, String> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect()
}

impl BlueprintArgs {
    /// Reads every file the arguments name.
    pub fn read(&self) -> VerifyInput {
        VerifyInput {
            descriptors: self.descriptors.as_deref().map_or(DescriptorSource::NotGiven, descriptors),
            blueprint: read(&self.blueprint, shown(&self.blueprint)),
            confs: self.confs.iter().map(|c| read(c, shown(c))).collect(),
            env: environment(),
        }
    }
}
