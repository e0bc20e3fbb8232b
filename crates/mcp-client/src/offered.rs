//! What a run's servers offer beyond tools, for the model's surface: at open, each server that
//! declared the `resources` or `prompts` capability or the skills extension is asked for its
//! listings (never for a resource's contents or a skill's files), bounded by the session's [`ListLimits`](crate::ListLimits) and
//! [`LISTING_WAIT`], and the catalog indexes them for `mcp_search_tools` and offers `mcp_read`.

use std::sync::Arc;
use std::time::Duration;

use mcp_catalog::{Catalog, ServerFeatures};

use crate::Session;

/// The longest a run's opening waits for one server's listings of resources, templates and
/// prompts; a server slower than that offers its reads with nothing indexed.
pub(crate) const LISTING_WAIT: Duration = Duration::from_secs(10);

/// What `session`'s server offers: listed only for the capabilities it declared, within
/// [`LISTING_WAIT`]. A listing that fails leaves its kind offered with nothing indexed.
async fn offered(session: &Session) -> ServerFeatures {
    let mut offered = ServerFeatures::default();
    let resources = session.identity().declares("resources");
    let prompts = session.identity().declares("prompts");
    let skills = session.offers_skills();
    if resources {
        offered = offered.with_resources(Vec::new());
    }
    if prompts {
        offered = offered.with_prompts(Vec::new());
    }
    if skills {
        offered = offered.with_skills(Vec::new());
    }
    if !resources && !prompts && !skills {
        return offered;
    }
    let listing = async {
        let (listed, templates, prompt_list, skill_list) = tokio::join!(
            async {
                if resources {
                    session.list_resources().await.ok()
                } else {
                    None
                }
            },
            async {
                if resources {
                    session.list_resource_templates().await.ok()
                } else {
                    None
                }
            },
            async {
                if prompts {
                    session.list_prompts().await.ok()
                } else {
                    None
                }
            },
            async {
                if skills {
                    session.list_skills().await.ok()
                } else {
                    None
                }
            },
        );
        (listed, templates, prompt_list, skill_list)
    };
    match tokio::time::timeout(LISTING_WAIT, listing).await {
        Ok((mut listed, templates, prompt_list, skill_list)) => {
            // A skill's files are read as the skill's (`skill`, `file`), under its rules and
            // manifest: none is offered as a plain resource. Without the skills' listing, no
            // `skill://` resource is.
            if let Some(listed) = &mut listed {
                listed.retain(|r| match &skill_list {
                    Some(skill_list) => !skill_list.iter().any(|s| s.owns(&r.uri)),
                    None => !skills || !r.uri.starts_with("skill://"),
                });
            }
            if let Some(skill_list) = skill_list {
                // A refused entry (over a bound, breaking the extension's rules) is not offered.
                let usable = skill_list
                    .into_iter()
                    .filter(|s| s.refused.is_none())
                    .map(|s| mcp_catalog::SkillEntry::new(s.name, s.description))
                    .collect();
                offered = offered.with_skills(usable);
            }
            if let Some(listed) = listed {
                offered = offered.with_resources(listed);
            }
            if let Some(templates) = templates {
                offered = offered.with_templates(templates);
            }
            if let Some(prompt_list) = prompt_list {
                offered = offered.with_prompts(prompt_list);
            }
        }
        Err(_) => tracing::info!(
            server = %session.name(),
            "listing resources, prompts and skills took longer than {} s: none indexed",
            LISTING_WAIT.as_secs()
        ),
    }
    offered
}

/// Lists what each session's server offers, all at once, and sets it in `catalog`.
pub(crate) async fn index(catalog: &Catalog, sessions: &[Arc<Session>]) {
    let listed = futures::future::join_all(sessions.iter().map(|s| offered(s))).await;
    for (session, offered) in sessions.iter().zip(listed) {
        if offered.offers_reads()
            && let Err(e) = catalog.set_features(session.name(), offered)
        {
            tracing::info!(server = %session.name(), error = %e, "features not indexed");
        }
    }
}
