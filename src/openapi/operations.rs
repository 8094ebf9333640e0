//! What the route table does not say about each operation: its name, summary, query
//! parameters, body and success schemas, and the statuses beyond those every operation of its
//! kind answers (see [`super::statuses`]). One row per route of `api::routes()`; a test checks
//! the two lists name the same `(method, path)` pairs.
//!
//! A raw-bytes body or a streamed answer is a row like
//! `Op { body_media: "application/octet-stream", ok_also: &["text/event-stream"], ..op(…) }`.

use serde_json::{json, Value};

use crate::service::channel::Bot;

/// One operation's documentation.
pub struct Op {
    pub method: &'static str,
    pub path: &'static str,
    pub id: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    pub description: &'static str,
    /// Query parameters (OpenAPI parameter objects).
    pub query: Vec<Value>,
    /// Schema name of the request body (JSON unless `body_media` says otherwise).
    pub body: Option<&'static str>,
    /// Media type of the request body.
    pub body_media: &'static str,
    /// The body may be left out (`requestBody.required` false).
    pub body_optional: bool,
    /// Success status and schema name of its JSON body.
    pub ok: (u16, &'static str),
    /// Other media types the success answer may come in (e.g. `text/event-stream`), as text.
    pub ok_also: &'static [&'static str],
    /// The 404 body carries no `error_code`/`fingerprint` (redeem, spec §7 rule 2).
    pub plain_404: bool,
    /// The path parameter of the resource this operation creates and the JSON pointer of its
    /// id in the success body (for the document's `links`).
    pub creates: Option<(&'static str, &'static str)>,
    /// Statuses beyond the derived ones (409, 429, …).
    pub extra: &'static [u16],
    /// Statuses that answer a schema of their own rather than an error body (the 503 of
    /// readiness).
    pub also: &'static [(u16, &'static str)],
    /// Marked `deprecated` in the document (spec §9: the legacy conversation operations).
    pub deprecated: bool,
}

/// Answers that may also stream (`Accept: text/event-stream`).
const SSE: &[&str] = &["text/event-stream"];

pub(super) fn op(
    method: &'static str,
    path: &'static str,
    id: &'static str,
    tag: &'static str,
    summary: &'static str,
) -> Op {
    Op {
        method,
        path,
        id,
        tag,
        summary,
        description: "",
        query: Vec::new(),
        body: None,
        body_media: "application/json",
        body_optional: false,
        ok: (200, "Done"),
        ok_also: &[],
        plain_404: false,
        creates: None,
        extra: &[],
        also: &[],
        deprecated: false,
    }
}

impl Op {
    pub(super) fn describe(mut self, d: &'static str) -> Op {
        self.description = d;
        self
    }
    pub(super) fn body(mut self, schema: &'static str) -> Op {
        self.body = Some(schema);
        self
    }
    fn optional_body(mut self, schema: &'static str) -> Op {
        self.body_optional = true;
        self.body(schema)
    }
    fn creates(mut self, param: &'static str, pointer: &'static str) -> Op {
        self.creates = Some((param, pointer));
        self
    }
    fn plain_404(mut self) -> Op {
        self.plain_404 = true;
        self
    }
    pub(super) fn ok(mut self, status: u16, schema: &'static str) -> Op {
        self.ok = (status, schema);
        self
    }
    pub(super) fn extra(mut self, statuses: &'static [u16]) -> Op {
        self.extra = statuses;
        self
    }
    pub(super) fn query(mut self, params: Vec<Value>) -> Op {
        self.query = params;
        self
    }
}

pub(super) fn param(name: &str, schema: Value, description: &str) -> Value {
    json!({ "name": name, "in": "query", "required": false, "schema": schema, "description": description })
}

fn old_param(name: &str, schema: Value, current: &str) -> Value {
    let mut p = param(name, schema, &format!("Older name of `{current}` (spec §9); accepted as an alias."));
    p["deprecated"] = json!(true);
    p
}

pub(super) fn page() -> Value {
    json!({ "type": "integer", "minimum": 1, "maximum": 1_000_000, "default": 1 })
}

fn page_size() -> Value {
    json!({ "type": "integer", "minimum": 1, "maximum": 100, "default": 24 })
}

fn history_query() -> Vec<Value> {
    vec![
        param(
            "limit",
            json!({ "type": "integer", "minimum": 1, "maximum": 100, "default": 20 }),
            "Newest items, returned oldest first.",
        ),
        param(
            "beforeID",
            json!({ "type": "integer", "minimum": 0 }),
            "Only items with a smaller `id` (paging back in time).",
        ),
    ]
}

fn replica_list_query() -> Vec<Value> {
    let text = json!({ "type": "string" });
    vec![
        param("page", page(), "Page number (current name)."),
        param("page_size", page_size(), "Items per page (current name)."),
        old_param("page_index", page(), "page"),
        old_param("pageIndex", page(), "page"),
        old_param("pageSize", page_size(), "page_size"),
        param("ownerID", text.clone(), "Only replicas of this owner (user id)."),
        param("slug", text.clone(), "Only the replica with this slug."),
        json!({ "name": "tags", "in": "query", "required": false, "style": "form", "explode": true,
            "schema": { "type": "array", "items": { "type": "string" } },
            "description": "Only replicas carrying every one of these tags (repeat the parameter or separate by \
                commas)." }),
        param(
            "integration",
            json!({ "type": "string", "enum": Bot::ALL.map(Bot::name) }),
            "Only replicas with this channel connected.",
        ),
        param("search", text, "Text searched in name and descriptions."),
        param("sort", json!({ "type": "string", "enum": ["name", "popularity"] }), "Order of the list."),
    ]
}

fn kb_list_query() -> Vec<Value> {
    use crate::service::knowledge::{SORTS, STATUSES, TYPES};
    let repeated = |name: &str, values: &[&str], what: &str| {
        json!({ "name": name, "in": "query", "required": false, "style": "form", "explode": true,
            "schema": { "type": "array", "items": { "type": "string", "enum": values } },
            "description": format!("Only entries {what} (repeat the parameter for several).") })
    };
    let sort_by: Vec<&str> = SORTS.iter().map(|(n, _)| *n).collect();
    vec![
        param("page", page(), "Page number."),
        param("pageSize", json!({ "type": "integer", "minimum": 0, "maximum": 100, "default": 24 }), "Items per page."),
        repeated("status", STATUSES, "in one of these statuses"),
        repeated("type", TYPES, "of one of these types"),
        param("search", json!({ "type": "string", "minLength": 3 }), "Text searched in titles, URLs and file names."),
        param(
            "hasError",
            json!({ "type": "string", "enum": ["true", "false"] }),
            "Only failed (or only other) entries.",
        ),
        param("sortBy", json!({ "type": "string", "enum": sort_by }), "Order by this field (with `sortOrder`)."),
        param(
            "sortOrder",
            json!({ "type": "string", "enum": ["asc", "desc"], "default": "desc" }),
            "Order of `sortBy` (default `desc`).",
        ),
        param(
            "sort",
            json!({ "type": "string", "enum": sort_values() }),
            "Ours, instead of `sortBy`/`sortOrder`: `createdAt`, `updatedAt`, `title`, `status`; a `-` prefix sorts \
            descending. Without either, `createdAt`: ascending for one replica's list, descending organization-wide.",
        ),
    ]
}

fn sort_values() -> Vec<String> {
    crate::service::knowledge::SORTS.iter().flat_map(|(n, _)| [n.to_string(), format!("-{n}")]).collect()
}

/// A chat-history list operation (spec §4.1): the same shape for every channel.
fn history_list(path: &'static str, id: &'static str, summary: &'static str) -> Op {
    op("GET", path, id, "Chat history", summary).query(history_query()).ok(200, "ChatHistory").describe(
        "The caller's history items on the channel of the path, newest `limit` (oldest first). A private replica the \
        caller may not see answers 404.",
    )
}

/// A chat-history path below `/v1/replicas/{replicaUUID}/chat/history`.
macro_rules! concat_path {
    ($suffix:literal) => {
        concat!("/v1/replicas/{replicaUUID}/chat/history", $suffix)
    };
}

/// The rows this file lists, in the order of the document (the other files' rows follow them:
/// [`super::all_operations`]).
pub fn listed() -> Vec<Op> {
    let groups =
        [meta(), replicas(), knowledge_base(), chat(), history(), users(), integration_ops(), messenger_b_ops()];
    groups.into_iter().flatten().collect()
}

/// Meta and organizations: the document itself, invitations, the model catalog.
fn meta() -> Vec<Op> {
    vec![
        op("GET", "/v1/openapi.json", "getOpenApi", "Meta", "This OpenAPI document")
            .ok(200, "OpenApiDocument")
            .describe("Public. The document every other operation is checked against."),
        op("POST", "/v1/api-keys/invites/{code}/redeem", "redeemInvite", "Organizations", "Redeem an invitation code")
            .body("RedeemRequest")
            .ok(200, "Redeemed")
            .extra(&[409])
            .plain_404()
            .describe(
                "Creates an organization, its owner user (the contact) and an API key shown only in this answer. Codes \
                are minted by the operator (`replicad invites create`), single-use and may expire: unknown code 404 \
                (body without `error_code`/`fingerprint`, spec §7 rule 2), used code 409 `INVITE_ALREADY_REDEEMED`, \
                expired code 400 `INVITE_EXPIRED`.",
            ),
        op("GET", "/v1/replicas/models", "listModels", "Models", "The model catalog")
            .ok(200, "ModelCatalogResponse")
            .describe(
                "Exactly 19 models keyed by id (spec §2.4). A model with no configured upstream is served by the \
                embedded, offline generator.",
            ),
    ]
}

/// Replicas (spec §2.3).
fn replicas() -> Vec<Op> {
    vec![
        op("GET", "/v1/replicas", "listReplicas", "Replicas", "List replicas")
            .query(replica_list_query())
            .ok(200, "ReplicaList")
            .describe("`{success, items, total}`. Private replicas appear only to their owner and whitelisted users."),
        op("POST", "/v1/replicas", "createReplica", "Replicas", "Create a replica")
            .body("ReplicaWrite")
            .ok(201, "ReplicaCreated")
            .creates("replicaUUID", "/uuid")
            .extra(&[409, 429])
            .describe(
                "201 `{success, uuid}`. 409 `SLUG_TAKEN` when the slug is used in the organization; 429 \
                `REPLICA_QUOTA_EXCEEDED` beyond the organization's replica quota. Unknown fields are ignored.",
            ),
        op("GET", "/v1/replicas/{replicaUUID}", "getReplica", "Replicas", "Read a replica")
            .ok(200, "ReplicaRead")
            .describe("The replica's fields, current and deprecated names, plus `success`."),
        op("PUT", "/v1/replicas/{replicaUUID}", "updateReplica", "Replicas", "Update a replica")
            .body("ReplicaWrite")
            .extra(&[409])
            .describe(
                "Replaces the fields (the create body); 200 `{success}`. 409 `SLUG_TAKEN` when the slug is used in \
                the organization; 409 `EMBEDDING_MODEL_FIXED` when `llm.embeddingModel` names another model than \
                the replica's (it cannot be changed once set; absent, it is kept).",
            ),
        op("DELETE", "/v1/replicas/{replicaUUID}", "deleteReplica", "Replicas", "Delete a replica")
            .describe("Deletes the replica, its knowledge base and its chat history; 200 `{success}`."),
    ]
}

/// Knowledge base (spec §2.5), uploads included.
fn knowledge_base() -> Vec<Op> {
    let entry = "/v1/replicas/{replicaUUID}/knowledge-base/{knowledgeBaseID}";
    let org_entry = "/v1/knowledge-base/{knowledgeBaseID}";
    let kb = "Knowledge base";
    vec![
        op("GET", "/v1/replicas/{replicaUUID}/knowledge-base", "listKnowledgeBase", kb, "List entries")
            .query(kb_list_query())
            .ok(200, "KnowledgeBaseList"),
        op("POST", "/v1/replicas/{replicaUUID}/knowledge-base", "createKnowledgeBaseEntry", kb, "Create an entry")
            .body("KnowledgeBaseCreate")
            .ok(207, "KnowledgeBaseCreated")
            .creates("knowledgeBaseID", "/results/0/knowledgeBaseID")
            .extra(&[409, 429])
            .describe(
                "Exactly one of `text`, `url`, `filename`; 207 `{success, results}`. Statuses move \
                `NEW → FILE_UPLOADED → RAW_TEXT → PROCESSED_TEXT → READY` (see `status`; or `UNPROCESSABLE` with \
                `error.message`) as a background job queue kept in the store works: a `url` is fetched (timeouts, \
                size cap, at most 5 redirects, no private or loopback addresses unless the operator allows them), \
                a `filename` waits for its bytes on `signedURL`. 409 `URL_ALREADY_EXISTS`; 429 \
                `KNOWLEDGE_BASE_CUSTOM_QUOTA_EXCEEDED` at the operator's per-organization quota, 400 with the same \
                code at the body's `usageLimits.knowledgeBaseEntries`. `language` absent: detected from the text.",
            ),
        op("GET", entry, "getKnowledgeBaseEntry", kb, "Read an entry").ok(200, "KnowledgeBaseEntryFull"),
        op("PATCH", entry, "updateKnowledgeBaseEntry", kb, "Update an entry")
            .body("KnowledgeBasePatch")
            .describe("A new `rawText` is re-processed (the entry goes back to `PROCESSED_TEXT`, then `READY`)."),
        op("DELETE", entry, "deleteKnowledgeBaseEntry", kb, "Delete an entry")
            .describe("Removes the entry and its index documents."),
        op("GET", "/v1/knowledge-base", "listKnowledgeBaseOfOrganization", kb, "List entries of every replica")
            .query(kb_list_query())
            .ok(200, "KnowledgeBaseList")
            .describe(
                "The entries of every replica the caller may see (private replicas only for their owner and \
                whitelisted users), each with its `replicaUUID`; filters, paging and order as the per-replica list, \
                default order `createdAt` descending.",
            ),
        op("GET", org_entry, "getKnowledgeBaseEntryOfOrganization", kb, "Read an entry by id")
            .ok(200, "KnowledgeBaseEntryFull")
            .describe("As the per-replica read; 404 when the entry's replica is not visible to the caller."),
        op("PATCH", org_entry, "updateKnowledgeBaseEntryOfOrganization", kb, "Update an entry by id")
            .body("KnowledgeBasePatch")
            .describe("As the per-replica PATCH (one implementation)."),
        op("DELETE", org_entry, "deleteKnowledgeBaseEntryOfOrganization", kb, "Delete an entry by id")
            .describe("As the per-replica DELETE (one implementation): the entry and its index documents go."),
        op("GET", "/v1/knowledge-base/file-types", "listFileTypes", kb, "Supported file types")
            .ok(200, "FileTypes")
            .describe("Exactly what this server can extract: PDF, DOCX, EPUB, plain text, Markdown, CSV, JSON, HTML."),
        Op {
            body_media: "application/octet-stream",
            ..op("PUT", "/v1/knowledge-base/uploads/{token}", "uploadKnowledgeBaseFile", kb, "Upload a file")
        }
        .body("UploadBody")
        .ok(200, "UploadDone")
        .extra(&[409])
        .describe(
            "The `signedURL` of a `filename` entry: the token in the path is the credential (no API key). Any \
                content type; `Content-Encoding: gzip` allowed. Single use (409 `UPLOAD_ALREADY_USED`), expires after \
                one hour (400 `UPLOAD_EXPIRED`), at most `--max-upload-bytes` (413, also while a gzip body inflates). \
                The token is checked before the body is read: an unknown, used or expired URL answers without \
                reading it. The entry moves to `FILE_UPLOADED` and is extracted in the background.",
        ),
    ]
}

/// Completions (spec §2.1, §4.1): plain, messengerA and the OpenAI-shaped one.
fn chat() -> Vec<Op> {
    vec![
        Op {
            ok_also: SSE,
            ..op(
                "POST",
                "/v1/replicas/{replicaUUID}/chat/completions",
                "createChatCompletion",
                "Chat",
                "Ask the replica",
            )
        }
        .body("CompletionRequest")
        .ok(200, "Completion")
        .extra(&[429, 502])
        .describe(
            "Retrieves the most relevant knowledge and answers. Stores the question and the answer (with its \
                `sources`) in the chat history unless `skip_chat_history`. The `X-Replica-Backend` response header \
                names the generator that answered (`embedded` or the upstream's name). 502 `UPSTREAM_ERROR` when the \
                model server fails after retries. With `Accept: text/event-stream` the reply streams as server-sent \
                events: `event: delta` / `data: {\"delta\": \"…\"}` per piece of text; `event: error` (a §7 error \
                body) only if the model fails after it began; `event: message` / `data: {success, content, sources, \
                id, interrupted}`; then `data: [DONE]`. A client that disconnects cancels the model request; the \
                history keeps what was said, flagged `interrupted`.",
        ),
        Op {
            ok_also: SSE,
            ..op(
                "POST",
                "/v1/replicas/{replicaUUID}/chat/completions/messengerA",
                "createChatCompletionMessengerA",
                "Chat",
                "Ask the replica on messengerA",
            )
        }
        .body("CompletionMessengerARequest")
        .ok(200, "Completion")
        .extra(&[429, 502])
        .describe(
            "As `…/chat/completions`, on the messengerA channel: `messengerA_data` is required (a repeated \
                message id stores nothing new) and `imageURL` reaches vision-capable models.",
        ),
        op(
            "POST",
            "/v1/replicas/{replicaUUID}/chat/completions/test",
            "testChatCompletion",
            "Chat",
            "Check retrieval for a question",
        )
        .body("CompletionRequest")
        .ok(200, "CompletionTest")
        .extra(&[429, 502])
        .describe(
            "Organization key only. A retrieval check with the body of `…/chat/completions`: answers the reply, the \
            search `query` it ran and every retrieved source, best first, with its `bm25Rank`, its `vectorRank` \
            and its fused `score` (fields of our own; a chunk whose own heading the query names whole may take \
            BM25's last place). With an embedding model configured the question is searched both ways (BM25 and \
            the replica's `llm.embeddingModel`) and the rankings are fused (a convex combination); without one, \
            by BM25 alone (`vectorRank` and `cosine` absent). The embedded generator adds `reader`: its decision, \
            the confidence it decided on and its candidate passages with their signals. \
            The query is searched with the words its form implies as well (English: a written-out ordinal also \
            looks for `Nth` and `NUMBERth`; \"How does X …?\" for a heading saying \"works\"). Nothing is stored \
            in the chat history; the token usage is counted.",
        ),
        Op {
            ok_also: SSE,
            ..op(
                "POST",
                "/v1/experimental/replicas/{replicaUUID}/chat/completions",
                "createExperimentalChatCompletion",
                "Chat",
                "OpenAI-shaped completion",
            )
        }
        .body("ExperimentalCompletionRequest")
        .ok(200, "ExperimentalCompletion")
        .extra(&[429, 502])
        .describe(
            "Requires a user (`X-USER-ID` + `X-USER-ID-TYPE`). The last message (role `user`) is the question; \
                earlier ones replace the stored history in the prompt. `store` (default true) keeps the question and \
                the reply in the history. Streams with `Accept: text/event-stream` (the events of \
                `…/chat/completions`).",
        ),
    ]
}

/// Chat history (spec §4.1), per channel.
fn history() -> Vec<Op> {
    let h = "/v1/replicas/{replicaUUID}/chat/history";
    let msg_a = "/v1/replicas/{replicaUUID}/chat/history/messengerA";
    vec![
        history_list(h, "listChatHistory", "History on every channel"),
        op("POST", h, "saveChatHistory", "Chat history", "Save a history item")
            .body("HistorySave")
            .ok(200, "HistorySaved")
            .extra(&[429])
            .describe(
                "Saves a `user` item on `source` (default `web`, or `messengerB` with `messengerB_data`). A repeated \
                `messengerB_data.message_id` stores nothing new.",
            ),
        history_list(concat_path!("/web"), "listChatHistoryWeb", "History of the web channel"),
        history_list(concat_path!("/embed"), "listChatHistoryEmbed", "History of the embed channel"),
        history_list(msg_a, "listChatHistoryMessengerA", "History of messengerA"),
        op("POST", msg_a, "saveChatHistoryMessengerA", "Chat history", "Save a messengerA item")
            .body("HistorySaveMessengerA")
            .ok(200, "HistorySaved")
            .extra(&[429])
            .describe("A repeated `(chat_id, message_id)` stores nothing new."),
        history_list(concat_path!("/messengerB"), "listChatHistoryMessengerB", "History of messengerB"),
    ]
}

/// Users (docs/decisions.md "Users").
fn users() -> Vec<Op> {
    vec![
        op("POST", "/v1/users", "createUser", "Users", "Create a user")
            .body("UserWrite")
            .ok(200, "UserResponse")
            .creates("userID", "/id")
            .extra(&[409])
            .describe(
                "Every field is optional. `id` lets a migrating team keep its own user ids (1–100 visible characters, \
                unique in the organization; 409 `USER_ID_TAKEN`); without it the server makes a UUID. `name` defaults to \
                the empty string. 409 `EMAIL_TAKEN`, `LINKED_ACCOUNT_TAKEN`. Answers 200 (the hosted service's code). \
                Unknown fields are ignored.",
            ),
        op("GET", "/v1/users/me", "getMe", "Users", "Read the current user").ok(200, "UserResponse"),
        op("PUT", "/v1/users/me", "updateMe", "Users", "Update the current user")
            .body("UserWrite")
            .ok(200, "UserResponse")
            .extra(&[409])
            .describe(
                "Sets the fields given; a field not given keeps its value (`linkedAccounts`, when given, replaces the \
                list). `id`, when given, must be the caller's own id (400 otherwise). 409 `EMAIL_TAKEN`, \
                `LINKED_ACCOUNT_TAKEN`.",
            ),
        op("DELETE", "/v1/users/me", "deleteMe", "Users", "Delete the current user").ok(204, "").describe(
            "204 with no body (the hosted service's code). Its replicas pass to the organization's owner; the owner \
            user itself cannot be deleted (400).",
        ),
        op("GET", "/v1/users/{userID}", "getUser", "Users", "Read a user").ok(200, "UserResponse"),
    ]
}

/// The credentials of the widget and page operations (header parameters).
fn embed_headers() -> Vec<Value> {
    vec![
        json!({ "name": "X-Embed-Key", "in": "header", "required": false, "schema": { "type": "string" },
            "description": "The public embed key (widget). Absent: the web chat page of a public replica." }),
        json!({ "name": "X-Embed-Visitor", "in": "header", "required": false,
            "schema": { "type": "string", "pattern": "^[A-Za-z0-9_-]{8,100}$" },
            "description": "The visitor's id (kept by the widget in localStorage): the linked account `embed:<id>`. \
                Required (400 `INVALID_USER_HEADERS` without it) unless a valid `X-Embed-Identity` is sent, which \
                makes it ignored." }),
        json!({ "name": "X-Embed-Identity", "in": "header", "required": false,
            "schema": {
                "type": "string",
                "pattern": "^[0-9]{1,18}\\.[0-9a-f]{64}\\.[A-Za-z0-9_@.+-]{1,128}$",
            },
            "description": "A logged-in user of the site, signed by the site's backend (widget only, with \
                `X-Embed-Key`): `<expires>.<signature>.<userId>`. `expires`: unix seconds, in the future and at \
                most 31 days ahead; `userId`: 1–128 of `A-Z a-z 0-9 _ @ . + -`; `signature`: the lowercase hex \
                HMAC-SHA256 keyed with the UTF-8 bytes of the replica's whole identity secret (`rpl_idsec_…`, \
                `createEmbedIdentitySecret`) over `{replicaUUID}\\n{userId}\\n{expires}` (the replica's UUID \
                lowercase and hyphenated, `\\n` a newline, `expires` as written in the token). The visitor is \
                then the linked account `embed:user:<userId>`, the same on every device, and `X-Embed-Visitor` \
                is ignored. Malformed, a bad signature, expired, too far ahead, a replica without an identity \
                secret, or sent by the web chat page (no key): 403 `EMBED_IDENTITY_REFUSED`, naming which." }),
    ]
}

/// The channel integrations, in the document's order: messengerA's connect, the embed
/// operations, messengerA's disconnect.
fn integration_ops() -> Vec<Op> {
    let connect = messenger_a_connect();
    let disconnect = op(
        "DELETE",
        "/v1/replicas/{replicaUUID}/integrations/messengerA",
        "disconnectMessengerA",
        "Integrations",
        "Disconnect the messengerA bot",
    )
    .describe("Stops the bot and forgets its token; 404 when no bot is connected.");
    [vec![connect], embed_key_ops(), embed_visitor_ops(), vec![disconnect]].into_iter().flatten().collect()
}

/// `connectMessengerA`.
fn messenger_a_connect() -> Op {
    op(
        "POST",
        "/v1/replicas/{replicaUUID}/integrations/messengerA",
        "connectMessengerA",
        "Integrations",
        "Connect a messengerA bot",
    )
    .body("MessengerAConnect")
    .ok(200, "IntegrationConnected")
    .extra(&[409, 502])
    .describe(
        "Checks the token with the Bot API's `getMe` (400 `INVALID_CHANNEL_TOKEN` when refused, 502 when the \
            API cannot be reached), stores it encrypted, replaces any earlier bot of the replica and starts it: \
            long polling with `getUpdates` (base URL `--messenger-a-api-base`). The bot answers every text \
            message of a private chat, and in groups the messages that mention `mention` or reply to it; it shows \
            \"typing\" while the reply is made and splits replies longer than 4096 characters. Questions and \
            replies are stored as history (`source: messengerA`, full `messengerA_data`) of the linked-account \
            user `messengerA:<user id>`; unaddressed group messages are stored too. The update offset is kept in \
            the store: a restart neither loses nor repeats a message. The state shows in the replica's \
            `messengerA_integration`. 409 `INTEGRATION_CONFLICT` when the bot serves another replica.",
    )
}

/// The embed keys and the identity secret of a replica (our own operations).
fn embed_key_ops() -> Vec<Op> {
    vec![
        op("POST", "/v1/replicas/{replicaUUID}/embed-keys", "createEmbedKey", "Integrations", "Create an embed key")
            .body("EmbedKeyCreate")
            .ok(200, "EmbedKeyCreated")
            .describe(
                "Our own operation. Mints a public key for the chat widget (`GET /embed/widget.js`, included with \
                `data-replica` and `data-key`) and sets the replica's allowed origins (they replace earlier ones; \
                earlier keys keep working). The key can only chat with this replica and read the history of the \
                visitor that uses it (`POST /v1/embed/{replicaUUID}/chat`, `GET /v1/embed/{replicaUUID}/history`); \
                every widget request must come from an allowed origin (CORS). Shown only here (stored hashed); \
                `DELETE …/embed-keys/{embedKey}` revokes it.",
            ),
        op(
            "POST",
            "/v1/replicas/{replicaUUID}/embed-identity-secret",
            "createEmbedIdentitySecret",
            "Integrations",
            "Create the identity secret",
        )
        .optional_body("EmbedIdentitySecretCreate")
        .ok(200, "EmbedIdentitySecretCreated")
        .describe(
            "Our own operation. No body, or `{}`. Makes the secret with which the site's backend signs its \
            logged-in users' ids for the widget (`X-Embed-Identity` of `POST /v1/embed/{replicaUUID}/chat` and \
            `GET /v1/embed/{replicaUUID}/history`), so that a user keeps their conversation across devices. \
            Shown only in this answer, never again; a new call replaces the earlier secret (identities signed \
            with it are refused from this answer on). The replica's embed keys and allowed origins stay.",
        ),
        op(
            "DELETE",
            "/v1/replicas/{replicaUUID}/embed-identity-secret",
            "deleteEmbedIdentitySecret",
            "Integrations",
            "Delete the identity secret",
        )
        .describe(
            "Our own operation. Turns signed identities off: from this answer on, widget requests carrying \
            `X-Embed-Identity` are refused with 403 `EMBED_IDENTITY_REFUSED` (anonymous visitors keep \
            chatting). 404 when the replica has no identity secret.",
        ),
        op(
            "DELETE",
            "/v1/replicas/{replicaUUID}/embed-keys/{embedKey}",
            "revokeEmbedKey",
            "Integrations",
            "Revoke an embed key",
        )
        .describe(
            "Our own operation. `embedKey` is the key itself (`rpl_embed_…`; it is public, in the site's HTML, \
            so it is no secret in a path). From this answer on, widget requests carrying it are refused with 403 \
            `EMBED_KEY_REFUSED`; the replica's other keys and its allowed origins stay. 404 when it is not a key of \
            this replica (unknown, already revoked, or another replica's).",
        ),
    ]
}

/// The widget's and the web page's operations.
fn embed_visitor_ops() -> Vec<Op> {
    vec![
        op("POST", "/v1/embed/{replicaUUID}/chat", "embedChat", "Integrations", "Ask as a widget or page visitor")
            .body("EmbedChatRequest")
            .query(embed_headers())
            .ok(200, "EmbedChatReply")
            .extra(&[403, 429, 502])
            .describe(
                "Called by the widget (`X-Embed-Key`; source `embed`; `Origin` must be an allowed origin, else 403 \
                `ORIGIN_NOT_ALLOWED`; a key of another replica, 403 `EMBED_KEY_REFUSED`) and by the web chat page `GET /r/{organizationID}/{replicaSlug}` of a public \
                replica (no key; the server's own origin; source `web`). `X-Embed-Visitor` (8–100 letters, digits, \
                `-`, `_`) names the visitor: the linked-account user `embed:<id>`; or, for a user logged in on the \
                site, `X-Embed-Identity` signed by the site's backend (the widget only; an invalid one, 403 \
                `EMBED_IDENTITY_REFUSED`): the user `embed:user:<userId>`. With `Accept: text/event-stream` \
                the events of `…/chat/completions`. CORS: `Access-Control-Allow-Origin` echoes an allowed origin on \
                every answer past the origin check, errors included (but a 500), so the widget can show the error \
                body's `error`; `OPTIONS` answers the preflight.\n\n\
                Limits of its own, apart from the organization's (our decisions; the operator sets them by flag): \
                requests per visitor of a replica (`--embed-rate-limit-per-visitor`, default 10 a minute) and per \
                replica from all its visitors (`--embed-rate-limit-per-replica`, default 120 a minute), both token \
                buckets with a burst of as many, shared with `GET /v1/embed/{replicaUUID}/history`: beyond, 429 \
                `RATE_LIMITED` with `Retry-After` and `RateLimit-Policy` / `RateLimit` headers (and the CORS \
                header, so the widget can read it). A visitor id seen for the first time is made a user only at its \
                first question, at most `--embed-new-visitors-per-minute` (default 20) per replica a minute \
                (beyond: 429 `RATE_LIMITED`), and only when the visitors may still start a conversation. The \
                conversations visitors start count in a monthly quota of their own per organization \
                (`--embed-conversations-per-month`, default 10000, or the operator's `replicad orgs set-quota ORG \
                --embed-conversations-per-month N`; UTC months): beyond, 429 \
                `EMBED_CONVERSATION_QUOTA_EXCEEDED` before anything is generated. They never count in the \
                organization's own conversation quota, so visitors cannot starve its API use; and the \
                organization's quota (or `--rate-limit-per-key`) does not close its public chats. A conversation \
                under way goes on.",
            ),
        op("GET", "/v1/embed/{replicaUUID}/history", "embedHistory", "Integrations", "The visitor's conversation")
            .query(embed_headers())
            .ok(200, "EmbedHistory")
            .extra(&[403, 429])
            .describe(
                "The visitor's own history items on the channel (newest 100, oldest first); the credentials and \
                request limits of `POST /v1/embed/{replicaUUID}/chat`. A visitor that never asked has an empty \
                history (reading it makes no user).",
            ),
    ]
}

/// The messengerB integration (docs/decisions.md "Integrations"; `DELETE` is our own).
fn messenger_b_ops() -> Vec<Op> {
    let path = "/v1/replicas/{replicaUUID}/integrations/messengerB";
    vec![
        op("POST", path, "connectMessengerB", "Integrations", "Connect a messengerB bot")
            .body("MessengerBConnect")
            .ok(200, "IntegrationConnected")
            .extra(&[409, 502])
            .describe(
                "Checks the token with the REST API's \"get current user\" (400 `INVALID_CHANNEL_TOKEN` when refused, \
                502 when the API cannot be reached; base URL `--messenger-b-api-base`), stores it encrypted, replaces \
                any earlier bot of the replica and starts it on the gateway (`--messenger-b-gateway`; intents \
                GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES; heartbeats, RECONNECT and session resume handled). The bot \
                answers direct messages, and in servers the messages that mention it; it shows \"typing\" while the \
                reply is made, splits replies longer than 2000 characters (the first part replies to the question in \
                servers) and pings nobody. Questions and replies are stored as history (`source: messengerB`, full \
                `messengerB_data`; `channel_name` is the author's name for a direct message) of the linked-account \
                user `messengerB:<author id>`. The state shows in the replica's `messengerB_integration`. `id` in \
                the answer is ours (the bot's user id). 409 `INTEGRATION_CONFLICT` when the bot serves another \
                replica.",
            ),
        op("DELETE", path, "disconnectMessengerB", "Integrations", "Disconnect the messengerB bot")
            .describe("Our own operation. Stops the bot and forgets its token; 404 when no bot is connected."),
    ]
}
