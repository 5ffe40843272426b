//! Signed NIP-34 and NIP-22 event builders: repository announcements and state, root events
//! (patches, pull requests, issues), and the replies and comments that tag them.
//!
//! Every builder takes an explicit `created_at`, so the same keys and inputs always give the
//! same event ID. Each reply or comment tags its target with exactly one tag letter, so a
//! test can prove that a sync filter covers that letter.

use nostr::{Event, EventBuilder, Keys, Kind, PublicKey, Tag, TagKind, Timestamp};

use crate::TestkitError;

/// Kind of a repository announcement (NIP-34), an addressable event.
pub const KIND_REPO_ANNOUNCEMENT: u16 = grasp_sync_model::REPO_ANNOUNCEMENT_KIND;
/// Kind of a repository state event (NIP-34), an addressable event.
pub const KIND_REPO_STATE: u16 = grasp_sync_model::REPO_STATE_KIND;
/// Kind of a patch (NIP-34).
pub const KIND_PATCH: u16 = grasp_sync_model::PATCH_KIND;
/// Kind of a pull request (NIP-34).
pub const KIND_PULL_REQUEST: u16 = grasp_sync_model::PULL_REQUEST_KIND;
/// Kind of an issue (NIP-34).
pub const KIND_ISSUE: u16 = grasp_sync_model::ISSUE_KIND;
/// Kind of a comment (NIP-22).
pub const KIND_COMMENT: u16 = 1111;
/// Kind of a short text note, used for `e` replies and `q` quotes.
pub const KIND_TEXT_NOTE: u16 = 1;

/// The address of a repository: its owner and its `d` identifier.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoRef {
    /// The key that signs the announcement.
    pub owner: PublicKey,
    /// The announcement's `d` tag.
    pub identifier: String,
}

impl RepoRef {
    /// A repository address.
    pub fn new(owner: PublicKey, identifier: impl Into<String>) -> Self {
        Self {
            owner,
            identifier: identifier.into(),
        }
    }

    /// The coordinate `30617:<owner hex>:<d>` used in `a`, `A` and `q` tags.
    pub fn coordinate(&self) -> String {
        format!(
            "{KIND_REPO_ANNOUNCEMENT}:{}:{}",
            self.owner.to_hex(),
            self.identifier
        )
    }
}

/// The content of a repository announcement (kind 30617).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// The `d` identifier.
    pub identifier: String,
    /// The `name` tag.
    pub name: String,
    /// Relay URLs, all in one `relays` tag.
    pub relays: Vec<String>,
    /// Clone URLs, all in one `clone` tag.
    pub clone: Vec<String>,
    /// Additional maintainers, all in one `maintainers` tag (omitted when empty).
    pub maintainers: Vec<PublicKey>,
    /// The event's timestamp.
    pub created_at: Timestamp,
}

/// The three NIP-34 root kinds a repository's threads start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RootKind {
    /// Kind 1617.
    Patch,
    /// Kind 1618.
    PullRequest,
    /// Kind 1621.
    Issue,
}

impl RootKind {
    /// All root kinds, in kind order.
    pub const ALL: [RootKind; 3] = [RootKind::Patch, RootKind::PullRequest, RootKind::Issue];

    /// The event kind.
    pub fn kind(self) -> Kind {
        Kind::from_u16(match self {
            RootKind::Patch => KIND_PATCH,
            RootKind::PullRequest => KIND_PULL_REQUEST,
            RootKind::Issue => KIND_ISSUE,
        })
    }
}

/// How a reply or comment points at the event it answers. Each variant uses exactly one
/// tag letter for the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ThreadTag {
    /// A kind 1 reply with `["e", <id>, "", "root"]`.
    LowerE,
    /// A kind 1111 comment with `["E", <id>, "", <author>]` and `K`, `P` tags.
    UpperE,
    /// A kind 1 quote with `["q", <id>, "", <author>]`.
    Q,
}

impl ThreadTag {
    /// All thread tags.
    pub const ALL: [ThreadTag; 3] = [ThreadTag::LowerE, ThreadTag::UpperE, ThreadTag::Q];
}

/// How a comment points at a repository. Each variant uses exactly one tag letter for the
/// repository coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RepoTag {
    /// A kind 1111 comment with `["a", <coordinate>]` and `k`, `p` tags.
    LowerA,
    /// A kind 1111 comment with `["A", <coordinate>]` and `K`, `P` tags.
    UpperA,
    /// A kind 1 quote with `["q", <coordinate>]` and a `p` tag.
    Q,
}

impl RepoTag {
    /// All repository tags.
    pub const ALL: [RepoTag; 3] = [RepoTag::LowerA, RepoTag::UpperA, RepoTag::Q];
}

/// Builds and signs a repository announcement (kind 30617).
pub fn announcement(owner: &Keys, announcement: &Announcement) -> Result<Event, TestkitError> {
    let mut tags = vec![
        tag("d", [announcement.identifier.clone()]),
        tag("name", [announcement.name.clone()]),
        tag("relays", announcement.relays.iter().cloned()),
        tag("clone", announcement.clone.iter().cloned()),
    ];
    if !announcement.maintainers.is_empty() {
        tags.push(tag(
            "maintainers",
            announcement.maintainers.iter().map(PublicKey::to_hex),
        ));
    }
    sign(
        owner,
        KIND_REPO_ANNOUNCEMENT,
        "",
        tags,
        announcement.created_at,
    )
}

/// Builds and signs a repository state event (kind 30618) with `refs` as `(name, value)`
/// pairs, e.g. `("refs/heads/main", "<commit>")` or `("HEAD", "ref: refs/heads/main")`.
pub fn repo_state(
    owner: &Keys,
    identifier: &str,
    refs: &[(String, String)],
    created_at: Timestamp,
) -> Result<Event, TestkitError> {
    let mut tags = vec![tag("d", [identifier.to_owned()])];
    tags.extend(refs.iter().map(|(name, value)| tag(name, [value.clone()])));
    sign(owner, KIND_REPO_STATE, "", tags, created_at)
}

/// Builds and signs a root event (patch, pull request or issue) with one `a` tag per
/// repository and one `p` tag per distinct repository owner.
pub fn root(
    author: &Keys,
    kind: RootKind,
    repos: &[RepoRef],
    content: &str,
    created_at: Timestamp,
) -> Result<Event, TestkitError> {
    let mut tags: Vec<Tag> = repos.iter().map(|r| tag("a", [r.coordinate()])).collect();
    let mut owners: Vec<PublicKey> = repos.iter().map(|r| r.owner).collect();
    owners.sort();
    owners.dedup();
    tags.extend(owners.iter().map(|o| tag("p", [o.to_hex()])));
    if kind == RootKind::Issue {
        tags.push(tag("subject", [content.to_owned()]));
    }
    sign(author, kind.kind().as_u16(), content, tags, created_at)
}

/// Builds and signs a reply or comment that tags `parent` (a root, or a direct member for a
/// second-generation descendant) with the letter `how` names, and nothing else that a sync
/// filter could match on besides the parent author's `p`/`P`.
pub fn reply(
    author: &Keys,
    parent: &Event,
    how: ThreadTag,
    content: &str,
    created_at: Timestamp,
) -> Result<Event, TestkitError> {
    let id = parent.id.to_hex();
    let parent_author = parent.pubkey.to_hex();
    let (kind, tags) = match how {
        ThreadTag::LowerE => (
            KIND_TEXT_NOTE,
            vec![
                tag("e", [id, String::new(), "root".to_owned()]),
                tag("p", [parent_author]),
            ],
        ),
        ThreadTag::UpperE => (
            KIND_COMMENT,
            vec![
                tag("E", [id, String::new(), parent_author.clone()]),
                tag("K", [parent.kind.as_u16().to_string()]),
                tag("P", [parent_author]),
            ],
        ),
        ThreadTag::Q => (
            KIND_TEXT_NOTE,
            vec![
                tag("q", [id, String::new(), parent_author.clone()]),
                tag("p", [parent_author]),
            ],
        ),
    };
    sign(author, kind, content, tags, created_at)
}

/// Builds and signs a comment that tags a repository with the letter `how` names.
pub fn repo_comment(
    author: &Keys,
    repo: &RepoRef,
    how: RepoTag,
    content: &str,
    created_at: Timestamp,
) -> Result<Event, TestkitError> {
    let coordinate = repo.coordinate();
    let owner = repo.owner.to_hex();
    let announcement_kind = KIND_REPO_ANNOUNCEMENT.to_string();
    let (kind, tags) = match how {
        RepoTag::LowerA => (
            KIND_COMMENT,
            vec![
                tag("a", [coordinate]),
                tag("k", [announcement_kind]),
                tag("p", [owner]),
            ],
        ),
        RepoTag::UpperA => (
            KIND_COMMENT,
            vec![
                tag("A", [coordinate]),
                tag("K", [announcement_kind]),
                tag("P", [owner]),
            ],
        ),
        RepoTag::Q => (
            KIND_TEXT_NOTE,
            vec![tag("q", [coordinate]), tag("p", [owner])],
        ),
    };
    sign(author, kind, content, tags, created_at)
}

/// Builds a tag from its name and values.
fn tag<I, S>(name: &str, values: I) -> Tag
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    Tag::custom(TagKind::from(name), values)
}

/// Signs an event with an explicit timestamp.
fn sign(
    keys: &Keys,
    kind: u16,
    content: &str,
    tags: Vec<Tag>,
    created_at: Timestamp,
) -> Result<Event, TestkitError> {
    Ok(EventBuilder::new(Kind::from_u16(kind), content)
        .tags(tags)
        .allow_self_tagging()
        .custom_created_at(created_at)
        .sign_with_keys(keys)?)
}

#[cfg(test)]
mod tests;
