//! The accept loop: HTTP/1.1 and HTTP/2 (hyper-util `auto::Builder`), over TCP or TLS
//! ([`tls`]), header read timeout, graceful shutdown (in-flight requests finish, at most
//! `--shutdown-grace`).

pub mod tls;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::app::App;

/// Longest time a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `listener` until `shutdown` resolves; over TLS when `tls` is given.
pub async fn run(app: Arc<App>, listener: TcpListener, tls: Option<TlsAcceptor>, shutdown: impl Future<Output = ()>) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    let builder = Arc::new(builder);
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
                let (app, builder, watcher, tls) = (app.clone(), builder.clone(), graceful.watcher(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => serve_connection(app, &builder, watcher, stream).await,
                        Some(acceptor) => {
                            if let Some(stream) = tls::handshake(&acceptor, stream).await {
                                serve_connection(app, &builder, watcher, stream).await;
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
        _ = tokio::time::sleep(Duration::from_secs(app.config.shutdown_grace)) => {
            tracing::warn!("in-flight requests cut at shutdown (--shutdown-grace)")
        }
    }
}

/// Serves one connection (plain or TLS) until it closes or the server shuts down.
async fn serve_connection<I>(app: Arc<App>, builder: &Builder<TokioExecutor>, watcher: Watcher, io: I)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(crate::http::handle(app, req).await) }
    });
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    if let Err(e) = watcher.watch(conn.into_owned()).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}
