//! Links the addon against Node's N-API symbols, resolved when Node loads it.
fn main() {
    napi_build::setup();
}
