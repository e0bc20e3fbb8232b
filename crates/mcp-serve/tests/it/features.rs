//! Features beyond tools served per session (`SessionTools::features`): declared only when
//! offered, served as the session's tools answer them; what a client sends is checked before
//! it reaches them (URIs, names, arguments, the subscription bound); a flood of resource
//! updates reaches the client coalesced, and the session keeps working; skills are paged
//! behind cursors the session gave, entries breaking the extension's rules left out.

#![allow(deprecated)] // resources/subscribe is 2025-11-25's (the revision these sessions speak).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::{ToolCall, ToolCatalog, ToolDescriptor, ToolDispatcher, ToolError, ToolOutput};
use async_trait::async_trait;
use mcp_serve::{
    MAX_FEATURE_URI_BYTES, MAX_SESSION_SUBSCRIPTIONS, Offered, OpenError, OpenTools,
    ResourceUpdates, SKILLS_PAGE, SessionFeatures, SessionTools, ToolServer,
};
use rmcp::ErrorData;
use rmcp::model::{
    ErrorCode, GetPromptRequestParams, GetPromptResult, GetSkillRequestParams,
    PaginatedRequestParams, PromptMessage, ReadResourceRequestParams, Resource, ResourceContents,
    ResourceUpdatedNotificationParam, Role, Skill, SkillFrontmatter, SkillResource, SkillResources,
    SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{RoleClient, ServiceError};
use serde_json::json;

use crate::support::bounded;

/// Notes: one resource, one prompt; records every request that reaches it.
#[derive(Default)]
struct Notes {
    reached: AtomicUsize,
    updates: Mutex<Option<ResourceUpdates>>,
}

#[async_trait]
impl SessionFeatures for Notes {
    fn offered(&self) -> Offered {
        Offered::default()
            .with_resources(true)
            .with_subscribe(true)
            .with_prompts(true)
    }

    async fn list_resources(&self) -> Result<Vec<Resource>, ErrorData> {
        self.reached.fetch_add(1, Ordering::SeqCst);
        Ok(vec![Resource::new("note://today", "today")])
    }

    async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, ErrorData> {
        self.reached.fetch_add(1, Ordering::SeqCst);
        match uri {
            "note://today" => Ok(vec![ResourceContents::text("buy milk", uri)]),
            "note://empty" => Ok(Vec::new()),
            _ => Err(mcp_serve::resource_not_found(uri)),
        }
    }

    async fn subscribe(&self, _uri: &str, updates: &ResourceUpdates) -> Result<(), ErrorData> {
        self.reached.fetch_add(1, Ordering::SeqCst);
        *self.updates.lock().unwrap() = Some(updates.clone());
        Ok(())
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<GetPromptResult, ErrorData> {
        self.reached.fetch_add(1, Ordering::SeqCst);
        let who = arguments.get("who").cloned().unwrap_or_default();
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("{name} {who}"),
        )]))
    }

    async fn list_skills(&self) -> Result<Vec<Skill>, ErrorData> {
        let mut skills: Vec<Skill> = (0..SKILLS).map(skill).collect();
        // Its name is not its URI's last segment but one: left out, not answered.
        let mut wrong = skill(SKILLS);
        wrong.frontmatter.name = "another-name".into();
        skills.insert(SKILLS_PAGE / 2, wrong);
        Ok(skills)
    }

    async fn get_skill(&self, uri: &str) -> Result<Skill, ErrorData> {
        (0..=SKILLS)
            .map(skill)
            .find(|s| s.uri == uri)
            .map(|mut s| {
                if s.uri == skill(SKILLS).uri {
                    s.frontmatter.name = "another-name".into();
                }
                s
            })
            .ok_or_else(|| mcp_serve::no_skill(uri))
    }
}

/// How many skills `Notes` lists (one more, which breaks the extension's rules, is left out).
const SKILLS: usize = 2 * SKILLS_PAGE + 22;

/// Skill `n` of `Notes`: `skill-NNN`, its `SKILL.md` its one file.
fn skill(n: usize) -> Skill {
    let uri = format!("skill://notes/skill-{n:03}/SKILL.md");
    let file = SkillResource::from_bytes(uri.clone(), b"---\nname: x\n---\n");
    Skill::new(
        uri,
        SkillFrontmatter::new(format!("skill-{n:03}"), "a skill"),
        SkillResources::Files(vec![file]),
    )
}

/// Opens the session's tools over the one `Notes` it holds; says they may offer `hint`.
struct Opener {
    notes: Arc<Notes>,
    hint: Offered,
}

/// A session's tools: no tools, the features of `Notes`.
struct Shared(Arc<Notes>);

impl ToolCatalog for Shared {
    fn tools(&self) -> Vec<ToolDescriptor> {
        Vec::new()
    }
}

#[async_trait]
impl ToolDispatcher for Shared {
    async fn dispatch(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        Err(ToolError::unknown_tool(call.name, Vec::new()))
    }
}

#[async_trait]
impl SessionTools for Shared {
    fn features(&self) -> Option<&dyn SessionFeatures> {
        Some(&*self.0)
    }
}

#[async_trait]
impl OpenTools for Opener {
    async fn open(&self) -> Result<Arc<dyn SessionTools>, OpenError> {
        Ok(Arc::new(Shared(self.notes.clone())))
    }

    fn offered(&self) -> Offered {
        self.hint
    }
}

/// A client handler counting `notifications/resources/updated`.
#[derive(Clone, Default)]
struct Counter(Arc<AtomicUsize>);

impl rmcp::ClientHandler for Counter {
    async fn on_resource_updated(
        &self,
        _params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A client session on the in-memory transport: the tools' features, the client, its
/// notification counter, and the server's end (the session ends when it drops).
async fn session(
    hint: Offered,
) -> (
    Arc<Notes>,
    RunningService<RoleClient, Counter>,
    Counter,
    mcp_serve::SessionServer,
) {
    let notes = Arc::new(Notes::default());
    let server = ToolServer::per_session(Arc::new(Opener {
        notes: notes.clone(),
        hint,
    }));
    let (server_end, client_end) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn(server.serve_transport(server_end));
    let counter = Counter::default();
    let client = rmcp::ServiceExt::serve(counter.clone(), client_end)
        .await
        .unwrap();
    let served = serving.await.unwrap().unwrap();
    (notes, client, counter, served)
}

fn code(e: ServiceError) -> ErrorCode {
    match e {
        ServiceError::McpError(e) => e.code,
        other => panic!("not an MCP error: {other}"),
    }
}

#[tokio::test]
async fn features_are_declared_as_offered_and_served() {
    let offered = Offered::default()
        .with_resources(true)
        .with_subscribe(true)
        .with_prompts(true);
    let (notes, client, _, _served) = session(offered).await;
    let info = client.peer_info().unwrap();
    let resources = info
        .capabilities
        .resources
        .clone()
        .expect("resources declared");
    assert_eq!(resources.subscribe, Some(true));
    assert!(info.capabilities.prompts.is_some());
    assert!(info.capabilities.completions.is_none(), "not offered");

    let listed = bounded("list", client.list_resources(None)).await.unwrap();
    assert_eq!(listed.resources[0].uri, "note://today");
    let read = bounded(
        "read",
        client.read_resource(ReadResourceRequestParams::new("note://today")),
    )
    .await
    .unwrap();
    assert!(
        matches!(&read.contents[0], ResourceContents::TextResourceContents { text, .. } if text == "buy milk")
    );
    // A missing resource, and an empty read, are -32002 at 2025-11-25 (-32602 since).
    for uri in ["note://none", "note://empty"] {
        let e = bounded(
            "read missing",
            client.read_resource(ReadResourceRequestParams::new(uri)),
        )
        .await
        .unwrap_err();
        assert_eq!(code(e), ErrorCode::RESOURCE_NOT_FOUND, "{uri}");
    }
    let prompt = bounded(
        "get",
        client.get_prompt(
            GetPromptRequestParams::new("hello")
                .with_arguments(json!({"who": "bob"}).as_object().unwrap().clone()),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::to_value(&prompt.messages[0].content).unwrap()["text"],
        "hello bob"
    );
    assert_eq!(notes.reached.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn initialize_declares_what_the_opener_says_its_tools_may_offer() {
    let (_notes, client, _, _served) = session(Offered::default()).await;
    let info = client.peer_info().unwrap();
    assert!(info.capabilities.resources.is_none());
    assert!(info.capabilities.prompts.is_none());
    assert!(info.capabilities.completions.is_none());
}

#[tokio::test]
async fn hostile_names_and_arguments_never_reach_the_tools() {
    let (notes, client, _, _served) = session(Offered::default().with_resources(true)).await;
    let long = format!("note://{}", "x".repeat(MAX_FEATURE_URI_BYTES));
    for uri in [
        "",
        "note://a\u{0}b",
        "note://a\nb",
        "note://\u{1b}[31m",
        long.as_str(),
    ] {
        let e = bounded(
            "read hostile",
            client.read_resource(ReadResourceRequestParams::new(uri)),
        )
        .await
        .unwrap_err();
        assert_eq!(code(e), ErrorCode::INVALID_PARAMS, "{uri:?}");
    }
    let not_strings = json!({"who": 7});
    let too_many: serde_json::Map<String, serde_json::Value> =
        (0..100).map(|n| (format!("a{n}"), json!("v"))).collect();
    for arguments in [not_strings.as_object().unwrap().clone(), too_many] {
        let e = bounded(
            "get hostile",
            client.get_prompt(GetPromptRequestParams::new("hello").with_arguments(arguments)),
        )
        .await
        .unwrap_err();
        assert_eq!(code(e), ErrorCode::INVALID_PARAMS);
    }
    assert_eq!(
        notes.reached.load(Ordering::SeqCst),
        0,
        "nothing reached the tools"
    );
}

#[tokio::test]
async fn subscriptions_are_bounded_per_session() {
    let (notes, client, _, _served) = session(Offered::default().with_resources(true)).await;
    for n in 0..MAX_SESSION_SUBSCRIPTIONS {
        bounded(
            "subscribe",
            client.subscribe(SubscribeRequestParams::new(format!("note://{n}"))),
        )
        .await
        .unwrap();
    }
    let e = bounded(
        "one more",
        client.subscribe(SubscribeRequestParams::new("note://one-more")),
    )
    .await
    .unwrap_err();
    assert_eq!(code(e), ErrorCode::INVALID_REQUEST);
    assert_eq!(
        notes.reached.load(Ordering::SeqCst),
        MAX_SESSION_SUBSCRIPTIONS
    );
}

#[tokio::test]
async fn a_flood_of_updates_reaches_the_client_coalesced() {
    let (notes, client, counter, _served) = session(Offered::default().with_resources(true)).await;
    bounded(
        "subscribe",
        client.subscribe(SubscribeRequestParams::new("note://today")),
    )
    .await
    .unwrap();
    let updates = notes.updates.lock().unwrap().clone().unwrap();
    const FLOOD: usize = 100_000;
    for _ in 0..FLOOD {
        updates.updated("note://today");
        updates.updated("note://not-subscribed");
    }
    assert!(updates.pending() <= 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while counter.0.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no update relayed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The session keeps working, and the flood arrived as a handful of notifications.
    bounded("list", client.list_resources(None)).await.unwrap();
    let relayed = counter.0.load(Ordering::SeqCst);
    assert!(relayed < 100, "{relayed} notifications for {FLOOD} updates");
}

#[tokio::test]
async fn skills_are_paged_behind_cursors_the_session_gave() {
    let (_notes, client, _, _served) = session(Offered::default().with_skills(true)).await;
    let info = client.peer_info().unwrap();
    assert!(info.capabilities.supports_skills());
    assert!(
        info.capabilities.resources.is_some(),
        "skill files are resources"
    );

    let mut names = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = bounded(
            "skills/list",
            client.list_skills(Some(PaginatedRequestParams::default().with_cursor(cursor))),
        )
        .await
        .unwrap();
        pages += 1;
        assert!(page.skills.len() <= SKILLS_PAGE);
        names.extend(page.skills.into_iter().map(|s| s.frontmatter.name));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, SKILLS.div_ceil(SKILLS_PAGE));
    let expected: Vec<String> = (0..SKILLS).map(|n| format!("skill-{n:03}")).collect();
    assert_eq!(names, expected, "every valid skill once, in order");

    for hostile in [
        "0",
        "1",
        "65",
        "abc",
        "-64",
        &"6".repeat(40),
        &(SKILLS_PAGE * 100).to_string(),
    ] {
        let e = bounded(
            "skills/list",
            client.list_skills(Some(
                PaginatedRequestParams::default().with_cursor(Some(hostile.to_owned())),
            )),
        )
        .await
        .unwrap_err();
        assert_eq!(code(e), ErrorCode::INVALID_PARAMS, "{hostile}");
    }

    let got = bounded(
        "skills/get",
        client.get_skill(GetSkillRequestParams::new(skill(7).uri)),
    )
    .await
    .unwrap();
    assert_eq!(got.skill, skill(7));
    for uri in [
        skill(SKILLS).uri,
        "skill://notes/none/SKILL.md".to_owned(),
        "skill://notes/a\u{7}b/SKILL.md".to_owned(),
    ] {
        let e = bounded(
            "skills/get",
            client.get_skill(GetSkillRequestParams::new(uri.clone())),
        )
        .await
        .unwrap_err();
        assert_eq!(code(e), ErrorCode::INVALID_PARAMS, "{uri}");
    }
}
