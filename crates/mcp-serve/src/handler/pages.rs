//! The lists a session pages itself (`skills/list`, `resources/directory/read`): a cursor is
//! the decimal offset of a whole page, one this session gave; any other is refused before
//! anything is listed.

use rmcp::ErrorData;

use crate::features::shown;

/// The longest cursor accepted, in bytes (the decimal offset of a page).
const MAX_CURSOR_BYTES: usize = 20;

/// The pages of one method's lists.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pages {
    /// Items a page.
    pub(super) size: usize,
    /// The method, for the refusal of a cursor.
    pub(super) method: &'static str,
}

impl Pages {
    /// The offset `cursor` stands for (0 without one): a decimal multiple of the page size,
    /// at most [`MAX_CURSOR_BYTES`] long.
    pub(super) fn offset(&self, cursor: Option<&str>) -> Result<usize, ErrorData> {
        let Some(cursor) = cursor else {
            return Ok(0);
        };
        let offset = (cursor.len() <= MAX_CURSOR_BYTES
            && !cursor.is_empty()
            && cursor.bytes().all(|b| b.is_ascii_digit()))
        .then(|| cursor.parse::<usize>().ok())
        .flatten()
        .filter(|offset| offset % self.size == 0 && *offset > 0);
        offset.ok_or_else(|| self.stale(cursor))
    }

    /// The page of `items` at `offset` (from `cursor`), and the cursor of the next one.
    pub(super) fn page<T>(
        &self,
        mut items: Vec<T>,
        offset: usize,
        cursor: Option<&str>,
    ) -> Result<(Vec<T>, Option<String>), ErrorData> {
        let total = items.len();
        if offset > total {
            return Err(self.stale(cursor.unwrap_or_default()));
        }
        let end = offset.saturating_add(self.size).min(total);
        let page = items.drain(offset..end).collect();
        Ok((page, (end < total).then(|| end.to_string())))
    }

    /// The refusal of a cursor this session did not give (or no longer can follow).
    fn stale(&self, cursor: &str) -> ErrorData {
        ErrorData::invalid_params(
            format!(
                "the cursor `{}` is not one this server gave for `{}`",
                shown(cursor),
                self.method
            ),
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cursors_of_whole_pages_are_followed() {
        for size in [64, 7] {
            let pages = Pages {
                size,
                method: "skills/list",
            };
            let offset = |cursor: &str| pages.offset(Some(cursor));
            assert_eq!(pages.offset(None).unwrap(), 0);
            assert_eq!(offset(&size.to_string()).unwrap(), size);
            assert_eq!(offset(&(3 * size).to_string()).unwrap(), 3 * size);
            for hostile in ["", "0", "1", "-64", "+64", "64 ", "6.4e1", "x", "0x40"] {
                assert!(offset(hostile).is_err(), "{hostile:?} was followed");
            }
            assert!(offset(&"9".repeat(MAX_CURSOR_BYTES + 1)).is_err());
            assert!(offset("18446744073709551616").is_err(), "overflows");
        }
    }

    #[test]
    fn a_page_names_the_next_and_a_cursor_past_the_end_is_stale() {
        let pages = Pages {
            size: 2,
            method: "resources/directory/read",
        };
        assert_eq!(
            pages.page(vec![1, 2, 3], 0, None).unwrap(),
            (vec![1, 2], Some("2".to_owned()))
        );
        assert_eq!(
            pages.page(vec![1, 2, 3], 2, Some("2")).unwrap(),
            (vec![3], None)
        );
        let stale = pages.page(vec![1], 2, Some("2")).unwrap_err();
        assert!(
            stale.message.contains("resources/directory/read"),
            "{}",
            stale.message
        );
    }
}
