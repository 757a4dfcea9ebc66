//! Generates wattline's `AgentScopes` service (client and server) from
//! `proto/wattline/host/v1/agent_scopes.proto`, with a vendored `protoc` so that no
//! system protobuf compiler is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/wattline/host/v1/agent_scopes.proto";
    println!("cargo:rerun-if-changed={proto}");
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(config, &[proto], &["proto"])?;
    Ok(())
}
