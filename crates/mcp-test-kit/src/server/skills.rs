//! The skills a [`TestServer`](super::TestServer) serves (the `io.modelcontextprotocol/skills`
//! extension): every folder below a directory that holds a `SKILL.md` is a skill at
//! `skill://<its path>/SKILL.md`, its files (hidden ones left out) in its manifest with their
//! digests and sizes, each directory of a skill read with `resources/directory/read`
//! ([`DIRECTORY_PAGE`] children a page); and, for tests, hostile skills ([`SkillHostility`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{
    DIRECTORY_MIME_TYPE, GetSkillResult, ListResourcesResult, ListSkillsResult, ReadResourceResult,
    Resource, ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources,
};
use serde_json::Value;

/// The deepest folder searched for skills below the directory.
const MAX_DEPTH: usize = 6;
/// The most files read from the directory.
const MAX_FILES: usize = 20_000;
/// The children on one page of `resources/directory/read`: few, so that a client's paging is
/// exercised by any directory of more than two.
pub const DIRECTORY_PAGE: usize = 2;

/// A hostile twist on the skills served, for tests of a client's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum SkillHostility {
    /// Every file but the `SKILL.md`s is listed with the digest of other bytes.
    WrongDigest,
    /// Every file but the `SKILL.md`s is listed one byte longer than it is.
    WrongSize,
    /// One more skill, `many-files`, lists 10,000 files.
    ManyFiles,
    /// One more skill, `escapes`, whose frontmatter (and body) holds terminal escape
    /// sequences and control characters.
    Escapes,
    /// The extension is declared without `directoryRead`, and `resources/directory/read` is
    /// not served.
    NoDirectoryRead,
}

/// A set of skills and the bytes of their files, served as they are (see the module docs).
///
/// ```
/// use mcp_test_kit::Skills;
///
/// let dir = tempfile::tempdir().unwrap();
/// mcp_test_kit::write_example_skills(dir.path()).unwrap();
/// let skills = Skills::from_dir(dir.path()).unwrap();
/// assert_eq!(skills.names(), ["pdf-processing"]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Skills {
    skills: Vec<Skill>,
    files: BTreeMap<String, Vec<u8>>,
    /// [`SkillHostility::NoDirectoryRead`].
    no_directory_read: bool,
}

/// Writes a small skill directory: `pdf-processing/SKILL.md` (frontmatter `name` and
/// `description`, a body) and `pdf-processing/references/FORMS.md`.
pub fn write_example_skills(dir: &Path) -> std::io::Result<()> {
    let skill = dir.join("pdf-processing");
    std::fs::create_dir_all(skill.join("references"))?;
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n\
         license: MIT\n---\n\n# PDF processing\n\nRead references/FORMS.md before filling a form.\n",
    )?;
    std::fs::write(
        skill.join("references/FORMS.md"),
        "# Forms\n\nFill every field; sign last.\n",
    )?;
    Ok(())
}

impl Skills {
    /// The skills below `dir`.
    pub fn from_dir(dir: &Path) -> std::io::Result<Self> {
        let mut found: Vec<(String, PathBuf)> = Vec::new();
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        walk(dir, "", 0, &mut found, &mut files)?;
        let mut skills = Self::default();
        for (path, folder) in found {
            let manifest = std::fs::read_to_string(folder.join("SKILL.md"))?;
            let frontmatter = frontmatter(&manifest).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", folder.display()),
                )
            })?;
            let prefix = if path.is_empty() {
                String::new()
            } else {
                format!("{path}/")
            };
            let mut contents = Vec::new();
            for (rel, file) in files.iter().filter(|(rel, _)| rel.starts_with(&prefix)) {
                contents.push((format!("skill://{rel}"), std::fs::read(file)?));
            }
            skills.add(&format!("skill://{path}/SKILL.md"), frontmatter, contents);
        }
        Ok(skills)
    }

    /// Adds a skill whose `SKILL.md` is at `uri` with `files` (its `SKILL.md` among them).
    fn add(&mut self, uri: &str, frontmatter: SkillFrontmatter, files: Vec<(String, Vec<u8>)>) {
        let resources = files
            .iter()
            .map(|(file, bytes)| SkillResource::from_bytes(file.clone(), bytes))
            .collect();
        self.skills.push(Skill::new(
            uri,
            frontmatter,
            SkillResources::Files(resources),
        ));
        self.files.extend(files);
    }

    /// These skills with `hostility`.
    #[must_use]
    pub fn with_hostility(mut self, hostility: SkillHostility) -> Self {
        match hostility {
            SkillHostility::NoDirectoryRead => self.no_directory_read = true,
            SkillHostility::WrongDigest | SkillHostility::WrongSize => {
                for skill in &mut self.skills {
                    let uri = skill.uri.clone();
                    if let SkillResources::Files(files) = &mut skill.resources {
                        for file in files.iter_mut().filter(|f| f.uri != uri) {
                            if hostility == SkillHostility::WrongSize {
                                file.size += 1;
                            } else {
                                let mut other =
                                    self.files.get(&file.uri).cloned().unwrap_or_default();
                                other.push(b'!');
                                file.digest = SkillResource::from_bytes("", &other).digest;
                            }
                        }
                    }
                }
            }
            SkillHostility::ManyFiles => {
                let manifest = "---\nname: many-files\ndescription: A skill of 10,000 files\n---\n\nToo many.\n";
                let mut files = vec![(
                    "skill://many-files/SKILL.md".to_owned(),
                    manifest.as_bytes().to_vec(),
                )];
                files.extend(
                    (0..10_000).map(|i| (format!("skill://many-files/f/{i:05}.md"), b"x".to_vec())),
                );
                self.add(
                    "skill://many-files/SKILL.md",
                    SkillFrontmatter::new("many-files", "A skill of 10,000 files"),
                    files,
                );
            }
            SkillHostility::Escapes => {
                let manifest = "---\nname: escapes\ndescription: \"\\e[31mred\\e[0m text\\a with \\e]0;a title\\a escapes\"\n---\n\n\u{1b}[2JThe body \u{1b}[1mstyles\u{1b}[0m the terminal.\u{7}\n";
                let description = frontmatter(manifest)
                    .map(|f| f.description)
                    .unwrap_or_default();
                self.add(
                    "skill://escapes/SKILL.md",
                    SkillFrontmatter::new("escapes", description),
                    vec![(
                        "skill://escapes/SKILL.md".to_owned(),
                        manifest.as_bytes().to_vec(),
                    )],
                );
            }
        }
        self
    }

    /// The skills' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.skills
            .iter()
            .map(|s| s.frontmatter.name.clone())
            .collect()
    }

    /// `skills/list`: every skill on one page.
    pub(super) fn list(&self) -> ListSkillsResult {
        ListSkillsResult::with_all_items(self.skills.clone())
    }

    /// `skills/get`.
    pub(super) fn get(&self, uri: &str) -> Result<GetSkillResult, ErrorData> {
        self.skills
            .iter()
            .find(|s| s.uri == uri)
            .map(|s| GetSkillResult::new(s.clone()))
            .ok_or_else(|| ErrorData::invalid_params(format!("no skill {uri}"), None))
    }

    /// The `SKILL.md` resources, for `resources/list`.
    pub(super) fn resources(&self) -> Vec<Resource> {
        self.skills
            .iter()
            .map(|s| {
                Resource::new(s.uri.clone(), s.frontmatter.name.clone())
                    .with_description(s.frontmatter.description.clone())
                    .with_mime_type("text/markdown")
            })
            .collect()
    }

    /// `resources/read` of a skill file, or `None` when `uri` is none.
    pub(super) fn read(&self, uri: &str) -> Option<ReadResourceResult> {
        let bytes = self.files.get(uri)?;
        let content = match std::str::from_utf8(bytes) {
            Ok(text) => ResourceContents::text(text, uri).with_mime_type("text/markdown"),
            Err(_) => {
                ResourceContents::blob(base64::engine::general_purpose::STANDARD.encode(bytes), uri)
            }
        };
        Some(ReadResourceResult::new(vec![content]))
    }
}

impl Skills {
    /// Whether `resources/directory/read` is served (and `directoryRead` declared).
    pub(super) fn reads_directories(&self) -> bool {
        !self.no_directory_read
    }

    /// `resources/directory/read` of `uri` (a directory within a skill, no trailing `/`): its
    /// direct children, files with their MIME type and subdirectories as `inode/directory`,
    /// [`DIRECTORY_PAGE`] a page from the offset `cursor` stands for. A URI that is no
    /// directory of a skill (a file, nothing), or a cursor this server did not give, is -32602.
    pub(super) fn directory(
        &self,
        uri: &str,
        cursor: Option<&str>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let prefix = format!("{uri}/");
        let mut children: Vec<Resource> = Vec::new();
        for file in self.files.keys().filter_map(|f| f.strip_prefix(&prefix)) {
            let child =
                match file.split_once('/') {
                    Some((dir, _)) => Resource::new(format!("{prefix}{dir}"), dir)
                        .with_mime_type(DIRECTORY_MIME_TYPE),
                    None => Resource::new(format!("{prefix}{file}"), file)
                        .with_mime_type(mime_type(file)),
                };
            if children.last().is_none_or(|last| last.uri != child.uri) {
                children.push(child);
            }
        }
        if uri.is_empty() || children.is_empty() {
            return Err(ErrorData::invalid_params(
                format!("{uri} is not a directory of a skill"),
                None,
            ));
        }
        let offset = match cursor {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .ok()
                .filter(|o| *o > 0 && *o < children.len())
                .ok_or_else(|| ErrorData::invalid_params(format!("no cursor {c}"), None))?,
        };
        let end = (offset + DIRECTORY_PAGE).min(children.len());
        let mut page = ListResourcesResult::with_all_items(children[offset..end].to_vec());
        page.next_cursor = (end < children.len()).then(|| end.to_string());
        Ok(page)
    }
}

/// The MIME type of a skill file, by its name.
fn mime_type(file: &str) -> &'static str {
    if file.ends_with(".md") {
        "text/markdown"
    } else {
        "application/octet-stream"
    }
}

/// Finds the folders holding a `SKILL.md` (their path from the root) and every file (its path
/// from the root), hidden entries left out.
fn walk(
    dir: &Path,
    rel: &str,
    depth: usize,
    found: &mut Vec<(String, PathBuf)>,
    files: &mut Vec<(String, PathBuf)>,
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    if !rel.is_empty() && dir.join("SKILL.md").is_file() {
        found.push((rel.to_owned(), dir.to_path_buf()));
    }
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&entry.path(), &path, depth + 1, found, files)?;
        } else if kind.is_file() && files.len() < MAX_FILES {
            files.push((path, entry.path()));
        }
    }
    Ok(())
}

/// The frontmatter of a `SKILL.md`: the YAML between its first two `---` lines.
fn frontmatter(text: &str) -> Result<SkillFrontmatter, String> {
    let rest = text
        .strip_prefix("---\n")
        .ok_or("SKILL.md does not begin with `---`")?;
    let end = rest
        .find("\n---")
        .ok_or("SKILL.md's frontmatter does not end")?;
    let value: Value = serde_yaml_ng::from_str(&rest[..end]).map_err(|e| e.to_string())?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}
