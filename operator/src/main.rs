//! `flow-operator`: reconciles `AnkkaFlow` resources in every namespace and carries out their reset
//! requests.

mod allocator;
mod api;
mod apply;
#[cfg(test)]
mod clock;
mod cluster_ids;
mod clusters;
mod connections;
mod context;
mod controller;
mod faults;
#[cfg(test)]
mod fixtures;
mod lag;
mod leader;
mod ledger;
mod metrics;
mod observe;
mod owners;
mod probe;
mod reconcile;
mod reset;
#[cfg(test)]
mod scenario;
mod scope;
mod settings;
mod slots;
mod stopped;
mod tenancy;
mod warm;
mod writes;

use std::process::ExitCode;

use clap::Parser;
use kube::CustomResourceExt;

use crate::settings::{Cli, Command};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Crd) => match serde_saphyr::to_string(&flow_core::resource::AnkkaFlow::crd()) {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("flow-operator: cannot render the CRD: {e}");
                ExitCode::FAILURE
            }
        },
        None => {
            if let Some(why) = cli.settings.inconsistency() {
                // As clap refuses a setting out of range: a usage error, before anything starts.
                eprintln!("flow-operator: {why}");
                return ExitCode::from(2);
            }
            settings::init_tracing(cli.settings.log_format);
            if !allocator::fix_mmap_threshold() {
                tracing::warn!("the C allocator refused a fixed mmap threshold; memory after bursts may stay higher");
            }
            tracing::info!(
                version = metrics::VERSION,
                commit = metrics::GIT_COMMIT,
                "flow-operator {}",
                metrics::VERSION
            );
            let code = match controller::run(cli.settings).await {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!(error = %e, "operator stopped");
                    eprintln!("flow-operator: {e}");
                    1
                }
            };
            // Exit here instead of returning: dropping the runtime waits for every task on the
            // blocking pool (Kafka calls, librdkafka clients closing), and one stuck in librdkafka
            // kept a stopped operator alive for minutes. Everything durable is written by now: the
            // ledger flushes each write, and the Lease was given back.
            std::process::exit(code)
        }
    }
}
