//! NIP-34 parsing (`Nip34Event::parse_with_limits`) of events built from fuzz input, two ways
//! per input: the bytes as a JSON event, read without verifying its signature (the seeds are
//! real events), and the bytes as the choices of an event assembled from NIP-34-shaped parts,
//! so that most inputs reach the tag parsers.
//!
//! Asserts: parsing never panics; every parsed value keeps its caps (relays, clone URLs,
//! maintainers, referenced repositories), is sorted and deduplicated where documented, counts no
//! more dropped values than it saw, and every coordinate and relay URL re-parses to itself.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use grasp_sync_model::nip34::MAX_REPOS_PER_ROOT_EVENT;
use grasp_sync_model::{
    AnnouncementLimits, Nip34Event, RelayUrl, RepoAnnouncement, RepoCoordinate, RootEvent,
};
use libfuzzer_sys::fuzz_target;
use nostr::secp256k1::schnorr::Signature;
use nostr::{Event, EventId, JsonUtil, Kind, PublicKey, Tag, Timestamp};

#[derive(Debug, Arbitrary)]
struct BuiltEvent {
    kind: KindChoice,
    author: u8,
    created_at: u64,
    id: [u8; 32],
    tags: Vec<BuiltTag>,
    limits: (u8, u16, u8, u8),
}

#[derive(Debug, Arbitrary)]
enum KindChoice {
    Announcement,
    State,
    Patch,
    PullRequest,
    Issue,
    Other(u16),
}

impl KindChoice {
    fn as_u16(&self) -> u16 {
        match self {
            KindChoice::Announcement => 30617,
            KindChoice::State => 30618,
            KindChoice::Patch => 1617,
            KindChoice::PullRequest => 1618,
            KindChoice::Issue => 1621,
            KindChoice::Other(kind) => *kind,
        }
    }
}

#[derive(Debug, Arbitrary)]
struct BuiltTag {
    name: TagName,
    values: Vec<TagValue>,
}

#[derive(Debug, Arbitrary)]
enum TagName {
    D,
    A,
    Relays,
    Clone,
    Maintainers,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum TagValue {
    Text(String),
    Relay {
        secure: bool,
        host: String,
        port: Option<u16>,
        path: String,
    },
    Coordinate {
        kind: KindChoice,
        author: u8,
        identifier: String,
    },
    Key(u8),
}

/// A few distinct authors, so coordinates collide and deduplication is exercised.
fn author(index: u8) -> PublicKey {
    PublicKey::from_byte_array([index % 4 + 1; 32])
}

impl TagValue {
    fn render(&self) -> String {
        match self {
            TagValue::Text(text) => text.clone(),
            TagValue::Relay {
                secure,
                host,
                port,
                path,
            } => {
                let scheme = if *secure { "wss" } else { "ws" };
                match port {
                    Some(port) => format!("{scheme}://{host}:{port}{path}"),
                    None => format!("{scheme}://{host}{path}"),
                }
            }
            TagValue::Coordinate {
                kind,
                author: index,
                identifier,
            } => format!("{}:{}:{identifier}", kind.as_u16(), author(*index).to_hex()),
            TagValue::Key(index) => author(*index).to_hex(),
        }
    }
}

impl BuiltEvent {
    fn event(&self) -> Event {
        let tags = self.tags.iter().filter_map(|tag| {
            let name = match &tag.name {
                TagName::D => "d".to_owned(),
                TagName::A => "a".to_owned(),
                TagName::Relays => "relays".to_owned(),
                TagName::Clone => "clone".to_owned(),
                TagName::Maintainers => "maintainers".to_owned(),
                TagName::Other(name) => name.clone(),
            };
            let values = std::iter::once(name).chain(tag.values.iter().map(TagValue::render));
            Tag::parse(values).ok()
        });
        let sig = Signature::from_slice(&[7; 64]).expect("64 bytes are a signature");
        Event::new(
            EventId::from_byte_array(self.id),
            author(self.author),
            Timestamp::from_secs(self.created_at),
            Kind::from(self.kind.as_u16()),
            tags,
            "",
            sig,
        )
    }

    fn limits(&self) -> AnnouncementLimits {
        let (relays, identifier, clone_urls, maintainers) = self.limits;
        AnnouncementLimits {
            max_relays: usize::from(relays % 40),
            max_identifier_bytes: usize::from(identifier % 300),
            max_clone_urls: usize::from(clone_urls % 40),
            max_maintainers: usize::from(maintainers % 70),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(event) = Event::from_json(data) {
        check(&event, &AnnouncementLimits::default());
    }
    if let Ok(built) = BuiltEvent::arbitrary_take_rest(Unstructured::new(data)) {
        check(&built.event(), &built.limits());
    }
});

fn check(event: &Event, limits: &AnnouncementLimits) {
    let event = event.clone();
    match Nip34Event::parse_with_limits(&event, limits) {
        Ok(Nip34Event::Announcement(announcement)) => {
            check_announcement(&event, limits, &announcement)
        }
        Ok(Nip34Event::Root(root)) => check_root(&event, &root),
        Ok(Nip34Event::State(state)) => {
            assert_eq!(event.kind.as_u16(), 30618);
            check_coordinate(&state.coordinate, &event, usize::MAX);
        }
        Err(_) => {}
    }
}

fn check_announcement(event: &Event, limits: &AnnouncementLimits, parsed: &RepoAnnouncement) {
    assert_eq!(event.kind.as_u16(), 30617);
    check_coordinate(&parsed.coordinate, event, limits.max_identifier_bytes);
    assert!(parsed.relays.len() <= limits.max_relays);
    assert!(parsed.relays.is_sorted() && parsed.relays.windows(2).all(|w| w[0] != w[1]));
    for relay in &parsed.relays {
        assert_eq!(RelayUrl::parse(relay.as_str()).as_ref(), Ok(relay));
    }
    assert!(parsed.clone_urls.len() <= limits.max_clone_urls);
    for (at, url) in parsed.clone_urls.iter().enumerate() {
        assert!(!url.is_empty());
        assert!(!parsed.clone_urls[..at].contains(url));
    }
    assert!(parsed.maintainers.len() <= limits.max_maintainers);
    assert!(parsed.maintainers.windows(2).all(|w| w[0] < w[1]));

    let values = |name: &str| -> usize {
        event
            .tags
            .iter()
            .map(|tag| tag.as_slice())
            .filter(|values| values.first().map(String::as_str) == Some(name))
            .map(|values| values.len() - 1)
            .sum()
    };
    assert!(parsed.relays.len() + parsed.dropped_relays <= values("relays"));
    assert!(
        parsed.clone_urls.len() + parsed.maintainers.len() + parsed.dropped_other
            <= values("clone") + values("maintainers")
    );
    assert_eq!(parsed.created_at, event.created_at);
    assert_eq!(parsed.id, event.id);
}

fn check_root(event: &Event, parsed: &RootEvent) {
    assert_eq!(parsed.kind.as_u16(), event.kind.as_u16());
    assert!(!parsed.repos.is_empty() && parsed.repos.len() <= MAX_REPOS_PER_ROOT_EVENT);
    assert!(parsed.repos.windows(2).all(|w| w[0] < w[1]));
    let a_tags = event
        .tags
        .iter()
        .filter(|tag| tag.as_slice().first().map(String::as_str) == Some("a"))
        .count();
    assert!(parsed.repos.len() + parsed.dropped_repos <= a_tags);
    for repo in &parsed.repos {
        assert_eq!(
            repo.to_string().parse::<RepoCoordinate>().as_ref(),
            Ok(repo)
        );
    }
    assert_eq!(parsed.author, event.pubkey);
}

fn check_coordinate(coordinate: &RepoCoordinate, event: &Event, max_identifier_bytes: usize) {
    assert_eq!(coordinate.owner(), &event.pubkey);
    assert!(!coordinate.identifier().is_empty());
    assert!(coordinate.identifier().len() <= max_identifier_bytes);
    assert_eq!(
        coordinate.to_string().parse::<RepoCoordinate>().as_ref(),
        Ok(coordinate)
    );
}
