//! A run's skills served on (a gateway in front of the run's servers): each listed entry in the
//! extension's wire form ([`SkillEntry::to_skill`], [`McpRunner::served_skill`]), and a read of
//! a skill's file ([`McpRunner::read_skill_resource`]) decided by the run's `[policy]` `skill`
//! rules, checked against the skill's manifest (size, digest; a `SKILL.md`'s frontmatter
//! against its entry) before any of it is passed on, and told as a `skill_read` event.

use std::time::Instant;

use agent_core::EventKind;
use mcp_catalog::sanitize::Lines;
use rmcp::model::{ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources};

use crate::resources::{MAX_FEATURE_NAME_BYTES, content_len, is_clean_uri, lies_within};
use crate::skills::{compare_frontmatter, parse_frontmatter, without_escapes};
use crate::{FeatureError, McpRunner, Session, SessionView, SkillEntry, SkillFiles, SkillProblem};

impl SkillEntry {
    /// True when `uri` lies within this skill: its `SKILL.md`, a file of its manifest, or (a
    /// file the manifest does not list, or a dynamic skill's) a clean URI below its directory,
    /// its percent-escapes decoded (`skill://pdf%2Freferences/x` is within `skill://pdf/`).
    ///
    /// ```no_run
    /// # fn show(entry: &mcp_client::SkillEntry) {
    /// assert!(entry.owns(&entry.uri));
    /// # }
    /// ```
    pub fn owns(&self, uri: &str) -> bool {
        uri == self.uri
            || self.file(uri).is_some()
            || (lies_within(uri, self.directory()) && is_clean_uri(uri))
    }

    /// The innermost of `listed` that `uri` lies within ([`owns`](Self::owns)): a file of a
    /// skill nested in another (which the outer one's manifest may list too) is the inner
    /// skill's, read under its rules.
    pub(crate) fn owner<'a>(listed: &'a [SkillEntry], uri: &str) -> Option<&'a SkillEntry> {
        listed
            .iter()
            .filter(|skill| skill.owns(uri))
            .max_by_key(|skill| skill.directory().len())
    }

    /// The entry in the extension's wire form, to serve it on: its URI, its frontmatter as the
    /// server sent it (so it stays identical to its `SKILL.md`'s), its manifest (or
    /// `"dynamic"`); `None` for a refused entry ([`refused`](Self::refused)).
    ///
    /// ```no_run
    /// # fn show(entry: &mcp_client::SkillEntry) {
    /// if let Some(skill) = entry.to_skill() {
    ///     assert_eq!(skill.uri, entry.uri);
    /// }
    /// # }
    /// ```
    pub fn to_skill(&self) -> Option<Skill> {
        if self.refused.is_some() {
            return None;
        }
        let frontmatter: SkillFrontmatter =
            serde_json::from_value(serde_json::Value::Object(self.frontmatter.clone())).ok()?;
        let resources = match &self.files {
            SkillFiles::Listed(files) => SkillResources::Files(
                files
                    .iter()
                    .map(|f| SkillResource::new(f.uri.clone(), f.digest.clone(), f.size))
                    .collect(),
            ),
            SkillFiles::Dynamic => SkillResources::Dynamic,
        };
        Some(Skill::new(self.uri.clone(), frontmatter, resources))
    }
}

impl SessionView {
    /// True when the server declared the skills extension.
    ///
    /// ```no_run
    /// # fn show(runner: &mcp_client::McpRunner) {
    /// let with_skills = runner.sessions().iter().filter(|s| s.offers_skills()).count();
    /// # }
    /// ```
    pub fn offers_skills(&self) -> bool {
        self.0.offers_skills()
    }
}

impl McpRunner {
    /// `entry` of `server` as served on ([`SkillEntry::to_skill`]), its frontmatter's text
    /// without the run's secrets; `None` for a refused entry.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let skills: Vec<_> = runner
    ///     .list_skills("docs")
    ///     .await?
    ///     .iter()
    ///     .filter_map(|entry| runner.served_skill(entry))
    ///     .collect();
    /// # Ok(()) }
    /// ```
    pub fn served_skill(&self, entry: &SkillEntry) -> Option<Skill> {
        let mut skill = entry.to_skill()?;
        let mut frontmatter = serde_json::to_value(&skill.frontmatter).ok()?;
        self.redactor().scrub_json(&mut frontmatter);
        skill.frontmatter = serde_json::from_value(frontmatter).ok()?;
        Some(skill)
    }

    /// The skills `server` lists that the run's `[policy]` refuses (those
    /// [`list_skills`](Self::list_skills) leaves out): what a gateway hides the files of.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let hidden = runner.refused_skills("docs").await?;
    /// let shown = |uri: &str| !hidden.iter().any(|skill| skill.owns(uri));
    /// # Ok(()) }
    /// ```
    pub async fn refused_skills(&self, server: &str) -> Result<Vec<SkillEntry>, FeatureError> {
        let session = self.session_of(server)?;
        if !session.offers_skills() {
            return Ok(Vec::new());
        }
        Ok(session
            .list_skills()
            .await?
            .into_iter()
            .filter(|s| self.skill_allowed(session, &s.name).is_err())
            .collect())
    }

    /// Reads `uri` of `server` as a file of one of its skills, if it lies within one
    /// ([`SkillEntry::owns`]; `Ok(None)` when it does not, or the server offers no skills): the
    /// run's `[policy]` `skill` rules decide first (else [`FeatureError::Denied`], nothing
    /// read), the file must be in the skill's manifest (a dynamic skill's: within its
    /// directory), and what is read must have the manifest's size and digest (a `SKILL.md`, the
    /// entry's frontmatter) before anything of it is returned, as the server sent it (text
    /// without the run's secrets). Emits a `skill_read` event either way.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let uri = "skill://pdf-processing/references/FORMS.md";
    /// if let Some(contents) = runner.read_skill_resource("docs", uri).await? {
    ///     println!("{} parts", contents.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn read_skill_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<Option<Vec<ResourceContents>>, FeatureError> {
        let session = self.session_of(server)?;
        if !session.offers_skills() {
            return Ok(None);
        }
        let listed = session.list_skills().await?;
        let Some(entry) = SkillEntry::owner(&listed, uri) else {
            return Ok(None);
        };
        let started = Instant::now();
        let outcome = match self.skill_allowed(session, &entry.name) {
            Ok(()) => session.read_served_file(entry, uri).await,
            Err(denied) => Err(denied),
        };
        self.tell(
            EventKind::SkillRead,
            session,
            uri,
            started,
            &outcome,
            |contents| contents.iter().map(content_len).sum(),
        );
        outcome.map(Some)
    }
}

impl Session {
    /// A file of `entry` read and checked for serving on (see
    /// [`McpRunner::read_skill_resource`]).
    async fn read_served_file(
        &self,
        entry: &SkillEntry,
        uri: &str,
    ) -> Result<Vec<ResourceContents>, FeatureError> {
        if let Some(problem) = &entry.refused {
            return Err(self.skill_error(&entry.name, None, problem.clone()));
        }
        let manifest = entry.file(uri).cloned();
        if manifest.is_none() && matches!(entry.files, SkillFiles::Listed(_)) {
            return Err(self.skill_error(&entry.name, Some(uri), SkillProblem::NotListed));
        }
        let read = self.read_checked(entry, uri, manifest.as_ref()).await?;
        let problem = |p| self.skill_error(&entry.name, Some(uri), p);
        if uri == entry.uri {
            let text = std::str::from_utf8(&read.bytes).map_err(|_| {
                problem(SkillProblem::Frontmatter(
                    "SKILL.md is not UTF-8 text".into(),
                ))
            })?;
            let frontmatter = parse_frontmatter(text).map_err(problem)?;
            compare_frontmatter(&frontmatter, &entry.frontmatter).map_err(problem)?;
        }
        let mime_type = read
            .mime_type
            .map(|m| without_escapes(&m, MAX_FEATURE_NAME_BYTES, Lines::Single));
        let content = match read.blob {
            Some(blob) => ResourceContents::BlobResourceContents {
                uri: uri.to_owned(),
                mime_type,
                blob,
                meta: None,
            },
            None => ResourceContents::TextResourceContents {
                uri: uri.to_owned(),
                mime_type,
                text: self
                    .redactor()
                    .scrub(&String::from_utf8_lossy(&read.bytes))
                    .into_owned(),
                meta: None,
            },
        };
        Ok(vec![content])
    }
}
