//! Attributed energy: each interval of a meter divided among the Agent scopes live in
//! it, so that the scopes' figures and what no scope held add up to the total.
//!
//! A scope's *window* energy is the device's energy while it was live, whoever used
//! it: concurrent scopes each count the whole of it. Its *attributed* energy is its
//! part. Within one interval (cut at every scope boundary inside it, so the live set
//! is fixed in each piece) the energy divides:
//!
//! 1. by process first, where the interval carries process shares naming at least one
//!    process: a process's share goes to the scopes that process opened; a share whose
//!    process has no live scope, and the part the named processes leave (idle power,
//!    other users), is unattributed. Shares naming no process say nothing about who
//!    used the device (the driver lists none when none runs, and also when the ones
//!    that run are out of its sight: a container's own PID namespace), so the interval
//!    divides as if none were read: a step is never left with nothing because the
//!    driver saw no one;
//! 2. then among the receiving live *innermost* scopes (live scopes with no live
//!    child), in proportion to each scope's weight (1 unless the caller gave one).
//!
//! A scope is also credited with what its live descendants receive, so a parent's
//! attributed energy includes its children's. Without process shares the whole
//! interval divides among every live innermost scope; with none live it is
//! unattributed.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use wattline_model::energy::Nanos;

/// The weight a scope has when the caller gives none (or one that is not a positive,
/// finite number).
pub const DEFAULT_WEIGHT: f64 = 1.0;

/// One Agent scope as attribution sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claimant {
    /// Its UUID (children name their parent by it).
    pub uuid: Uuid,
    /// The live scope it was opened inside, if any.
    pub parent: Option<Uuid>,
    /// Monotonic start.
    pub start: Nanos,
    /// Monotonic end; `Nanos::MAX` while live.
    pub until: Nanos,
    /// The process that opened it, when known.
    pub process_id: Option<u32>,
    /// Its weight among the innermost scopes it shares an interval with.
    pub weight: f64,
}

impl Claimant {
    fn live_throughout(&self, from: Nanos, to: Nanos) -> bool {
        self.start <= from && self.until >= to
    }

    fn overlaps(&self, from: Nanos, to: Nanos) -> bool {
        self.start < to && self.until > from
    }
}

/// A weight as given by a caller, made usable: a positive, finite number, else the
/// default.
pub fn usable_weight(weight: Option<f64>) -> f64 {
    weight
        .filter(|w| w.is_finite() && *w > 0.0)
        .unwrap_or(DEFAULT_WEIGHT)
}

/// How one stretch of one interval's energy divided, by position in the claimants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Division {
    /// Energy each claimant received, its descendants' included (J); indexed as the
    /// claimants passed in.
    pub inclusive: Vec<f64>,
    /// Energy each claimant received as an innermost scope (J): these and
    /// `unattributed` add up to the stretch's energy.
    pub own: Vec<f64>,
    /// Energy no scope held (J).
    pub unattributed: f64,
}

/// Divides the energy of `[from, to]` among `claimants`; `energy_between(a, b)` is the
/// energy of any `[a, b]` inside it (additive over adjacent stretches) and `shares`
/// the interval's process shares, if it has any.
pub fn divide(
    from: Nanos,
    to: Nanos,
    energy_between: impl Fn(Nanos, Nanos) -> f64,
    claimants: &[Claimant],
    shares: Option<&BTreeMap<u32, f64>>,
) -> Division {
    let mut division = Division {
        inclusive: vec![0.0; claimants.len()],
        own: vec![0.0; claimants.len()],
        unattributed: 0.0,
    };
    if to <= from {
        return division;
    }
    let relevant: Vec<usize> = (0..claimants.len())
        .filter(|&i| claimants[i].overlaps(from, to))
        .collect();
    let cuts = stretch_cuts(from, to, claimants, &relevant);
    let position: HashMap<Uuid, usize> = relevant.iter().map(|&i| (claimants[i].uuid, i)).collect();
    // Shares naming no process carry no division (see the module).
    let shares = shares.filter(|shares| !shares.is_empty());
    let mut sweep = LiveSweep::new(&cuts, claimants, &relevant);
    let mut has_live_child = vec![false; claimants.len()];
    for (index, stretch) in cuts.windows(2).enumerate() {
        sweep.advance_to(index);
        let (a, b) = (stretch[0], stretch[1]);
        let energy = energy_between(a, b);
        if energy == 0.0 {
            continue;
        }
        let live_parent = |i: usize| {
            claimants[i]
                .parent
                .and_then(|parent| position.get(&parent).copied())
                .filter(|&p| claimants[p].live_throughout(a, b))
        };
        let innermost = sweep.innermost(&live_parent, &mut has_live_child);
        let mut given = 0.0;
        match shares {
            None => division.credit(claimants, &innermost, energy, &live_parent, &mut given),
            Some(shares) => {
                for (process_id, share) in shares {
                    let theirs: Vec<usize> = innermost
                        .iter()
                        .copied()
                        .filter(|&i| claimants[i].process_id == Some(*process_id))
                        .collect();
                    let amount = energy * share.clamp(0.0, 1.0);
                    division.credit(claimants, &theirs, amount, &live_parent, &mut given);
                }
            }
        }
        // Taken as the difference, so the parts add up to the stretch's energy.
        division.unattributed += energy - given;
    }
    division
}

/// The instants `[from, to]` is cut at: its ends and every relevant claimant's start
/// and end inside it, in order, each once.
fn stretch_cuts(from: Nanos, to: Nanos, claimants: &[Claimant], relevant: &[usize]) -> Vec<Nanos> {
    let mut cuts = vec![from, to];
    for &i in relevant {
        let scope = &claimants[i];
        cuts.extend(
            [scope.start, scope.until]
                .into_iter()
                .filter(|t| from < *t && *t < to),
        );
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// The claimants live in each stretch between cuts. A claimant is live throughout the
/// stretches from the cut at its start to the cut at its end: a sweep over the cuts
/// keeps the live set (by position, as the claimants were passed), so no stretch scans
/// every claimant, and a burst of many short scopes in one interval costs in
/// proportion to their number, not its square.
struct LiveSweep {
    joins: std::iter::Peekable<std::vec::IntoIter<(usize, usize)>>,
    leaves: std::iter::Peekable<std::vec::IntoIter<(usize, usize)>>,
    live_now: std::collections::BTreeSet<usize>,
}

impl LiveSweep {
    /// The sweep over `cuts` (from [`stretch_cuts`]) of the `relevant` claimants.
    fn new(cuts: &[Nanos], claimants: &[Claimant], relevant: &[usize]) -> Self {
        let (from, to) = (cuts[0], cuts[cuts.len() - 1]);
        let cut_at = |t: Nanos| {
            cuts.binary_search(&t.clamp(from, to))
                .unwrap_or_else(|index| index)
        };
        let spans: Vec<(usize, usize, usize)> = relevant
            .iter()
            .map(|&i| (cut_at(claimants[i].start), cut_at(claimants[i].until), i))
            .filter(|(join, leave, _)| join < leave)
            .collect();
        let mut joins: Vec<(usize, usize)> = spans.iter().map(|&(join, _, i)| (join, i)).collect();
        let mut leaves: Vec<(usize, usize)> =
            spans.iter().map(|&(_, leave, i)| (leave, i)).collect();
        joins.sort_unstable();
        leaves.sort_unstable();
        LiveSweep {
            joins: joins.into_iter().peekable(),
            leaves: leaves.into_iter().peekable(),
            live_now: std::collections::BTreeSet::new(),
        }
    }

    /// Moves to the stretch after cut `index`.
    fn advance_to(&mut self, index: usize) {
        while let Some((_, i)) = self.joins.next_if(|(at, _)| *at <= index) {
            self.live_now.insert(i);
        }
        while let Some((_, i)) = self.leaves.next_if(|(at, _)| *at <= index) {
            self.live_now.remove(&i);
        }
    }

    /// The live claimants with no live child, by position; `has_live_child` is
    /// scratch, all `false` before and after.
    fn innermost(
        &self,
        live_parent: &impl Fn(usize) -> Option<usize>,
        has_live_child: &mut [bool],
    ) -> Vec<usize> {
        let parents: Vec<usize> = self
            .live_now
            .iter()
            .filter_map(|&i| live_parent(i))
            .collect();
        for &parent in &parents {
            has_live_child[parent] = true;
        }
        let innermost: Vec<usize> = self
            .live_now
            .iter()
            .copied()
            .filter(|&i| !has_live_child[i])
            .collect();
        for parent in parents {
            has_live_child[parent] = false;
        }
        innermost
    }
}

impl Division {
    /// Credits `amount` to `receivers` by weight, as their own and to each of them and
    /// its live ancestors inclusively; adds what it gave to `given`.
    fn credit(
        &mut self,
        claimants: &[Claimant],
        receivers: &[usize],
        amount: f64,
        live_parent: &impl Fn(usize) -> Option<usize>,
        given: &mut f64,
    ) {
        let total_weight: f64 = receivers.iter().map(|&i| claimants[i].weight).sum();
        if receivers.is_empty() || total_weight <= 0.0 || amount <= 0.0 {
            return;
        }
        for &leaf in receivers {
            let part = amount * claimants[leaf].weight / total_weight;
            self.own[leaf] += part;
            *given += part;
            let mut next = Some(leaf);
            while let Some(scope) = next {
                self.inclusive[scope] += part;
                next = live_parent(scope);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    fn scope(n: u128, start: Nanos, until: Nanos) -> Claimant {
        Claimant {
            uuid: Uuid::from_u128(n),
            parent: None,
            start,
            until,
            process_id: Some(1),
            weight: DEFAULT_WEIGHT,
        }
    }

    /// 100 W flat: the energy of `[a, b]` is 100 J per second.
    fn flat(a: Nanos, b: Nanos) -> f64 {
        100.0 * (b - a) as f64 / S as f64
    }

    #[test]
    fn concurrent_scopes_split_the_interval_and_the_rest_is_unattributed() {
        // 0..4 s; A live 0..4, B live 1..3: 1 s A alone, 2 s shared, 1 s A alone.
        let claimants = [scope(1, 0, 4 * S), scope(2, S, 3 * S)];
        let division = divide(0, 4 * S, flat, &claimants, None);
        assert!((division.own[0] - (100.0 + 100.0 + 100.0)).abs() < 1e-9);
        assert!((division.own[1] - 100.0).abs() < 1e-9);
        assert_eq!(division.unattributed, 0.0);
        // Before and after a lone scope: no one held those.
        let division = divide(0, 4 * S, flat, &[scope(3, S, 2 * S)], None);
        assert!((division.own[0] - 100.0).abs() < 1e-9);
        assert!((division.unattributed - 300.0).abs() < 1e-9);
    }

    #[test]
    fn weights_divide_in_proportion() {
        let mut heavy = scope(1, 0, 2 * S);
        heavy.weight = 3.0;
        let claimants = [heavy, scope(2, 0, 2 * S)];
        let division = divide(0, 2 * S, flat, &claimants, None);
        assert!((division.own[0] - 150.0).abs() < 1e-9);
        assert!((division.own[1] - 50.0).abs() < 1e-9);
    }

    #[test]
    fn a_parent_is_credited_with_its_children_and_only_innermost_scopes_receive() {
        // Parent 0..4 s, child 1..3 s: the child takes the 2 s it covers.
        let mut child = scope(2, S, 3 * S);
        child.parent = Some(Uuid::from_u128(1));
        let claimants = [scope(1, 0, 4 * S), child];
        let division = divide(0, 4 * S, flat, &claimants, None);
        assert!((division.own[0] - 200.0).abs() < 1e-9);
        assert!((division.own[1] - 200.0).abs() < 1e-9);
        assert!((division.inclusive[0] - 400.0).abs() < 1e-9);
        assert!((division.inclusive[1] - 200.0).abs() < 1e-9);
    }

    #[test]
    fn process_shares_go_to_their_own_scopes_and_unclaimed_shares_are_unattributed() {
        let mut other = scope(2, 0, S);
        other.process_id = Some(2);
        let claimants = [scope(1, 0, S), other];
        // Process 1: 50%, process 2: 20%, process 3 (no scope): 10%, 20% idle.
        let shares = BTreeMap::from([(1, 0.5), (2, 0.2), (3, 0.1)]);
        let division = divide(0, S, flat, &claimants, Some(&shares));
        assert!((division.own[0] - 50.0).abs() < 1e-9);
        assert!((division.own[1] - 20.0).abs() < 1e-9);
        assert!((division.unattributed - 30.0).abs() < 1e-9);
    }

    #[test]
    fn shares_naming_no_process_divide_as_if_none_were_read() {
        // 0..2 s, A (process 1) live throughout, B (process 2) 1..2 s, weight 3.
        let mut heavy = scope(2, S, 2 * S);
        heavy.process_id = Some(2);
        heavy.weight = 3.0;
        let claimants = [scope(1, 0, 2 * S), heavy];
        let empty = BTreeMap::new();
        let division = divide(0, 2 * S, flat, &claimants, Some(&empty));
        // As without shares: A alone 100 J, then 1:3 of 100 J.
        assert!((division.own[0] - 125.0).abs() < 1e-9, "{division:?}");
        assert!((division.own[1] - 75.0).abs() < 1e-9, "{division:?}");
        assert_eq!(division.unattributed, 0.0);
        assert_eq!(division, divide(0, 2 * S, flat, &claimants, None));
        // One process named, even at a share of 0, and the rest is unattributed.
        let named = BTreeMap::from([(3, 0.0)]);
        let division = divide(0, 2 * S, flat, &claimants, Some(&named));
        assert_eq!(division.own, vec![0.0, 0.0]);
        assert!((division.unattributed - 200.0).abs() < 1e-9);
    }

    #[test]
    fn a_stretch_with_no_energy_or_no_length_gives_nothing() {
        let claimants = [scope(1, 0, S)];
        let division = divide(S, S, flat, &claimants, None);
        assert_eq!(division.own, vec![0.0]);
        assert_eq!(usable_weight(Some(f64::NAN)), DEFAULT_WEIGHT);
        assert_eq!(usable_weight(Some(-1.0)), DEFAULT_WEIGHT);
        // A file's 0 (the API refuses one) would make a stretch's weights sum to 0.
        assert_eq!(usable_weight(Some(0.0)), DEFAULT_WEIGHT);
        assert_eq!(usable_weight(Some(2.5)), 2.5);
    }

    #[test]
    fn a_burst_of_short_children_each_takes_its_own_stretch_and_the_parent_the_gaps() {
        // A parent 0..1 s with 1000 children of 0.5 ms, one every 1 ms, at 100 W: each
        // child 0.05 J; the parent the 500 gaps' 50 J as its own and all 100 J in all.
        // A child that ends before it starts, and one of no length, get nothing.
        const MS: Nanos = 1_000_000;
        let mut claimants = vec![scope(1, 0, S)];
        for n in 0..1000 {
            let mut child = scope(10 + n as u128, n * MS, n * MS + MS / 2);
            child.parent = Some(Uuid::from_u128(1));
            claimants.push(child);
        }
        claimants.push(scope(2, 3 * MS / 4, MS / 4));
        claimants.push(scope(3, MS / 4, MS / 4));
        let division = divide(0, S, flat, &claimants, None);
        assert!((division.own[0] - 50.0).abs() < 1e-9, "{}", division.own[0]);
        assert!((division.inclusive[0] - 100.0).abs() < 1e-9);
        for child in 1..=1000 {
            assert!((division.own[child] - 0.05).abs() < 1e-12, "child {child}");
            assert_eq!(division.own[child], division.inclusive[child]);
        }
        assert_eq!(division.own[1001..], [0.0, 0.0]);
        assert!(division.unattributed.abs() < 1e-9);
    }
}
