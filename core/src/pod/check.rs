//! What the operator and `flow verify` refuse in pod settings: what Pod Security `restricted`
//! forbids, and what Kubernetes would refuse when the operator applies the Deployment, each with
//! the setting's path and what to write instead (docs/blueprint.md, "Pod settings").

use std::fmt;

use k8s_openapi::api::core::v1::{Affinity, NodeSelectorTerm, PodAffinityTerm, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::nanos;
use super::{ContainerSecurity, PodSettings, Resources};
use crate::names::objects::{ANNOTATION_CONFIG_HASH, RESERVED_ANNOTATIONS, label_value_fault, subdomain_fault};
use crate::names::{DOMAIN, LABEL_MANAGED_BY, LABEL_NAME};

/// Where pod settings were written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The pipeline's defaults (`spec.pod`, `flow.pod`).
    Pipeline,
    /// A streamlet's own (`spec.streamlets[].pod`, `flow.streamlets.<name>.pod`), or what the
    /// streamlet gets of both.
    Streamlet(String),
}

/// One setting that cannot be rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where.
    pub scope: Scope,
    /// The setting's path inside `pod` (`securityContext.runAsUser`, `tolerations[0].effect`);
    /// empty for `pod` itself.
    pub path: String,
    /// What is wrong, and what to write instead.
    pub reason: String,
}

impl fmt::Display for Problem {
    /// As the operator reports it: `spec.pod.<path>: <reason>` or
    /// `streamlet '<name>': pod.<path>: <reason>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.is_empty() { "pod".to_string() } else { format!("pod.{}", self.path) };
        match &self.scope {
            Scope::Pipeline => write!(f, "spec.{at}: {}", self.reason),
            Scope::Streamlet(s) => write!(f, "streamlet '{s}': {at}: {}", self.reason),
        }
    }
}

/// The largest UID or GID Kubernetes accepts.
const MAX_ID: i64 = 2_147_483_647;
/// The most bytes all of a pod's annotations may hold (keys and values; Kubernetes'
/// `TotalAnnotationSizeLimitB`).
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// Every problem of a pipeline's pod settings: the pipeline's `defaults`, each streamlet's own
/// (name, whether it is built in, its settings), and what each streamlet gets of both (a request
/// above its limit, the annotations' size).
pub fn check_pipeline<'a>(
    defaults: Option<&PodSettings>,
    streamlets: impl IntoIterator<Item = (&'a str, bool, Option<&'a PodSettings>)>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Some(d) = defaults {
        problems.extend(check(d).into_iter().map(|(path, reason)| Problem { scope: Scope::Pipeline, path, reason }));
    }
    for (name, builtin, own) in streamlets {
        let scope = || Scope::Streamlet(name.to_string());
        let mut found: Vec<(String, String)> = own.map(check).unwrap_or_default();
        if builtin && own.is_some_and(|o| o.container(true).is_some()) {
            found.push((
                "containers.process".into(),
                "a built-in streamlet runs inside the sidecar and has no process container: set containers.sidecar"
                    .into(),
            ));
        }
        // Each side alone may be fine and the two together not; reported when each side was.
        if found.is_empty() && defaults.is_none_or(|d| check(d).is_empty()) {
            found.extend(check_merged(&PodSettings::for_streamlet(defaults, own, builtin), defaults.is_some()));
        }
        problems.extend(found.into_iter().map(|(path, reason)| Problem { scope: scope(), path, reason }));
    }
    problems
}

/// The problems of one set of settings, as (path, reason).
fn check(s: &PodSettings) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut push = |path: String, reason: String| out.push((path, reason));
    for (k, v) in &s.labels {
        let path = format!("labels.{k}");
        if let Some(r) = reserved_label(k) {
            push(path, r);
        } else if let Some(r) = key_problem(k, "label") {
            push(path, r);
        } else if label_value_fault(v).is_some() {
            push(path, label_value_reason(v));
        }
    }
    for k in s.annotations.keys() {
        let path = format!("annotations.{k}");
        if let Some(r) = reserved_annotation(k) {
            push(path, r);
        } else if let Some(r) = key_problem(k, "annotation") {
            push(path, r);
        }
    }
    for (i, secret) in s.image_pull_secrets.iter().enumerate() {
        if subdomain_fault(&secret.name).is_some() {
            push(format!("imagePullSecrets[{i}].name"), object_name_reason(&secret.name, "Secret"));
        }
    }
    for (k, v) in &s.node_selector {
        let path = format!("nodeSelector.{k}");
        if let Some(r) = key_problem(k, "label") {
            push(path, r);
        } else if label_value_fault(v).is_some() {
            push(path, label_value_reason(v));
        }
    }
    for (i, t) in s.tolerations.iter().enumerate() {
        for (field, reason) in toleration(t) {
            push(format!("tolerations[{i}].{field}"), reason);
        }
    }
    if let Some(a) = &s.affinity {
        for (field, reason) in affinity(a) {
            push(format!("affinity.{field}"), reason);
        }
    }
    if let Some(p) = &s.priority_class_name
        && subdomain_fault(p).is_some()
    {
        push("priorityClassName".into(), object_name_reason(p, "PriorityClass"));
    }
    if let Some(sc) = &s.security_context {
        let ids = ContainerSecurity { run_as_user: sc.run_as_user, run_as_group: sc.run_as_group };
        for (field, reason) in ids_problems(&ids) {
            push(format!("securityContext.{field}"), reason);
        }
        if let Some(g) = sc.fs_group
            && !(0..=MAX_ID).contains(&g)
        {
            push("securityContext.fsGroup".into(), gid_reason(g));
        }
        for (i, g) in sc.supplemental_groups.iter().enumerate() {
            if !(0..=MAX_ID).contains(g) {
                push(format!("securityContext.supplementalGroups[{i}]"), gid_reason(*g));
            }
        }
        if let Some(p) = &sc.fs_group_change_policy
            && !["OnRootMismatch", "Always"].contains(&p.as_str())
        {
            push(
                "securityContext.fsGroupChangePolicy".into(),
                format!("'{p}' is not a policy: write OnRootMismatch or Always"),
            );
        }
        if let Some(p) = &sc.seccomp_profile {
            let at = |f: &str| format!("securityContext.seccompProfile.{f}");
            match (p.type_.as_str(), p.localhost_profile.as_deref().map(str::trim)) {
                ("RuntimeDefault", None) => {}
                ("RuntimeDefault", Some(_)) => push(
                    at("localhostProfile"),
                    "is only for type Localhost: leave it out, or write type Localhost".into(),
                ),
                ("Localhost", Some(path)) if !path.is_empty() => {}
                ("Localhost", _) => push(
                    at("localhostProfile"),
                    "type Localhost needs the profile's path, relative to the kubelet's seccomp directory".into(),
                ),
                ("Unconfined", _) => push(
                    at("type"),
                    "Unconfined is forbidden by Pod Security 'restricted': write RuntimeDefault (the default) or Localhost"
                        .into(),
                ),
                (other, _) => push(
                    at("type"),
                    format!("'{other}' is not a seccomp profile type: write RuntimeDefault or Localhost"),
                ),
            }
        }
    }
    for (name, c) in s.containers.iter().flat_map(|c| [("sidecar", &c.sidecar), ("process", &c.process)]) {
        let Some(c) = c else { continue };
        if let Some(r) = &c.resources {
            for (field, reason) in resources(r) {
                push(format!("containers.{name}.resources.{field}"), reason);
            }
        }
        if let Some(ids) = &c.security_context {
            for (field, reason) in ids_problems(ids) {
                push(format!("containers.{name}.securityContext.{field}"), reason);
            }
        }
    }
    out
}

/// What only shows once a streamlet's settings are laid over the pipeline's.
fn check_merged(s: &PodSettings, with_defaults: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let whose = if with_defaults { " (with the pipeline's defaults)" } else { "" };
    for (name, c) in s.containers.iter().flat_map(|c| [("sidecar", &c.sidecar), ("process", &c.process)]) {
        let Some(r) = c.as_ref().and_then(|c| c.resources.as_ref()) else { continue };
        for (resource, request) in &r.requests {
            let path = format!("containers.{name}.resources.requests.{resource}");
            match r.limits.get(resource) {
                Some(limit) => {
                    let (req, lim) = (nanos(&request.0), nanos(&limit.0));
                    if !overcommits(resource) && req != lim {
                        out.push((
                            path,
                            format!(
                                "{} is not its limit {}{whose}: {resource} cannot be overcommitted, so its request must equal its limit (or leave the request out)",
                                request.0, limit.0
                            ),
                        ));
                    } else if req > lim {
                        out.push((
                            path,
                            format!("{} is more than its limit {}{whose}: a request may not exceed its limit", request.0, limit.0),
                        ));
                    }
                }
                None if !overcommits(resource) => out.push((
                    path,
                    format!("{resource} cannot be overcommitted: set limits.{resource} too{whose} (the request may then be left out)"),
                )),
                None => {}
            }
        }
    }
    // The operator's own annotations (the config hash, 64 hex digits, and the two Prometheus ones)
    // come on top of these.
    let ours: usize =
        RESERVED_ANNOTATIONS.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() + ANNOTATION_CONFIG_HASH.len() + 64;
    let theirs: usize = s.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if ours + theirs > ANNOTATIONS_MAX_BYTES {
        out.push((
            "annotations".into(),
            format!(
                "hold {theirs} bytes{whose}, and with the operator's own {} more than Kubernetes' {ANNOTATIONS_MAX_BYTES}",
                ours + theirs
            ),
        ));
    }
    out
}

/// Whether a resource may be requested below its limit: not hugepages, not extended resources.
fn overcommits(resource: &str) -> bool {
    !resource.starts_with("hugepages-") && !resource.contains('/')
}

fn resources(r: &Resources) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (kind, map) in [("requests", &r.requests), ("limits", &r.limits)] {
        for (name, q) in map {
            let path = format!("{kind}.{name}");
            if let Some(reason) = resource_name_problem(name) {
                out.push((path, reason));
            } else if let Some(reason) = quantity_problem(q) {
                out.push((path, reason));
            }
        }
    }
    out
}

fn resource_name_problem(name: &str) -> Option<String> {
    let standard = ["cpu", "memory", "ephemeral-storage"].contains(&name)
        || name.strip_prefix("hugepages-").and_then(nanos).is_some_and(|n| n > 0);
    let extended = name.contains('/') && !name.starts_with("kubernetes.io/") && key_problem(name, "resource").is_none();
    (!standard && !extended).then(|| {
        format!(
            "'{name}' is not a resource a container can request: write cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource such as example.com/gpu"
        )
    })
}

fn quantity_problem(q: &Quantity) -> Option<String> {
    match nanos(&q.0) {
        None => Some(format!("'{}' is not a Kubernetes quantity: write one such as 250m, 0.5, 512Mi or 2Gi", q.0)),
        Some(n) if n < 0 => Some(format!("'{}' is negative: a resource quantity is 0 or more", q.0)),
        Some(_) => None,
    }
}

/// The UID and GID problems of a pod's or container's ids.
fn ids_problems(ids: &ContainerSecurity) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match ids.run_as_user {
        Some(0) => out.push((
            "runAsUser".into(),
            "0 is root, which Pod Security 'restricted' forbids: write a UID other than 0, or leave runAsUser out to run as the image's own user".into(),
        )),
        Some(u) if !(1..=MAX_ID).contains(&u) => {
            out.push(("runAsUser".into(), format!("{u} is not a UID: write one from 1 to {MAX_ID}")));
        }
        _ => {}
    }
    if let Some(g) = ids.run_as_group
        && !(0..=MAX_ID).contains(&g)
    {
        out.push(("runAsGroup".into(), gid_reason(g)));
    }
    out
}

fn gid_reason(g: i64) -> String {
    format!("{g} is not a GID: write one from 0 to {MAX_ID}")
}

fn toleration(t: &Toleration) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let key = t.key.as_deref().unwrap_or_default();
    let operator = t.operator.as_deref().unwrap_or("Equal");
    if !key.is_empty()
        && let Some(r) = key_problem(key, "taint")
    {
        out.push(("key", r));
    }
    match operator {
        "Exists" => {
            if t.value.as_deref().is_some_and(|v| !v.is_empty()) {
                out.push(("value", "operator Exists takes no value: leave it out".into()));
            }
        }
        "Equal" => {
            if key.is_empty() {
                out.push(("operator", "a toleration without a key must have operator Exists".into()));
            }
            if let Some(v) = t.value.as_deref()
                && label_value_fault(v).is_some()
            {
                out.push(("value", label_value_reason(v)));
            }
        }
        other => out.push(("operator", format!("'{other}' is not a toleration operator: write Equal or Exists"))),
    }
    let effect = t.effect.as_deref().unwrap_or_default();
    if !["", "NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
        out.push((
            "effect",
            format!("'{effect}' is not a taint effect: write NoSchedule, PreferNoSchedule or NoExecute, or leave it out for every effect"),
        ));
    }
    if t.toleration_seconds.is_some() && effect != "NoExecute" {
        out.push(("tolerationSeconds", "applies to effect NoExecute only: set that effect, or leave it out".into()));
    }
    out
}

fn affinity(a: &Affinity) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(n) = &a.node_affinity {
        let at = "nodeAffinity";
        if let Some(required) = &n.required_during_scheduling_ignored_during_execution {
            let at = format!("{at}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
            if required.node_selector_terms.is_empty() {
                out.push((at.clone(), "needs at least one term".into()));
            }
            for (i, term) in required.node_selector_terms.iter().enumerate() {
                out.extend(node_term(term, &format!("{at}[{i}]")));
            }
        }
        for (i, p) in n.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
            let at = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            out.extend(weight(p.weight, &at));
            out.extend(node_term(&p.preference, &format!("{at}.preference")));
        }
    }
    for (at, terms) in [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ] {
        let Some((required, preferred)) = terms else { continue };
        for (i, term) in required.iter().flatten().enumerate() {
            out.extend(pod_term(term, &format!("{at}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")));
        }
        for (i, w) in preferred.iter().flatten().enumerate() {
            let at = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            out.extend(weight(w.weight, &at));
            out.extend(pod_term(&w.pod_affinity_term, &format!("{at}.podAffinityTerm")));
        }
    }
    out
}

fn weight(w: i32, at: &str) -> Option<(String, String)> {
    (!(1..=100).contains(&w)).then(|| (format!("{at}.weight"), format!("{w} is not a weight: write one from 1 to 100")))
}

fn node_term(term: &NodeSelectorTerm, at: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, e) in term.match_expressions.iter().flatten().enumerate() {
        let at = format!("{at}.matchExpressions[{i}]");
        if let Some(r) = key_problem(&e.key, "label") {
            out.push((format!("{at}.key"), r));
        }
        let values = e.values.as_deref().unwrap_or_default();
        let reason = match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => Some("In and NotIn need values".to_string()),
            "Exists" | "DoesNotExist" if !values.is_empty() => Some("Exists and DoesNotExist take no values".into()),
            "Gt" | "Lt" if values.len() != 1 || values[0].parse::<i64>().is_err() => {
                Some("Gt and Lt take one value, a whole number".into())
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => None,
            other => Some(format!("'{other}' is not an operator: write In, NotIn, Exists, DoesNotExist, Gt or Lt")),
        };
        out.extend(reason.map(|r| (format!("{at}.operator"), r)));
    }
    for (i, e) in term.match_fields.iter().flatten().enumerate() {
        if e.key != "metadata.name" {
            out.push((
                format!("{at}.matchFields[{i}].key"),
                "a node can be matched by its field metadata.name only".into(),
            ));
        }
    }
    out
}

fn pod_term(term: &PodAffinityTerm, at: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(r) = key_problem(&term.topology_key, "topology") {
        out.push((format!("{at}.topologyKey"), r));
    }
    for (field, selector) in [("labelSelector", &term.label_selector), ("namespaceSelector", &term.namespace_selector)]
    {
        for (i, e) in selector.iter().flat_map(|s| s.match_expressions.iter().flatten()).enumerate() {
            let at = format!("{at}.{field}.matchExpressions[{i}]");
            let values = e.values.as_deref().unwrap_or_default();
            let reason = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => Some("In and NotIn need values".to_string()),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    Some("Exists and DoesNotExist take no values".into())
                }
                "In" | "NotIn" | "Exists" | "DoesNotExist" => None,
                other => Some(format!("'{other}' is not an operator: write In, NotIn, Exists or DoesNotExist")),
            };
            out.extend(reason.map(|r| (format!("{at}.operator"), r)));
            if let Some(r) = key_problem(&e.key, "label") {
                out.push((format!("{at}.key"), r));
            }
        }
    }
    out
}

/// Why `key` is not a label (or annotation, taint, topology) key: an optional DNS subdomain and
/// `/`, then a name of at most 63 of `[A-Za-z0-9-_.]` beginning and ending with a letter or digit.
fn key_problem(key: &str, what: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty() && label_value_fault(name).is_none();
    let prefix_ok = prefix.is_none_or(|p| subdomain_fault(p).is_none());
    (!name_ok || !prefix_ok).then(|| {
        format!(
            "'{key}' is not a {what} key: an optional DNS subdomain and '/', then at most 63 of [A-Za-z0-9-_.] beginning and ending with a letter or digit"
        )
    })
}

fn label_value_reason(v: &str) -> String {
    format!("'{v}' is not a label value: at most 63 of [A-Za-z0-9-_.], beginning and ending with a letter or digit")
}

fn object_name_reason(name: &str, kind: &str) -> String {
    format!("'{name}' is not a {kind} name: at most 253 of [a-z0-9-.], beginning and ending with a letter or digit")
}

/// The labels the operator finds and selects the streamlets' pods by, and its own prefix.
fn reserved_label(key: &str) -> Option<String> {
    if key.starts_with(&format!("{DOMAIN}/")) {
        return Some(format!("labels under {DOMAIN}/ are the operator's own: choose another key"));
    }
    [LABEL_MANAGED_BY, LABEL_NAME].contains(&key).then(|| {
        format!("'{key}' is the operator's own label, by which it finds the streamlet's pods: choose another key")
    })
}

fn reserved_annotation(key: &str) -> Option<String> {
    if key.starts_with(&format!("{DOMAIN}/")) {
        return Some(format!("annotations under {DOMAIN}/ are the operator's own: choose another key"));
    }
    RESERVED_ANNOTATIONS.iter().any(|(k, _)| *k == key).then(|| {
        format!("'{key}' is set by the operator (its sidecar serves metrics on port 2050): choose another key")
    })
}

/// The reason for a setting that is not among the pod settings (`path` as segments inside `pod`,
/// its last one the unknown key): for what Pod Security `restricted` or the operator fixes, what
/// it is and why; else which settings exist there.
pub fn unknown_setting(path: &[String]) -> String {
    let key = path.last().map(String::as_str).unwrap_or_default();
    let parent: Vec<&str> =
        path[..path.len().saturating_sub(1)].iter().map(|s| s.split('[').next().unwrap_or(s)).collect();
    let fixed = match key {
        "runAsNonRoot" => Some("the operator always sets runAsNonRoot: true (Pod Security 'restricted'): leave it out"),
        "allowPrivilegeEscalation" => {
            Some("the operator always sets allowPrivilegeEscalation: false (Pod Security 'restricted'): leave it out")
        }
        "privileged" => Some("Pod Security 'restricted' forbids privileged containers: leave it out"),
        "capabilities" => Some(
            "the operator drops every capability (Pod Security 'restricted'), and the streamlet's containers need none: leave it out",
        ),
        "hostNetwork" | "hostPID" | "hostIPC" | "hostUsers" | "hostPort" | "hostPath" => {
            Some("Pod Security 'restricted' forbids sharing the node's namespaces and files: leave it out")
        }
        "seLinuxOptions" | "appArmorProfile" | "sysctls" | "procMount" | "windowsOptions" => Some(
            "is not offered: the operator renders the runtime's default, which Pod Security 'restricted' allows; leave it out",
        ),
        "readOnlyRootFilesystem" => {
            Some("is not offered: the sidecar writes its state files (/tmp/flow) to its own file system; leave it out")
        }
        _ => None,
    };
    if let Some(why) = fixed {
        return why.to_string();
    }
    let known: Option<&[&str]> = match parent.as_slice() {
        [] => Some(&POD_KEYS),
        ["securityContext"] => Some(&POD_SECURITY_KEYS),
        ["securityContext", "seccompProfile"] => Some(&["type", "localhostProfile"]),
        ["containers"] => Some(&["sidecar", "process"]),
        ["containers", _] => Some(&["resources", "securityContext"]),
        ["containers", _, "resources"] => Some(&["requests", "limits"]),
        ["containers", _, "securityContext"] => Some(&["runAsUser", "runAsGroup"]),
        ["imagePullSecrets"] => Some(&["name"]),
        ["tolerations"] => Some(&["key", "operator", "value", "effect", "tolerationSeconds"]),
        _ => None,
    };
    match known {
        Some(keys) => format!("is not a setting here: write {}", keys.join(", ")),
        None => "is not a field of the Kubernetes object written here".into(),
    }
}

/// The keys of [`PodSettings`], for messages (a test checks them against the type).
pub(super) const POD_KEYS: [&str; 9] = [
    "labels",
    "annotations",
    "imagePullSecrets",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "securityContext",
    "containers",
];

/// The keys of [`super::PodSecurity`], for messages.
pub(super) const POD_SECURITY_KEYS: [&str; 6] =
    ["runAsUser", "runAsGroup", "fsGroup", "fsGroupChangePolicy", "supplementalGroups", "seccompProfile"];
