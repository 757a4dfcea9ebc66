//! The Agent-scope client against a stand-in `AgentScopes` server (the generated
//! server trait) on a Unix socket: what it sends, what it surfaces, and the
//! best-effort end of a dropped scope. The real host's end-to-end test lives in the
//! root crate.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::{Request, Response, Status};
use wattline_worker::wire::agent_scopes::agent_scopes_server::{AgentScopes, AgentScopesServer};
use wattline_worker::wire::agent_scopes::{
    EndAgentScopeRequest, EndAgentScopeResponse, StartAgentScopeRequest, StartAgentScopeResponse,
};
use wattline_worker::{AgentScopeError, HostConnection};

const TOKEN: &str = "token-1";

/// Accepts one token; remembers what it was asked.
#[derive(Default, Clone)]
struct StandIn {
    started: Arc<Mutex<Vec<StartAgentScopeRequest>>>,
    ended: Arc<Mutex<Vec<EndAgentScopeRequest>>>,
}

#[tonic::async_trait]
impl AgentScopes for StandIn {
    async fn start_agent_scope(
        &self,
        request: Request<StartAgentScopeRequest>,
    ) -> Result<Response<StartAgentScopeResponse>, Status> {
        let request = request.into_inner();
        if request.credentials.as_ref().map(|c| c.auth_token.as_str()) != Some(TOKEN) {
            return Err(Status::permission_denied("unknown activation or token"));
        }
        let mut started = self.started.lock().unwrap();
        started.push(request);
        Ok(Response::new(StartAgentScopeResponse {
            scope_id: format!("scope-{}", started.len()),
        }))
    }

    async fn end_agent_scope(
        &self,
        request: Request<EndAgentScopeRequest>,
    ) -> Result<Response<EndAgentScopeResponse>, Status> {
        let request = request.into_inner();
        let mut ended = self.ended.lock().unwrap();
        if ended.iter().any(|end| end.scope_id == request.scope_id) {
            return Err(Status::not_found("scope already ended"));
        }
        ended.push(request);
        Ok(Response::new(EndAgentScopeResponse {}))
    }
}

async fn serve(stand_in: StandIn) -> (tempfile::TempDir, std::path::PathBuf) {
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("host.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(AgentScopesServer::new(stand_in))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
            .await
            .unwrap();
    });
    (directory, socket)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_is_started_by_name_and_ended_by_id_with_the_credentials() {
    let stand_in = StandIn::default();
    let (_directory, socket) = serve(stand_in.clone()).await;
    let host = HostConnection::new(&socket, "activation-1", TOKEN);
    let planner = host.agent_scope("planner").await.unwrap();
    assert_eq!(planner.name(), "planner");
    assert_eq!(planner.scope_id(), "scope-1");
    {
        let started = stand_in.started.lock().unwrap();
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].name, "planner");
        let credentials = started[0].credentials.clone().unwrap();
        assert_eq!(
            (
                credentials.activation_id.as_str(),
                credentials.auth_token.as_str()
            ),
            ("activation-1", TOKEN)
        );
    }
    planner.end().await.unwrap();
    let ended = stand_in.ended.lock().unwrap().clone();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].scope_id, "scope-1");
    assert_eq!(
        ended[0].credentials.as_ref().unwrap().activation_id,
        "activation-1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_scope_is_ended_in_the_background() {
    let stand_in = StandIn::default();
    let (_directory, socket) = serve(stand_in.clone()).await;
    let host = HostConnection::new(&socket, "activation-1", TOKEN);
    drop(host.agent_scope("tool_call").await.unwrap());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while stand_in.ended.lock().unwrap().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no EndAgentScope for the dropped scope"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(stand_in.ended.lock().unwrap()[0].scope_id, "scope-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_are_not_sent_and_host_refusals_are_surfaced() {
    let stand_in = StandIn::default();
    let (_directory, socket) = serve(stand_in.clone()).await;
    let host = HostConnection::new(&socket, "activation-1", TOKEN);
    for name in ["", "   ", &"x".repeat(257)] {
        let refused = host.agent_scope(name).await.unwrap_err();
        assert!(
            matches!(refused, AgentScopeError::InvalidName { .. }),
            "{refused:?}"
        );
    }
    assert!(stand_in.started.lock().unwrap().is_empty());

    let wrong = HostConnection::new(&socket, "activation-1", "wrong");
    match wrong.agent_scope("planner").await.unwrap_err() {
        AgentScopeError::Host {
            operation, code, ..
        } => assert_eq!(
            (operation, code),
            ("StartAgentScope", tonic::Code::PermissionDenied)
        ),
        other => panic!("{other:?}"),
    }

    let nobody = HostConnection::new(socket.with_file_name("absent.sock"), "a", TOKEN);
    match nobody.agent_scope("planner").await.unwrap_err() {
        AgentScopeError::Host { code, .. } => assert_eq!(code, tonic::Code::Unavailable),
        other => panic!("{other:?}"),
    }
}
