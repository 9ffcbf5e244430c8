//! Compiles proto/ with protox (pure Rust), so no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");
    let files = ["bench.proto", "health.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={proto_dir}/{file}");
    }
    let fds = protox::compile(files, [proto_dir])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
