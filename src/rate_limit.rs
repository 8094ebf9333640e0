//! Per-key rate limits (`--rate-limit-per-key N`): a token bucket per organization key holding
//! at most N tokens, refilled at N per minute; each request takes one. In memory, or, when
//! several nodes share a PostgreSQL store, in the database ([`RateLimiter::shared`]), so that
//! the limit holds for the key across the nodes, whichever node each request reaches. The embed
//! operations' own limits ([`EmbedLimits`]) are buckets of the same kind.
//!
//! In memory, memory stays bounded: a bucket that has refilled completely is the same as no bucket, so
//! full buckets are dropped by a sweep that runs whenever the map has doubled since the last
//! one (amortized O(1) per request); only keys that authenticated get a bucket at all.
//!
//! Answers carry the IETF `RateLimit-Policy: N;w=60` and `RateLimit: limit=N, remaining=R,
//! reset=S` headers (draft-ietf-httpapi-ratelimit-headers); a refused request gets 429
//! `RATE_LIMITED` with `Retry-After` (seconds).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::error::Result;
use crate::store::Store;

/// The buckets of every key.
pub struct RateLimiter {
    per_minute: u32,
    state: Mutex<State>,
    /// The store holding the buckets instead, when nodes share it, and the name of this
    /// limiter's buckets there (several limiters share the store's bucket table).
    shared: Option<(Store, &'static str)>,
}

/// The embed operations' own request limits (`--embed-rate-limit-per-visitor`,
/// `--embed-rate-limit-per-replica`, `--embed-new-visitors-per-minute`, each a number per
/// minute): buckets apart from the organization keys' (`--rate-limit-per-key`), taken by
/// `api::embed`.
pub struct EmbedLimits {
    /// Requests of one visitor of one replica (`service::embed::visitor_key`).
    pub per_visitor: RateLimiter,
    /// Requests to one replica from all its visitors.
    pub per_replica: RateLimiter,
    /// Visitors one replica takes in (made users) per minute.
    pub new_visitors: RateLimiter,
}

impl EmbedLimits {
    /// The three limits, per minute, their buckets in `store` when several nodes share it (so
    /// that they hold across the nodes).
    pub fn new(per_visitor: u32, per_replica: u32, new_visitors: u32, store: &Store) -> EmbedLimits {
        EmbedLimits {
            per_visitor: RateLimiter::for_store(per_visitor, store, "embed-visitor"),
            per_replica: RateLimiter::for_store(per_replica, store, "embed-replica"),
            new_visitors: RateLimiter::for_store(new_visitors, store, "embed-new-visitor"),
        }
    }
}

struct State {
    buckets: HashMap<u128, Bucket>,
    sweep_at: usize,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// What one request met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Requests left now.
    pub remaining: u32,
    /// Seconds until the bucket is full again.
    pub reset_secs: u64,
    /// Seconds until one request is allowed (0 when allowed).
    pub retry_after_secs: u64,
}

const MIN_SWEEP: usize = 1024;

impl RateLimiter {
    /// `per_minute` requests per minute with a burst of `per_minute` (at least 1).
    pub fn new(per_minute: u32) -> RateLimiter {
        let state = State { buckets: HashMap::new(), sweep_at: MIN_SWEEP };
        RateLimiter { per_minute: per_minute.max(1), state: Mutex::new(state), shared: None }
    }

    /// [`RateLimiter::new`] with the buckets in `store` when other nodes share it (PostgreSQL),
    /// named `scope` there (each limiter its own), in memory otherwise.
    pub fn for_store(per_minute: u32, store: &Store, scope: &'static str) -> RateLimiter {
        let shared = store.is_shared().then(|| (store.clone(), scope));
        RateLimiter { shared, ..RateLimiter::new(per_minute) }
    }

    /// The limit per minute.
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Takes a token from `key`'s bucket now if there is one: in the shared store's bucket
    /// ([`RateLimiter::for_store`]), else in memory. Errors: the shared store's.
    pub async fn check_now(&self, key: u128) -> Result<Decision> {
        let Some((store, scope)) = &self.shared else { return Ok(self.check(key, Instant::now())) };
        let per_minute = self.per_minute;
        store
            .update_bucket([scope.as_bytes(), b"/", &key.to_be_bytes()].concat(), move |found| {
                let refilled = found.map_or(per_minute as f64, |(tokens, seconds)| refill(per_minute, tokens, seconds));
                take(per_minute, refilled)
            })
            .await
    }

    /// Takes a token from `key`'s in-memory bucket at `now` if there is one.
    pub fn check(&self, key: u128, now: Instant) -> Decision {
        let cap = self.per_minute as f64;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let since = |b: &Bucket| now.saturating_duration_since(b.at).as_secs_f64();
        if state.buckets.len() >= state.sweep_at {
            state.buckets.retain(|_, b| refill(self.per_minute, b.tokens, since(b)) < cap);
            state.sweep_at = (state.buckets.len() * 2).max(MIN_SWEEP);
        }
        let fresh = Bucket { tokens: cap, at: now };
        let b = state.buckets.entry(key).or_insert(fresh);
        let (left, decision) = take(self.per_minute, refill(self.per_minute, b.tokens, since(b)));
        *b = Bucket { tokens: left, at: now };
        decision
    }

    /// Keys with a bucket (for tests of the bound).
    pub fn tracked(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).buckets.len()
    }

    /// The headers of an answer to a request that met `d`.
    pub fn headers(&self, d: &Decision) -> Vec<(&'static str, String)> {
        let mut h = vec![
            ("ratelimit-policy", format!("{};w=60", self.per_minute)),
            ("ratelimit", format!("limit={}, remaining={}, reset={}", self.per_minute, d.remaining, d.reset_secs)),
        ];
        if !d.allowed {
            h.push(("retry-after", d.retry_after_secs.to_string()));
        }
        h
    }
}

/// The tokens of a bucket of `per_minute` that held `tokens` `seconds` ago.
fn refill(per_minute: u32, tokens: f64, seconds: f64) -> f64 {
    (tokens + seconds * per_minute as f64 / 60.0).min(per_minute as f64)
}

/// Takes a token from a bucket of `per_minute` holding `tokens` (refilled) if there is one: the
/// tokens left and the decision.
fn take(per_minute: u32, tokens: f64) -> (f64, Decision) {
    let cap = per_minute as f64;
    let allowed = tokens >= 1.0;
    let left = if allowed { tokens - 1.0 } else { tokens };
    let wait = |tokens: f64| ((tokens / (cap / 60.0)).ceil().max(0.0)) as u64;
    let decision = Decision {
        allowed,
        remaining: left.floor() as u32,
        reset_secs: wait(cap - left),
        retry_after_secs: if allowed { 0 } else { wait(1.0 - left).max(1) },
    };
    (left, decision)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_is_allowed_then_refused_until_a_token_refills() {
        let rl = RateLimiter::new(3);
        let t = Instant::now();
        let got: Vec<bool> = (0..4).map(|_| rl.check(1, t).allowed).collect();
        assert_eq!(got, [true, true, true, false]);
        let refused = rl.check(1, t);
        assert_eq!((refused.remaining, refused.retry_after_secs, refused.reset_secs), (0, 20, 60));
        assert!(rl.check(2, t).allowed, "another key has its own bucket");
        assert!(rl.check(1, t + Duration::from_secs(20)).allowed, "one token per 20 s at 3/min");
        assert!(!rl.check(1, t + Duration::from_secs(21)).allowed);
    }

    #[test]
    fn idle_keys_are_dropped() {
        let rl = RateLimiter::new(60);
        let t = Instant::now();
        for key in 0..(MIN_SWEEP as u128) {
            rl.check(key, t);
        }
        assert_eq!(rl.tracked(), MIN_SWEEP);
        rl.check(u128::MAX, t + Duration::from_secs(2));
        assert_eq!(rl.tracked(), 1, "buckets full again after a refill are gone");
    }
}
