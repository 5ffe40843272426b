//! Tests of the external-mode "have" index: seen and refused events are both "had", refusals
//! keep their reason, and negentropy sees only what the relay holds.

use nostr::{EventBuilder, Filter, Keys, Kind};

use super::HaveIndex;

#[tokio::test]
async fn seen_and_refused_events_are_had_and_refusals_keep_their_reason() {
    let dir = tempfile::tempdir().expect("dir");
    let index = HaveIndex::open(dir.path()).expect("open");
    let keys = Keys::generate();
    let seen = EventBuilder::text_note("kept")
        .sign_with_keys(&keys)
        .expect("sign");
    let refused = EventBuilder::new(Kind::from(1621), "refused")
        .sign_with_keys(&keys)
        .expect("sign");
    let unknown = EventBuilder::text_note("never offered")
        .sign_with_keys(&keys)
        .expect("sign");

    index.record_seen(&seen).await.expect("seen");
    index
        .record_rejected(&refused, "blocked: not wanted")
        .await
        .expect("rejected");

    assert!(index.contains(&seen.id).await.expect("contains"));
    assert!(index.contains(&refused.id).await.expect("contains"));
    assert!(!index.contains(&unknown.id).await.expect("contains"));
    assert!(!index.is_seen(&refused.id).await.expect("seen"));
    assert_eq!(
        index
            .rejection_reason(&refused.id)
            .await
            .expect("reason")
            .as_deref(),
        Some("blocked: not wanted")
    );
    let items = index.negentropy_items(Filter::new()).await.expect("items");
    assert_eq!(items, vec![(seen.id, seen.created_at)]);
}
