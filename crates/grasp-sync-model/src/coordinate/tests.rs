//! Unit tests of `RepoCoordinate` parsing, formatting and identifier validation.

use super::*;

const OWNER: &str = "b0635d6a9851d3aed0cd6c495b282167acf761729078d975fc341b22650b07b9";

fn check(input: &str, expected: Result<(), ModelError>) {
    let parsed = input.parse::<RepoCoordinate>();
    assert_eq!(
        parsed.as_ref().map(|_| ()),
        expected.as_ref().map(|_| ()),
        "{input:?}"
    );
    if let Ok(coordinate) = parsed {
        assert_eq!(coordinate.to_string(), input, "format round-trips");
    }
}

#[test]
fn coordinate_parses_and_formats_round_trip() {
    check(&format!("30617:{OWNER}:grasp-sync"), Ok(()));
    check(&format!("30617:{OWNER}:with:colons"), Ok(()));
    let coordinate: RepoCoordinate = format!("30617:{OWNER}:repo").parse().unwrap();
    assert_eq!(
        (
            coordinate.owner().to_hex().as_str(),
            coordinate.identifier()
        ),
        (OWNER, "repo")
    );
}

#[test]
fn coordinate_must_name_kind_30617() {
    check(
        &format!("30618:{OWNER}:repo"),
        Err(ModelError::WrongCoordinateKind(30618)),
    );
    check(
        &format!("x:{OWNER}:repo"),
        Err(ModelError::MalformedCoordinate(format!("x:{OWNER}:repo"))),
    );
    check(
        "30617:repo",
        Err(ModelError::MalformedCoordinate("30617:repo".into())),
    );
}

#[test]
fn coordinate_owner_must_be_64_hex_characters() {
    check(
        "30617:abc:repo",
        Err(ModelError::InvalidPublicKey("abc".into())),
    );
    let not_hex = "z".repeat(64);
    check(
        &format!("30617:{not_hex}:repo"),
        Err(ModelError::InvalidPublicKey(not_hex.clone())),
    );
}

#[test]
fn identifier_rules_are_enforced() {
    let check_identifier = |identifier: &str, expected: Result<(), ModelError>| {
        assert_eq!(validate_identifier(identifier), expected, "{identifier:?}");
    };
    check_identifier("ok-name_1.2", Ok(()));
    check_identifier("", Err(ModelError::InvalidIdentifier("empty")));
    check_identifier(".", Err(ModelError::InvalidIdentifier("`.` or `..`")));
    check_identifier("..", Err(ModelError::InvalidIdentifier("`.` or `..`")));
    check_identifier("...", Ok(()));
    for bad in ["a/b", "a\\b", "a\0b"] {
        check_identifier(
            bad,
            Err(ModelError::InvalidIdentifier("contains `/`, `\\` or NUL")),
        );
    }
    check_identifier(&"x".repeat(MAX_IDENTIFIER_BYTES), Ok(()));
    check_identifier(
        &"x".repeat(MAX_IDENTIFIER_BYTES + 1),
        Err(ModelError::InvalidIdentifier(
            "longer than the identifier cap",
        )),
    );
}

#[test]
fn errors_quote_at_most_a_short_prefix_of_hostile_input() {
    let long = format!("{}é", "a".repeat(79));
    let quoted = truncated(&long);
    assert!(
        quoted.starts_with(&"a".repeat(79)) && quoted.ends_with('…'),
        "{quoted}"
    );
    assert_eq!(truncated("short"), "short");
}
