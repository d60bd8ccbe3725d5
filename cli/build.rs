//! Records the git commit for `flow version`.

#[path = "../build-support/git_commit.rs"]
mod git_commit;

fn main() {
    git_commit::emit();
}
