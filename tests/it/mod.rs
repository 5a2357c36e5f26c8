mod cli;
mod common;
mod grpc;
mod reload;
