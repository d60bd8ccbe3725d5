//! Records the git commit for `flow-operator --version`, its start-up log line and its build_info
//! metric.

#[path = "../build-support/git_commit.rs"]
mod git_commit;

fn main() {
    git_commit::emit();
}
