//! A session's skills (the skills extension): `skills/list` paged, [`SKILLS_PAGE`] skills a
//! page behind a cursor this session gave (any other is refused), and `skills/get`, each URI
//! checked before it reaches the session's [`SessionFeatures`](crate::SessionFeatures). An
//! entry that breaks the extension's rules is left out rather than failing the listing.

use rmcp::model::{GetSkillResult, ListSkillsResult, Skill};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::Session;
use super::features::NoFeatures;
use crate::features::{SKILLS_PAGE, check_client_text, no_skill, shown};

/// The longest cursor accepted, in bytes (the decimal offset of a page).
const MAX_CURSOR_BYTES: usize = 20;

impl Session {
    pub(super) async fn serve_list_skills(
        &self,
        cursor: Option<String>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        // The cursor is checked before anything is listed.
        let offset = cursor.as_deref().map(page_offset).transpose()?.unwrap_or(0);
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
        let total = valid.len();
        if offset > total {
            return Err(stale_cursor(cursor.as_deref().unwrap_or_default()));
        }
        let end = offset.saturating_add(SKILLS_PAGE).min(total);
        let page: Vec<Skill> = valid.drain(offset..end).collect();
        let mut result = ListSkillsResult::with_all_items(page);
        result.next_cursor = (end < total).then(|| end.to_string());
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

/// The offset a cursor of this session's `skills/list` stands for: a decimal multiple of
/// [`SKILLS_PAGE`], at most [`MAX_CURSOR_BYTES`] long.
fn page_offset(cursor: &str) -> Result<usize, ErrorData> {
    let offset = (cursor.len() <= MAX_CURSOR_BYTES
        && !cursor.is_empty()
        && cursor.bytes().all(|b| b.is_ascii_digit()))
    .then(|| cursor.parse::<usize>().ok())
    .flatten()
    .filter(|offset| offset % SKILLS_PAGE == 0 && *offset > 0);
    offset.ok_or_else(|| stale_cursor(cursor))
}

/// The refusal of a cursor this session did not give (or no longer can follow).
fn stale_cursor(cursor: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "the cursor `{}` is not one this server gave for `skills/list`",
            shown(cursor)
        ),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cursors_of_whole_pages_are_followed() {
        assert_eq!(page_offset(&SKILLS_PAGE.to_string()).unwrap(), SKILLS_PAGE);
        assert_eq!(
            page_offset(&(3 * SKILLS_PAGE).to_string()).unwrap(),
            3 * SKILLS_PAGE
        );
        for hostile in ["", "0", "1", "-64", "+64", "64 ", "6.4e1", "x", "0x40"] {
            assert!(page_offset(hostile).is_err(), "{hostile:?} was followed");
        }
        assert!(page_offset(&"9".repeat(MAX_CURSOR_BYTES + 1)).is_err());
        assert!(page_offset("18446744073709551616").is_err(), "overflows");
    }
}
