//! The gitnostr-sized data set, generated deterministically: 869 repository coordinates over 310
//! owners and 3,632 root event IDs. Shared by the scenario test and the planner benchmark.

use grasp_sync_model::RepoCoordinate;
use nostr::{EventId, Keys, SecretKey};
use rand::{Rng as _, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub(crate) const REPOS: usize = 869;
pub(crate) const ROOTS: usize = 3632;
const OWNERS: usize = 310;

/// The seeded generator the simulation uses too, so the data set is the same on every run.
struct Rng(ChaCha8Rng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn bytes32(&mut self) -> [u8; 32] {
        self.0.random()
    }
}

pub(crate) fn gitnostr_set() -> (Vec<RepoCoordinate>, Vec<EventId>) {
    let mut rng = Rng(ChaCha8Rng::seed_from_u64(0x6769_746e_6f73_7472));
    let owners: Vec<_> = (0..OWNERS)
        .map(|i| {
            let mut secret = [0u8; 32];
            secret[24..].copy_from_slice(&(i as u64 + 1).to_be_bytes());
            let secret = SecretKey::from_slice(&secret).expect("small scalars are valid keys");
            Keys::new(secret).public_key()
        })
        .collect();
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789-";
    let repos = (0..REPOS)
        .map(|i| {
            let len = 4 + (rng.next() % 24) as usize;
            let mut name: String = (0..len)
                .map(|_| alphabet[(rng.next() % 37) as usize] as char)
                .collect();
            name.push_str(&format!("-{i}"));
            let owner = owners[(rng.next() % OWNERS as u64) as usize];
            RepoCoordinate::new(owner, name).expect("valid identifier")
        })
        .collect();
    let roots = (0..ROOTS)
        .map(|_| EventId::from_byte_array(rng.bytes32()))
        .collect();
    (repos, roots)
}
