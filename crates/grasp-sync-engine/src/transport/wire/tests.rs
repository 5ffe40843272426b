//! Unit tests of the byte counter.

use super::{WireBytes, WireCounter};

#[test]
fn counts_grow_by_frame_length_and_add_up_across_sessions() {
    let counter = WireCounter::default();
    counter.handle_sent(10);
    counter.handle_received(300);
    counter.handle_sent(5);
    let first = counter.snapshot();
    assert_eq!(
        first,
        WireBytes {
            sent: 15,
            received: 300
        }
    );
    let mut relay = WireBytes::default();
    relay += first;
    relay += WireBytes {
        sent: 1,
        received: 2,
    };
    assert_eq!(relay.total(), 318);
}
