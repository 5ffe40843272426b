//! Tests of the external-mode "have" index: only recorded events are had, and negentropy sees
//! only them.

use nostr::{EventBuilder, Filter, Keys};

use super::HaveIndex;

#[tokio::test]
async fn recorded_events_are_had_and_others_are_not() {
    let dir = tempfile::tempdir().expect("dir");
    let index = HaveIndex::open(dir.path()).expect("open");
    let keys = Keys::generate();
    let kept = EventBuilder::text_note("kept")
        .sign_with_keys(&keys)
        .expect("sign");
    let unknown = EventBuilder::text_note("never offered")
        .sign_with_keys(&keys)
        .expect("sign");

    index.record_accepted(&kept).await.expect("record");

    assert!(index.is_accepted(&kept.id).await.expect("accepted"));
    assert!(!index.is_accepted(&unknown.id).await.expect("accepted"));
    let items = nostr_database::NostrDatabase::negentropy_items(index.database(), Filter::new())
        .await
        .expect("items");
    assert_eq!(items, vec![(kept.id, kept.created_at)]);
}
