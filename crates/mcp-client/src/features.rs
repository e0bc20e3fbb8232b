//! A run's resources, prompts and completions, governed like its tool calls: the run's
//! `[policy]` rules ([`agent_core::Rule::resource`], [`agent_core::Rule::prompt`]) decide
//! before anything is sent, listings hide what they refuse, and every read or get is a
//! `resource_read` / `prompt_got` event (denials too, with outcome `denied`) on the run's
//! bus, so its sink, subscribers and history see it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use agent_core::{CallOutcome, Event, EventKind, EventSink};
use mcp_catalog::sanitize::{Lines, clean};
use rmcp::model::{
    CompletionInfo, GetPromptResult, Prompt, Reference, Resource, ResourceContents,
    ResourceTemplate,
};

use crate::resources::{content_len, is_clean_uri};
use crate::updates::Added;
use crate::{FeatureError, MAX_SUBSCRIPTIONS, MAX_URI_BYTES, McpRunner, Session};

/// What a rule check is about.
#[derive(Clone, Copy)]
enum Target<'a> {
    Resource(&'a str),
    Prompt(&'a str),
}

impl McpRunner {
    pub(crate) fn session_of(&self, server: &str) -> Result<&Arc<Session>, FeatureError> {
        self.sessions()
            .iter()
            .find(|s| s.name() == server)
            .map(|s| &s.0)
            .ok_or_else(|| FeatureError::UnknownServer {
                server: clean(server, 256, Lines::Single).into_owned(),
            })
    }

    fn allowed(&self, session: &Session, target: Target<'_>) -> Result<(), FeatureError> {
        let rules = self.governed().identity_rules();
        let identity = session.identity().name.as_deref();
        let (what, name, decision) = match target {
            Target::Resource(uri) => ("resource", uri, rules.allows_resource(identity, uri)),
            Target::Prompt(name) => ("prompt", name, rules.allows_prompt(identity, name)),
        };
        decision.map_err(|denial| FeatureError::Denied {
            server: session.name().to_owned(),
            what,
            target: clean(name, MAX_URI_BYTES, Lines::Single).into_owned(),
            reason: denial.to_string(),
        })
    }

    /// Emits the event of one read or get.
    pub(crate) fn tell<T>(
        &self,
        kind: EventKind,
        session: &Session,
        target: &str,
        started: Instant,
        outcome: &Result<T, FeatureError>,
        bytes: impl Fn(&T) -> usize,
    ) {
        let target = clean(target, MAX_URI_BYTES, Lines::Single);
        let mut event = Event::new(kind)
            .with_target(session.name(), &target)
            .with_server_identity(session.identity().name.as_deref())
            .with_duration(started.elapsed());
        event = match outcome {
            Ok(value) => {
                let mut event = event.with_outcome(CallOutcome::Ok);
                event.output_bytes = Some(bytes(value) as u64);
                event
            }
            Err(e) => event
                .with_outcome(e.outcome())
                .with_message(self.redactor().scrub(&e.to_string())),
        };
        self.governed().events().emit(event);
    }

    /// The instructions the server `server` gave in its initialize result (bounded by
    /// [`MAX_INSTRUCTIONS_BYTES`](crate::MAX_INSTRUCTIONS_BYTES), cleaned and scrubbed), if
    /// it is open in this run and gave any.
    ///
    /// ```no_run
    /// # fn show(runner: &mcp_client::McpRunner) {
    /// if let Some(text) = runner.instructions("docs") {
    ///     println!("{text}");
    /// }
    /// # }
    /// ```
    pub fn instructions(&self, server: &str) -> Option<&str> {
        self.session_of(server)
            .ok()?
            .identity()
            .instructions
            .as_deref()
    }

    /// The resources of `server` the run's `[policy]` allows (see
    /// [`Session::list_resources`] for the bounds and cleaning).
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// for resource in runner.list_resources("docs").await? {
    ///     println!("{}", resource.uri);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_resources(&self, server: &str) -> Result<Vec<Resource>, FeatureError> {
        let session = self.session_of(server)?;
        let listed = session.list_resources().await?;
        Ok(listed
            .into_iter()
            .filter(|r| self.allowed(session, Target::Resource(&r.uri)).is_ok())
            .collect())
    }

    /// The resource templates of `server` whose URI template the run's `[policy]` resource
    /// rules allow (matched as a URI: `file:///public/*` allows `file:///public/{path}`).
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let templates = runner.list_resource_templates("docs").await?;
    /// # Ok(()) }
    /// ```
    pub async fn list_resource_templates(
        &self,
        server: &str,
    ) -> Result<Vec<ResourceTemplate>, FeatureError> {
        let session = self.session_of(server)?;
        let listed = session.list_resource_templates().await?;
        Ok(listed
            .into_iter()
            .filter(|t| {
                self.allowed(session, Target::Resource(&t.uri_template))
                    .is_ok()
            })
            .collect())
    }

    /// Reads the resource at `uri` of `server`, if the run's `[policy]` allows it (else
    /// [`FeatureError::Denied`], nothing sent), within [`MAX_RESOURCE_BYTES`](crate::MAX_RESOURCE_BYTES)
    /// (see [`Session::read_resource_within`]). Emits a `resource_read` event either way. A
    /// file of a listed skill is read as the skill's
    /// ([`read_skill_resource`](Self::read_skill_resource): the skill rules, its manifest, a
    /// `skill_read` event).
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let contents = runner.read_resource("docs", "file:///public/readme.md").await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<Vec<ResourceContents>, FeatureError> {
        if let Some(contents) = self.read_skill_resource(server, uri).await? {
            return Ok(contents);
        }
        let session = self.session_of(server)?;
        let started = Instant::now();
        let outcome = match self.allowed(session, Target::Resource(uri)) {
            Ok(()) => session.read_resource(uri).await,
            Err(denied) => Err(denied),
        };
        self.tell(
            EventKind::ResourceRead,
            session,
            uri,
            started,
            &outcome,
            |contents| contents.iter().map(content_len).sum(),
        );
        outcome
    }

    /// Subscribes the run to changes of the resource at `uri` of `server`, if the run's
    /// `[policy]` allows reading it (by the skill rules for a file of a listed skill): the
    /// server's `notifications/resources/updated` for it
    /// become `resource_updated` events of the run — at most one per URI each
    /// [`UPDATE_EVENT_INTERVAL`](crate::UPDATE_EVENT_INTERVAL), a flood coalesced and counted
    /// in the event's message. At most [`MAX_SUBSCRIPTIONS`] per server; notifications for
    /// URIs the run did not subscribe to are ignored.
    ///
    /// ```no_run
    /// # async fn sub(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// runner.subscribe_resource("docs", "file:///public/log.txt").await?;
    /// let mut events = runner.governed().subscribe();
    /// # Ok(()) }
    /// ```
    pub async fn subscribe_resource(&self, server: &str, uri: &str) -> Result<(), FeatureError> {
        let session = self.session_of(server)?;
        self.allowed(session, Target::Resource(uri))?;
        // A skill's file is the skill's: its rules decide (as for a read).
        if let Some(skill) = session.skill_owning(uri).await? {
            self.skill_allowed(session, &skill)?;
        }
        if !is_clean_uri(uri) {
            return Err(FeatureError::InvalidUri {
                server: session.name().to_owned(),
                limit: MAX_URI_BYTES,
            });
        }
        let inbox = self
            .updates
            .inbox(server, session.updates(), self.governed().events());
        match inbox.add(uri) {
            Added::New => {}
            // A second subscription of the run to the same URI: already told, and a failure
            // to tell again must not drop the first.
            Added::Held => return Ok(()),
            Added::Full => {
                return Err(FeatureError::TooManySubscriptions {
                    server: server.to_owned(),
                    limit: MAX_SUBSCRIPTIONS,
                });
            }
        }
        if let Err(e) = session.subscribe_resource(uri).await {
            inbox.remove(uri);
            return Err(e);
        }
        Ok(())
    }

    /// Ends the run's subscription to `uri` of `server`. The server is told
    /// (`resources/unsubscribe`) unless another run sharing the session still holds one.
    ///
    /// ```no_run
    /// # async fn unsub(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// runner.unsubscribe_resource("docs", "file:///public/log.txt").await?;
    /// # Ok(()) }
    /// ```
    pub async fn unsubscribe_resource(&self, server: &str, uri: &str) -> Result<(), FeatureError> {
        let session = self.session_of(server)?;
        let Some(inbox) = self.updates.existing(server) else {
            return Ok(());
        };
        if !inbox.remove(uri) || session.updates().wanted_elsewhere(uri, &inbox) {
            return Ok(());
        }
        session.unsubscribe_resource(uri).await
    }

    /// The prompts of `server` the run's `[policy]` allows (see [`Session::list_prompts`]).
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// for prompt in runner.list_prompts("git").await? {
    ///     println!("{}", prompt.name);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_prompts(&self, server: &str) -> Result<Vec<Prompt>, FeatureError> {
        let session = self.session_of(server)?;
        let listed = session.list_prompts().await?;
        Ok(listed
            .into_iter()
            .filter(|p| self.allowed(session, Target::Prompt(&p.name)).is_ok())
            .collect())
    }

    /// Gets prompt `name` of `server` with `arguments`, if the run's `[policy]` allows it
    /// (else [`FeatureError::Denied`], nothing sent); see [`Session::get_prompt`] for the
    /// argument check and bounds. Emits a `prompt_got` event either way.
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// let args = [("code".to_owned(), "fn main() {}".to_owned())].into_iter().collect();
    /// let prompt = runner.get_prompt("git", "review_code", args).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<GetPromptResult, FeatureError> {
        let session = self.session_of(server)?;
        let started = Instant::now();
        let outcome = match self.allowed(session, Target::Prompt(name)) {
            Ok(()) => session.get_prompt(name, arguments).await,
            Err(denied) => Err(denied),
        };
        self.tell(
            EventKind::PromptGot,
            session,
            name,
            started,
            &outcome,
            |result| {
                serde_json::to_vec(&result.messages)
                    .map(|v| v.len())
                    .unwrap_or(0)
            },
        );
        outcome
    }

    /// Completes `argument`'s `value` of a prompt or resource template of `server`
    /// (`completion/complete`), if the run's `[policy]` allows that prompt or template (see
    /// [`Session::complete`]).
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// use rmcp::model::Reference;
    /// let info = runner.complete("git", Reference::for_prompt("review_code"), "language", "ru").await?;
    /// # Ok(()) }
    /// ```
    pub async fn complete(
        &self,
        server: &str,
        reference: Reference,
        argument: &str,
        value: &str,
    ) -> Result<CompletionInfo, FeatureError> {
        self.complete_in_context(server, reference, argument, value, BTreeMap::new())
            .await
    }

    /// [`complete`](Self::complete) with the values already chosen for the other arguments
    /// (see [`Session::complete_in_context`]).
    ///
    /// ```no_run
    /// # async fn show(runner: &mcp_client::McpRunner) -> Result<(), mcp_client::FeatureError> {
    /// use rmcp::model::Reference;
    /// let chosen = [("owner".to_owned(), "acme".to_owned())].into_iter().collect();
    /// let info = runner
    ///     .complete_in_context("git", Reference::for_prompt("review_pr"), "repo", "we", chosen)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn complete_in_context(
        &self,
        server: &str,
        reference: Reference,
        argument: &str,
        value: &str,
        context: BTreeMap<String, String>,
    ) -> Result<CompletionInfo, FeatureError> {
        let session = self.session_of(server)?;
        match &reference {
            Reference::Prompt(p) => self.allowed(session, Target::Prompt(&p.name))?,
            Reference::Resource(r) => self.allowed(session, Target::Resource(&r.uri))?,
            _ => {}
        }
        session
            .complete_in_context(reference, argument, value, context)
            .await
    }
}
