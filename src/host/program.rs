//! The host endpoint of the program `wattline run` measures: the command gets the
//! socket and its credentials in its environment, records diagnostics over
//! `RelayDiagnostics` (under the namespace `command`) and marks its own steps as Agent
//! scopes over `AgentScopes`. At the command's exit the scopes it left open are ended,
//! flagged as such, before the pipeline's report is made.

use std::path::Path;
use std::sync::Arc;

use wattline_diagnostics::Diagnostics;

use super::worker::new_credentials;
use super::{
    Admission, AgentScopesService, HostEndpoint, HostEndpointError, ScopeControl, ScopeControlSlot,
    WorkerCredentials,
};

/// The socket path (a plain path, as `unix://` URIs are not needed by clients).
pub const SOCKET_VARIABLE: &str = "WATTLINE_HOST_SOCKET";
/// The caller's activation id.
pub const ACTIVATION_VARIABLE: &str = "WATTLINE_HOST_ACTIVATION_ID";
/// The caller's token.
pub const TOKEN_VARIABLE: &str = "WATTLINE_HOST_TOKEN";
/// The namespace the program's diagnostic components are registered under
/// (`worker.command.<local name>`).
pub const PROGRAM_NAMESPACE: &str = "command";

/// A running endpoint for one measured program.
#[derive(Debug)]
pub struct ProgramEndpoint {
    endpoint: HostEndpoint,
    credentials: WorkerCredentials,
    scopes: AgentScopesService,
    slot: ScopeControlSlot,
}

impl ProgramEndpoint {
    /// Serves `context` (use [`Diagnostics::disabled`] when diagnostics are off) and
    /// Agent scopes for one program, in a new private directory under `parent`.
    /// Scope calls wait until [`Self::attach`]. Call inside a Tokio runtime.
    pub fn start(
        context: Diagnostics,
        parent: Option<&Path>,
    ) -> Result<ProgramEndpoint, HostEndpointError> {
        let credentials = new_credentials(PROGRAM_NAMESPACE);
        let (scopes, slot) = AgentScopesService::new(vec![credentials.clone()]);
        let endpoint = HostEndpoint::serve(
            context,
            vec![credentials.clone()],
            Some(scopes.clone()),
            parent,
            Admission::default(),
        )?;
        Ok(ProgramEndpoint {
            endpoint,
            credentials,
            scopes,
            slot,
        })
    }

    /// The variables the program needs, to add to its environment.
    pub fn environment(&self) -> [(&'static str, String); 3] {
        [
            (
                SOCKET_VARIABLE,
                self.endpoint.socket_path().display().to_string(),
            ),
            (ACTIVATION_VARIABLE, self.credentials.activation_id.clone()),
            (TOKEN_VARIABLE, self.credentials.token.clone()),
        ]
    }

    /// The socket path.
    pub fn socket_path(&self) -> &Path {
        self.endpoint.socket_path()
    }

    /// Scopes start and end in `control` from now on.
    pub fn attach(&self, control: Arc<dyn ScopeControl>) {
        self.slot.attach(control);
    }

    /// The program has exited: ends the scopes it left open (flagged
    /// `wattline.ended_at_program_exit`), stops serving and removes the directory.
    /// How many scopes it ended.
    pub async fn close(self) -> usize {
        let ended = self.scopes.end_open_scopes(&self.credentials.activation_id);
        self.endpoint.shutdown().await;
        ended
    }
}
