//! `cuprof serve [DIR]`: a local web server over traces loaded once: the report page, JSON
//! for the summary and its sections, the flame graph's stacks, windows of any rank's
//! timeline at a screen's resolution, and the live figures of `--on-demand` processes.
//!
//! It listens on 127.0.0.1 unless asked; on any other address every request must carry a
//! random token printed at start. The first line on stdout is the address it listens on
//! (`--port 0`: a free one). The folder is watched: a change is loaded whole, then served
//! (`state`); routes are in `routes`, the page and its script in `page`, `/api/live` in
//! `live`.

mod live;
mod page;
mod routes;
mod state;

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use anyhow::{Context, Result};
use clap::Args;
use cuprof_analysis::io::console::print_line;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Trace files or directories of rank traces (the newest run among them is served).
    #[arg(value_name = "DIR", default_value = ".")]
    paths: Vec<PathBuf>,

    /// The address to listen on; any but a loopback one requires the printed token of every
    /// request.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,

    /// The port to listen on (0: any free one; the first line printed names it).
    #[arg(long, default_value_t = 8765)]
    port: u16,

    /// Rows per table of the report page.
    #[arg(long, default_value_t = cuprof_analysis::report::DEFAULT_TOP)]
    top: usize,

    #[command(flatten)]
    jobs: crate::analysis_args::JobsArg,
}

/// 128 random bits, as hex.
fn token() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("/dev/urandom: cannot read a token from it")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

pub fn serve(a: ServeArgs) -> Result<()> {
    let jobs: cuprof_analysis::Jobs = a.jobs.into();
    // The port first: one in use is said at once, not after a load of many seconds.
    let address = SocketAddr::new(a.bind, a.port);
    let listener = TcpListener::bind(address).with_context(|| {
        format!("cannot listen on {address}: pick another --port (0: any free one) or --bind")
    })?;
    let loaded = jobs.install(|| state::load(&a.paths, a.top))??;
    let bound = listener.local_addr()?;
    let token: Option<Arc<str>> = match a.bind.is_loopback() {
        true => None,
        false => Some(token()?.into()),
    };
    let ranks = loaded.spans.len();
    let files = loaded.analysis.files.len();
    print_line(&format!(
        "cuprof serve: http://{bound}/ ({files} file(s), {ranks} rank(s))"
    ));
    if let Some(t) = &token {
        print_line(&format!(
            "token: {t} (every request needs it, as ?token={t} or the X-Cuprof-Token header)"
        ));
    }
    let shared = Arc::new(RwLock::new(state::Served {
        loaded: Arc::new(loaded),
        generation: 1,
        problem: None,
    }));
    state::watch(shared.clone(), a.paths.clone(), a.top);
    let ctx = routes::Ctx { shared, token };
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_io()
        .build()
        .context("cannot start the server's threads")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let app = axum::Router::new().fallback(routes::handle).with_state(ctx);
        axum::serve(listener, app).await
    })?;
    Ok(())
}
