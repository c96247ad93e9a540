//! `cuprof serve`'s answers: each request checked (method, host or token, parameters) and answered
//! from what is loaded; whatever is wrong with a request is a 4xx with one line saying what to
//! ask instead, and the server goes on.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use cuprof_analysis::escape::json;
use cuprof_analysis::views::window::{window, WindowError, WindowQuery};
use serde::Serialize;

use super::page;
use super::state::{current, Answer, Shared};

/// What every request sees.
#[derive(Clone)]
pub struct Ctx {
    pub shared: Shared,
    /// Required of every request when the server listens beyond this host.
    pub token: Option<Arc<str>>,
}

/// The header a client may send the token in (else `?token=`).
pub const TOKEN_HEADER: &str = "x-cuprof-token";

fn answer(status: StatusCode, kind: &'static str, body: impl Into<Body>) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, kind)
        .header(header::CACHE_CONTROL, "no-store")
        .body(body.into())
        .unwrap_or_default()
}

/// A refused request: one line of text.
fn refuse(status: StatusCode, why: &str) -> Response {
    let line = cuprof_analysis::escape::terminal::printable_line(why).into_owned() + "\n";
    answer(status, "text/plain; charset=utf-8", line)
}

fn json_answer(bytes: impl Into<Body>) -> Response {
    answer(StatusCode::OK, "application/json", bytes)
}

/// Whether the client accepts gzip (`Accept-Encoding: gzip`, not refused with `;q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',').any(|e| {
                let mut parts = e.split(';').map(str::trim);
                let coding = parts.next().unwrap_or("");
                let refused = parts.any(|p| {
                    p.strip_prefix("q=")
                        .and_then(|q| q.parse::<f64>().ok())
                        .is_some_and(|q| q == 0.0)
                });
                (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
            })
        })
}

/// A made answer, gzipped when the client accepts it and it was kept so.
fn made(a: &Answer, kind: &'static str, headers: &HeaderMap) -> Response {
    let gzip_ok = accepts_gzip(headers);
    let mut r = match (&a.gzip, gzip_ok) {
        (Some(gz), true) => {
            let mut r = answer(StatusCode::OK, kind, gz.clone());
            r.headers_mut().insert(
                header::CONTENT_ENCODING,
                header::HeaderValue::from_static("gzip"),
            );
            r
        }
        _ => answer(StatusCode::OK, kind, a.plain.clone()),
    };
    r.headers_mut().insert(
        header::VARY,
        header::HeaderValue::from_static("accept-encoding"),
    );
    r
}

/// The query's `name=value` pairs, undecoded (every parameter is a number or the token).
fn param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn number<T: std::str::FromStr>(query: &str, name: &str, default: Option<T>) -> Result<T, String> {
    match param(query, name) {
        Some(v) => v.parse().map_err(|_| {
            format!("{name}={v} is not an integer: ask /api/window?rank=R&t0=NS&t1=NS&px=WIDTH")
        }),
        None => default.ok_or_else(|| {
            format!("{name} is missing: ask /api/window?rank=R&t0=NS&t1=NS&px=WIDTH")
        }),
    }
}

/// Compares in time independent of where the strings differ.
fn same_token(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |d, (a, b)| d | (a ^ b))
            == 0
}

/// Whether a request names this host in its `Host` header (or sends none, as HTTP/1.0
/// clients may): a web page whose own name its attacker resolved to 127.0.0.1 (DNS rebinding)
/// sends that name, and must not read the traces of a server that asks no token.
fn addressed_to_this_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(ip, _)| ip),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[derive(Serialize)]
struct Status<'a> {
    generation: u64,
    files: usize,
    ranks: &'a [super::state::RankSpan],
    /// Why the files now are not what is served (they could not be read again), if so.
    problem: Option<String>,
}

/// Every request.
pub async fn handle(
    State(ctx): State<Ctx>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return refuse(StatusCode::METHOD_NOT_ALLOWED, "only GET is served");
    }
    let query = uri.query().unwrap_or("");
    if ctx.token.is_none() && !addressed_to_this_host(&headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this server answers requests addressed to localhost only: open it as http://127.0.0.1:PORT/ (or listen beyond localhost with --bind, behind its token)",
        );
    }
    if let Some(token) = &ctx.token {
        let given = headers
            .get(TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .or_else(|| param(query, "token"));
        if !given.is_some_and(|g| same_token(g, token)) {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "this server listens beyond localhost: send the token it printed at start (?token=T or the X-Cuprof-Token header)",
            );
        }
    }
    let path = uri.path();
    match path {
        "/" => return page::index(),
        "/app.js" => return page::script(),
        "/api/live" => {
            // The processes answer over their sockets: off the runtime's threads.
            return match tokio::task::spawn_blocking(super::live::processes).await {
                Ok(Ok(body)) => json_answer(body),
                Ok(Err(e)) => refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &cuprof_analysis::io::console::one_line(&e),
                ),
                Err(_) => refuse(StatusCode::INTERNAL_SERVER_ERROR, "the live request failed"),
            };
        }
        _ => {}
    }
    let (loaded, generation, problem) = current(&ctx.shared);
    match path {
        "/report" => made(&loaded.page, "text/html; charset=utf-8", &headers),
        "/api/status" => {
            let status = Status {
                generation,
                files: loaded.analysis.files.len(),
                ranks: &loaded.spans,
                problem,
            };
            match json::to_string(&status) {
                Ok(s) => json_answer(s),
                Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
            }
        }
        "/api/window" => {
            let q = (|| {
                Ok::<_, String>(WindowQuery {
                    rank: number(query, "rank", None)?,
                    t0: number(query, "t0", None)?,
                    t1: number(query, "t1", None)?,
                    px: number(query, "px", Some(1000))?,
                })
            })();
            let q = match q {
                Ok(q) => q,
                Err(why) => return refuse(StatusCode::BAD_REQUEST, &why),
            };
            // Up to a rank's every event: off the runtime's threads, and gzipped there for a
            // client that accepts it (100,000 marks are megabytes of JSON).
            let gzip_ok = accepts_gzip(&headers);
            let answered = tokio::task::spawn_blocking(move || {
                window(&loaded.analysis, q).map(|w| {
                    let body = json::to_string(&w).map_err(|e| e.to_string())?;
                    Answer::made_for(body.into_bytes(), gzip_ok).map_err(|e| e.to_string())
                })
            })
            .await;
            match answered {
                Ok(Ok(Ok(body))) => made(&body, "application/json", &headers),
                Ok(Err(e @ WindowError::TooLarge(_))) => {
                    refuse(StatusCode::PAYLOAD_TOO_LARGE, &e.to_string())
                }
                Ok(Err(e @ WindowError::NoRank(_))) => refuse(StatusCode::NOT_FOUND, &e.to_string()),
                Ok(Err(e)) => refuse(StatusCode::BAD_REQUEST, &e.to_string()),
                Ok(Ok(Err(e))) => refuse(StatusCode::INTERNAL_SERVER_ERROR, &e),
                Err(_) => refuse(StatusCode::INTERNAL_SERVER_ERROR, "the window request failed"),
            }
        }
        _ => match path.strip_prefix("/api/").and_then(|name| loaded.json.get(name)) {
            Some(body) => made(body, "application/json", &headers),
            None => refuse(
                StatusCode::NOT_FOUND,
                "no such page: ask /, /report, /api/summary, /api/kernels, /api/operators, /api/memory, /api/flame, /api/torch_compile, /api/window, /api/live or /api/status",
            ),
        },
    }
}
