//! Whether the pipeline's background work is still running: a clock task or actor that
//! stops on its own is recorded here (and as a `pipeline.task_failed` diagnostic), so
//! [`crate::pipeline::RunningPipeline::health`] and the report say so instead of the
//! pipeline going quiet.

use std::sync::{Arc, Mutex};

use chrono::Utc;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use wattline_diagnostics::PipelineDiagnostics;

use wattline_model::report::HealthProblem;

/// The pipeline's health: healthy when nothing stopped that should be running.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PipelineHealth {
    /// The parts that stopped, in the order noticed.
    pub problems: Vec<HealthProblem>,
}

impl PipelineHealth {
    /// Whether every part is running.
    pub fn is_healthy(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Where failures are recorded, shared by the watchers and the pipeline.
#[derive(Debug, Clone, Default)]
pub struct HealthBoard {
    problems: Arc<Mutex<Vec<HealthProblem>>>,
    diagnostics: Option<PipelineDiagnostics>,
}

impl HealthBoard {
    /// A board that also records each problem into `diagnostics`.
    pub fn new(diagnostics: Option<PipelineDiagnostics>) -> Self {
        HealthBoard {
            problems: Arc::default(),
            diagnostics,
        }
    }

    /// Records that `component` stopped; once per component.
    pub fn record(&self, component: &str, detail: String) {
        let mut problems = match self.problems.lock() {
            Ok(problems) => problems,
            Err(poisoned) => poisoned.into_inner(),
        };
        if problems
            .iter()
            .any(|problem| problem.component == component)
        {
            return;
        }
        tracing::error!(component, %detail, "pipeline part stopped");
        if let Some(diagnostics) = &self.diagnostics {
            diagnostics.task_failed(&format!("{component}: {detail}"));
        }
        problems.push(HealthProblem {
            component: component.to_owned(),
            detail,
            at: Utc::now(),
        });
    }

    /// What was recorded so far.
    pub fn problems(&self) -> Vec<HealthProblem> {
        match self.problems.lock() {
            Ok(problems) => problems.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// Watches a clock task: when it ends before `cancel` (it panicked, or the actor it
/// drives is gone), the board records why. The returned handle ends with the task.
pub fn watch_task(
    component: &'static str,
    task: JoinHandle<()>,
    board: HealthBoard,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let outcome = task.await;
        if cancel.is_cancelled() {
            return;
        }
        let detail = match outcome {
            Ok(()) => "stopped: the actor it drives is gone".to_owned(),
            Err(error) if error.is_panic() => {
                format!(
                    "panicked: {}",
                    crate::panics::panic_message(error.into_panic().as_ref())
                )
            }
            Err(error) => format!("ended: {error}"),
        };
        board.record(component, detail);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_that_panics_is_recorded_with_its_message() {
        let board = HealthBoard::new(None);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(async { panic!("interval must be non-zero") });
        watch_task("poll clock", task, board.clone(), cancel)
            .await
            .unwrap();
        let problems = board.problems();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].component, "poll clock");
        assert_eq!(problems[0].detail, "panicked: interval must be non-zero");
    }

    #[tokio::test]
    async fn a_task_ended_by_cancel_is_not_a_problem() {
        let board = HealthBoard::new(None);
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let task = tokio::spawn(async move { token.cancelled().await });
        cancel.cancel();
        watch_task("poll clock", task, board.clone(), cancel)
            .await
            .unwrap();
        assert!(board.problems().is_empty());
    }

    #[tokio::test]
    async fn a_task_that_returns_early_is_recorded_once() {
        let board = HealthBoard::new(None);
        let cancel = CancellationToken::new();
        for _ in 0..2 {
            let task = tokio::spawn(async {});
            watch_task("energy clock", task, board.clone(), cancel.clone())
                .await
                .unwrap();
        }
        let problems = board.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].detail.contains("the actor it drives is gone"));
    }
}
