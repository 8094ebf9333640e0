//! Users (spec §4.2 `/v1/users*`).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Timestamp;
use super::{Operation, Serve};
use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::op;
use crate::service::channel::linked_account_types;
use crate::service::users::{self, UserInput, TEXT_MAX};
use crate::store::records::User;

/// A linked account on the wire: `{accountID, accountType}`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "LinkedAccountWrite")]
pub struct LinkedAccount {
    /// The id on that channel (the X-USER-ID it sends).
    #[serde(rename = "accountID")]
    pub account_id: String,
    #[schemars(extend("enum" = linked_account_types()))]
    pub account_type: String,
}

/// Create and update body (docs/decisions.md "Users"): every field optional; unknown fields are
/// ignored (the interface does not close this body).
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "UserWrite")]
pub struct UserBody {
    /// Create: the new user's id, chosen by the client (a migrating team keeps its ids); unique
    /// in the organization (409 USER_ID_TAKEN). Absent: the server makes a UUID. Update: the
    /// caller's own id (400 otherwise).
    #[schemars(length(min = 1, max = TEXT_MAX), regex(pattern = r"^[^\s\x00-\x1f\x7f-\x9f]+$"))]
    pub id: Option<String>,
    /// Create: default empty.
    #[schemars(length(min = 1, max = TEXT_MAX))]
    pub name: Option<String>,
    /// Unique per organization (409 EMAIL_TAKEN).
    #[schemars(email)]
    pub email: Option<String>,
    pub profile_image: Option<String>,
    /// Channel accounts that name this user (409 LINKED_ACCOUNT_TAKEN when another user has
    /// one); on update, replaces the list.
    pub linked_accounts: Option<Vec<LinkedAccount>>,
}

impl From<UserBody> for UserInput {
    fn from(b: UserBody) -> Self {
        UserInput {
            id: b.id,
            name: b.name,
            email: b.email,
            profile_image: b.profile_image,
            linked: b.linked_accounts.map(|l| l.into_iter().map(|a| (a.account_type, a.account_id)).collect()),
        }
    }
}

/// A user on the wire, flat (the `UserResponse` schema; docs/decisions.md "Users"): `{id, name,
/// email?, linkedAccounts: [{accountID, accountType}], profileImage?, createdAt, updatedAt}`;
/// absent values omitted.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "UserResponse")]
pub struct UserView<'a> {
    /// The id the client chose at creation, else a UUID made by the server.
    id: String,
    name: &'a str,
    /// Omitted when the user has none (e.g. a user made on first contact from a channel).
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<&'a str>,
    /// The channel accounts that name this user (given at creation or update, or the one a
    /// channel made it for).
    linked_accounts: Vec<LinkedAccountView<'a>>,
    /// Ours: the picture URL; omitted when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    profile_image: Option<&'a str>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

/// A linked account of [`UserView`] (the `LinkedAccount` schema): `{accountID, accountType}`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "LinkedAccount")]
pub struct LinkedAccountView<'a> {
    /// The id on that channel (the X-USER-ID it sent).
    #[serde(rename = "accountID")]
    account_id: &'a str,
    #[schemars(extend("enum" = linked_account_types()))]
    account_type: &'a str,
}

/// The wire view of user `u`.
pub fn view(u: &User) -> UserView<'_> {
    let linked = u.linked.iter().map(|(kind, id)| LinkedAccountView { account_id: id, account_type: kind });
    UserView {
        id: u.public_id(),
        name: &u.name,
        email: u.email.as_deref(),
        linked_accounts: linked.collect(),
        profile_image: u.profile_image.as_deref(),
        created_at: Timestamp::of(u.created_at),
        updated_at: Timestamp::of(u.updated_at),
    }
}

fn me(req: &Req) -> Result<&User> {
    req.caller()?.user.as_ref().ok_or_else(|| Error::new(Code::Unauthorized, "X-USER-ID required"))
}

/// # `POST /v1/users`
/// 200 `{success, id, name, email?, linkedAccounts, ...}`: the code of the hosted service's
/// document, as strict generated clients parse only the codes documented there
/// (docs/decisions.md "Common"). Errors: 400, 409 `USER_ID_TAKEN`, `EMAIL_TAKEN`,
/// `LINKED_ACCOUNT_TAKEN`.
pub async fn create(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: UserBody = req.json()?;
    let user = users::create(&app.store, req.caller()?.org.id, body.into()).await?;
    Ok(Reply::ok(&view(&user)))
}

/// # `GET /v1/users/{userID}`
/// `{success, id, name, email?, linkedAccounts, ...}`; 404 when missing or of another organization.
pub async fn read(app: Arc<App>, req: Req) -> Result<Reply> {
    let user = users::get(&app.store, req.caller()?.org.id, req.param("userID")).await?;
    Ok(Reply::ok(&view(&user)))
}

/// # `GET /v1/users/me`
/// The user named by `X-USER-ID`, `{success, id, name, email?, linkedAccounts, ...}`.
pub async fn me_read(_app: Arc<App>, req: Req) -> Result<Reply> {
    Ok(Reply::ok(&view(me(&req)?)))
}

/// # `PUT /v1/users/me`
/// Sets the fields given (name, e-mail, picture, linked accounts; `id`, if given, must be the
/// caller's); `{success, id, name, email?, linkedAccounts, ...}`. Errors: 400, 409
/// `EMAIL_TAKEN`, `LINKED_ACCOUNT_TAKEN`.
pub async fn update_me(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: UserBody = req.json()?;
    let (org, id) = (req.caller()?.org.id, me(&req)?.id);
    let user = users::update(&app.store, org, id, body.into()).await?;
    Ok(Reply::ok(&view(&user)))
}

/// # `DELETE /v1/users/me`
/// Deletes the user (its replicas pass to the organization's owner); 204, no body
/// (the hosted document's code; docs/decisions.md "Common"). The owner user itself cannot be
/// deleted (400).
pub async fn delete_me(app: Arc<App>, req: Req) -> Result<Reply> {
    let caller = req.caller()?;
    users::delete(&app.store, &caller.org, me(&req)?.id).await?;
    Ok(Reply::no_content())
}

/// The document's rows of the user operations: create and read by the organization, and the
/// caller's own user (`/v1/users/me`).
pub fn operations() -> Vec<Operation> {
    vec![
        op("POST", "/v1/users", "createUser", "Users", "Create a user")
            .body_of::<UserBody>()
            .ok_of::<UserView>(200)
            .creates("userID", "/id")
            .extra(&[409])
            .describe(
                "Every field is optional. `id` lets a migrating team keep its own user ids (1–100 visible characters, \
                unique in the organization; 409 `USER_ID_TAKEN`); without it the server makes a UUID. `name` defaults to \
                the empty string. 409 `EMAIL_TAKEN`, `LINKED_ACCOUNT_TAKEN`. Answers 200 (the hosted service's code). \
                Unknown fields are ignored.",
            )
            .serve(Access::Org, handler!(create)),
        op("GET", "/v1/users/me", "getMe", "Users", "Read the current user").ok_of::<UserView>(200)
            .serve(Access::User, handler!(me_read)),
        op("PUT", "/v1/users/me", "updateMe", "Users", "Update the current user")
            .body_of::<UserBody>()
            .ok_of::<UserView>(200)
            .extra(&[409])
            .describe(
                "Sets the fields given; a field not given keeps its value (`linkedAccounts`, when given, replaces the \
                list). `id`, when given, must be the caller's own id (400 otherwise). 409 `EMAIL_TAKEN`, \
                `LINKED_ACCOUNT_TAKEN`.",
            )
            .serve(Access::User, handler!(update_me)),
        op("DELETE", "/v1/users/me", "deleteMe", "Users", "Delete the current user").ok(204, "").describe(
            "204 with no body (the hosted service's code). Its replicas pass to the organization's owner; the owner \
            user itself cannot be deleted (400).",
        )
            .serve(Access::User, handler!(delete_me)),
        op("GET", "/v1/users/{userID}", "getUser", "Users", "Read a user").ok_of::<UserView>(200)
            .serve(Access::Org, handler!(read)),
    ]
}
