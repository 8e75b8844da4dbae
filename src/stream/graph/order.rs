//! The order in which a view's stream scans read their snapshots (`backfill_order`).
//!
//! A view's result does not depend on the order its scans read in: each scan merges its
//! upstream's changes with what it reads (see
//! [`crate::stream::executor::backfill::arrangement`]). The work does. When both inputs of a
//! join read at once, an anti join emits each left row and retracts it once its match
//! arrives, an outer join emits each row padded with NULLs and replaces it, and every join
//! probes, and keeps in its caches, two growing sides. Read one side first and the other
//! after, and each output row is made once: the rows of the side read second find the
//! first side whole (and cached), and the second side's own rows, which nothing probes
//! during the build, need no cache.
//!
//! [`BackfillOrder::Auto`], the default, derives the order from the plan: at each join the
//! side read first is
//!
//! - the right side of a left outer, semi or anti join (and the left of a right one): the
//!   side whose rows decide whether the other side's rows show;
//! - otherwise the side with fewer rows (by the upstream tables' stored row estimates).
//!
//! A scan waits for every scan of the side read first at each join above it: in a star the
//! dimensions read first and the facts last. [`BackfillOrder::Fixed`] states the order by
//! upstream relation instead (`FIXED(a -> b, ..)`), [`BackfillOrder::None`] lets every scan
//! read at once. The runtime half, the gates that hold a scan back, is
//! [`crate::stream::executor::backfill::order`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::catalog::{BackfillOrder, TableCatalog};
use crate::error::{Error, Result};
use crate::storage::keycodec::table_prefix;
use crate::storage::store::Store;
use crate::stream::executor::backfill::order::{OrderGates, StartGate};
use crate::stream::executor::hash_join::JoinKind;
use crate::stream::plan::{NodeKind, StreamNode};

/// Rows read to estimate an upstream's size (exact below it, see [`Store::estimate_rows`]).
const SAMPLE_ROWS: u64 = 4096;

/// For each scan (by progress slot) that waits, the scans it waits for.
pub type Waits = BTreeMap<usize, BTreeSet<usize>>;

/// A scan of the plan: its progress slot and its upstream.
struct ScanRef {
    slot: usize,
    table: Arc<TableCatalog>,
}

/// The waits of the scans under `root` by `order`; `rows` estimates an upstream's rows. A
/// `FIXED` order naming a relation the view does not read, or going round in a circle, is an
/// error naming it.
pub fn scan_waits(
    root: &StreamNode,
    order: &BackfillOrder,
    rows: &dyn Fn(&TableCatalog) -> u64,
) -> Result<Waits> {
    let mut waits = Waits::new();
    match order {
        BackfillOrder::None => {}
        BackfillOrder::Auto => {
            auto(root, rows, &mut waits);
        }
        BackfillOrder::Fixed(pairs) => {
            let scans = scans_under(root);
            let of = |name: &str| -> Result<Vec<usize>> {
                let slots: Vec<usize> =
                    scans.iter().filter(|s| s.table.name == name).map(|s| s.slot).collect();
                match slots.is_empty() {
                    true => Err(Error::InvalidParameter(format!(
                        "backfill_order names {name}, which the view does not read; it reads {}",
                        relation_names(&scans)
                    ))),
                    false => Ok(slots),
                }
            };
            for (before, after) in pairs {
                for slot in of(after)? {
                    waits.entry(slot).or_default().extend(of(before)?);
                }
            }
            if let Some(name) = in_a_cycle(&waits, &scans) {
                return Err(Error::InvalidParameter(format!(
                    "backfill_order goes round in a circle through {name}; state an order in which \
                     every relation comes after those it waits for"
                )));
            }
        }
    }
    Ok(waits)
}

/// The gates of a job built with `parallelism` actors per fragment, or `None` when no scan
/// waits for another.
pub fn gates(
    root: &StreamNode,
    order: &BackfillOrder,
    store: &Arc<Store>,
    parallelism: usize,
) -> Result<Option<PlanGates>> {
    let waits = stored_waits(root, order, store)?;
    if waits.is_empty() {
        return Ok(None);
    }
    let slots: Vec<usize> = scans_under(root).iter().map(|s| s.slot).collect();
    Ok(Some(PlanGates { gates: OrderGates::new(&slots, parallelism), waits }))
}

/// [`scan_waits`] by the upstreams' rows as stored now.
pub fn stored_waits(root: &StreamNode, order: &BackfillOrder, store: &Arc<Store>) -> Result<Waits> {
    let rows = |table: &TableCatalog| {
        let end = table_prefix(crate::catalog::TableId(table.id.0 + 1));
        // An estimate that cannot be made orders the scan as an empty one.
        store.estimate_rows(&table_prefix(table.id), &end, SAMPLE_ROWS).unwrap_or(0)
    };
    scan_waits(root, order, &rows)
}

/// `waits` as lines for `EXPLAIN`: `<scan> after <scans>`, a scan named by its upstream
/// (`name#k` for the `k`-th of several scans of one upstream, in plan order).
pub fn explain(root: &StreamNode, waits: &Waits) -> Vec<String> {
    let scans = scans_under(root);
    let label = |slot: usize| {
        let scan = scans.iter().position(|s| s.slot == slot).expect("a scan of the plan");
        let name = &scans[scan].table.name;
        let same: Vec<usize> = scans
            .iter()
            .enumerate()
            .filter(|(_, s)| &s.table.name == name)
            .map(|(i, _)| i)
            .collect();
        match same.len() {
            1 => name.clone(),
            _ => format!("{name}#{}", same.iter().position(|&i| i == scan).expect("in") + 1),
        }
    };
    // In plan order of the waiting scans.
    scans
        .iter()
        .filter_map(|scan| {
            let before = waits.get(&scan.slot).filter(|b| !b.is_empty())?;
            let names: Vec<String> = before.iter().map(|&s| label(s)).collect();
            Some(format!("{} after {}", label(scan.slot), names.join(", ")))
        })
        .collect()
}

/// A job's scan gates and who waits for whom.
pub struct PlanGates {
    gates: Arc<OrderGates>,
    waits: Waits,
}

impl PlanGates {
    /// The gate of one actor of the scan with progress slot `slot`.
    pub fn start_gate(&self, slot: usize) -> StartGate {
        let after = self.waits.get(&slot).map(|s| s.iter().copied().collect()).unwrap_or_default();
        StartGate::new(self.gates.clone(), slot, after)
    }
}

/// Adds the waits of [`BackfillOrder::Auto`] under `node`; returns its scans with their rows.
fn auto(
    node: &StreamNode,
    rows: &dyn Fn(&TableCatalog) -> u64,
    waits: &mut Waits,
) -> Vec<(usize, u64)> {
    if let NodeKind::Scan { table, progress, .. } = &node.kind {
        return vec![(*progress, rows(table))];
    }
    let mut below: Vec<Vec<(usize, u64)>> =
        node.inputs.iter().map(|input| auto(input, rows, waits)).collect();
    if let NodeKind::DynamicFilter { .. } = &node.kind {
        // The threshold first: the rows then come judged by it, not all turned at once.
        let before: Vec<usize> = below[1].iter().map(|(slot, _)| *slot).collect();
        for (slot, _) in &below[0] {
            waits.entry(*slot).or_default().extend(before.iter().copied());
        }
    }
    if let NodeKind::HashJoin { kind, .. } = &node.kind {
        let total = |side: &[(usize, u64)]| side.iter().map(|(_, r)| r).sum::<u64>();
        use JoinKind::*;
        let first = match kind {
            LeftOuter | LeftSemi | LeftAnti => 1,
            RightOuter | RightSemi | RightAnti => 0,
            Inner | FullOuter => usize::from(total(&below[1]) < total(&below[0])),
        };
        let before: Vec<usize> = below[first].iter().map(|(slot, _)| *slot).collect();
        for (slot, _) in &below[1 - first] {
            waits.entry(*slot).or_default().extend(before.iter().copied());
        }
    }
    below.drain(..).flatten().collect()
}

/// The scans under `node`, in plan order.
fn scans_under(node: &StreamNode) -> Vec<ScanRef> {
    let mut scans = Vec::new();
    let mut stack = vec![node];
    while let Some(node) = stack.pop() {
        if let NodeKind::Scan { table, progress, .. } = &node.kind {
            scans.push(ScanRef { slot: *progress, table: table.clone() });
        }
        stack.extend(node.inputs.iter().rev());
    }
    scans
}

/// The names of the relations `scans` read, for messages.
fn relation_names(scans: &[ScanRef]) -> String {
    let names: BTreeSet<&str> = scans.iter().map(|s| s.table.name.as_str()).collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}

/// A relation whose scan waits, through others, for itself.
fn in_a_cycle(waits: &Waits, scans: &[ScanRef]) -> Option<String> {
    // Scans whose waits are all done go next; when none can, the rest wait in a circle.
    let mut done = BTreeSet::new();
    loop {
        let next: Vec<usize> = scans
            .iter()
            .map(|s| s.slot)
            .filter(|slot| !done.contains(slot))
            .filter(|slot| waits.get(slot).is_none_or(|before| before.is_subset(&done)))
            .collect();
        if next.is_empty() {
            let stuck = scans.iter().find(|s| !done.contains(&s.slot))?;
            return Some(stuck.table.name.clone());
        }
        done.extend(next);
    }
}

/// `FIXED(a -> b, c -> d)` as `(before, after)` pairs of relation names: unquoted names are
/// folded to lower case, as Postgres folds identifiers.
pub fn parse_fixed(text: &str) -> Result<Vec<(String, String)>> {
    let usage = || {
        Error::InvalidParameter(format!(
            "backfill_order must be 'auto', 'none' or FIXED(a -> b, ..), not {text}"
        ))
    };
    let trimmed = text.trim();
    let inner = trimmed
        .get(..6)
        .filter(|head| head.eq_ignore_ascii_case("fixed("))
        .and_then(|_| trimmed[6..].strip_suffix(')'))
        .ok_or_else(usage)?;
    let name = |part: &str| -> Result<String> {
        let part = part.trim();
        let part = part.rsplit('.').next().unwrap_or(part);
        let name = match part.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
            Some(quoted) => quoted.to_owned(),
            None => part.to_lowercase(),
        };
        match name.is_empty() {
            true => Err(usage()),
            false => Ok(name),
        }
    };
    let mut pairs = Vec::new();
    for edge in inner.split(',') {
        let names: Vec<&str> = edge.split("->").collect();
        if names.len() < 2 {
            return Err(usage());
        }
        // `a -> b -> c` is a chain.
        for pair in names.windows(2) {
            pairs.push((name(pair[0])?, name(pair[1])?));
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_orders_read_as_pairs_of_folded_names_and_chains_as_their_links() {
        let pairs = |text: &str| parse_fixed(text).map_err(|e| e.to_string());
        let owned = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
        };
        assert_eq!(pairs("FIXED(a -> b, C->d)"), Ok(owned(&[("a", "b"), ("c", "d")])));
        assert_eq!(pairs("fixed(a -> b -> c)"), Ok(owned(&[("a", "b"), ("b", "c")])));
        assert_eq!(pairs("FIXED(public.A -> \"B\")"), Ok(owned(&[("a", "B")])));
        for bad in ["a -> b", "FIXED(a)", "FIXED(a -> )", "FIXED a -> b"] {
            let error = pairs(bad).unwrap_err();
            assert!(
                error.contains("must be 'auto', 'none' or FIXED(a -> b, ..)"),
                "{bad}: {error}"
            );
        }
    }
}
