//! The NIP-42 key: read from the environment's text or from `auth_key_file`, refused with a
//! typed error naming its source, and never shown by `Debug` or an error message.

use nostr::{Keys, ToBech32};

use crate::config::{RawConfig, SecretText, Settings};
use crate::error::ConfigError;

/// Resolves a configuration whose only keys are the NIP-42 ones.
fn check(text: Option<&str>, file: Option<&std::path::Path>) -> Result<Settings, ConfigError> {
    Settings::resolve(RawConfig {
        auth_key: text.map(SecretText::new),
        auth_key_file: file.map(std::path::Path::to_path_buf),
        ..RawConfig::default()
    })
}

fn key_file(contents: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), contents).expect("write key");
    file
}

#[test]
fn no_key_answers_no_challenge() {
    assert_eq!(check(None, None).expect("valid").auth_key, None);
}

#[test]
fn the_key_is_read_as_nsec_or_hex_from_the_environment_or_a_file() {
    let keys = Keys::generate();
    let nsec = keys.secret_key().to_bech32().expect("nsec");
    let hex = keys.secret_key().to_secret_hex();
    let file = key_file(&format!("{nsec}\n"));
    for settings in [
        check(Some(&nsec), None),
        check(Some(&format!(" {hex} ")), None),
        check(None, Some(file.path())),
    ] {
        let key = settings.expect("valid").auth_key.expect("a key");
        assert_eq!(key.keys().public_key(), keys.public_key());
    }
    // The file's key is read from TOML too.
    let toml = format!("auth_key_file = {:?}", file.path().display().to_string());
    let raw = RawConfig::from_toml(&toml, "test.toml").expect("toml");
    let key = Settings::resolve(raw)
        .expect("valid")
        .auth_key
        .expect("a key");
    assert_eq!(key.keys().public_key(), keys.public_key());
}

#[test]
fn a_bad_key_is_one_typed_error_naming_its_source_without_its_text() {
    let bad = "nsec1notakeyatallbutsecretlookingtext";
    let file = key_file(bad);
    let missing = std::path::Path::new("/nonexistent/grasp-sync-key");
    for (result, key) in [
        (check(Some(bad), None), "GRASP_SYNC_AUTH_KEY"),
        (check(Some(""), None), "GRASP_SYNC_AUTH_KEY"),
        (check(None, Some(file.path())), "auth_key_file"),
        (check(None, Some(missing)), "auth_key_file"),
        (check(Some(bad), Some(file.path())), "GRASP_SYNC_AUTH_KEY"),
    ] {
        let error = result.expect_err("refused");
        assert!(matches!(error, ConfigError::AuthKey { .. }), "{error:?}");
        assert_eq!(error.key(), Some(key));
        let shown = format!("{error} {error:?}");
        assert!(shown.contains(key), "{shown}");
        assert!(!shown.contains(bad), "the key leaked: {shown}");
    }
}

#[test]
fn the_key_never_appears_in_debug_output() {
    let keys = Keys::generate();
    let nsec = keys.secret_key().to_bech32().expect("nsec");
    let hex = keys.secret_key().to_secret_hex();
    let raw = RawConfig {
        auth_key: Some(SecretText::new(nsec.clone())),
        ..RawConfig::default()
    };
    let raw_debug = format!("{raw:?}");
    let settings = Settings::resolve(raw).expect("valid");
    let settings_debug = format!("{settings:?}");
    for shown in [raw_debug, settings_debug.clone()] {
        assert!(!shown.contains(&nsec), "{shown}");
        assert!(!shown.contains(&hex), "{shown}");
    }
    // What it does show is the public key, so an operator can tell which key is in use.
    assert!(settings_debug.contains(&keys.public_key().to_hex()));
}

#[test]
fn the_key_itself_is_never_a_configuration_file_key() {
    let error = RawConfig::from_toml("auth_key = \"00\"", "test.toml").expect_err("refused");
    assert!(matches!(error, ConfigError::File { .. }), "{error:?}");
}
