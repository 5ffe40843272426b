//! [`FileLimitsMemory`]: kept limits in one JSON file, replaced atomically.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use grasp_sync_model::RelayUrl;
use serde::{Deserialize, Serialize};

use super::{LimitsMemory, LimitsMemoryError, RelayLimitsRecord};

/// The document's format version.
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Document {
    version: u32,
    relays: BTreeMap<String, RelayLimitsRecord>,
}

/// Kept limits in a JSON file: `{"version": 1, "relays": {"wss://relay.example": {...}}}`.
/// A missing file holds nothing; a save writes a temporary file beside it and renames it over
/// the old one, so a crash leaves the old or the new document, never half of one. Entries
/// whose URL is not a relay URL are skipped.
#[derive(Debug, Clone)]
pub struct FileLimitsMemory {
    path: PathBuf,
}

impl FileLimitsMemory {
    /// Keeps limits at `path` (its directory must exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io_error(&self, source: std::io::Error) -> LimitsMemoryError {
        LimitsMemoryError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }
}

impl LimitsMemory for FileLimitsMemory {
    fn load(&self) -> Result<Vec<(RelayUrl, RelayLimitsRecord)>, LimitsMemoryError> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(self.io_error(error)),
        };
        let document: Document =
            serde_json::from_slice(&text).map_err(|source| LimitsMemoryError::Format {
                path: self.path.display().to_string(),
                source,
            })?;
        Ok(document
            .relays
            .into_iter()
            .filter_map(|(url, record)| Some((RelayUrl::parse(&url).ok()?, record)))
            .collect())
    }

    fn save(&self, records: &[(RelayUrl, RelayLimitsRecord)]) -> Result<(), LimitsMemoryError> {
        let document = Document {
            version: VERSION,
            relays: records
                .iter()
                .map(|(relay, record)| (relay.to_string(), *record))
                .collect(),
        };
        let mut text =
            serde_json::to_vec_pretty(&document).map_err(|source| LimitsMemoryError::Format {
                path: self.path.display().to_string(),
                source,
            })?;
        text.push(b'\n');
        let mut temporary = self.path.clone().into_os_string();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::File::create(&temporary)?;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &self.path)
        };
        write().map_err(|error| self.io_error(error))
    }
}
