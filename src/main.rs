//! Thin entry point: parse the command line, run it, map failures to exit codes
//! (64 for a bad policy or input, 1 for failed tests or runtime errors).

use clap::Parser;

use toolgate::app::{self, Exit};
use toolgate::cli::Cli;

/// Requests are decided on tokio's threads and their events and decisions are freed on the
/// decision-log thread; mimalloc frees across threads without the arena lock glibc takes.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = Cli::parse();
    let code = match app::run(cli) {
        Ok(Exit::Ok) => 0,
        Ok(Exit::Failed) => 1,
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            match e.downcast_ref::<app::UsageError>() {
                Some(_) => 64,
                None => 1,
            }
        }
    };
    std::process::exit(code);
}
