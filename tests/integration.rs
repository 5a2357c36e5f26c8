//! Integration tests: the real server on 127.0.0.1:0, called with the generated client, and
//! the real binary for the command line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod it;
