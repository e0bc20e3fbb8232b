//! A run's skills, governed like its resources: the `[policy]` `skill` rules
//! ([`agent_core::Rule::skill`], matched against the skill's name) decide before anything is
//! sent, listings hide the skills they refuse, and every load and file read is a `skill_read`
//! event (denials too, with outcome `denied`) on the run's bus.

use std::sync::Arc;
use std::time::Instant;

use agent_core::EventKind;
use mcp_catalog::sanitize::Lines;

use crate::skills::without_escapes;
use crate::{
    FeatureError, LoadedSkill, McpRunner, Session, SkillEntry, SkillFileContents, SkillProblem,
};

impl McpRunner {
    pub(crate) fn skill_allowed(&self, session: &Session, name: &str) -> Result<(), FeatureError> {
        let identity = session.identity().name.as_deref();
        self.governed()
            .identity_rules()
            .allows_skill(identity, name)
            .map_err(|denial| FeatureError::Denied {
                server: session.name().to_owned(),
                what: "skill",
                target: without_escapes(name, crate::MAX_SKILL_NAME_BYTES, Lines::Single),
                reason: denial.to_string(),
            })
    }

    /// The skills of `server` the run's `[policy]` allows (see [`Session::list_skills`]: every
    /// page within the session's bounds, entries cleaned, refused ones marked; nothing when the
    /// server does not offer skills). No file of any skill is read.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// for skill in runner.list_skills("docs").await? {
    ///     println!("{}\t{}", skill.name, skill.description);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_skills(&self, server: &str) -> Result<Vec<SkillEntry>, FeatureError> {
        let session = self.session_of(server)?;
        let listed = session.list_skills().await?;
        Ok(listed
            .into_iter()
            .filter(|s| self.skill_allowed(session, &s.name).is_ok())
            .collect())
    }

    /// The skills of every server of the run that offers them, listed concurrently (each as
    /// [`list_skills`](Self::list_skills) does, within its own bounds), in the run's server
    /// order; a server whose listing failed is there with its error.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) {
    /// for (server, listed) in runner.list_all_skills().await {
    ///     match listed {
    ///         Ok(skills) => println!("{server}: {} skills", skills.len()),
    ///         Err(e) => eprintln!("{e}"),
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn list_all_skills(&self) -> Vec<(String, Result<Vec<SkillEntry>, FeatureError>)> {
        let servers: Vec<String> = self
            .sessions()
            .iter()
            .filter(|s| s.0.offers_skills())
            .map(|s| s.name().to_owned())
            .collect();
        let listings =
            futures::future::join_all(servers.iter().map(|server| self.list_skills(server))).await;
        servers.into_iter().zip(listings).collect()
    }

    /// The entry of skill `skill` of `server`: by the URI of its `SKILL.md` (`skills/get`) when
    /// it holds `://`, else by name among the listed skills (several of that name:
    /// [`SkillProblem::Ambiguous`](crate::SkillProblem::Ambiguous)). The run's `[policy]` is checked first for a name.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let entry = runner.skill("docs", "pdf-processing").await?;
    /// println!("{} files", entry.files.listed().len());
    /// # Ok(()) }
    /// ```
    pub async fn skill(&self, server: &str, skill: &str) -> Result<SkillEntry, FeatureError> {
        let session = self.session_of(server)?;
        let entry = if skill.contains("://") {
            // Checked before anything is sent: a URI that names no skill is no skill's.
            let Some(name) = rmcp::model::skill_name_from_uri(skill) else {
                return Err(session.skill_error(
                    skill,
                    None,
                    SkillProblem::Invalid(
                        "not the URI of a skill's `SKILL.md` (`…/<name>/SKILL.md`, without a \
                         query or fragment)"
                            .into(),
                    ),
                ));
            };
            self.skill_allowed(session, name)?;
            session.get_skill(skill).await?
        } else {
            self.skill_allowed(session, skill)?;
            session.find_skill(skill).await?
        };
        self.skill_allowed(session, &entry.name)?;
        Ok(entry)
    }

    /// Loads skill `skill` of `server` (named as [`skill`](Self::skill) takes it), if the run's
    /// `[policy]` allows it (else [`FeatureError::Denied`], nothing sent): its `SKILL.md` read
    /// and checked ([`Session::load_skill`]); no other file is read. Emits a `skill_read`
    /// event for the `SKILL.md` either way.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let skill = runner.load_skill("docs", "pdf-processing").await?;
    /// println!("{}", skill.instructions);
    /// # Ok(()) }
    /// ```
    pub async fn load_skill(&self, server: &str, skill: &str) -> Result<LoadedSkill, FeatureError> {
        let session = self.session_of(server)?;
        let started = Instant::now();
        let (target, outcome) = match self.skill(server, skill).await {
            Ok(entry) => (entry.uri.clone(), session.load_skill(&entry).await),
            Err(e) => (skill.to_owned(), Err(e)),
        };
        self.tell(
            EventKind::SkillRead,
            session,
            &target,
            started,
            &outcome,
            |loaded| loaded.bytes,
        );
        outcome
    }

    /// A file of a loaded skill, read on its first use and checked against the skill's
    /// manifest ([`Session::read_skill_file`]), if the run's `[policy]` still allows the
    /// skill. Emits a `skill_read` event for a file read from the server (or refused); a file
    /// already read is returned without one.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let skill = runner.load_skill("docs", "pdf-processing").await?;
    /// let forms = runner
    ///     .read_skill_file(&skill, "skill://pdf-processing/references/FORMS.md")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_skill_file(
        &self,
        skill: &LoadedSkill,
        uri: &str,
    ) -> Result<Arc<SkillFileContents>, FeatureError> {
        let session = self.session_of(&skill.server)?;
        if let Some(kept) = skill.cached(uri) {
            return Ok(kept);
        }
        let started = Instant::now();
        let outcome = match self.skill_allowed(session, &skill.entry.name) {
            Ok(()) => session.read_skill_file(skill, uri).await,
            Err(denied) => Err(denied),
        };
        self.tell(
            EventKind::SkillRead,
            session,
            uri,
            started,
            &outcome,
            |contents| contents.bytes,
        );
        outcome
    }
}
