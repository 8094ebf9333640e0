//! Per-key rate limits (`--rate-limit-per-key N`): token buckets per organization key.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{assert_error, Server};

#[tokio::test]
async fn a_key_past_its_burst_gets_429_with_retry_after_and_other_keys_do_not() {
    let server = Server::start_with(&["--rate-limit-per-key", "3"]);
    let org = server.new_org("Busy").await;
    let calm = server.new_org("Calm").await;
    for left in [2, 1, 0] {
        let r = org.call(Method::GET, "/v1/replicas", None, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(r.header("ratelimit-policy"), Some("3;w=60"));
        let state = r.header("ratelimit").expect("RateLimit header");
        assert!(state.starts_with(&format!("limit=3, remaining={left}, reset=")), "{state}");
        assert!(r.header("retry-after").is_none());
    }
    let refused = org.call(Method::POST, "/v1/replicas", Some(&json!({})), &[]).await;
    assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, Some("RATE_LIMITED"));
    let wait: u64 = refused.header("retry-after").expect("Retry-After").parse().expect("seconds");
    assert!((1..=20).contains(&wait), "one token per 20 s at 3/min: {wait}");
    assert_eq!(refused.header("ratelimit-policy"), Some("3;w=60"));

    let other = calm.call(Method::GET, "/v1/replicas", None, &[]).await;
    assert_eq!(other.status, StatusCode::OK, "another key has its own bucket");
    let public = server.req(Method::GET, "/v1/openapi.json").send().await.expect("openapi");
    assert!(public.headers().get("ratelimit").is_none(), "public operations are not limited");
}

#[tokio::test]
async fn without_the_flag_nothing_is_limited() {
    let server = Server::start();
    let org = server.new_org("Free").await;
    for _ in 0..5 {
        let r = org.call(Method::GET, "/v1/replicas", None, &[]).await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.header("ratelimit").is_none());
    }
}
