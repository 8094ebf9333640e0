//! `serve --demo`: on the first start only, an organization (key printed once, on stderr) and a
//! sample replica whose knowledge base is the documentation under `--sample-dir`.

use std::path::{Path, PathBuf};

use uuid::Uuid;

use crate::app::App;
use crate::error::{Error, Result};
use crate::service::knowledge::{self, Limits, NewEntry};
use crate::service::orgs;
use crate::service::replicas::{self, LlmInput, ReplicaInput};
use crate::store::{k, tables};

/// Slug of the sample replica.
pub const SLUG: &str = "python-tutor";
/// E-mail of the demo organization's owner user.
pub const OWNER_EMAIL: &str = "owner@demo.replicad.local";

/// Makes the demo organization and replica unless an earlier start did.
pub async fn ensure(app: &App) -> Result<()> {
    let existing = app
        .store
        .read(|txn| Ok(txn.open_table(tables::ONCE)?.get("demo")?.map(|v| Uuid::from_u128(v.value()))))
        .await?;
    if let Some(org) = existing {
        eprintln!("demo: organization {org} exists (its API key was printed at its first start); replica slug {SLUG}");
        return Ok(());
    }
    let files = sample_files(&sample_dir(&app.config.sample_dir))?;
    let new = orgs::NewOrg {
        organization_name: "Demo organization".into(),
        name: "Demo owner".into(),
        email: OWNER_EMAIL.into(),
    };
    let (org, key) = orgs::create_direct(&app.store, new).await?;
    let replica =
        replicas::create(&app.store, org.id, &body(), &app.models, app.search.embedders.as_deref(), u64::MAX).await?;
    for path in &files {
        let text = std::fs::read_to_string(path).map_err(|e| Error::internal(format!("{}: {e}", path.display())))?;
        knowledge::create(&app.store, org.id, replica, NewEntry::text(text, Some("en")), Limits::UNLIMITED).await?;
    }
    let org_id = org.id;
    app.store.write(move |txn| txn.open_table(tables::ONCE)?.insert("demo", k(org_id)).map(|_| ())).await?;
    eprintln!(
        "\ndemo: organization {} created. Its API key (shown only now):\n\n    {key}\n\n\
         demo: replica {replica} (slug {SLUG}) with {} documents from {}\n",
        org.id,
        files.len(),
        app.config.sample_dir.display()
    );
    Ok(())
}

fn body() -> ReplicaInput {
    ReplicaInput {
        name: "Python Tutor".into(),
        short_description: "Answers from the Python tutorial".into(),
        greeting: "Hi! I'm the Python Tutor. Ask me anything from the official Python tutorial.".into(),
        owner_id: OWNER_EMAIL.into(),
        slug: SLUG.into(),
        llm: LlmInput::default(),
        purpose: Some("Help people learn Python with answers quoted from the Python 3.11 tutorial.".into()),
        kind: Some("character".into()),
        private: None,
        tags: vec!["python".into(), "tutorial".into()],
        suggested_questions: vec!["What is a module?".into(), "How do I handle exceptions?".into()],
        whitelist_emails: Vec::new(),
        profile_image: None,
        voice_preview_text: None,
        voice_enabled: None,
        video_enabled: None,
        is_every_conversation_accessible_by_support: None,
        is_private_conversations_enabled: None,
        voice_vendor_id: None,
        system_message: None,
    }
}

/// `dir`, or, when it is relative and missing here, the same path in the source tree the
/// binary was built from (so `--demo` works from any working directory on a build machine).
fn sample_dir(dir: &Path) -> PathBuf {
    let built_in = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    if dir.is_relative() && !dir.exists() && built_in.exists() {
        built_in
    } else {
        dir.to_path_buf()
    }
}

/// Every `*.txt` file below `dir`, sorted.
fn sample_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .map_err(|e| Error::internal(format!("sample documents at {}: {e} (see --sample-dir)", d.display())))?;
        for entry in entries {
            let p = entry?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "txt") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}
