mod cli;
mod common;
mod deep;
mod grpc;
mod observability;
mod reload;
mod tracing;
