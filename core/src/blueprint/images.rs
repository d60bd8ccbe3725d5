//! Container images of streamlets: `--images <file>` and `--image <name>=<ref>` (docs/blueprint.md,
//! "Images").

use std::collections::{BTreeMap, HashMap};

use super::problems::Problem;
use super::tree::{self, Node};
use super::{Source, SourceError};

/// The images of the streamlets, as read.
#[derive(Debug, Default)]
pub struct Images {
    /// Streamlet name → image reference; an `--image` wins over the file for the same name.
    pub by_name: BTreeMap<String, String>,
    /// Whether the file (if any) was read whole.
    pub file_ok: bool,
    /// The well-formed `--image` arguments, as (argument, name), in the order given.
    pub args: Vec<(String, String)>,
}

/// Reads the images file and the `--image` arguments. Names of the file that are no streamlet are
/// not refused here (an images file may serve several blueprints); [`check`] refuses an `--image`
/// that names no streamlet.
///
/// # Errors
/// `images: <reason>` for a file that cannot be read or parsed or that maps a name to something
/// other than a reference; `--image '<value>' is not name=reference` per bad argument. The images
/// hold what could be read.
pub fn read(file: Option<&Source>, args: &[String], env: &HashMap<String, String>) -> (Images, Vec<Problem>) {
    let mut images = BTreeMap::new();
    let mut given = Vec::new();
    let mut problems = Vec::new();
    let mut file_ok = true;
    if let Some(f) = file {
        match &f.text {
            Err(SourceError::Missing) => problems.push(Problem::ImagesFile(format!("'{}': no such file", f.name))),
            Err(SourceError::NotAFile) => problems.push(Problem::ImagesFile(format!("'{}' is not a file", f.name))),
            Err(SourceError::Unreadable(r)) => {
                problems.push(Problem::ImagesFile(format!("'{}' cannot be read: {r}", f.name)))
            }
            Ok(text) => match tree::parse(text, env) {
                Err(e) => problems.push(Problem::ImagesFile(e.to_string())),
                Ok(root) => {
                    for (name, v) in &root {
                        match v {
                            n if n.is_null() => {}
                            Node::Scalar(_) => {
                                if let Some(t) = v.as_text().filter(|t| !t.trim().is_empty()) {
                                    images.insert(name.clone(), t.trim().to_string());
                                } else {
                                    problems.push(Problem::ImagesFile(format!("'{name}' names an empty image")));
                                }
                            }
                            _ => problems.push(Problem::ImagesFile(format!(
                                "'{name}' must be an image reference, not {}",
                                v.render()
                            ))),
                        }
                    }
                }
            },
        }
        file_ok = problems.is_empty();
    }
    for a in args {
        match a.split_once('=') {
            Some((name, reference)) if !name.trim().is_empty() && !reference.trim().is_empty() => {
                images.insert(name.trim().to_string(), reference.trim().to_string());
                given.push((a.clone(), name.trim().to_string()));
            }
            _ => problems.push(Problem::ImageArgument(a.clone())),
        }
    }
    (Images { by_name: images, file_ok, args: given }, problems)
}

/// Why `reference` is not an image reference a container runtime accepts (the distribution
/// project's grammar: `[registry[:port]/]path[:tag][@algorithm:digest]`, lower-case path), or
/// `None` when it is one.
pub fn reference_problem(reference: &str) -> Option<String> {
    use oci_spec::distribution::{ParseError, Reference};
    match reference.parse::<Reference>() {
        Ok(_) => None,
        // The grammar has no separate rule for capitals, so say so when they are all that is wrong.
        Err(ParseError::ReferenceInvalidFormat)
            if reference.chars().any(|c| c.is_ascii_uppercase())
                && lowercase_path(reference).parse::<Reference>().is_ok() =>
        {
            Some(ParseError::NameContainsUppercase.to_string())
        }
        Err(e) => Some(e.to_string()),
    }
}

/// `reference` with its repository path (not the registry host, tag or digest) in lower case.
fn lowercase_path(reference: &str) -> String {
    let (name, rest) = match reference.find(['@']) {
        Some(at) => reference.split_at(at),
        None => (reference, ""),
    };
    // A tag follows the last ':' after the last '/'.
    let slash = name.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name[slash..].find(':') {
        Some(c) => name.split_at(slash + c),
        None => (name, ""),
    };
    let (host, path) = match name.split_once('/') {
        Some((h, p)) if h.contains(['.', ':']) || h == "localhost" => (format!("{h}/"), p),
        _ => (String::new(), name),
    };
    format!("{host}{}{tag}{rest}", path.to_ascii_lowercase())
}
