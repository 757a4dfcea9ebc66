//! wattline's `AgentScopes` service on the host endpoint, rule by rule, through the
//! generated client over the real socket, against a real pipeline.

use tonic::Code;
use wattline::host::program::{ACTIVATION_VARIABLE, ProgramEndpoint, TOKEN_VARIABLE};
use wattline::host::{MAX_OPEN_SCOPES_PER_CALLER, MAX_SCOPE_NAME_BYTES};
use wattline_worker::wire::agent_scopes::agent_scopes_client::AgentScopesClient;
use wattline_worker::wire::agent_scopes::{
    EndAgentScopeRequest, HostCredentials, RemoteEnergyEstimate, RemoteModelCall,
    StartAgentScopeRequest,
};

type Client = AgentScopesClient<tonic::transport::Channel>;

async fn client(endpoint: &ProgramEndpoint) -> Client {
    let channel = wattline::host::connect_unix(endpoint.socket_path().to_path_buf())
        .await
        .expect("connects over the socket");
    AgentScopesClient::new(channel)
}

fn credentials(endpoint: &ProgramEndpoint) -> HostCredentials {
    let environment = endpoint.environment();
    let value = |name: &str| {
        environment
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
            .unwrap()
    };
    HostCredentials {
        activation_id: value(ACTIVATION_VARIABLE),
        auth_token: value(TOKEN_VARIABLE),
    }
}

async fn start(
    client: &mut Client,
    credentials: &HostCredentials,
    name: &str,
) -> Result<String, Code> {
    start_weighted(client, credentials, name, None)
        .await
        .map_err(|status| status.code())
}

async fn start_weighted(
    client: &mut Client,
    credentials: &HostCredentials,
    name: &str,
    weight: Option<f64>,
) -> Result<String, tonic::Status> {
    client
        .start_agent_scope(StartAgentScopeRequest {
            credentials: Some(credentials.clone()),
            name: name.into(),
            process_id: None,
            weight,
            traceparent: None,
            parent_scope_id: None,
        })
        .await
        .map(|response| response.into_inner().scope_id)
}

async fn end(
    client: &mut Client,
    credentials: &HostCredentials,
    scope_id: &str,
) -> Result<(), Code> {
    client
        .end_agent_scope(EndAgentScopeRequest {
            credentials: Some(credentials.clone()),
            scope_id: scope_id.into(),
            remote_call: None,
        })
        .await
        .map(|_| ())
        .map_err(|status| status.code())
}

/// A pipeline, an endpoint attached to it, a client over its socket and the right
/// credentials.
async fn attached() -> (wattline::Pipeline, ProgramEndpoint, Client, HostCredentials) {
    let pipeline = wattline::Pipeline::builder().spawn().await.unwrap();
    let endpoint =
        ProgramEndpoint::start(wattline::diagnostics::Diagnostics::disabled(), None).unwrap();
    endpoint.attach(pipeline.scope_control());
    let client = client(&endpoint).await;
    let good = credentials(&endpoint);
    (pipeline, endpoint, client, good)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_calls_follow_the_rules() {
    let (pipeline, endpoint, mut client, good) = attached().await;
    let wrong_token = HostCredentials {
        auth_token: "not-the-token".into(),
        ..good.clone()
    };

    // (what is asked, what comes back)
    assert_eq!(
        start(&mut client, &wrong_token, "planner").await,
        Err(Code::PermissionDenied)
    );
    assert_eq!(
        start(&mut client, &good, "   ").await,
        Err(Code::InvalidArgument)
    );
    assert_eq!(
        start(&mut client, &good, "a\nb").await,
        Err(Code::InvalidArgument)
    );
    let longest = "x".repeat(MAX_SCOPE_NAME_BYTES);
    let too_long = "x".repeat(MAX_SCOPE_NAME_BYTES + 1);
    assert_eq!(
        start(&mut client, &good, &too_long).await,
        Err(Code::InvalidArgument)
    );
    let long_scope = start(&mut client, &good, &longest)
        .await
        .expect("256 bytes is allowed");
    end(&mut client, &good, &long_scope).await.unwrap();

    let scope = start(&mut client, &good, "planner").await.unwrap();
    assert_eq!(
        end(&mut client, &wrong_token, &scope).await,
        Err(Code::PermissionDenied)
    );
    assert_eq!(
        end(&mut client, &good, "no-such-scope").await,
        Err(Code::NotFound)
    );
    assert_eq!(end(&mut client, &good, &scope).await, Ok(()));
    assert_eq!(
        end(&mut client, &good, &scope).await,
        Err(Code::NotFound),
        "ended once"
    );

    // The pipeline's own report has the step, ended.
    let report = pipeline.flush().await.unwrap();
    let planner = report
        .agent_scopes
        .iter()
        .find(|step| step.name == "planner")
        .expect("the step is in the report");
    assert_eq!(planner.uuid.to_string(), scope);
    assert!(planner.ended_at.is_some());

    // Open scopes per caller are bounded; ending at exit ends every one left.
    for index in 0..MAX_OPEN_SCOPES_PER_CALLER {
        start(&mut client, &good, &format!("step-{index}"))
            .await
            .unwrap();
    }
    assert_eq!(
        start(&mut client, &good, "one-too-many").await,
        Err(Code::ResourceExhausted)
    );
    assert_eq!(endpoint.close().await, MAX_OPEN_SCOPES_PER_CALLER);
    pipeline.shutdown().await.unwrap();
}

/// The SDKs check a weight before sending it; the host checks it again, for any client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weight_not_positive_and_finite_is_refused_naming_it_and_a_good_one_is_kept() {
    let (pipeline, endpoint, mut client, good) = attached().await;
    for weight in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let refused = start_weighted(&mut client, &good, "bad", Some(weight))
            .await
            .expect_err("refused");
        assert_eq!(refused.code(), Code::InvalidArgument, "{weight}");
        assert!(
            refused.message().contains("the scope weight is"),
            "{weight}: {}",
            refused.message()
        );
    }
    let heavy = start_weighted(&mut client, &good, "heavy", Some(2.5))
        .await
        .unwrap();
    end(&mut client, &good, &heavy).await.unwrap();
    let report = pipeline.flush().await.unwrap();
    let weights: Vec<(&str, Option<f64>)> = report
        .agent_scopes
        .iter()
        .map(|step| (step.name.as_str(), step.weight))
        .collect();
    assert_eq!(
        weights,
        [("heavy", Some(2.5))],
        "only the good one, with its weight"
    );
    assert_eq!(endpoint.close().await, 0);
    pipeline.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_before_the_pipeline_is_attached_waits_then_is_unavailable() {
    let endpoint =
        ProgramEndpoint::start(wattline::diagnostics::Diagnostics::disabled(), None).unwrap();
    let mut client = client(&endpoint).await;
    let good = credentials(&endpoint);
    assert_eq!(
        start(&mut client, &good, "early").await,
        Err(Code::Unavailable)
    );
    // Nothing was opened, so nothing is ended at exit.
    assert_eq!(endpoint.close().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_the_pipeline_goes_through_once_it_is_attached() {
    let endpoint =
        ProgramEndpoint::start(wattline::diagnostics::Diagnostics::disabled(), None).unwrap();
    let mut client = client(&endpoint).await;
    let good = credentials(&endpoint);
    let early = tokio::spawn(async move { start(&mut client, &good, "early").await });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let pipeline = wattline::Pipeline::builder().spawn().await.unwrap();
    endpoint.attach(pipeline.scope_control());
    let scope = early
        .await
        .unwrap()
        .expect("started once the pipeline is attached");
    assert_eq!(endpoint.close().await, 1, "left open, ended at exit");
    let report = pipeline.shutdown().await.unwrap().unwrap();
    assert!(
        report
            .agent_scopes
            .iter()
            .any(|step| step.uuid.to_string() == scope)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_names_its_open_parent_and_a_parent_not_open_is_refused_naming_it() {
    let sink = std::sync::Arc::new(wattline::events::CollectingEventSink::default());
    let pipeline = wattline::Pipeline::builder()
        .event_sink(sink.clone())
        .spawn()
        .await
        .unwrap();
    let endpoint =
        ProgramEndpoint::start(wattline::diagnostics::Diagnostics::disabled(), None).unwrap();
    endpoint.attach(pipeline.scope_control());
    let good = credentials(&endpoint);
    // The Rust worker SDK, as a program under `wattline run` uses it.
    let host = wattline_worker::HostConnection::new(
        endpoint.socket_path(),
        good.activation_id.clone(),
        good.auth_token.clone(),
    );
    let request = host.agent_scope("request").await.unwrap();
    let plan = request.child("plan").await.unwrap();
    let sibling = host
        .agent_scope_with(
            "summarize",
            wattline_worker::ScopeRequest {
                parent_scope_id: Some(request.scope_id()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let ended = host.agent_scope("ended").await.unwrap();
    let ended_id = ended.scope_id().to_owned();
    ended.end().await.unwrap();
    for parent in [ended_id.as_str(), "no-such-scope"] {
        let refused = host
            .agent_scope_with(
                "orphan",
                wattline_worker::ScopeRequest {
                    parent_scope_id: Some(parent),
                    ..Default::default()
                },
            )
            .await
            .unwrap_err();
        let wattline_worker::AgentScopeError::Host { code, message, .. } = refused else {
            panic!("refused by the host: {refused}")
        };
        assert_eq!(code, Code::InvalidArgument);
        assert!(message.contains(&format!("{parent:?}")), "{message}");
    }
    let request_id = request.scope_id().to_owned();
    let (plan_id, summarize_id) = (plan.scope_id().to_owned(), sibling.scope_id().to_owned());
    plan.end().await.unwrap();
    sibling.end().await.unwrap();
    request.end().await.unwrap();
    pipeline.shutdown().await.unwrap();

    let parents: std::collections::HashMap<String, Option<String>> = sink
        .events()
        .iter()
        .filter_map(|event| match event {
            wattline::events::PipelineEvent::Scope(scope) => Some((
                scope.uuid.to_string(),
                scope.parent_uuid.map(|parent| parent.to_string()),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(parents[&plan_id].as_deref(), Some(request_id.as_str()));
    assert_eq!(parents[&summarize_id].as_deref(), Some(request_id.as_str()));
    assert_eq!(
        parents.len(),
        5,
        "root, request, plan, summarize, ended: no orphan"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_call_ends_its_scope_with_its_estimate_and_a_malformed_one_is_refused_naming_it() {
    let (pipeline, endpoint, mut client, good) = attached().await;
    let scope = start(&mut client, &good, "chat").await.unwrap();
    let end_with = |operation: &str, estimate: Option<RemoteEnergyEstimate>| EndAgentScopeRequest {
        credentials: Some(good.clone()),
        scope_id: scope.clone(),
        remote_call: Some(RemoteModelCall {
            operation: operation.into(),
            provider: Some("example".into()),
            model: Some("their-model".into()),
            input_tokens: Some(10),
            output_tokens: Some(20),
            estimate,
        }),
    };
    let estimate = |low_kwh: f64, high_kwh: f64| RemoteEnergyEstimate {
        low_kwh,
        high_kwh,
        estimator: "their library 1.0".into(),
        source: "their methodology".into(),
    };
    for (request, field) in [
        (end_with("execute_tool", None), "remote_call.operation"),
        (
            end_with("chat", Some(estimate(2.0, 1.0))),
            "remote_call.estimate",
        ),
        (
            end_with("chat", Some(estimate(f64::NAN, 1.0))),
            "remote_call.estimate",
        ),
    ] {
        let refused = client.end_agent_scope(request).await.expect_err("refused");
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(
            refused.message().starts_with(field),
            "{}",
            refused.message()
        );
    }
    // Refused, the scope stayed open; ended well, it keeps the estimate it brought.
    client
        .end_agent_scope(end_with("chat", Some(estimate(0.001, 0.003))))
        .await
        .unwrap();
    let report = pipeline.flush().await.unwrap();
    let call = report.agent_scopes[0].remote_call.clone().unwrap();
    assert_eq!(
        (call.input_tokens, call.output_tokens),
        (Some(10), Some(20))
    );
    let kept = call.estimate.unwrap();
    assert_eq!((kept.low_kwh, kept.high_kwh), (0.001, 0.003));
    assert_eq!(
        (kept.method.as_str(), kept.estimator.as_str()),
        ("estimated", "their library 1.0")
    );
    assert_eq!(endpoint.close().await, 0);
    pipeline.shutdown().await.unwrap();
}
