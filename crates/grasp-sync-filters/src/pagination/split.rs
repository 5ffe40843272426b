//! `split_filter`: narrowing a filter into parts that together match exactly what it matches,
//! for a second that holds more events than a page: the longest tag value list into halves,
//! then the kinds, then the authors, then the IDs.

use std::collections::BTreeSet;

use nostr::Filter;

/// Splits `filter` into two narrower filters whose matches together are exactly the filter's
/// matches, or `None` when no list of it has two values (one value of one kind: the smallest
/// query a relay can be asked).
///
/// The longest generic tag value list is halved first (ties go to the lowest tag letter), then
/// `kinds`, then `authors`, then `ids`.
pub fn split_filter(filter: &Filter) -> Option<[Filter; 2]> {
    let longest_tag = filter
        .generic_tags
        .iter()
        .filter(|(_, values)| values.len() > 1)
        .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))
        .map(|(tag, _)| *tag);
    if let Some(tag) = longest_tag {
        let values = filter.generic_tags.get(&tag)?;
        let (low, high) = halves(values);
        let mut first = filter.clone();
        let mut second = filter.clone();
        first.generic_tags.insert(tag, low);
        second.generic_tags.insert(tag, high);
        return Some([first, second]);
    }
    split_list(filter, |f| &mut f.kinds)
        .or_else(|| split_list(filter, |f| &mut f.authors))
        .or_else(|| split_list(filter, |f| &mut f.ids))
}

/// `filter` twice, with the list `field` selects halved between the two; `None` when that list
/// has fewer than two values.
fn split_list<T: Ord + Clone>(
    filter: &Filter,
    field: impl Fn(&mut Filter) -> &mut Option<BTreeSet<T>>,
) -> Option<[Filter; 2]> {
    let mut first = filter.clone();
    let values = field(&mut first).take().filter(|v| v.len() > 1)?;
    let (low, high) = halves(&values);
    let mut second = filter.clone();
    *field(&mut first) = Some(low);
    *field(&mut second) = Some(high);
    Some([first, second])
}

/// The lower and upper halves of a set (the lower one takes the odd value).
fn halves<T: Ord + Clone>(values: &BTreeSet<T>) -> (BTreeSet<T>, BTreeSet<T>) {
    let keep = values.len().div_ceil(2);
    let low: BTreeSet<T> = values.iter().take(keep).cloned().collect();
    let high: BTreeSet<T> = values.iter().skip(keep).cloned().collect();
    (low, high)
}
