//! Admin commands while the server runs: a Unix socket `DATA_DIR/admin.sock` (mode 0600, so
//! only the server's own OS user can use it) taking one JSON line and answering one.
//! `replicad invites create` and `replicad reindex` go through it when a server holds the
//! store, and open the store themselves otherwise.
//!
//! Requests: `{"op":"invite","expires_in_secs":N|null}` → `{"ok":true,"code":"inv_…"}`;
//! `{"op":"reindex"}` → `{"ok":true,"chunks":N}`; `{"op":"check"}` → `{"ok":true,"report":{…}}`
//! (see `search::check::Report`); `{"op":"advance-clock","ms":N}` → `{"ok":true,"now_ms":N}`
//! (only with `serve --test-clock`, see [`crate::clock`]); `{"op":"orgs"}` →
//! `{"ok":true,"orgs":[…]}` (see `service::quotas::OrgUsage`); `{"op":"set-quota","org":ID,
//! "conversations_per_month"?,"replicas"?,"knowledge_base_entries"?}` → `{"ok":true,"quota":{…}}`;
//! failures → `{"ok":false,"error":"…"}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::app::App;
use crate::service::{orgs, quotas};

/// `{"op":"set-quota","org":UUID,"conversations_per_month"?,"replicas"?,"knowledge_base_entries"?}`.
#[derive(serde::Deserialize)]
struct SetQuota {
    org: uuid::Uuid,
    #[serde(flatten)]
    quota: crate::store::records::Quota,
}

/// Path of the admin socket in `data_dir`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join("admin.sock")
}

/// Listens on the admin socket for the life of the server.
pub fn spawn(app: Arc<App>) -> std::io::Result<()> {
    let path = socket_path(&app.config.data_dir);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let app = app.clone();
            tokio::spawn(async move {
                if let Err(e) = answer(app, stream).await {
                    tracing::warn!(error = %e, "admin connection failed");
                }
            });
        }
    });
    Ok(())
}

async fn answer(app: Arc<App>, stream: UnixStream) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut line = String::new();
    BufReader::new(r).read_line(&mut line).await?;
    let reply = match serde_json::from_str::<Value>(&line) {
        Ok(req) => execute(&app, &req).await,
        Err(e) => json!({"ok": false, "error": format!("bad request: {e}")}),
    };
    w.write_all(format!("{reply}\n").as_bytes()).await
}

async fn execute(app: &App, req: &Value) -> Value {
    let result = match req["op"].as_str() {
        Some("invite") => orgs::create_invite(&app.store, req["expires_in_secs"].as_u64())
            .await
            .map(|code| json!({"ok": true, "code": code})),
        Some("reindex") => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            if app.reindex.send(tx).await.is_err() {
                return json!({"ok": false, "error": "indexer stopped"});
            }
            match rx.await {
                Ok(r) => r.map(|chunks| json!({"ok": true, "chunks": chunks})),
                Err(_) => return json!({"ok": false, "error": "indexer stopped"}),
            }
        }
        Some("check") => crate::search::check::check(&app.store, &app.search)
            .await
            .map(|report| json!({"ok": true, "report": report})),
        Some("orgs") => {
            let c = &app.config;
            quotas::list(&app.store, c.max_replicas_per_org, c.max_kb_entries_per_org, crate::store::now_ms())
                .await
                .map(|orgs| json!({"ok": true, "orgs": orgs}))
        }
        Some("set-quota") => match serde_json::from_value::<SetQuota>(req.clone()) {
            Ok(s) => quotas::set(&app.store, s.org, s.quota).await.map(|q| json!({"ok": true, "quota": q})),
            Err(e) => return json!({"ok": false, "error": format!("bad set-quota request: {e}")}),
        },
        Some("advance-clock") => match crate::clock::advance(req["ms"].as_i64().unwrap_or(-1)) {
            Some(now) => Ok(json!({"ok": true, "now_ms": now})),
            None => return json!({"ok": false, "error": "the clock is not adjustable (serve --test-clock) or ms < 0"}),
        },
        _ => return json!({"ok": false, "error": "unknown op"}),
    };
    result.unwrap_or_else(|e| json!({"ok": false, "error": e.to_string()}))
}

/// Sends `req` to a running server; `Ok(None)` when no server listens on `data_dir`.
pub async fn request(data_dir: &Path, req: &Value) -> Result<Option<Value>, String> {
    let Ok(stream) = UnixStream::connect(socket_path(data_dir)).await else { return Ok(None) };
    let (r, mut w) = stream.into_split();
    w.write_all(format!("{req}\n").as_bytes()).await.map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(r).read_line(&mut line).await.map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_str(&line).map_err(|e| format!("bad answer from the server: {e}"))?;
    if v["ok"] == true {
        Ok(Some(v))
    } else {
        Err(v["error"].as_str().unwrap_or("failed").to_string())
    }
}
