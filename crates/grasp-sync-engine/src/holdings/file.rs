//! [`FileHoldingsMemory`]: one binary file per relay, replaced atomically.

use std::io::Write;
use std::path::{Path, PathBuf};

use grasp_sync_model::RelayUrl;
use nostr::hashes::{Hash, sha256};
use nostr::{EventId, Timestamp};

use super::{Held, HoldingsError, HoldingsMemory, MAX_HELD_EVENTS, RelayHoldings};

/// The most relays whose holdings are kept; saving past it removes the files written longest
/// ago. Relay URLs come from remote data.
pub const MAX_HOLDINGS_FILES: usize = 1_024;

/// How much older than a file just written a temporary file must be to count as left behind
/// by a save that stopped before its rename (one in progress is newer).
const LEFTOVER_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// The first bytes of every holdings file, with its format version.
const MAGIC: &[u8; 8] = b"GSHELD01";
/// A held event on disk: `created_at` (8 bytes, little-endian) and the ID (32 bytes).
const ENTRY: usize = 40;
const EVENTS: u8 = 0;
const TOO_LARGE: u8 = 1;

/// Holdings in a directory, one file per relay named by a hash of its normalised URL:
/// `GSHELD01`, the URL's length (2 bytes) and text, `learned_at` (8 bytes), `0` and the count
/// (4 bytes) then the events, or `1` for a relay found too large; integers little-endian. A
/// missing file holds nothing; a file naming another URL (a hash collision) holds nothing for
/// this one. A save writes a temporary file beside it and renames it over the old one.
#[derive(Debug, Clone)]
pub struct FileHoldingsMemory {
    directory: PathBuf,
}

impl FileHoldingsMemory {
    /// Keeps holdings in `directory`, created on the first save.
    pub fn new(directory: impl Into<PathBuf>) -> Self {
        Self {
            directory: directory.into(),
        }
    }

    /// The directory.
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// The file of `relay`.
    fn path_of(&self, relay: &RelayUrl) -> PathBuf {
        let digest = sha256::Hash::hash(relay.as_str().as_bytes());
        let name: String = digest.to_string().chars().take(32).collect();
        self.directory.join(format!("{name}.held"))
    }

    /// Removes the files written longest ago, never `kept` (the one just written), while more
    /// than [`MAX_HOLDINGS_FILES`] are kept; and temporary files a save left behind (it stopped
    /// before its rename), once they are [`LEFTOVER_AGE`] older than `kept`.
    fn prune(&self, kept: &Path) -> std::io::Result<()> {
        let written = std::fs::metadata(kept)?.modified()?;
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.directory)? {
            let entry = entry?;
            let path = entry.path();
            let modified = entry.metadata()?.modified()?;
            if path.extension().is_some_and(|e| e == "held") && path != kept {
                files.push((modified, path));
            } else if path.to_string_lossy().ends_with(".held.tmp")
                && modified + LEFTOVER_AGE < written
            {
                std::fs::remove_file(path)?;
            }
        }
        if files.len() < MAX_HOLDINGS_FILES {
            return Ok(());
        }
        files.sort();
        let excess = files.len() + 1 - MAX_HOLDINGS_FILES;
        for (_, path) in files.into_iter().take(excess) {
            std::fs::remove_file(path)?;
        }
        Ok(())
    }
}

impl HoldingsMemory for FileHoldingsMemory {
    fn load(&self, relay: &RelayUrl) -> Result<Option<RelayHoldings>, HoldingsError> {
        let path = self.path_of(relay);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(io_error(&path, error)),
        };
        decode(relay, &bytes).map_err(|reason| HoldingsError::Format {
            path: path.display().to_string(),
            reason,
        })
    }

    fn save(&self, relay: &RelayUrl, holdings: &RelayHoldings) -> Result<(), HoldingsError> {
        let path = self.path_of(relay);
        let bytes = encode(relay, holdings);
        let mut temporary = path.clone().into_os_string();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.directory)?;
            let mut file = std::fs::File::create(&temporary)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &path)?;
            self.prune(&path)
        };
        write().map_err(|error| io_error(&path, error))
    }
}

fn io_error(path: &Path, source: std::io::Error) -> HoldingsError {
    HoldingsError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn encode(relay: &RelayUrl, holdings: &RelayHoldings) -> Vec<u8> {
    let url = relay.as_str().as_bytes();
    let events = match &holdings.held {
        Held::Events(events) => events.as_slice(),
        Held::TooLarge => &[],
    };
    let mut bytes = Vec::with_capacity(MAGIC.len() + 2 + url.len() + 13 + events.len() * ENTRY);
    bytes.extend_from_slice(MAGIC);
    // A relay URL is far shorter than 64 KiB; a longer one is cut, and then names no relay.
    let url = &url[..url.len().min(usize::from(u16::MAX))];
    bytes.extend_from_slice(&(url.len() as u16).to_le_bytes());
    bytes.extend_from_slice(url);
    bytes.extend_from_slice(&holdings.learned_at.as_secs().to_le_bytes());
    match &holdings.held {
        Held::Events(events) => {
            bytes.push(EVENTS);
            bytes.extend_from_slice(&(events.len() as u32).to_le_bytes());
            for (id, created_at) in events {
                bytes.extend_from_slice(&created_at.as_secs().to_le_bytes());
                bytes.extend_from_slice(id.as_bytes());
            }
        }
        Held::TooLarge => bytes.push(TOO_LARGE),
    }
    bytes
}

fn decode(relay: &RelayUrl, bytes: &[u8]) -> Result<Option<RelayHoldings>, &'static str> {
    let mut reader = Reader(bytes);
    if reader.take(MAGIC.len())? != MAGIC {
        return Err("not a holdings file of this version");
    }
    let url_len = usize::from(u16::from_le_bytes(reader.array()?));
    let url = reader.take(url_len)?;
    if url != relay.as_str().as_bytes() {
        return Ok(None);
    }
    let learned_at = Timestamp::from_secs(u64::from_le_bytes(reader.array()?));
    let held = match reader.take(1)?[0] {
        EVENTS => {
            let count = u32::from_le_bytes(reader.array()?) as usize;
            if count > MAX_HELD_EVENTS || reader.0.len() != count * ENTRY {
                return Err("the event count does not match the file");
            }
            let mut events = Vec::with_capacity(count);
            for _ in 0..count {
                let created_at = Timestamp::from_secs(u64::from_le_bytes(reader.array()?));
                let id = EventId::from_byte_array(reader.array()?);
                events.push((id, created_at));
            }
            if !events.windows(2).all(|pair| pair[0].0 < pair[1].0) {
                return Err("the events are not sorted by ID");
            }
            Held::Events(events)
        }
        TOO_LARGE => Held::TooLarge,
        _ => return Err("unknown holdings kind"),
    };
    if !reader.0.is_empty() {
        return Err("bytes after the holdings");
    }
    Ok(Some(RelayHoldings { learned_at, held }))
}

/// Reads a file front to back.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("the file ends early");
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
}
