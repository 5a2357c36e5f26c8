//! Thin entry point: parse the command line, run it, map failures to exit codes
//! (64 for a bad policy or input, 1 for failed tests or runtime errors).

use clap::Parser;

use toolgate::app::{self, Exit};
use toolgate::cli::Cli;

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
