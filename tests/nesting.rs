//! Rust's current scope: a scope started inside [`wattline::AgentScope::run`] (or
//! `run_sync`) is that scope's child across awaits; a task spawned from it is not (a
//! task-local, like a tracing span); an explicit `child` wins; the current scope of
//! another pipeline is no parent.

mod support;

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;
use wattline::current_scope;
use wattline::events::{CollectingEventSink, PipelineEvent, ScopeCategory};

/// Each started scope's parent, from the events.
fn parents(sink: &CollectingEventSink) -> HashMap<Uuid, Option<Uuid>> {
    sink.events()
        .iter()
        .filter_map(|event| match event {
            PipelineEvent::Scope(scope) if scope.scope_category == ScopeCategory::Start => {
                Some((scope.uuid, scope.parent_uuid))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_started_inside_run_is_a_child_and_a_spawned_task_is_not() {
    let sink = Arc::new(CollectingEventSink::default());
    let other_sink = Arc::new(CollectingEventSink::default());
    let pipeline = Arc::new(support::pipeline_into(&sink).await);
    let other = support::pipeline_into(&other_sink).await;
    let root = pipeline.run_id();

    let request = pipeline.agent_scope("request").unwrap();
    let beside = pipeline.agent_scope("beside").unwrap();
    assert_eq!(current_scope(), None);
    let (plan, lookup, spawned, explicit, elsewhere, in_sync) = request
        .run(async {
            assert_eq!(current_scope(), Some(request.uuid()));
            let plan = pipeline.agent_scope("plan").unwrap();
            // Across an await, and one level deeper.
            tokio::task::yield_now().await;
            let lookup = plan
                .run(async { pipeline.agent_scope("lookup").unwrap() })
                .await;
            let spawned = {
                let pipeline = Arc::clone(&pipeline);
                tokio::spawn(async move { pipeline.agent_scope("spawned").unwrap() })
                    .await
                    .unwrap()
            };
            let explicit = beside.child("explicit").unwrap();
            let elsewhere = other.agent_scope("elsewhere").unwrap();
            let in_sync = beside.run_sync(|| pipeline.agent_scope("in-sync").unwrap());
            (plan, lookup, spawned, explicit, elsewhere, in_sync)
        })
        .await;
    assert_eq!(current_scope(), None);
    let (request_id, plan_id, beside_id) = (request.uuid(), plan.uuid(), beside.uuid());
    let expected = [
        (&plan, Some(request_id)),
        (&lookup, Some(plan_id)),
        (&spawned, Some(root)),
        (&explicit, Some(beside_id)),
        (&in_sync, Some(beside_id)),
    ]
    .map(|(scope, parent)| (scope.uuid(), parent));
    let elsewhere_id = elsewhere.uuid();
    let other_root = other.run_id();
    drop((
        lookup, plan, spawned, explicit, in_sync, beside, request, elsewhere,
    ));
    pipeline.flush().await.unwrap();
    other.flush().await.unwrap();

    let found = parents(&sink);
    for (uuid, parent) in expected {
        assert_eq!(found[&uuid], parent, "scope {uuid}");
    }
    assert_eq!(found[&request_id], Some(root));
    assert_eq!(parents(&other_sink)[&elsewhere_id], Some(other_root));
}
