//! `GET /metrics` as Prometheus scrapes it: the text format parsed with a Prometheus parser,
//! names and labels checked after a known set of requests.

use openmetrics_parser::{MetricsExposition, PrometheusType, PrometheusValue};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::fake_llm::{FakeLlm, Script};
use crate::common::{send, Server, ZORBLAX_QUESTION};

const TOKEN: &str = "metrics-token-0123456789";

type Scrape = MetricsExposition<PrometheusType, PrometheusValue>;

/// Scrapes `url` with the token and parses the text.
async fn scrape(server: &Server, url: &str, token: Option<&str>) -> Scrape {
    let mut rb = server.client.get(url);
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    let res = rb.send().await.expect("scrape");
    assert_eq!(res.status(), StatusCode::OK);
    let ct = res.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    let text = res.text().await.unwrap();
    openmetrics_parser::prometheus::parse_prometheus(&text)
        .unwrap_or_else(|e| panic!("not the Prometheus text format ({e:?}):\n{text}"))
}

/// The value of the sample of `family` with every label of `labels` (a histogram: its count).
fn value(scrape: &Scrape, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let sample = scrape.families.get(family)?.iter_samples().find(|s| {
        let set = s.get_labelset().expect("labels");
        labels.iter().all(|(k, v)| set.get_label_value(k) == Some(*v))
    })?;
    Some(match &sample.value {
        PrometheusValue::Counter(c) => c.value.as_f64(),
        PrometheusValue::Gauge(v) | PrometheusValue::Unknown(v) => v.as_f64(),
        PrometheusValue::Histogram(h) => h.count? as f64,
        PrometheusValue::Summary(_) => panic!("{family} is a summary, not a histogram"),
    })
}

/// Every label value of every sample.
fn label_values(scrape: &Scrape) -> Vec<String> {
    let samples = scrape.families.values().flat_map(|f| f.iter_samples());
    samples.flat_map(|s| s.get_labelset().expect("labels").iter_values().cloned().collect::<Vec<_>>()).collect()
}

#[tokio::test]
async fn metrics_count_requests_by_route_template_and_report_the_store_and_the_process() {
    let server = Server::start_with(&["--metrics-token", TOKEN]);
    let url = server.url("/metrics");
    assert_eq!(server.client.get(&url).send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(server.client.get(&url).bearer_auth("wrong").send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let org = server.new_org("Metrics").await;
    let replica = org.create_replica("measured").await;
    for _ in 0..2 {
        assert_eq!(org.get(&format!("/v1/replicas/{replica}")).await.0, StatusCode::OK);
    }
    let missing = "/v1/replicas/00000000-0000-7000-8000-000000000000";
    assert_eq!(org.get(missing).await.0, StatusCode::NOT_FOUND);
    org.add_ready_text(&replica, "Notes", "The measured replica keeps notes.").await;
    // A file goes through the ingestion queue (a text entry does not).
    let (st, v) = org.post(&format!("/v1/replicas/{replica}/knowledge-base"), json!({"filename": "notes.txt"})).await;
    assert_eq!(st, StatusCode::MULTI_STATUS, "{v}");
    let put = org.client.put(v["results"][0]["signedURL"].as_str().unwrap()).body("Filed notes.").send().await;
    assert_eq!(put.expect("PUT").status(), StatusCode::OK);
    org.wait_ready(&replica, v["results"][0]["knowledgeBaseID"].as_u64().unwrap()).await;

    let s = scrape(&server, &url, Some(TOKEN)).await;
    let read = [("method", "GET"), ("route", "/v1/replicas/{replicaUUID}")];
    assert_eq!(value(&s, "replicad_http_requests_total", &[read[0], read[1], ("status", "2xx")]), Some(2.0));
    assert_eq!(value(&s, "replicad_http_requests_total", &[read[0], read[1], ("status", "4xx")]), Some(1.0));
    assert_eq!(value(&s, "replicad_http_request_duration_seconds", &read), Some(3.0));
    let create = [("method", "POST"), ("route", "/v1/replicas"), ("status", "2xx")];
    assert_eq!(value(&s, "replicad_http_requests_total", &create), Some(1.0));
    assert!(label_values(&s).iter().all(|v| !v.contains(&replica)), "a label holds a raw path");
    // The scrape itself is the one request in flight.
    assert_eq!(value(&s, "replicad_http_requests_in_flight", &[]), Some(1.0));
    assert!(value(&s, "replicad_store_write_batch_size", &[]).unwrap() >= 3.0, "one per commit");
    assert!(value(&s, "replicad_store_commit_duration_seconds", &[]).unwrap() >= 3.0);
    assert_eq!(value(&s, "replicad_ingest_jobs_total", &[("outcome", "processed")]), Some(1.0));
    assert_eq!(value(&s, "replicad_ingest_queue_depth", &[]), Some(0.0));
    assert_eq!(value(&s, "replicad_index_outbox_rows", &[]), Some(0.0));
    assert_eq!(value(&s, "replicad_index_lag_seconds", &[]), Some(0.0));
    assert!(value(&s, "process_resident_memory_bytes", &[]).unwrap() > 1e6);
    assert!(value(&s, "process_open_fds", &[]).unwrap() >= 3.0);
}

#[tokio::test]
async fn metrics_report_upstream_latency_and_errors_per_upstream() {
    let script = vec![Script::Reply(vec!["451 kelvin."]), Script::Fail { status: 500, retry_after: None }];
    let fake = FakeLlm::start(script, Script::Reply(vec!["unused"])).await;
    let server = crate::llm::serve(&fake, &["--metrics-token", TOKEN, "--llm-max-retries", "0"]);
    let org = server.new_org("Upstream metrics").await;
    let (replica, _) = crate::llm::reactor(&org).await;
    assert_eq!(org.chat(&replica, ZORBLAX_QUESTION).await.0, StatusCode::OK);
    assert_eq!(org.chat(&replica, ZORBLAX_QUESTION).await.0, StatusCode::BAD_GATEWAY);
    let s = scrape(&server, &server.url("/metrics"), Some(TOKEN)).await;
    assert_eq!(value(&s, "replicad_upstream_request_duration_seconds", &[("upstream", "fake")]), Some(1.0));
    assert_eq!(value(&s, "replicad_upstream_errors_total", &[("upstream", "fake")]), Some(1.0));
    let completions = [("route", "/v1/replicas/{replicaUUID}/chat/completions"), ("status", "5xx")];
    assert_eq!(value(&s, "replicad_http_requests_total", &completions), Some(1.0));
}

#[tokio::test]
async fn metrics_are_off_by_default_and_can_have_their_own_listener() {
    let off = Server::start();
    let r = send(off.req(Method::GET, "/metrics")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    assert_eq!(r.body["error_code"], json!("ROUTE_NOT_FOUND"));

    let server = Server::start_with(&["--metrics-listen", "127.0.0.1:0", "--log-format", "json"]);
    let log = server.dir().log();
    let addr = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|l| {
            l["message"].as_str().filter(|m| m.starts_with("serving metrics")).and(l["addr"].as_str().map(String::from))
        })
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{log}"));
    let s = scrape(&server, &format!("http://{addr}/metrics"), None).await;
    assert!(value(&s, "process_open_fds", &[]).is_some());
    let main = send(server.req(Method::GET, "/metrics")).await;
    assert_eq!(main.status, StatusCode::NOT_FOUND, "without --metrics-token the main listener has no /metrics");
}
