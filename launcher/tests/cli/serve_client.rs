//! `cuprof serve` for the tests (the CLI suite's, and the end-to-end suite's, which includes
//! this file): the server started and killed, and a small HTTP/1.1 client over
//! `std::net::TcpStream`, one request per connection, the answer read to its end.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdout, Command, Stdio};

/// A `cuprof serve` child, killed when dropped.
pub struct Server {
    child: Child,
    pub address: SocketAddr,
    /// The lines after the first one (the token's, beyond localhost).
    pub stdout: BufReader<ChildStdout>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `cmd` (`cuprof serve ...`), and waits for the address on its first line.
    pub fn start(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start cuprof serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let address = first
            .strip_prefix("cuprof serve: http://")
            .and_then(|rest| rest.split_once('/'))
            .unwrap_or_else(|| panic!("no address on the first line: {first:?}"))
            .0
            .parse()
            .unwrap();
        Server {
            child,
            address,
            stdout,
        }
    }
}

/// Sends `request` as it is; the answer's head and body bytes.
pub fn exchange_raw(address: SocketAddr, request: &[u8]) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(address).unwrap();
    s.write_all(request).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {:?}", String::from_utf8_lossy(&answer)));
    let body = answer.split_off(end + 4);
    (String::from_utf8(answer).unwrap(), body)
}

/// GET `path` with `Accept-Encoding: accept`: the answer's head, and its body inflated when
/// the answer says it is gzipped.
pub fn get_encoded(address: SocketAddr, path: &str, accept: &str) -> (String, String) {
    let (head, body) = exchange_raw(
        address,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: {accept}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let text = if head.to_ascii_lowercase().contains("content-encoding: gzip") {
        let mut inflated = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut inflated)
            .unwrap();
        inflated
    } else {
        String::from_utf8(body).unwrap()
    };
    (head, text)
}

/// Sends `request` as it is; the answer's status and body.
pub fn exchange(address: SocketAddr, request: &[u8]) -> (u16, String) {
    let (head, body) = exchange_raw(address, request);
    let body = String::from_utf8(body).unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (status, if chunked { unchunk(&body) } else { body })
}

/// The body of a chunked answer.
pub fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").unwrap();
        let n = usize::from_str_radix(size, 16).unwrap();
        if n == 0 {
            return out;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
}

/// `GET path` with `headers` (each `Name: value`).
pub fn get_with(address: SocketAddr, path: &str, headers: &[&str]) -> (u16, String) {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    exchange(address, req.as_bytes())
}

pub fn get(address: SocketAddr, path: &str) -> (u16, String) {
    get_with(address, path, &[])
}
