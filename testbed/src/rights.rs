//! The operator's shipped rights (deploy/operator.yaml) on the test bed, and a kubeconfig that logs
//! in as its ServiceAccount, so that an operator process started by a test is treated by RBAC exactly
//! as the operator's pod would be.

use std::path::PathBuf;

use crate::bed::bed;
use crate::cart::install_cluster_secret;
use crate::kube::{install_crd, kubeconfig_with_token, kubectl_apply, kubectl_ok};

/// The fixed test token of the operator's ServiceAccount user
/// `system:serviceaccount:ankka-flow:ankka-flow-operator` (testbed/tb, `test_token_lines`).
const OPERATOR_TOKEN: &str = "ankka-flow-operator-test-token";

/// The YAML documents of deploy/operator.yaml whose kind is in `kinds`.
fn manifests(kinds: &[&str]) -> String {
    let text = std::fs::read_to_string(bed().root.join("deploy/operator.yaml")).expect("deploy/operator.yaml");
    text.split("\n---\n")
        .filter(|doc| doc.lines().any(|l| kinds.iter().any(|k| l == format!("kind: {k}"))))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Installs the CRD, the cluster Secret, and deploy/operator.yaml's identity and rights (not its
/// Deployment: the test runs the operator binary itself). The whole file, Deployment included, and
/// the kustomization are first checked by the API server (dry run).
pub fn install_operator_rights() {
    install_crd();
    install_cluster_secret();
    kubectl_ok(&["apply", "--dry-run=server", "-k", bed().root.join("deploy").to_str().expect("utf-8 path")]);
    kubectl_apply(&manifests(&["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]));
}

/// A kubeconfig that logs in as the operator's ServiceAccount, which holds the shipped rights once
/// [`install_operator_rights`] ran.
pub fn shipped_rights_kubeconfig() -> PathBuf {
    kubeconfig_with_token("ankka-flow-operator", OPERATOR_TOKEN)
}
