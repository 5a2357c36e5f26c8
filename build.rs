//! Compiles the public contract in `proto/` with protox (no system protoc) and
//! writes the descriptor set that gRPC reflection serves.

use prost::Message;
use std::{env, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/toolgate/v1/guard.proto",
        "proto/toolgate/v1/classifier.proto",
        "proto/toolgate/v1/tool.proto",
    ];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("toolgate_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
