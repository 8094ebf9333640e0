//! Connection limits, so that a client cannot hold a socket and a task for as long as it likes:
//! a connection with no request in flight is closed after `--header-timeout`, whatever it sends
//! or does not send; a request in flight is never cut.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::common::fake_llm::{FakeLlm, Script};
use crate::common::{Server, ZORBLAX_QUESTION};
use crate::llm::{reactor, serve};

/// The HTTP/2 client preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
/// A HEADERS frame on stream 1 (END_STREAM, END_HEADERS) for `GET http /` in HPACK's static
/// table: `:method GET`, `:scheme http`, `:path /`.
const H2_GET: &[u8] = b"\x00\x00\x03\x01\x05\x00\x00\x00\x01\x82\x86\x84";

fn connect(server: &Server, send: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(server.base_url.trim_start_matches("http://")).expect("connect");
    stream.write_all(send).expect("send");
    stream
}

/// Reads until the server closes `stream` (end of file or reset); returns what it sent. Fails
/// the test if the connection is still open at `deadline`.
fn read_until_closed(stream: &mut TcpStream, deadline: Instant, what: &str) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "{what}: still open at the deadline");
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("{what}: still open ({e})"),
        }
    }
}

/// The (type, stream id) of each HTTP/2 frame in `bytes`.
fn frame_types(bytes: &[u8]) -> Vec<(u8, u32)> {
    let mut frames = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        frames.push((rest[3], u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff));
        rest = &rest[(9 + len).min(rest.len())..];
    }
    frames
}

#[test]
fn silent_preface_only_and_idle_connections_are_closed_after_the_header_timeout() {
    let server = Server::start_with(&["--header-timeout", "1s"]);
    let opened = Instant::now();
    let mut silent: Vec<TcpStream> = (0..100).map(|_| connect(&server, b"")).collect();
    let mut preface: Vec<TcpStream> = (0..100).map(|_| connect(&server, H2_PREFACE)).collect();
    let mut partial = connect(&server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
    let mut h1_idle = connect(&server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    let h2_stream = [H2_PREFACE, H2_GET].concat();
    let mut h2_idle = connect(&server, &h2_stream);
    let deadline = opened + Duration::from_secs(10);
    for (i, stream) in silent.iter_mut().enumerate() {
        read_until_closed(stream, deadline, &format!("silent connection {i}"));
    }
    for (i, stream) in preface.iter_mut().enumerate() {
        read_until_closed(stream, deadline, &format!("preface-only HTTP/2 connection {i}"));
    }
    read_until_closed(&mut partial, deadline, "partial HTTP/1.1 headers");
    let answer = read_until_closed(&mut h1_idle, deadline, "HTTP/1.1 keep-alive after its response");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    // SETTINGS, then the response's HEADERS (frame type 1) on stream 1, then the close.
    let frames = read_until_closed(&mut h2_idle, deadline, "HTTP/2 with no stream open after its response");
    assert!(frame_types(&frames).contains(&(0x01, 1)), "no response HEADERS frame: {:?}", frame_types(&frames));
    assert!(opened.elapsed() >= Duration::from_millis(900), "closed before the timeout");
    // The server serves as before.
    let mut fresh = connect(&server, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let answer = read_until_closed(&mut fresh, Instant::now() + Duration::from_secs(10), "a fresh request");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn a_request_in_flight_longer_than_the_header_timeout_is_not_cut() {
    let fake = FakeLlm::start(vec![], Script::Slow(Duration::from_secs(3), vec!["It runs at 451 kelvin."])).await;
    let server = serve(&fake, &["--header-timeout", "1s"]);
    let org = server.new_org("Slow").await;
    let (replica, _) = reactor(&org).await;
    let (status, body) = org.chat(&replica, ZORBLAX_QUESTION).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["content"].as_str().unwrap().contains("451"), "{body}");
}

#[tokio::test]
async fn a_body_that_stalls_is_408_body_timeout_in_the_error_body() {
    let server = Server::start_with(&["--body-timeout", "1s"]);
    let org = server.new_org("Stall").await;
    let head = format!(
        "POST /v1/replicas HTTP/1.1\r\nHost: x\r\nX-ORGANIZATION-SECRET: {}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{\"name\": ",
        org.key
    );
    let sent = Instant::now();
    let mut stream = connect(&server, head.as_bytes());
    let answer = read_until_closed(&mut stream, sent + Duration::from_secs(15), "a stalled body");
    let answer = String::from_utf8_lossy(&answer).to_string();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body: serde_json::Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap();
    assert_eq!((body["success"].clone(), body["error_code"].clone()), (json!(false), json!("BODY_TIMEOUT")), "{body}");
    assert!(body["request_id"].is_string() && body["error"].as_str().unwrap().contains("--body-timeout"), "{body}");
    assert!(sent.elapsed() >= Duration::from_millis(900), "answered before the timeout");
    assert_eq!(org.get("/v1/replicas").await.0, StatusCode::OK);
}
