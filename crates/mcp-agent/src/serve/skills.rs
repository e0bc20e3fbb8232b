//! A run's skills served to a gateway's client (the skills extension): every upstream's
//! skills the run's `[policy]` `skill` rules allow, their URIs (and their files') named by
//! `mcp_serve::UpstreamNames` so each routes back to its server; a skill file read through the
//! skill's manifest checks, denied when its skill is.

use mcp_client::SkillEntry;
use mcp_serve::no_skill;
use rmcp::ErrorData;
use rmcp::model::{Skill, SkillResources};

use super::RunTools;

impl RunTools {
    /// The skills of every upstream offering them, as the client knows them (an upstream whose
    /// listing failed is logged and left out).
    pub(super) async fn served_skills(&self) -> Vec<Skill> {
        let mut all = Vec::new();
        for (server, listed) in self.runner.list_all_skills().await {
            match listed {
                Ok(entries) => all.extend(
                    entries
                        .iter()
                        .filter_map(|entry| self.shown_skill(&server, entry)),
                ),
                Err(e) => super::features::warn(&self.runner, &server, "skills/list", &e),
            }
        }
        all
    }

    /// `skills/get` of the skill whose `SKILL.md` the client knows as `uri`.
    pub(super) async fn served_skill(&self, uri: &str) -> Result<Skill, ErrorData> {
        let (server, own) = self.upstream.route_uri(uri)?;
        let offers = self
            .runner
            .sessions()
            .iter()
            .any(|s| s.name() == server && s.offers_skills());
        if !offers || rmcp::model::skill_name_from_uri(&own).is_none() {
            return Err(no_skill(uri));
        }
        let entry = self
            .runner
            .skill(server, &own)
            .await
            .map_err(|e| self.answer(&e, None))?;
        self.shown_skill(server, &entry)
            .ok_or_else(|| no_skill(uri))
    }

    /// `entry` of `server` as served, every URI as the client knows it; `None` when it is
    /// refused or a URI of it could not be routed back.
    fn shown_skill(&self, server: &str, entry: &SkillEntry) -> Option<Skill> {
        let mut skill = self.runner.served_skill(entry)?;
        skill.uri = self.upstream.uri(server, &skill.uri)?;
        if let SkillResources::Files(files) = &mut skill.resources {
            for file in files.iter_mut() {
                file.uri = self.upstream.uri(server, &file.uri)?;
            }
        }
        Some(skill)
    }

    /// Whether `uri` of `server` (its own URI) is a file of a skill the run's `[policy]`
    /// refuses, among `refused` (the server's, listed once per listing).
    pub(super) fn hidden(refused: &[SkillEntry], uri: &str) -> bool {
        refused.iter().any(|skill| skill.owns(uri))
    }
}
