//! Usage and analytics (docs/decisions.md "Usage and analytics"): counters kept with the messages,
//! read across UTC days and a restart, with the server's clock moved instead of waiting.

use chrono::{Datelike, TimeZone, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::chats::{advance_clock, advance_clock_ms, ask_as};
use crate::common::{assert_error, user, Org, Server};

/// Moves the clock to 01:00 UTC on the first day of next month; returns the offset applied.
fn to_next_month(server: &Server) -> i64 {
    let now = advance_clock_ms(server, 0);
    let t = Utc.timestamp_millis_opt(now).unwrap();
    let (y, m) = if t.month() == 12 { (t.year() + 1, 1) } else { (t.year(), t.month() + 1) };
    let target = Utc.with_ymd_and_hms(y, m, 1, 1, 0, 0).unwrap().timestamp_millis();
    advance_clock_ms(server, target - now);
    target - now
}

async fn analytics(org: &Org, replica: &str, what: &str) -> Vec<Value> {
    let (s, v) = org.get(&format!("/v1/replicas/{replica}/analytics/conversations/{what}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["items"].as_array().expect("items").clone()
}

#[tokio::test]
async fn conversations_are_counted_per_month_day_and_source_and_survive_a_restart() {
    let server = Server::start_with(&["--test-clock"]);
    let org = server.new_org("Usage").await;
    let replica = org.create_replica("counted").await;
    let other = org.create_replica("idle").await;
    org.add_text(&replica, "Notes", "Some notes for the knowledge base.").await;
    let mut offset = to_next_month(&server);
    ask_as(&org, &replica, "ann", "web", "first").await;
    ask_as(&org, &replica, "ann", "web", "same conversation").await;
    ask_as(&org, &replica, "bob", "embed", "second").await;
    advance_clock(&server, 2 * 24 * 60);
    offset += 2 * 24 * 60 * 60_000;
    ask_as(&org, &replica, "ann", "web", "third, two days later").await;

    let server = {
        let (_, dir) = server.stop();
        Server::start_in(dir, &["--test-clock"])
    };
    advance_clock_ms(&server, offset);
    let org = org.at(&server);

    let owner = user("email", &org.owner_email);
    let (s, u) = org.get_as("/v1/users/me/usage", &owner).await;
    assert_eq!(s, StatusCode::OK, "{u}");
    assert_eq!(u["conversations"]["currentMonthTotal"], json!(3), "{u}");
    assert_eq!(u["conversations"]["currentMonthByReplica"], json!({ &replica: 3, &other: 0 }));
    assert_eq!(u["knowledgeBaseEntries"], json!({"total": 1, "byReplica": { &replica: 1, &other: 0 }}));
    assert_eq!(u["tokens"]["byReplica"], json!({}), "the owner asked nothing");

    let (_, ann) = org.get_as("/v1/users/me/usage", &user("embed", "ann")).await;
    assert_eq!(ann["conversations"]["currentMonthTotal"], json!(0), "ann owns no replica: {ann}");
    let spent = &ann["tokens"]["byReplica"][&replica];
    assert!(spent["promptTokens"].as_u64().unwrap() > 0 && spent["completionTokens"].as_u64().unwrap() > 0, "{ann}");
    assert_eq!(ann["tokens"]["promptTokens"], spent["promptTokens"]);

    let days = analytics(&org, &replica, "historical").await;
    assert_eq!(days.len(), 30);
    let cumulative: Vec<u64> = days.iter().map(|d| d["cumulativeConversations"].as_u64().unwrap()).collect();
    assert_eq!(&cumulative[26..], &[0, 2, 2, 3], "two on the 1st, one on the 3rd: {days:?}");
    assert!(days[29]["date"].as_str().unwrap().ends_with("-03"), "{days:?}");

    let sources = analytics(&org, &replica, "sources").await;
    let count = |s: &str| sources.iter().find(|i| i["source"] == json!(s)).unwrap()["conversations"].clone();
    assert_eq!((count("web"), count("embed"), count("messengerA")), (json!(2), json!(1), json!(0)));
    assert_eq!(sources.len(), 5, "every source: {sources:?}");

    let stranger = org
        .call(
            Method::GET,
            &format!("/v1/replicas/{replica}/analytics/conversations/sources"),
            None,
            &user("embed", "ann"),
        )
        .await;
    assert_error(&stranger, StatusCode::NOT_FOUND, Some("NOT_FOUND"));
}
