//! Generated protobuf and gRPC types for `toolgate.v1`; nothing else lives here.

#![allow(clippy::all, clippy::pedantic, missing_docs)]

tonic::include_proto!("toolgate.v1");

/// Encoded descriptor set for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("toolgate_descriptor");
