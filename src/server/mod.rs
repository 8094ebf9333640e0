//! The accept loop: HTTP/1.1 and HTTP/2 (hyper-util `auto::Builder`), over TCP or TLS
//! ([`tls`], handshake bounded by `--tls-handshake-timeout`), a connection without a request in
//! flight closed after `--header-timeout` ([`conn`]), graceful shutdown (in-flight requests
//! finish, at most `--shutdown-grace`).

pub mod conn;
pub mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::http::Dispatcher;

/// Serves `listener` until `shutdown` resolves; over TLS when `tls` is given.
pub async fn run(
    d: Arc<Dispatcher>,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) {
    let config = &d.app.config;
    let builder = Arc::new(conn::builder(Duration::from_secs(config.header_timeout)));
    let handshake_timeout = Duration::from_secs(config.tls_handshake_timeout);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            conn = listener.accept() => {
                let stream = match conn {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let (d, builder, watcher, tls) = (d.clone(), builder.clone(), graceful.watcher(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => serve_connection(d, &builder, watcher, stream).await,
                        Some(acceptor) => {
                            if let Some(stream) = tls::handshake(&acceptor, stream, handshake_timeout).await {
                                serve_connection(d, &builder, watcher, stream).await;
                            }
                        }
                    }
                });
            }
            _ = shutdown.as_mut() => break,
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(Duration::from_secs(config.shutdown_grace)) => {
            tracing::warn!("in-flight requests cut at shutdown (--shutdown-grace)")
        }
    }
}

/// Serves one connection (plain or TLS) until it closes, idles past `--header-timeout`, or the
/// server shuts down.
async fn serve_connection<I>(d: Arc<Dispatcher>, builder: &Builder<TokioExecutor>, watcher: Watcher, io: I)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let idle = Duration::from_secs(d.app.config.header_timeout);
    conn::serve(builder, io, idle, Some(watcher), move |req| crate::http::handle(d.clone(), req)).await;
}
