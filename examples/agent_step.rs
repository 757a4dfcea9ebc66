//! A program to run under `wattline run`: it marks its own steps as Agent scopes over
//! the host endpoint (`WATTLINE_HOST_*` in its environment), so the run's marks, energy
//! and report attribute to them, exactly as for scopes started inside a pipeline.
//!
//! ```sh
//! cargo build --example agent_step
//! wattline run --atof runs/ -- target/debug/examples/agent_step
//! ```
//!
//! Its `planner` step holds a nested step, `lookup` ([`wattline_worker::AgentScope::child`]).
//!
//! With `--leave-open` it exits while its `executor` step is still open: `wattline run`
//! ends that scope at the exit and flags its end `wattline.ended_at_program_exit`.
//!
//! With `--weighted` it first runs two steps at once, `retrieve` of weight 3 and, 0.2 s
//! into it, `rank` of weight 1 for 0.6 s: the energy they share divides 3 : 1. A weight
//! that is not a positive, finite number is refused before anything is sent.

use std::time::{Duration, Instant};

use wattline_worker::HostConnection;
use wattline_worker::diagnostics::{
    DiagnosticExtensionDefinition, DiagnosticObservation, DiagnosticObservationOutcome as Outcome,
    DiagnosticObservationSeverity as Severity, extension_code,
};

/// Keeps one processor busy for `duration`: the step's real work.
fn work(duration: Duration) -> u64 {
    let started = Instant::now();
    let mut state = 0u64;
    while started.elapsed() < duration {
        for value in 0..10_000u64 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(value);
        }
    }
    state
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let leave_open = std::env::args().any(|argument| argument == "--leave-open");
    let weighted = std::env::args().any(|argument| argument == "--weighted");
    let host = HostConnection::from_env()?;

    // Its own diagnostics land in the run's context, under `worker.command.*`.
    let diagnostics = host.diagnostics().await.clone();
    let steps = diagnostics
        .component(
            "agent_step",
            vec![extension_code(DiagnosticExtensionDefinition {
                name: "step_completed".into(),
                description: "An agent step completed".into(),
                outcome: Outcome::Success as i32,
                allowed_failure_classes: vec![],
            })],
        )
        .await?;

    if weighted {
        weighted_steps(&host).await?;
    }
    // `planner` works 0.3 s on its own, then 0.3 s inside its nested step `lookup`:
    // the host counts lookup's energy in planner's too.
    let planner = host.agent_scope("planner").await?;
    let mut checksum = work(Duration::from_millis(300));
    let lookup = planner.child("lookup").await?;
    checksum ^= work(Duration::from_millis(300));
    lookup.end().await?;
    planner.end().await?;
    steps.try_record_lazy(|| DiagnosticObservation {
        code: 1,
        count: 1,
        outcome: Outcome::Success as i32,
        severity: Severity::Info as i32,
        detail: Some("planner".into()),
        ..Default::default()
    })?;
    diagnostics.flush(Duration::from_secs(2)).await?;
    println!(
        "planner step done ({checksum:x}) in pid {}",
        std::process::id()
    );

    if leave_open {
        let executor = host.agent_scope("executor").await?;
        work(Duration::from_millis(300));
        println!("exiting with the executor step open");
        // Exit without ending it (no destructor runs): wattline ends it at the exit.
        std::mem::forget(executor);
        std::process::exit(0);
    }
    Ok(())
}

/// Two steps live together, weights 3 and 1 (tokens, batch size: what the caller says
/// each step's share of the device is worth).
async fn weighted_steps(host: &HostConnection) -> Result<(), Box<dyn std::error::Error>> {
    match host.weighted_agent_scope("unweighable", Some(0.0)).await {
        Err(refused) => println!("refused: {refused}"),
        Ok(_) => return Err("a weight of 0 was accepted".into()),
    }
    let retrieve = host.weighted_agent_scope("retrieve", Some(3.0)).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rank = host.weighted_agent_scope("rank", Some(1.0)).await?;
    tokio::time::sleep(Duration::from_millis(600)).await;
    rank.end().await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    retrieve.end().await?;
    println!("weighted steps done");
    Ok(())
}
