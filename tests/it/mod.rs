mod cli;
mod common;
mod deep;
mod grpc;
mod mcp;
mod observability;
mod reload;
mod tracing;
