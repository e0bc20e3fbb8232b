//! A session's directory reads (`resources/directory/read`, the skills extension's
//! `directoryRead`): the URI checked before it reaches the session's
//! [`SessionFeatures`](crate::SessionFeatures), the children paged, [`DIRECTORY_PAGE`] a page
//! behind a cursor this session gave (any other is refused).

use rmcp::model::{ListResourcesResult, ReadResourceDirectoryResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::Session;
use super::features::NoFeatures;
use super::pages::Pages;
use crate::features::{DIRECTORY_PAGE, check_client_text};

/// The pages of `resources/directory/read`.
const PAGES: Pages = Pages {
    size: DIRECTORY_PAGE,
    method: "resources/directory/read",
};

impl Session {
    pub(super) async fn serve_read_directory(
        &self,
        uri: &str,
        cursor: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        // The URI and the cursor are checked before anything is read.
        check_client_text("directory URI", uri)?;
        let offset = PAGES.offset(cursor)?;
        let tools = self.featured(context).await?;
        let _permits = self.permits()?;
        let children = tools
            .features()
            .unwrap_or(&NoFeatures)
            .read_directory(uri)
            .await?;
        let (page, next) = PAGES.page(children, offset, cursor)?;
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }
}
