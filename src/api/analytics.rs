//! Conversation analytics of a replica (spec §4.2, docs/decisions.md "Usage and analytics"), from
//! the counters kept with every conversation start.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::chats::replica_and_viewer;
use super::usage::TAG;
use super::{Items, Operation, Serve};
use crate::app::App;
use crate::error::{Error, Result};
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::op;
use crate::service::chats::Viewer;
use crate::service::usage;
use crate::store::now_ms;

/// Days of the historical series, today included.
pub const HISTORY_DAYS: u32 = 30;

/// The replica of the path if the caller may read its analytics (its owner, or the key alone).
async fn owned(app: &App, req: &Req) -> Result<uuid::Uuid> {
    match replica_and_viewer(app, req).await? {
        (r, Viewer::All) => Ok(r.id),
        _ => Err(Error::not_found("replica")),
    }
}

/// A day of the historical series (an item of the `ConversationHistory` schema): `{date:
/// YYYY-MM-DD, cumulativeConversations}`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline, description = "")]
pub struct DayView<'a> {
    #[schemars(with = "chrono::NaiveDate")]
    date: &'a str,
    cumulative_conversations: u64,
}

impl<'a> From<&'a (String, u64)> for DayView<'a> {
    fn from((date, n): &'a (String, u64)) -> Self {
        DayView { date, cumulative_conversations: *n }
    }
}

/// A source with its conversations (an item of the `ConversationSources` schema).
#[derive(Serialize, JsonSchema)]
#[schemars(inline, description = "")]
pub struct SourceCountView {
    #[schemars(extend("enum" = crate::service::channel::sources()))]
    source: &'static str,
    conversations: u64,
}

impl From<&(&'static str, u64)> for SourceCountView {
    fn from(&(source, conversations): &(&'static str, u64)) -> Self {
        SourceCountView { source, conversations }
    }
}

/// # `GET /v1/replicas/{replicaUUID}/analytics/conversations/historical`
/// `{success, items: [{date: YYYY-MM-DD, cumulativeConversations}]}`: the last 30 UTC days,
/// oldest first, each with the conversations started up to its end.
pub async fn historical(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = owned(&app, &req).await?;
    let days = usage::cumulative(&app.store, replica, now_ms(), HISTORY_DAYS).await?;
    Ok(Reply::ok(&Items { items: days.iter().map(DayView::from).collect() }))
}

/// # `GET /v1/replicas/{replicaUUID}/analytics/conversations/sources`
/// `{success, items: [{source, conversations}]}`: every source, conversations started on it.
pub async fn sources(app: Arc<App>, req: Req) -> Result<Reply> {
    let replica = owned(&app, &req).await?;
    let counts = usage::by_source(&app.store, replica).await?;
    Ok(Reply::ok(&Items { items: counts.iter().map(SourceCountView::from).collect() }))
}

/// The document's rows of this file's operations (see `super::operations`).
pub fn operations() -> Vec<Operation> {
    vec![
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/analytics/conversations/historical",
            "getConversationHistory",
            TAG,
            "Conversations over the last 30 days",
        )
        .ok_as::<Items<DayView>>(200, "ConversationHistory")
        .describe(
            "The last 30 UTC days, oldest first, today included, each with the conversations started up to its end. \
            The replica's owner or the key alone; 404 for other users.",
        )
        .serve(Access::Either, handler!(historical)),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/analytics/conversations/sources",
            "getConversationSources",
            TAG,
            "Conversations per source",
        )
        .ok_as::<Items<SourceCountView>>(200, "ConversationSources")
        .describe("Every source value with the conversations started on it. The replica's owner or the key alone.")
        .serve(Access::Either, handler!(sources)),
    ]
}
