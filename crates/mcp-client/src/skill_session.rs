//! A session's skills on the wire: `skills/list` and `skills/get` bounded and cleaned into
//! [`SkillEntry`]s, a skill's `SKILL.md` and files read with `resources/read` and checked
//! against the manifest before any of it is used.

use std::collections::HashMap;
use std::sync::Mutex;

use mcp_catalog::sanitize::Lines;
use rmcp::model::{
    GetSkillRequestParams, ReadResourceRequestParams, ResourceContents, Skill, SkillIntegrityError,
    SkillResource, SkillResources,
};

use crate::resources::{
    MAX_FEATURE_DESCRIPTION_BYTES, MAX_FEATURE_NAME_BYTES, MAX_URI_BYTES, comparable_uri,
    lies_within,
};
use crate::skills::{
    LoadedSkill, MAX_FRONTMATTER_BYTES, MAX_SKILL_BYTES, MAX_SKILL_FILES, MAX_SKILL_NAME_BYTES,
    SkillData, SkillEntry, SkillFile, SkillFileContents, SkillFiles, SkillProblem, base64_len,
    compare_frontmatter, parse_frontmatter, shown_without_escapes, without_escapes,
};
use crate::{FeatureError, Session};

/// What one read returned, before it is checked.
pub(crate) struct Read {
    pub(crate) bytes: Vec<u8>,
    pub(crate) text: bool,
    pub(crate) mime_type: Option<String>,
    /// The base64 a blob came as (`None` for text).
    pub(crate) blob: Option<String>,
}

impl Session {
    /// True when the server declared the skills extension (`io.modelcontextprotocol/skills`).
    ///
    /// ```no_run
    /// # fn show(session: &mcp_client::Session) {
    /// if session.offers_skills() {
    ///     println!("{} serves skills", session.name());
    /// }
    /// # }
    /// ```
    pub fn offers_skills(&self) -> bool {
        self.peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.supports_skills())
    }

    /// The name of the innermost listed skill `uri` is a file of ([`SkillEntry::owns`]), if
    /// any: such a file is read as the skill's, not as a plain resource. Nothing is asked of a
    /// server without the skills extension. When its listing fails, a `skill://` URI fails
    /// too (whose it is cannot be told); any other is taken as a plain resource.
    pub(crate) async fn skill_owning(&self, uri: &str) -> Result<Option<String>, FeatureError> {
        if !self.offers_skills() {
            return Ok(None);
        }
        let listed = match self.list_skills().await {
            Ok(listed) => listed,
            Err(e) if uri.starts_with("skill://") => return Err(e),
            Err(_) => return Ok(None),
        };
        Ok(SkillEntry::owner(&listed, uri).map(|skill| skill.name.clone()))
    }

    pub(crate) fn skill_error(
        &self,
        skill: &str,
        file: Option<&str>,
        problem: SkillProblem,
    ) -> FeatureError {
        FeatureError::Skill {
            server: self.name().to_owned(),
            skill: without_escapes(skill, MAX_SKILL_NAME_BYTES, Lines::Single),
            file: file.map(|f| without_escapes(f, MAX_URI_BYTES, Lines::Single)),
            problem,
        }
    }

    /// Lists the server's skills (`skills/list`, every page) within the session's
    /// [`ListLimits`](crate::ListLimits) and the call timeout; nothing when the server did not
    /// declare the extension. No file of any skill is read. Each entry is checked and cleaned
    /// (see [`SkillEntry`]); one whose URI is not clean is left out, one over a bound or
    /// breaking the extension's rules is kept with [`SkillEntry::refused`] set.
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// for skill in session.list_skills().await? {
    ///     println!("{}: {}", skill.name, skill.description);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_skills(&self) -> Result<Vec<SkillEntry>, FeatureError> {
        if !self.offers_skills() {
            return Ok(Vec::new());
        }
        let peer = self.peer().clone();
        let listed = self
            .feature_listing("skills/list", move |params| {
                let peer = peer.clone();
                async move {
                    let page = peer.list_skills(params).await?;
                    Ok((page.skills, page.next_cursor))
                }
            })
            .await?;
        Ok(listed
            .into_iter()
            .filter_map(|skill| self.entry_of(skill))
            .collect())
    }

    /// The entry of the skill whose `SKILL.md` is at `uri` (`skills/get`), checked and cleaned
    /// like a listed one.
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// let skill = session.get_skill("skill://pdf-processing/SKILL.md").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_skill(&self, uri: &str) -> Result<SkillEntry, FeatureError> {
        if !crate::resources::is_clean_uri(uri) {
            return Err(FeatureError::InvalidUri {
                server: self.name().to_owned(),
                limit: MAX_URI_BYTES,
            });
        }
        let params = GetSkillRequestParams::new(uri);
        let result = self
            .feature_request("skills/get", self.peer().get_skill(params))
            .await?;
        if result.skill.uri != uri {
            return Err(self.skill_error(
                uri,
                None,
                SkillProblem::Invalid("`skills/get` answered with another skill".into()),
            ));
        }
        self.entry_of(result.skill).ok_or_else(|| {
            self.skill_error(
                uri,
                None,
                SkillProblem::Invalid("its URI is not clean".into()),
            )
        })
    }

    /// The entry a listed skill becomes; `None` for one whose URI is not clean, or whose URI,
    /// name or file URIs hold one of the run's secrets.
    fn entry_of(&self, skill: Skill) -> Option<SkillEntry> {
        if !crate::resources::is_clean_uri(&skill.uri)
            || self.holds_secret(&skill.uri)
            || self.holds_secret(&skill.frontmatter.name)
        {
            return None;
        }
        if let SkillResources::Files(files) = &skill.resources
            && files.iter().any(|f| self.holds_secret(&f.uri))
        {
            return None;
        }
        let name = without_escapes(&skill.frontmatter.name, MAX_SKILL_NAME_BYTES, Lines::Single);
        // Also as shown: removing an escape sequence may join a secret it split.
        if self.holds_secret(&name) {
            return None;
        }
        let description = shown_without_escapes(
            self.redactor(),
            &skill.frontmatter.description,
            MAX_FEATURE_DESCRIPTION_BYTES,
            Lines::Multi,
        );
        let mut refused = None;
        let mut frontmatter = match serde_json::to_value(&skill.frontmatter) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => Default::default(),
        };
        let frontmatter_bytes = serde_json::to_vec(&frontmatter).map_or(usize::MAX, |v| v.len());
        if frontmatter_bytes > MAX_FRONTMATTER_BYTES {
            frontmatter = Default::default();
            refused = Some(SkillProblem::FrontmatterTooLarge {
                limit: MAX_FRONTMATTER_BYTES,
            });
        }
        if refused.is_none()
            && let Err(e) = skill.validate()
        {
            refused = Some(SkillProblem::Invalid(shown_without_escapes(
                self.redactor(),
                &e.to_string(),
                MAX_FEATURE_DESCRIPTION_BYTES,
                Lines::Single,
            )));
        }
        let files = match skill.resources {
            SkillResources::Files(files) => {
                let total = files.iter().fold(0u64, |n, f| n.saturating_add(f.size));
                if refused.is_none() && files.len() > MAX_SKILL_FILES {
                    refused = Some(SkillProblem::TooManyFiles {
                        count: files.len(),
                        limit: MAX_SKILL_FILES,
                    });
                } else if refused.is_none() && total > MAX_SKILL_BYTES {
                    refused = Some(SkillProblem::TooLarge {
                        total,
                        limit: MAX_SKILL_BYTES,
                    });
                } else if refused.is_none()
                    && files
                        .iter()
                        .any(|f| !crate::resources::is_clean_uri(&f.uri))
                {
                    refused = Some(SkillProblem::Invalid(
                        "a file's URI is empty, too long or holds control characters".into(),
                    ));
                }
                if refused.is_some() {
                    SkillFiles::Listed(Vec::new())
                } else {
                    SkillFiles::Listed(
                        files
                            .into_iter()
                            .map(|f| SkillFile {
                                uri: f.uri,
                                digest: f.digest,
                                size: f.size,
                            })
                            .collect(),
                    )
                }
            }
            _ => SkillFiles::Dynamic,
        };
        Some(SkillEntry {
            uri: skill.uri,
            name,
            description,
            files,
            refused,
            frontmatter,
        })
    }

    /// The one listed skill named `name` (`skills/list`); none or several is a
    /// [`FeatureError::Skill`] naming the server and the skill.
    pub(crate) async fn find_skill(&self, name: &str) -> Result<SkillEntry, FeatureError> {
        self.one_named(&self.list_skills().await?, name).cloned()
    }

    /// The one of `listed` named `name`, as [`find_skill`](Self::find_skill) says.
    fn one_named<'a>(
        &self,
        listed: &'a [SkillEntry],
        name: &str,
    ) -> Result<&'a SkillEntry, FeatureError> {
        let mut found = listed.iter().filter(|e| e.name == name);
        match (found.next(), found.count()) {
            (Some(entry), 0) => Ok(entry),
            (None, _) => Err(self.skill_error(name, None, SkillProblem::Unknown)),
            (Some(_), more) => {
                Err(self.skill_error(name, None, SkillProblem::Ambiguous { count: more + 1 }))
            }
        }
    }

    /// `mcp_read` of a skill's file: the skill named `skill` found and loaded (its `SKILL.md`
    /// checked) on the session's first read of it and kept, then `file` (a path within the
    /// skill's directory, `SKILL.md` for its instructions) read on first use and checked
    /// ([`read_skill_file`](Self::read_skill_file)). A binary file is described, not returned.
    pub(crate) async fn skill_file(
        &self,
        skill: &str,
        file: &str,
    ) -> Result<Vec<ResourceContents>, FeatureError> {
        let loaded = match self.kept_skills().get(skill) {
            Some(loaded) => loaded,
            None => {
                let listed = self.list_skills().await?;
                let entry = self.one_named(&listed, skill)?;
                let loaded = self.load_listed(entry, &listed).await?;
                self.kept_skills().keep(skill, loaded)
            }
        };
        let uri = format!(
            "{}{}",
            loaded.entry.directory(),
            file.trim_start_matches('/')
        );
        let contents = self.read_skill_file(&loaded, &uri).await?;
        let text = match &contents.data {
            SkillData::Text(text) => text.clone(),
            SkillData::Binary(bytes) => format!(
                "(a binary file of {} bytes{}; not shown)",
                bytes.len(),
                contents
                    .mime_type
                    .as_deref()
                    .map(|m| format!(", {m}"))
                    .unwrap_or_default()
            ),
        };
        Ok(vec![ResourceContents::TextResourceContents {
            uri: contents.uri.clone(),
            mime_type: contents.mime_type.clone(),
            text,
            meta: None,
        }])
    }

    /// Loads a skill: reads its `SKILL.md` (`resources/read`), checks its size and digest
    /// against the manifest and its frontmatter against the entry, field by field, and notes
    /// the other listed skills within its directory (`skills/list`), whose files are theirs
    /// ([`read_skill_file`](Self::read_skill_file) refuses them). Its other files are not
    /// read. A refused entry, a mismatch or an unreadable frontmatter is a
    /// [`FeatureError::Skill`] naming the server, the skill and the file; nothing read of it is
    /// returned.
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session) -> Result<(), mcp_client::FeatureError> {
    /// let skills = session.list_skills().await?;
    /// let skill = session.load_skill(&skills[0]).await?;
    /// println!("{}", skill.instructions);
    /// # Ok(()) }
    /// ```
    pub async fn load_skill(&self, entry: &SkillEntry) -> Result<LoadedSkill, FeatureError> {
        self.load_listed(entry, &self.list_skills().await?).await
    }

    /// [`load_skill`](Self::load_skill), the server's skills already `listed`.
    async fn load_listed(
        &self,
        entry: &SkillEntry,
        listed: &[SkillEntry],
    ) -> Result<LoadedSkill, FeatureError> {
        if let Some(problem) = &entry.refused {
            return Err(self.skill_error(&entry.name, None, problem.clone()));
        }
        let manifest = entry.file(&entry.uri).cloned();
        if manifest.is_none() && matches!(entry.files, SkillFiles::Listed(_)) {
            return Err(self.skill_error(&entry.name, Some(&entry.uri), SkillProblem::NotListed));
        }
        let read = self
            .read_checked(entry, &entry.uri, manifest.as_ref())
            .await?;
        let problem = |p| self.skill_error(&entry.name, Some(&entry.uri), p);
        let text = String::from_utf8(read.bytes).map_err(|_| {
            problem(SkillProblem::Frontmatter(
                "SKILL.md is not UTF-8 text".into(),
            ))
        })?;
        let frontmatter = parse_frontmatter(&text).map_err(problem)?;
        compare_frontmatter(&frontmatter, &entry.frontmatter).map_err(problem)?;
        let nested = nested_in(entry, listed);
        Ok(LoadedSkill {
            server: self.name().to_owned(),
            entry: entry.clone(),
            instructions: shown_without_escapes(self.redactor(), &text, usize::MAX, Lines::Multi),
            bytes: text.len(),
            files: Mutex::new(HashMap::new()),
            nested,
        })
    }

    /// A file of a loaded skill, read on its first use (`resources/read`) and checked against
    /// its manifest entry (size, then digest); later uses return what was read. A file the
    /// manifest does not list (for a dynamic skill: outside its directory, or with a query or
    /// fragment) is refused without a request. Asking for the `SKILL.md` returns its
    /// instructions as read at load. The files kept stay within a skill's bounds (see
    /// [`MAX_SKILL_FILES`](crate::MAX_SKILL_FILES), [`MAX_SKILL_BYTES`](crate::MAX_SKILL_BYTES)).
    ///
    /// ```no_run
    /// # async fn show(session: &mcp_client::Session, skill: &mcp_client::LoadedSkill)
    /// # -> Result<(), mcp_client::FeatureError> {
    /// let forms = session
    ///     .read_skill_file(skill, "skill://pdf-processing/references/FORMS.md")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_skill_file(
        &self,
        skill: &LoadedSkill,
        uri: &str,
    ) -> Result<std::sync::Arc<SkillFileContents>, FeatureError> {
        let entry = &skill.entry;
        if uri == entry.uri {
            return Ok(std::sync::Arc::new(SkillFileContents {
                uri: uri.to_owned(),
                mime_type: Some("text/markdown".into()),
                data: SkillData::Text(skill.instructions.clone()),
                bytes: skill.bytes,
            }));
        }
        if let Some(kept) = skill.cached(uri) {
            return Ok(kept);
        }
        if let Some(dir) = skill.nested.iter().find(|dir| lies_within(uri, dir)) {
            let dir = without_escapes(dir, MAX_URI_BYTES, Lines::Single);
            return Err(self.skill_error(
                &entry.name,
                Some(uri),
                SkillProblem::Invalid(format!(
                    "it lies within another skill (`{dir}`): read it as that skill's"
                )),
            ));
        }
        let manifest = entry.file(uri).cloned();
        let inside = match &entry.files {
            SkillFiles::Listed(_) => manifest.is_some(),
            // No query or fragment: each would make another URI of the same file.
            _ => {
                uri.starts_with(entry.directory())
                    && crate::resources::is_clean_uri(uri)
                    && !uri.contains(['?', '#'])
            }
        };
        if !inside {
            return Err(self.skill_error(&entry.name, Some(uri), SkillProblem::NotListed));
        }
        let read = self.read_checked(entry, uri, manifest.as_ref()).await?;
        let bytes = read.bytes.len();
        let data = if read.text {
            let text = String::from_utf8(read.bytes).unwrap_or_default();
            SkillData::Text(self.redactor().scrub(&text).into_owned())
        } else {
            SkillData::Binary(read.bytes)
        };
        Ok(skill.keep(SkillFileContents {
            uri: uri.to_owned(),
            mime_type: read
                .mime_type
                .map(|m| without_escapes(&m, MAX_FEATURE_NAME_BYTES, Lines::Single)),
            data,
            bytes,
        }))
    }

    /// Reads `uri` and checks its bytes against `manifest` (a dynamic skill's file: against
    /// [`MAX_SKILL_BYTES`] only).
    pub(crate) async fn read_checked(
        &self,
        entry: &SkillEntry,
        uri: &str,
        manifest: Option<&SkillFile>,
    ) -> Result<Read, FeatureError> {
        let problem = |p| self.skill_error(&entry.name, Some(uri), p);
        if !crate::resources::is_clean_uri(uri) {
            return Err(FeatureError::InvalidUri {
                server: self.name().to_owned(),
                limit: MAX_URI_BYTES,
            });
        }
        let params = ReadResourceRequestParams::new(uri);
        let result = self
            .feature_request("resources/read", self.peer().read_resource(params))
            .await?;
        let expected = manifest.map_or(MAX_SKILL_BYTES, |f| f.size);
        // Base64 of the expected bytes, and some: far more than that is not worth checking.
        let bound = base64_len(expected).saturating_add(64 * 1024);
        let size = result.contents.iter().fold(0u64, |n, c| {
            n.saturating_add(crate::resources::content_len(c) as u64)
        });
        if size > bound {
            return Err(problem(SkillProblem::Oversized { expected }));
        }
        let read = match result.contents.into_iter().next() {
            Some(ResourceContents::TextResourceContents {
                text, mime_type, ..
            }) => Read {
                bytes: text.into_bytes(),
                text: true,
                mime_type,
                blob: None,
            },
            Some(ResourceContents::BlobResourceContents {
                blob, mime_type, ..
            }) => Read {
                bytes: decode_base64(&blob).ok_or_else(|| FeatureError::NotBase64 {
                    server: self.name().to_owned(),
                    uri: without_escapes(uri, MAX_URI_BYTES, Lines::Single),
                })?,
                text: false,
                mime_type,
                blob: Some(blob),
            },
            _ => return Err(problem(SkillProblem::NoContent)),
        };
        if let Some(file) = manifest {
            SkillResource::new(uri, file.digest.clone(), file.size)
                .verify(&read.bytes)
                .map_err(|e| {
                    problem(match e {
                        SkillIntegrityError::Size {
                            expected, actual, ..
                        } => SkillProblem::Size { expected, actual },
                        SkillIntegrityError::Digest {
                            expected, actual, ..
                        } => SkillProblem::Digest {
                            expected: expected.into(),
                            actual: actual.into(),
                        },
                        other => SkillProblem::Invalid(without_escapes(
                            &other.to_string(),
                            512,
                            Lines::Single,
                        )),
                    })
                })?;
        } else if read.bytes.len() as u64 > MAX_SKILL_BYTES {
            return Err(problem(SkillProblem::Oversized { expected }));
        }
        Ok(read)
    }
}

/// The bytes of standard base64 (RFC 4648 §4, `=` padding); `None` when `text` is not that.
/// (A stdio-only build carries no base64 crate.)
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    if !crate::resources::is_base64(text) {
        return None;
    }
    let value = |b: u8| match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let data = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(data.len() * 3 / 4);
    for chunk in data.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(value(b)) << (18 - 6 * i));
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// The directories of the skills of `listed` within `entry`'s: a file there is the inner
/// skill's, so reading it as `entry`'s would skip the inner skill's rules.
fn nested_in(entry: &SkillEntry, listed: &[SkillEntry]) -> Vec<String> {
    let outer = comparable_uri(entry.directory());
    listed
        .iter()
        .filter(|s| s.uri != entry.uri)
        .map(|s| s.directory().to_owned())
        .filter(|dir| {
            let dir = comparable_uri(dir);
            dir.len() > outer.len() && dir.starts_with(&*outer)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_decodes_the_rfc_vectors() {
        for (text, bytes) in [
            ("", ""),
            ("Zg==", "f"),
            ("Zm8=", "fo"),
            ("Zm9v", "foo"),
            ("Zm9vYmE=", "fooba"),
            ("Zm9vYmFy", "foobar"),
        ] {
            assert_eq!(super::decode_base64(text).unwrap(), bytes.as_bytes());
        }
        assert_eq!(super::decode_base64("not base64!"), None);
    }
}
