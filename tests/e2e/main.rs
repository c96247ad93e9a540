//! The end-to-end tests, one binary: real processes with the real libcuprof.so preloaded
//! against the libcupti double (and PyPI's torch running CPU operators), read back through
//! what they wrote. One module per area; `common` holds what they share.

mod abi;
mod capture_options;
mod common;
mod drops;
mod eager_compiled;
mod faults;
mod hta;
mod memory;
mod modules;
mod on_demand;
mod overview;
mod python_api;
mod replay;
/// `cuprof serve` started and asked, as the CLI suite does.
#[path = "../../launcher/tests/cli/serve_client.rs"]
mod serve_client;
mod threads;
mod top;
mod torch;
mod torch_native;
mod trace;
mod window;
