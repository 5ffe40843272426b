//! Tests of the bench report's parsing.

use super::*;

#[test]
fn criterion_lines_give_name_and_median() {
    let output = "build_filters/gitnostr  time:   [1.0 ms 1.5 ms 2.0 ms]\n\
                  derive_and_diff/gitnostr_x100\n                        time:   [10 ms 12 ms 14 ms]\n";
    let rows = parse_criterion(output);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].name, "build_filters/gitnostr");
    assert_eq!(rows[0].time, "1.5 ms");
    assert_eq!(rows[1].name, "derive_and_diff/gitnostr_x100");
    assert_eq!(rows[1].time, "12 ms");
}
