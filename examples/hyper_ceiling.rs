//! The ceiling of the read benchmarks: a minimal hyper 1 server that answers every
//! request with the same bytes (a file given on the command line, e.g. a replica JSON fetched
//! from replicad), `Content-Type: application/json`. It runs on the same runtime and connection
//! builder as replicad (tokio multi-thread, hyper-util `auto::Builder`), so the difference to
//! replicad on the same operation is what replicad's request path costs.
//!
//! ```text
//! cargo run --release --example hyper_ceiling -- --body replica.json [--listen 127.0.0.1:0]
//! ```
//! Prints `listening on http://HOST:PORT` once bound, like `replicad serve`.

use std::convert::Infallible;
use std::path::PathBuf;

use bytes::Bytes;
use clap::Parser;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;

#[derive(Parser)]
struct Args {
    /// The file whose bytes every response carries.
    #[arg(long)]
    body: PathBuf,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let body = Bytes::from(std::fs::read(&args.body).expect("read --body"));
    let listener = tokio::net::TcpListener::bind(&args.listen).await.expect("bind");
    println!("listening on http://{}", listener.local_addr().expect("addr"));
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        let body = body.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |_req: Request<hyper::body::Incoming>| {
                let mut res = Response::new(Full::new(body.clone()));
                res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                async move { Ok::<_, Infallible>(res) }
            });
            let _ = Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
