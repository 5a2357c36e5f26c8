mod cli;
mod common;
mod grpc;
mod observability;
mod reload;
mod tracing;
