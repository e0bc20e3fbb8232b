//! A session's skills (the skills extension): `skills/list` paged, [`SKILLS_PAGE`] skills a
//! page behind a cursor this session gave (any other is refused), and `skills/get`, each URI
//! checked before it reaches the session's [`SessionFeatures`](crate::SessionFeatures). An
//! entry that breaks the extension's rules is left out rather than failing the listing.

use rmcp::model::{GetSkillResult, ListSkillsResult, Skill};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::Session;
use super::features::NoFeatures;
use super::pages::Pages;
use crate::features::{SKILLS_PAGE, check_client_text, no_skill};

/// The pages of `skills/list`.
const PAGES: Pages = Pages {
    size: SKILLS_PAGE,
    method: "skills/list",
};

impl Session {
    pub(super) async fn serve_list_skills(
        &self,
        cursor: Option<String>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        // The cursor is checked before anything is listed.
        let offset = PAGES.offset(cursor.as_deref())?;
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let listed = tools
            .features()
            .unwrap_or(&NoFeatures)
            .list_skills()
            .await?;
        let mut valid: Vec<Skill> = listed
            .into_iter()
            .filter(|skill| skill.validate().is_ok())
            .collect();
        // The same SKILL.md listed twice (two names for one file): the first is kept.
        let mut seen = std::collections::HashSet::new();
        valid.retain(|skill| seen.insert(skill.uri.clone()));
        let (page, next) = PAGES.page(valid, offset, cursor.as_deref())?;
        let mut result = ListSkillsResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    pub(super) async fn serve_get_skill(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        check_client_text("skill URI", uri)?;
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let skill = tools
            .features()
            .unwrap_or(&NoFeatures)
            .get_skill(uri)
            .await?;
        // What is answered names the skill asked for and keeps the extension's rules.
        if skill.uri != uri || skill.validate().is_err() {
            return Err(no_skill(uri));
        }
        Ok(GetSkillResult::new(skill))
    }
}
