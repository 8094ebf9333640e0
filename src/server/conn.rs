//! One connection's limits: a connection with no request in flight is closed
//! after `--header-timeout`.
//!
//! hyper's own HTTP/1 header timeout cuts a request whose headers come too slowly, but nothing
//! in hyper closes a connection that sends *nothing*: a TCP connection that never sends a byte
//! (hyper-util's protocol detection waits for the first bytes without a timer), an HTTP/2
//! connection that sends only its preface, or one that goes idle with no stream open. Each is
//! a socket and a task held for as long as the client likes. So every connection carries an
//! [`Activity`]: the number of its requests in flight (a request counts from its complete headers
//! until its response body has been sent or dropped, so a long completion or a streamed answer
//! is never cut), and the connection is dropped once that number has stayed 0 for the timeout —
//! from the connection's opening, or from the end of its last response.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::Watcher;
use tokio::sync::Notify;

/// The connection builder of every listener: HTTP/1.1 and HTTP/2, with hyper's HTTP/1 header
/// timeout set to `header_timeout`.
pub fn builder(header_timeout: Duration) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_timeout);
    builder.http2().timer(TokioTimer::new());
    builder
}

/// The requests in flight on one connection.
#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    changed: Notify,
}

impl Activity {
    fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
        InFlight(self.clone())
    }

    /// Resolves once no request has been in flight for `limit` without a break.
    async fn idle_for(&self, limit: Duration) {
        loop {
            let changed = self.changed.notified();
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                tokio::select! {
                    _ = tokio::time::sleep(limit) => return,
                    _ = changed => {}
                }
            } else {
                changed.await;
            }
        }
    }
}

/// One request in flight; dropped with its response body.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// A response body that keeps its request counted in flight until it is sent or dropped.
struct Tracked<B> {
    inner: B,
    _in_flight: InFlight,
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serves `io` with `handler` until the connection closes, stays without a request in flight
/// for `idle` (then it is dropped: nothing is in flight to lose), or — with a `watcher` — the
/// server's graceful shutdown ends it.
pub async fn serve<I, H, F, B>(
    builder: &Builder<TokioExecutor>,
    io: I,
    idle: Duration,
    watcher: Option<Watcher>,
    handler: H,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let activity = Arc::new(Activity::default());
    let tracker = activity.clone();
    let service = hyper::service::service_fn(move |req| {
        let in_flight = tracker.start();
        let answer = handler(req);
        async move { Ok::<_, Infallible>(answer.await.map(|inner| Tracked { inner, _in_flight: in_flight })) }
    });
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service).into_owned();
    let ended = match watcher {
        Some(watcher) => until_idle(watcher.watch(conn), &activity, idle).await,
        None => until_idle(conn, &activity, idle).await,
    };
    match ended {
        Some(Err(e)) => tracing::debug!(error = %e, "connection ended with an error"),
        Some(Ok(())) => {}
        None => tracing::debug!("idle connection closed (--header-timeout)"),
    }
}

/// `conn`'s outcome, or `None` when it was dropped for idling.
async fn until_idle<C: Future>(conn: C, activity: &Activity, idle: Duration) -> Option<C::Output> {
    tokio::select! {
        ended = conn => Some(ended),
        _ = activity.idle_for(idle) => None,
    }
}
