//! `generate`: turns a `NetworkSpec` and relay URLs into signed events placed by relay index.
//! Keys come from seeded ChaCha streams, so the same spec always yields the same event IDs.
//! Participants with outbox relays are `outbox`'s.

use std::collections::BTreeSet;

use nostr::nips::nip19::ToBech32;
use nostr::{Event, EventId, Keys, RelayUrl, SecretKey, Timestamp};
use rand::seq::SliceRandom;
use rand::seq::index;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::outbox::{OutboxPlan, Part};
use super::{GeneratedNetwork, GeneratedOutbox, GeneratedRepo, NetworkSpec, RootCount};
use crate::TestkitError;
use crate::nip34::{self, Announcement, RepoRef, RepoTag, RootKind, ThreadTag};

/// Key stream for repository owners.
const OWNER_STREAM: u64 = 1 << 32;
/// Key stream for contributors.
const AUTHOR_STREAM: u64 = 2 << 32;
/// Domain of clone URLs that are not on the service.
const OTHER_GIT_HOST: &str = "https://git.example.org";

/// Generates the network for `spec`, with `relay_urls[i]` the URL of relay index `i`.
pub fn generate(
    spec: &NetworkSpec,
    relay_urls: &[String],
) -> Result<GeneratedNetwork, TestkitError> {
    validate(spec, relay_urls)?;
    Generator::new(spec, relay_urls).run()
}

/// Repository categories by acceptance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    Accepted,
    NotListingService,
    WithoutServiceClone,
}

/// Generation state.
struct Generator<'a> {
    spec: &'a NetworkSpec,
    relay_urls: &'a [String],
    clone_base: String,
    rng: ChaCha8Rng,
    authors: Vec<Keys>,
    outbox: OutboxPlan,
    out: GeneratedNetwork,
}

impl<'a> Generator<'a> {
    fn new(spec: &'a NetworkSpec, relay_urls: &'a [String]) -> Self {
        let authors: Vec<Keys> = (0..spec.authors.max(1))
            .map(|i| derive_keys(spec.seed, AUTHOR_STREAM + i as u64))
            .collect();
        let outbox = OutboxPlan::new(spec, &authors);
        Self {
            spec,
            relay_urls,
            clone_base: clone_base(&spec.service_url),
            rng: ChaCha8Rng::seed_from_u64(spec.seed),
            authors,
            outbox,
            out: GeneratedNetwork {
                relay_events: vec![Vec::new(); spec.relay_count()],
                repos: Vec::with_capacity(spec.repos),
                expected: BTreeSet::new(),
                expected_descendants: BTreeSet::new(),
                excluded: BTreeSet::new(),
                outbox: GeneratedOutbox::default(),
            },
        }
    }

    fn run(mut self) -> Result<GeneratedNetwork, TestkitError> {
        let listings = self.listings();
        let roots = self.roots_per_repo();
        for (i, (listing, roots)) in listings.into_iter().zip(roots).enumerate() {
            self.repo(i, listing, roots)?;
        }
        let Generator {
            spec,
            relay_urls,
            outbox,
            mut out,
            ..
        } = self;
        outbox.finish(spec, relay_urls, &mut out)?;
        Ok(out)
    }

    /// Exact category counts, shuffled over the repositories.
    fn listings(&mut self) -> Vec<Listing> {
        let repos = self.spec.repos;
        let not_listing = share_count(repos, self.spec.share_not_listing_service);
        let without_clone =
            share_count(repos, self.spec.share_without_service_clone).min(repos - not_listing);
        let mut listings = vec![Listing::Accepted; repos];
        listings[..not_listing].fill(Listing::NotListingService);
        listings[not_listing..not_listing + without_clone].fill(Listing::WithoutServiceClone);
        listings.shuffle(&mut self.rng);
        listings
    }

    /// Roots per repository.
    fn roots_per_repo(&mut self) -> Vec<usize> {
        let repos = self.spec.repos;
        match self.spec.roots {
            RootCount::PerRepo(n) => vec![n; repos],
            RootCount::Total(total) => {
                let mut counts = vec![0; repos];
                if repos > 0 {
                    for _ in 0..total {
                        // Squaring a uniform draw skews roots towards low indices, so a few
                        // repositories are busy and many are quiet.
                        let u: f64 = self.rng.random();
                        let i = ((u * u) * repos as f64) as usize;
                        counts[i.min(repos - 1)] += 1;
                    }
                }
                counts
            }
        }
    }

    fn repo(&mut self, i: usize, listing: Listing, roots: usize) -> Result<(), TestkitError> {
        let spec = self.spec;
        let owner = derive_keys(spec.seed, OWNER_STREAM + i as u64);
        let identifier = format!("repo-{i}");
        let repo = RepoRef::new(owner.public_key(), identifier.clone());
        let accepted = listing == Listing::Accepted;
        let relay_indices: Vec<usize> = {
            let mut picked =
                index::sample(&mut self.rng, spec.relays, spec.relays_per_repo).into_vec();
            picked.sort_unstable();
            picked
        };
        let mut relays: Vec<String> = relay_indices
            .iter()
            .map(|&r| self.relay_urls[r].clone())
            .collect();
        if listing != Listing::NotListingService {
            relays.push(spec.service_url.clone());
        }
        let npub = match repo.owner.to_bech32() {
            Ok(npub) => npub,
            Err(never) => match never {},
        };
        let mut clone = vec![format!("{OTHER_GIT_HOST}/{npub}/{identifier}.git")];
        if accepted {
            clone.insert(0, format!("{}/{npub}/{identifier}.git", self.clone_base));
        }
        let maintainers = if self.rng.random_bool(0.2) {
            vec![self.author().public_key()]
        } else {
            Vec::new()
        };
        for maintainer in &maintainers {
            self.outbox.joined(maintainer, &relay_indices);
            self.outbox.maintains(maintainer, i);
        }
        let announced_at = self.at(0, spec.time_span_secs / 4);
        let announcement = nip34::announcement(
            &owner,
            &Announcement {
                identifier: identifier.clone(),
                name: format!("Repository {i}"),
                relays,
                clone,
                maintainers,
                created_at: Timestamp::from_secs(announced_at),
            },
        )?;
        let commit = self.hex40();
        let state = nip34::repo_state(
            &owner,
            &identifier,
            &[
                ("HEAD".to_owned(), "ref: refs/heads/main".to_owned()),
                ("refs/heads/main".to_owned(), commit),
            ],
            Timestamp::from_secs(announced_at + 1),
        )?;
        let mut generated = GeneratedRepo {
            repo: repo.clone(),
            relay_indices: relay_indices.clone(),
            lists_service: listing != Listing::NotListingService,
            clone_on_service: accepted,
            announcement: announcement.id,
            state: state.id,
            roots: Vec::with_capacity(roots),
        };
        self.place_everywhere(announcement, &relay_indices, accepted);
        self.place_everywhere(state, &relay_indices, accepted);

        for c in 0..spec.comments_per_repo {
            let how = RepoTag::ALL[c % RepoTag::ALL.len()];
            let author = self.author();
            let at = self.at(announced_at + 2, spec.time_span_secs / 2);
            let comment = nip34::repo_comment(
                &author,
                &repo,
                how,
                &format!("comment {c} on {identifier}"),
                Timestamp::from_secs(at),
            )?;
            self.place(comment, &relay_indices, accepted, Placing::comment(i));
        }

        for r in 0..roots {
            let kind = RootKind::ALL[self.rng.random_range(0..RootKind::ALL.len())];
            let author = self.author();
            let root_at = self.at(announced_at + 2, spec.time_span_secs / 2);
            let root = nip34::root(
                &author,
                kind,
                std::slice::from_ref(&repo),
                &format!("{kind:?} {r} for {identifier}"),
                Timestamp::from_secs(root_at),
            )?;
            generated.roots.push(root.id);
            for p in 0..spec.replies_per_root {
                let how = ThreadTag::ALL[p % ThreadTag::ALL.len()];
                let author = self.author();
                let reply_at = self.at(root_at + 1, spec.time_span_secs / 4);
                let reply = nip34::reply(
                    &author,
                    &root,
                    how,
                    &format!("reply {p} to {}", root.id),
                    Timestamp::from_secs(reply_at),
                )?;
                for d in 0..spec.descendants_per_reply {
                    let how = ThreadTag::ALL[d % ThreadTag::ALL.len()];
                    let author = self.author();
                    let at = self.at(reply_at + 1, spec.time_span_secs / 8);
                    let descendant = nip34::reply(
                        &author,
                        &reply,
                        how,
                        &format!("descendant {d} of {}", reply.id),
                        Timestamp::from_secs(at),
                    )?;
                    self.place(descendant, &relay_indices, accepted, Placing::DESCENDANT);
                }
                self.place(reply, &relay_indices, accepted, Placing::reply(i, root.id));
            }
            self.place(root, &relay_indices, accepted, Placing::root(i));
        }
        self.out.repos.push(generated);
        Ok(())
    }

    /// Puts an event on every listed relay.
    fn place_everywhere(&mut self, event: Event, relays: &[usize], expected: bool) {
        self.record(event.id, expected, false);
        for &r in relays {
            self.out.relay_events[r].push(event.clone());
        }
    }

    /// Puts an event on all listed relays (at the spec's share) or on one of them; a root,
    /// reply or comment by a participant with outbox relays may go only to those instead.
    fn place(&mut self, event: Event, relays: &[usize], expected: bool, placing: Placing) {
        let routes = placing.routes();
        let descendant = routes.is_empty();
        self.record(event.id, expected, descendant);
        self.outbox.joined(&event.pubkey, relays);
        // The usual placement is drawn first, so routing to outbox relays (decided once the
        // network is complete) leaves the main stream, and so every other event, as it was.
        let usual = if self.rng.random_bool(self.spec.share_on_several_relays) {
            relays.to_vec()
        } else {
            vec![relays[self.rng.random_range(0..relays.len())]]
        };
        for &r in &usual {
            self.out.relay_events[r].push(event.clone());
        }
        if descendant {
            return;
        }
        self.outbox
            .placed(&event, expected, &usual, &routes, placing.takes);
    }

    fn record(&mut self, id: EventId, expected: bool, descendant: bool) {
        if expected {
            self.out.expected.insert(id);
            if descendant {
                self.out.expected_descendants.insert(id);
            }
        } else {
            self.out.excluded.insert(id);
        }
    }

    /// A contributor, chosen at random.
    fn author(&mut self) -> Keys {
        let i = self.rng.random_range(0..self.authors.len());
        self.authors[i].clone()
    }

    /// A timestamp in `from..from + span` (at least `from`).
    fn at(&mut self, from: u64, span: u64) -> u64 {
        self.spec.base_created_at.max(from) + self.rng.random_range(0..span.max(1))
    }

    /// 40 random hex digits (a commit ID).
    fn hex40(&mut self) -> String {
        let mut bytes = [0u8; 20];
        self.rng.fill_bytes(&mut bytes);
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Checks a spec and its relay URLs.
fn validate(spec: &NetworkSpec, relay_urls: &[String]) -> Result<(), TestkitError> {
    let invalid = |why: String| Err(TestkitError::InvalidSpec(why));
    if relay_urls.len() != spec.relay_count() {
        return invalid(format!(
            "{} relays and {} outbox relays in the spec but {} relay urls",
            spec.relays,
            spec.outbox.relays,
            relay_urls.len()
        ));
    }
    if spec.relays_per_repo == 0 || spec.relays_per_repo > spec.relays {
        return invalid(format!(
            "relays_per_repo must be in 1..={}, got {}",
            spec.relays, spec.relays_per_repo
        ));
    }
    for (name, share) in [
        ("share_on_several_relays", spec.share_on_several_relays),
        ("share_not_listing_service", spec.share_not_listing_service),
        (
            "share_without_service_clone",
            spec.share_without_service_clone,
        ),
        ("outbox.share_of_authors", spec.outbox.share_of_authors),
        ("outbox.share_of_events", spec.outbox.share_of_events),
    ] {
        if !(0.0..=1.0).contains(&share) {
            return invalid(format!("{name} must be in 0..=1, got {share}"));
        }
    }
    if spec.outbox.relays == 0 && spec.outbox.share_of_authors > 0.0 {
        return invalid(format!(
            "outbox.share_of_authors is {} but there is no outbox relay",
            spec.outbox.share_of_authors
        ));
    }
    for url in relay_urls.iter().chain([&spec.service_url]) {
        if RelayUrl::parse(url).is_err() {
            return invalid(format!("not a relay url: {url}"));
        }
    }
    Ok(())
}

/// `round(total * share)`.
pub(super) fn share_count(total: usize, share: f64) -> usize {
    ((total as f64) * share).round() as usize
}

/// The clone URL base on the service's domain: `ws` becomes `http`, `wss` becomes `https`,
/// and the path is dropped.
pub(crate) fn clone_base(service_url: &str) -> String {
    let (scheme, rest) = service_url
        .split_once("://")
        .unwrap_or(("wss", service_url));
    let authority = rest.split('/').next().unwrap_or_default();
    let scheme = if scheme.eq_ignore_ascii_case("ws") {
        "http"
    } else {
        "https"
    };
    format!("{scheme}://{authority}")
}

/// Keys from 32 bytes of the seed's ChaCha stream `stream`.
fn derive_keys(seed: u64, stream: u64) -> Keys {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    loop {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        // A draw outside the curve order (odds about 2^-128) takes the next 32 bytes.
        if let Ok(secret) = SecretKey::from_slice(&bytes) {
            return Keys::new(secret);
        }
    }
}

/// How an event may be routed to its author's outbox relays, and what placing it on listed
/// relays makes its author take part in.
#[derive(Debug, Clone, Copy)]
struct Placing {
    /// Routed only if the author takes part in one of these (none: never routed).
    routes: [Option<Part>; 2],
    /// What the author takes part in once it is on listed relays.
    takes: Option<Part>,
}

impl Placing {
    /// A second-generation descendant: never routed, and no part taken.
    const DESCENDANT: Placing = Placing {
        routes: [None, None],
        takes: None,
    };

    /// A repository comment, by someone taking part in the repository.
    fn comment(repo: usize) -> Placing {
        Placing {
            routes: [Some(Part::Repo(repo)), None],
            takes: None,
        }
    }

    /// A root: its author takes part in the repository.
    fn root(repo: usize) -> Placing {
        Placing {
            routes: [Some(Part::Repo(repo)), None],
            takes: Some(Part::Repo(repo)),
        }
    }

    /// A direct reply: its author takes part in the root's thread.
    fn reply(repo: usize, root: EventId) -> Placing {
        Placing {
            routes: [Some(Part::Repo(repo)), Some(Part::Root(root))],
            takes: Some(Part::Root(root)),
        }
    }

    fn routes(&self) -> Vec<Part> {
        self.routes.iter().flatten().copied().collect()
    }
}
