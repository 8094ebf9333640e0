//! Channel connections run by the server itself: one supervised task per connected bot, its
//! runner given by its channel's module ([`module`], the one row per `service::channel::Bot`
//! here, which also gives the bot's connect and its operations' document rows). A runner that
//! fails backs off and retries; one that panics is restarted after a pause; none can take the
//! server down. The runners talk to the rest only through the services (store) and the chat
//! service.
//!
//! **Several nodes** (a shared store): each bot runs on one node at a time, the one holding its
//! lease (`store::lease`, named `bot <channel> <replica>`). Every node follows the stored bots
//! ([`follow`], every [`FOLLOW_EVERY`] and at once after a change made through this node): it
//! starts a runner for a bot connected through any node, which waits for the lease, trying every
//! [`LEASE_RETRY`]; restarts it when the bot was connected again (a new token); stops it when
//! the bot is gone. A node that dies releases its leases with its database session, so a
//! survivor's runner takes the bot over within [`LEASE_RETRY`] and resumes from the stored
//! state (the update offset, the replies stored), answering each message once. A runner whose
//! lease is lost (its own session ended) stops and waits for the lease again.

pub mod connect;
pub mod embed;
pub mod messenger_a;
pub mod messenger_b;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::app::App;
use crate::http::request::Req;
use crate::http::route::HandlerFuture;
use crate::openapi::operations::Op;
use crate::service::channel::{Bot, Bots};
use crate::service::integrations;
use crate::store::lease::Lease;
use crate::store::records::{Integration, Replica};

/// The bot runners of this server, the [`Bots`] of its state (`App::bots`). It holds the state
/// weakly (the state holds it), and each runner holds the state while it runs.
pub struct Channels {
    app: Weak<App>,
    running: Mutex<HashMap<(Uuid, Bot), JoinHandle<()>>>,
    /// Wakes [`follow`] after a bot was connected or disconnected through this node.
    changed: tokio::sync::Notify,
}

/// How often each node reads the stored bots on a shared store.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(2);
/// How often a runner waiting for its bot's lease tries again.
pub const LEASE_RETRY: Duration = Duration::from_secs(2);

/// The HTTP client of the calls to the chat platforms (`App::platform_http`). Errors: the TLS
/// set-up failed.
pub fn platform_http() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .user_agent(concat!("replicad/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(10))
        .build()
}

impl Bots for Channels {
    /// On a shared store, has [`follow`] do it.
    fn start(&self, bot: Bot, replica: Uuid) {
        let Some(app) = self.app.upgrade() else { return };
        match app.store.is_shared() {
            true => self.changed.notify_one(),
            false => self.run(app, bot, replica),
        }
    }

    /// On a shared store, [`follow`] also stops the runners of other nodes within
    /// [`FOLLOW_EVERY`].
    fn stop(&self, replica: Uuid, bot: Bot) {
        self.abort(replica, bot);
        self.changed.notify_one();
    }
}

impl Channels {
    /// No bot running yet, for the state `app` (made with it: `Arc::new_cyclic`); [`start_all`]
    /// starts the stored ones.
    pub fn new(app: Weak<App>) -> Channels {
        Channels { app, running: Mutex::new(HashMap::new()), changed: tokio::sync::Notify::new() }
    }

    /// (Re)starts the runner of `bot` for `replica` under its lease.
    fn run(&self, app: Arc<App>, bot: Bot, replica: Uuid) {
        let task = tokio::spawn(async move {
            let name = format!("bot {} {replica}", bot.name());
            loop {
                let mut lease = Lease::wait(&app.store.leases, &name, LEASE_RETRY).await;
                let app = app.clone();
                tokio::select! {
                    () = supervise(replica, move || (module(bot).run)(app.clone(), replica)) => return,
                    () = lease.lost() => tracing::warn!(%replica, channel = bot.name(), "the bot's lease was lost; waiting for it again"),
                }
            }
        });
        if let Some(old) = self.lock().insert((replica, bot), task) {
            old.abort();
        }
    }

    /// Ends the runner of `bot` for `replica` on this node, if one runs.
    fn abort(&self, replica: Uuid, bot: Bot) {
        if let Some(task) = self.lock().remove(&(replica, bot)) {
            task.abort();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Uuid, Bot), JoinHandle<()>>> {
        self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Channels {
    fn drop(&mut self) {
        for (_, task) in self.lock().drain() {
            task.abort();
        }
    }
}

/// What the server composes of a bot channel's module (`channels::<name>`, [`module`]): its
/// runner, its connect operation, and the document rows of its connect and disconnect (whose
/// handlers, in `api::integrations`, are every bot's and call [`BotModule::connect`]).
pub struct BotModule {
    /// Runs the bot of a replica until it is disconnected (its record is gone).
    pub run: fn(Arc<App>, Uuid) -> Runner,
    /// `POST …/integrations/<name>` once the replica of the path is resolved: reads the body,
    /// checks the token with the platform, stores the bot and starts it ([`connect::connected`]).
    pub connect: fn(Arc<App>, Arc<Replica>, Req) -> HandlerFuture,
    /// The connect operation's document row (body type, prose).
    pub connect_operation: fn() -> Op,
    /// The disconnect operation's document row.
    pub disconnect_operation: fn() -> Op,
}

/// The [`BotModule`] of the bot channel module `$m`, by the names every bot's module gives
/// its parts: `$m::run`, and `$m::connect::{connect, operation, disconnect_operation}`.
macro_rules! bot_module {
    ($m:ident) => {
        BotModule {
            run: |app, replica| Box::pin($m::run(app, replica)),
            connect: |app, replica, req| Box::pin($m::connect::connect(app, replica, req)),
            connect_operation: $m::connect::operation,
            disconnect_operation: $m::connect::disconnect_operation,
        }
    };
}

/// The module of `bot`: the one place a [`Bot`] names its module.
pub const fn module(bot: Bot) -> BotModule {
    match bot {
        Bot::MessengerA => bot_module!(messenger_a),
        Bot::MessengerB => bot_module!(messenger_b),
    }
}

/// A bot's runner for one replica, as a future of its own.
pub type Runner = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Starts the runner of every stored bot; on a shared store, starts [`follow`] instead. Nothing
/// once the state is gone.
pub async fn start_all(channels: &Arc<Channels>) -> crate::error::Result<()> {
    let Some(app) = channels.app.upgrade() else { return Ok(()) };
    if app.store.is_shared() {
        tokio::spawn(follow(channels.clone()));
        return Ok(());
    }
    for bot in Bot::ALL {
        for (id, _) in integrations::connections(&app.store, bot).await? {
            channels.run(app.clone(), bot, id);
        }
    }
    Ok(())
}

/// Keeps this node's runners those of the stored bots, for the life of the server's state (a
/// shared store): reads them every [`FOLLOW_EVERY`], or at once after a change through this node.
async fn follow(channels: Arc<Channels>) {
    let mut started: HashMap<(Uuid, Bot), i64> = HashMap::new();
    loop {
        let Some(app) = channels.app.upgrade() else { return };
        for bot in Bot::ALL {
            match integrations::connections(&app.store, bot).await {
                Ok(stored) => follow_bot(&channels, &app, bot, &stored, &mut started),
                Err(e) => tracing::warn!(channel = bot.name(), error = %e, "reading the bots failed; trying again"),
            }
        }
        drop(app);
        let _ = tokio::time::timeout(FOLLOW_EVERY, channels.changed.notified()).await;
    }
}

/// Starts the runners of `stored` (replica, connected at) not started for that connection, and
/// stops those of `bot` no longer stored.
fn follow_bot(
    channels: &Channels,
    app: &Arc<App>,
    bot: Bot,
    stored: &[(Uuid, i64)],
    started: &mut HashMap<(Uuid, Bot), i64>,
) {
    for &(replica, connected_at) in stored {
        if started.insert((replica, bot), connected_at) != Some(connected_at) {
            channels.run(app.clone(), bot, replica);
        }
    }
    started.retain(|&(replica, b), _| {
        let keep = b != bot || stored.iter().any(|&(r, _)| r == replica);
        if !keep {
            channels.abort(replica, bot);
        }
        keep
    });
}

/// The stored `bot` of `replica`, `None` once it is disconnected; a failing read is retried
/// after `backoff`'s pause.
async fn stored_bot(app: &App, bot: Bot, replica: Uuid, backoff: &mut Backoff) -> Option<Integration> {
    loop {
        match integrations::get(&app.store, bot, replica).await {
            Ok(found) => return found,
            Err(e) => {
                tracing::warn!(%replica, channel = bot.name(), error = %e, "reading the bot failed");
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}

/// Records the state of the runner of `integration`, the `bot` channel's (`error` `None`:
/// active), in its integration object.
async fn report(app: &App, bot: Bot, integration: &Integration, error: Option<String>) {
    if let Err(e) = integrations::report(&app.store, bot, integration, error).await {
        tracing::warn!(replica = %integration.replica, channel = bot.name(), error = %e, "storing the bot state failed");
    }
}

/// Longest time the first "typing" request may take before it is given up on (a stalled chat
/// API must not hold the reply back).
const FIRST_TYPING_WAIT: Duration = Duration::from_secs(2);

/// Sent when the model could not produce a reply.
const APOLOGY: &str = "Sorry, I cannot answer right now. Please try again in a moment.";

/// The reply of `replica` to `ask` by `user` (`service::chat::complete`, which stores the
/// question and the reply as history), with `typing()` called every `every` meanwhile; the
/// apology when the model failed or said nothing. The first `typing()` runs beside the
/// completion and is waited for (up to [`FIRST_TYPING_WAIT`] from the start), so the chat shows
/// "typing" before the reply however fast the reply is: in a task of its own it could be cut
/// off by the reply's end before its request left.
async fn answer<T, Fut>(
    app: &App,
    replica: &Replica,
    user: Uuid,
    ask: crate::service::chat::Ask,
    typing: T,
    every: Duration,
) -> String
where
    T: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let first = tokio::time::timeout(FIRST_TYPING_WAIT, typing());
    let renewals = AbortOnDrop(tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            typing().await;
        }
    }));
    let cx = app.chat_context();
    let (_, done) = tokio::join!(first, crate::service::chat::complete(&cx, replica, user, ask));
    drop(renewals);
    match done {
        Ok(c) if !c.content.trim().is_empty() => c.content,
        Ok(_) => APOLOGY.to_string(),
        Err(e) => {
            tracing::warn!(replica = %replica.id, error = %e.message, "no channel reply could be made");
            APOLOGY.to_string()
        }
    }
}

/// An error as one line for the integration's `last_error` (its internal detail included).
fn error_text(e: &crate::error::Error) -> String {
    e.cause_text().map_or(e.message.clone(), |i| format!("{}: {i}", e.message))
}

/// Aborts its task when dropped (so aborting the supervisor aborts the runner).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `make()`'s future until it returns; restarts it, after a growing pause, when it panics.
async fn supervise<F, Fut>(replica: Uuid, make: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut backoff = Backoff::default();
    loop {
        let mut task = AbortOnDrop(tokio::spawn(make()));
        match (&mut task.0).await {
            Ok(()) => return,
            Err(e) if e.is_panic() => {
                tracing::error!(%replica, "a channel runner panicked; restarting it");
                tokio::time::sleep(backoff.next_delay()).await;
            }
            Err(_) => return,
        }
    }
}

/// Exponential back-off: 1 s, 2 s, 4 s … up to 5 minutes; [`Backoff::reset`] after a success.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// Longest pause.
    pub const MAX: Duration = Duration::from_secs(300);

    /// The pause before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let d = Duration::from_secs(1u64 << self.failures.min(9)).min(Self::MAX);
        self.failures += 1;
        d
    }

    /// After a success: the next failure waits 1 s again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_resets() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..12).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(&delays[..4], &[1, 2, 4, 8]);
        assert_eq!(*delays.last().unwrap(), 300);
        b.reset();
        assert_eq!(b.next_delay().as_secs(), 1);
    }
}
