//! The OpenAPI rows and schemas of chats, conversations, messages and mentions (docs/decisions.md
//! "Chat"; `api::chats`, `api::conversations`).

use serde_json::{json, Value};

use super::operations::{op, page, param, Op};
use crate::service::chats::SortBy;

const CHATS: &str = "Chats and conversations";

fn list_query(default_sort: &str) -> Vec<Value> {
    vec![
        param("page", page(), "Page number, from 1."),
        param("pageSize", json!({ "type": "integer", "minimum": 0, "maximum": 100, "default": 24 }), "Items per page."),
        param("sortBy", json!({ "type": "string", "enum": SortBy::NAMES, "default": default_sort }), "Order key."),
        param("sortOrder", json!({ "type": "string", "enum": ["asc", "desc"], "default": "desc" }), "Direction."),
    ]
}

fn message_cursor(name: &str, what: &str) -> Value {
    param(name, json!({ "type": "string", "format": "uuid" }), what)
}

fn messages_query() -> Vec<Value> {
    vec![
        param("limit", json!({ "type": "integer", "minimum": 1, "maximum": 100, "default": 20 }), "Most items."),
        message_cursor("beforeUUID", "Only items older than this message (the newest `limit` of them)."),
        message_cursor("afterUUID", "Only items newer than this message (the oldest `limit` of them when alone)."),
    ]
}

fn mentions_query() -> Vec<Value> {
    vec![
        param("limit", json!({ "type": "integer", "minimum": 1, "maximum": 100, "default": 20 }), "Most mentions."),
        message_cursor("beforeUUID", "Only mentions older than this message (paging back with `hasMore`)."),
        param(
            "contextMessages",
            json!({ "type": "integer", "minimum": 0, "maximum": 10, "default": 2 }),
            "Neighbours shown on each side of a mentioning message.",
        ),
        param(
            "minimumMessagesInPlaceholder",
            json!({ "type": "integer", "minimum": 1, "maximum": 100, "default": 3 }),
            "Runs of left-out messages shorter than this are shown as messages instead of a placeholder.",
        ),
    ]
}

fn deprecated(o: Op) -> Op {
    Op { deprecated: true, ..o }
}

/// The recomputation of a conversation's insights (ours; the decision is in its description).
fn recompute() -> Op {
    op(
        "POST",
        "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}/insights",
        "recomputeConversationInsights",
        CHATS,
        "Compute a conversation's summary, questions and topics again",
    )
    .ok(202, "Done")
    .describe(
        "Ours (the interface has no such operation). `summary`, `commonQuestions` and `commonTopics` are computed \
        once a conversation closes (30 minutes without messages): by the replica's language model when its \
        `llm.model` is served by an upstream (asked for a JSON object in the conversation's language), locally \
        otherwise (questions the user asked, distinctive terms by TF-IDF, a short extractive summary). An \
        owner's `PATCH` is kept until this operation is called: it clears the three fields (the `PATCH` \
        included) and queues the conversation; 202 once queued (durably). A closed conversation is computed \
        again within seconds, an open one once it closes; read the conversation to see the result (`summary` \
        is absent until then). When the upstream fails, the conversation stays queued and is retried with a \
        backoff (1 minute, doubled up to 1 hour; computed locally after 24 failures in a row, about 19 hours). Only the \
        replica's owner or the organization key alone; others get 404, as for a conversation of another chat. \
        A POST on a sub-resource was chosen over a PATCH flag because it starts work rather than sets fields.",
    )
}

/// The operation rows (see `super::all_operations`).
pub fn operations() -> Vec<Op> {
    let chat = "/v1/replicas/{replicaUUID}/chats/{chatUUID}";
    let conv = "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}";
    let old = "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}";
    vec![
        op("GET", "/v1/replicas/{replicaUUID}/chats", "listChats", CHATS, "List chats")
            .query(list_query("replicaReplies"))
            .ok(200, "ChatList")
            .describe(
                "A chat is one (replica, user, source) thread; messengerA / messengerB group chats are one chat per \
                group. The replica's owner (or the organization key alone) sees every chat, another user the chats \
                they wrote in. Counts are kept as messages are stored.",
            ),
        op("GET", chat, "getChat", CHATS, "Read a chat").ok(200, "ChatRead"),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/chats/{chatUUID}/messages",
            "listChatMessages",
            CHATS,
            "Messages of a chat",
        )
        .query(messages_query())
        .ok(200, "MessageList")
        .describe("Oldest first. Message `uuid`s are cursors for `beforeUUID` / `afterUUID`."),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations",
            "listChatConversations",
            CHATS,
            "Conversations of a chat",
        )
        .query(list_query("lastReplicaReplyAt"))
        .ok(200, "ConversationList")
        .describe("A new conversation starts after 30 minutes without messages in the chat."),
        op("GET", conv, "getChatConversation", CHATS, "Read a conversation").ok(200, "ConversationRead"),
        op(
            "GET",
            "/v1/replicas/{replicaUUID}/chats/{chatUUID}/conversations/{conversationUUID}/messages",
            "listChatConversationMessages",
            CHATS,
            "Messages of a conversation",
        )
        .query(messages_query())
        .ok(200, "MessageList"),
        recompute(),
        deprecated(op(
            "GET",
            "/v1/replicas/{replicaUUID}/conversations",
            "listConversations",
            CHATS,
            "List conversations (every chat)",
        ))
        .query(list_query("lastReplicaReplyAt"))
        .ok(200, "ConversationList")
        .describe("Deprecated: use `…/chats/{chatUUID}/conversations`. The conversations of every chat."),
        deprecated(op("GET", old, "getConversation", CHATS, "Read a conversation"))
            .ok(200, "ConversationRead")
            .describe("Deprecated: use `…/chats/{chatUUID}/conversations/{conversationUUID}`."),
        op("PATCH", old, "updateConversation", CHATS, "Correct a conversation's summary, questions, topics")
            .body("ConversationPatch")
            .describe(
                "An owner's correction: the fields given replace the stored ones (unknown fields are ignored) and are \
                kept until a recomputation is asked for (`POST …/chats/{chatUUID}/conversations/{conversationUUID}/\
                insights`). Only the replica's owner or the organization key alone; others get 404.",
            ),
        deprecated(op(
            "GET",
            "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}/mentions",
            "listConversationMentions",
            CHATS,
            "Mentions of the replica",
        ))
        .query(mentions_query())
        .ok(200, "MentionList")
        .describe(
            "Deprecated. Messages that mention the replica (`@slug`, or `@name` without spaces, in any case), \
                newest `limit` mentions, oldest first: `{type: mention, messages}` (the mentioning message with \
                `contextMessages` neighbours each side) and `{type: placeholder, count}` for runs left out. \
                `hasMore`: older mentions exist (page back with `beforeUUID` = the first message's uuid).",
        ),
        deprecated(op(
            "GET",
            "/v1/replicas/{replicaUUID}/conversations/{conversationUUID}/messages",
            "listConversationMessages",
            CHATS,
            "Messages of a conversation",
        ))
        .query(messages_query())
        .ok(200, "MessageList")
        .describe("Deprecated: use `…/chats/{chatUUID}/conversations/{conversationUUID}/messages`."),
    ]
}
