//! A session's directory reads (`resources/directory/read`, the skills extension's
//! `directoryRead`): the URI checked before it reaches the session's
//! [`SessionFeatures`](crate::SessionFeatures), the children paged, [`DIRECTORY_PAGE`] a page
//! behind a cursor this session gave (any other is refused).

use rmcp::model::{ListResourcesResult, ReadResourceDirectoryResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::Session;
use super::features::NoFeatures;
use crate::features::{DIRECTORY_PAGE, check_client_text, shown};

/// The longest cursor accepted, in bytes (the decimal offset of a page).
const MAX_CURSOR_BYTES: usize = 20;

impl Session {
    pub(super) async fn serve_read_directory(
        &self,
        uri: &str,
        cursor: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        // The URI and the cursor are checked before anything is read.
        check_client_text("directory URI", uri)?;
        let offset = cursor.map(page_offset).transpose()?.unwrap_or(0);
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let mut children = tools
            .features()
            .unwrap_or(&NoFeatures)
            .read_directory(uri)
            .await?;
        let total = children.len();
        if offset > total {
            return Err(stale_cursor(cursor.unwrap_or_default()));
        }
        let end = offset.saturating_add(DIRECTORY_PAGE).min(total);
        let page = children.drain(offset..end).collect();
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = (end < total).then(|| end.to_string());
        Ok(result)
    }
}

/// The offset a cursor of this session's directory reads stands for: a decimal multiple of
/// [`DIRECTORY_PAGE`], at most [`MAX_CURSOR_BYTES`] long.
fn page_offset(cursor: &str) -> Result<usize, ErrorData> {
    let offset = (cursor.len() <= MAX_CURSOR_BYTES
        && !cursor.is_empty()
        && cursor.bytes().all(|b| b.is_ascii_digit()))
    .then(|| cursor.parse::<usize>().ok())
    .flatten()
    .filter(|offset| offset % DIRECTORY_PAGE == 0 && *offset > 0);
    offset.ok_or_else(|| stale_cursor(cursor))
}

/// The refusal of a cursor this session did not give (or no longer can follow).
fn stale_cursor(cursor: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "the cursor `{}` is not one this server gave for `resources/directory/read`",
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
        assert_eq!(
            page_offset(&DIRECTORY_PAGE.to_string()).unwrap(),
            DIRECTORY_PAGE
        );
        for hostile in ["", "0", "1", "-64", "+64", "64 ", "6.4e1", "x", "0x40"] {
            assert!(page_offset(hostile).is_err(), "{hostile:?} was followed");
        }
        assert!(page_offset(&"9".repeat(MAX_CURSOR_BYTES + 1)).is_err());
        assert!(page_offset("18446744073709551616").is_err(), "overflows");
    }
}
