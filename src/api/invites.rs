//! Spec §4.1: `POST /v1/api-keys/invites/{code}/redeem`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Timestamp;
use super::{Operation, Serve};
use crate::app::App;
use crate::error::Result;
use crate::http::auth::Access;
use crate::http::request::Req;
use crate::http::response::Reply;
use crate::openapi::operations::op;
use crate::service::{check_len, normalize_email, orgs};

/// Request body: all fields required, no others.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "RedeemRequest")]
pub struct RedeemBody {
    #[schemars(length(min = 1, max = TEXT_MAX))]
    pub organization_name: String,
    /// Contact name.
    #[schemars(length(min = 1, max = TEXT_MAX))]
    pub name: String,
    /// Contact address; becomes the organization's owner user.
    #[schemars(email)]
    pub email: String,
}

/// The most characters of the organization's and the contact's names.
const TEXT_MAX: usize = 100;

/// 200 body (besides `success`).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Redeemed {
    /// The organization's API key; shown only here (stored hashed).
    pub api_key: String,
    #[serde(rename = "organizationID")]
    #[schemars(with = "uuid::Uuid")]
    pub organization_id: String,
    pub valid_until: Option<Timestamp>,
}

/// The document's row of the redeem operation.
pub fn operations() -> Vec<Operation> {
    let path = "/v1/api-keys/invites/{code}/redeem";
    vec![op("POST", path, "redeemInvite", "Organizations", "Redeem an invitation code")
        .body_of::<RedeemBody>()
        .ok_of::<Redeemed>(200)
        .extra(&[409])
        .plain_404()
        .describe(
            "Creates an organization, its owner user (the contact) and an API key shown only in this answer. Codes \
            are minted by the operator (`replicad invites create`), single-use and may expire: unknown code 404 \
            (body without `error_code`/`fingerprint`, spec §7 rule 2), used code 409 `INVITE_ALREADY_REDEEMED`, \
            expired code 400 `INVITE_EXPIRED`.",
        )
        .serve(Access::Public, handler!(redeem))]
}

/// # `POST /v1/api-keys/invites/{code}/redeem`
/// Makes an organization, its owner user (the contact) and an API key shown only here.
/// Errors: 400 body or `INVITE_EXPIRED`, 404 unknown code, 409 `INVITE_ALREADY_REDEEMED`.
pub async fn redeem(app: Arc<App>, req: Req) -> Result<Reply> {
    let body: RedeemBody = req.json()?;
    check_len("organizationName", body.organization_name.trim(), 1, TEXT_MAX)?;
    check_len("name", body.name.trim(), 1, TEXT_MAX)?;
    let email = normalize_email("email", &body.email)?;
    let new = orgs::NewOrg {
        organization_name: body.organization_name.trim().to_string(),
        name: body.name.trim().to_string(),
        email,
    };
    let (org, key) = orgs::redeem(&app.store, req.param("code"), new).await?;
    Ok(Reply::ok(&Redeemed {
        api_key: key,
        organization_id: org.id.to_string(),
        valid_until: org.valid_until.map(Timestamp::of),
    }))
}
