//! Users (spec §4.2 `/v1/users*`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::error::{Code, Error, Result};
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::service::rfc3339;
use crate::service::users::{self, UserInput};
use crate::store::records::User;

/// A linked account on the wire: `{accountID, accountType}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkedAccount {
    #[serde(rename = "accountID")]
    pub account_id: String,
    pub account_type: String,
}

/// Create and update body (docs/decisions.md "Users"): every field optional; unknown fields are
/// ignored (the interface does not close this body).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserBody {
    pub id: Option<String>,
    pub name: Option<String>,
    pub email: Option<String>,
    pub profile_image: Option<String>,
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
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserView<'a> {
    id: String,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<&'a str>,
    linked_accounts: Vec<LinkedAccountView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile_image: Option<&'a str>,
    created_at: String,
    updated_at: String,
}

/// A linked account of [`UserView`] (the `LinkedAccount` schema): `{accountID, accountType}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkedAccountView<'a> {
    #[serde(rename = "accountID")]
    account_id: &'a str,
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
        created_at: rfc3339(u.created_at),
        updated_at: rfc3339(u.updated_at),
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
