//! Container images of streamlets: `--images <file>` and `--image <name>=<ref>` (reference.md §4.2).

use std::collections::{BTreeMap, HashMap};

use super::problems::Problem;
use super::tree::{self, Node};
use super::{Source, SourceError};

/// Reads the images file and the `--image` arguments into streamlet name → image reference; an
/// `--image` wins over the file for the same name. Names that are no streamlet are not refused.
///
/// # Errors
/// `images: <reason>` for a file that cannot be read or parsed or that maps a name to something
/// other than a reference; `--image '<value>' is not name=reference` per bad argument. The map
/// holds what could be read; the flag tells whether the file (if any) was read whole.
pub fn read(
    file: Option<&Source>,
    args: &[String],
    env: &HashMap<String, String>,
) -> (BTreeMap<String, String>, bool, Vec<Problem>) {
    let mut images = BTreeMap::new();
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
            }
            _ => problems.push(Problem::ImageArgument(a.clone())),
        }
    }
    (images, file_ok, problems)
}
