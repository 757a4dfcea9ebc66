//! What a new Agent scope is, as the pipeline's callers describe it, and this
//! process's id, which every scope opened here names.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use uuid::Uuid;

/// This process's id, once read; 0 until then and again in a forked child.
static PROCESS_ID: AtomicU32 = AtomicU32::new(0);

/// This process's id without a system call each time (it is asked on every scope's
/// start): read once, and read again in a forked child, whose fork handler forgets it.
pub fn current_process_id() -> u32 {
    let cached = PROCESS_ID.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    let id = std::process::id();
    if forgotten_in_forked_children() {
        PROCESS_ID.store(id, Ordering::Relaxed);
    }
    id
}

/// Registers, once, the fork handler that clears the cached id in a child; whether it
/// is registered (else the id is not cached).
#[cfg(unix)]
fn forgotten_in_forked_children() -> bool {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    extern "C" fn forget() {
        PROCESS_ID.store(0, Ordering::Relaxed);
    }
    *REGISTERED.get_or_init(|| {
        // SAFETY: registers a handler that only stores to an atomic, which is safe in
        // a child right after fork.
        let status = unsafe { libc::pthread_atfork(None, None, Some(forget)) };
        if status != 0 {
            tracing::debug!(
                status,
                "pthread_atfork failed; the process id is not cached"
            );
        }
        status == 0
    })
}

/// Without fork, the id never changes.
#[cfg(not(unix))]
fn forgotten_in_forked_children() -> bool {
    true
}

/// What a new Agent scope is: its name, where it sits, whose it is and how it weighs
/// against the scopes live beside it.
#[derive(Debug, Clone, Copy)]
pub struct ScopeStart<'a> {
    /// Its name.
    pub name: &'a str,
    /// The live scope it is opened inside, if any.
    pub parent: Option<Uuid>,
    /// ATOF scope flags for its start and end events.
    pub attributes: &'a [&'static str],
    /// The process that opened it: where a device reports process shares, the scope
    /// is attributed from that process's share.
    pub process_id: Option<u32>,
    /// Its weight among the innermost scopes live beside it (tokens, batch size); 1
    /// when `None`.
    pub weight: Option<f64>,
    /// The caller's W3C `traceparent` (checked by the caller): the scope's span is a
    /// child of that span.
    pub traceparent: Option<&'a str>,
}

impl<'a> ScopeStart<'a> {
    /// A top-level scope named `name`, opened by this process, of weight 1.
    pub fn local(name: &'a str) -> Self {
        ScopeStart {
            name,
            parent: None,
            attributes: &[],
            process_id: Some(current_process_id()),
            weight: None,
            traceparent: None,
        }
    }
}

/// Slots in each thread's table of names it shared lately.
const NAME_SLOTS: usize = 64;

thread_local! {
    /// Names this thread shared lately, each in the slot its hash picks: a host opens
    /// the same few step names over and over, so most scopes find theirs here.
    static RECENT_NAMES: std::cell::RefCell<[Option<Arc<str>>; NAME_SLOTS]> =
        const { std::cell::RefCell::new([const { None }; NAME_SLOTS]) };
}

/// `name` as the actors share it: a name this thread used lately is shared again
/// (a reference count) instead of copied into a new allocation, which the actors would
/// free on their own threads, where the caller's allocator never sees it again.
pub fn shared_name(name: &str) -> Arc<str> {
    let first = name_slot(name);
    RECENT_NAMES.with(|recent| {
        let Ok(mut recent) = recent.try_borrow_mut() else {
            return Arc::from(name);
        };
        // Two slots a name may be in: two names that hash alike both stay.
        let slots = [first, first ^ 1];
        for slot in slots {
            if let Some(known) = &recent[slot]
                && same_text(known, name)
            {
                return Arc::clone(known);
            }
        }
        let shared: Arc<str> = Arc::from(name);
        // An empty slot of the two, else the second: the first slot's name was the
        // last to move there, so the older one goes.
        let slot = slots
            .into_iter()
            .find(|&slot| recent[slot].is_none())
            .unwrap_or(slots[1]);
        recent[slot] = Some(Arc::clone(&shared));
        if slot == slots[1] {
            recent.swap(slots[0], slots[1]);
        }
        shared
    })
}

/// Whether `a` and `b` are the same text, compared in line: a step's name is a few
/// bytes, for which a call to `memcmp` costs more than the comparison.
fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

/// The slot `name` goes in: FNV-1a over its bytes, both halves folded in.
fn name_slot(name: &str) -> usize {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (hash ^ (hash >> 32)) as usize % NAME_SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_used_again_is_shared_not_copied() {
        let first = shared_name("plan");
        let again = shared_name(&String::from("plan"));
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(&*again, "plan");
    }

    #[test]
    fn names_that_differ_in_their_last_character_mostly_keep_their_own_slots() {
        let slots: std::collections::HashSet<usize> =
            (0..10).map(|n| name_slot(&format!("step-{n}"))).collect();
        assert!(slots.len() >= 8, "{slots:?}");
    }

    #[test]
    fn same_text_compares_every_byte_and_the_length() {
        assert!(same_text("step-1", "step-1"));
        assert!(same_text("", ""));
        assert!(!same_text("step-1", "step-2"));
        assert!(!same_text("step-1", "step-10"));
        assert!(!same_text("xtep-1", "step-1"));
    }

    #[test]
    fn two_names_of_one_slot_both_stay_shared() {
        let first = String::from("collide-0");
        let second = (1..10_000)
            .map(|n| format!("collide-{n}"))
            .find(|name| name_slot(name) == name_slot(&first))
            .expect("a name in the same slot among 10,000");
        let (a, b) = (shared_name(&first), shared_name(&second));
        for _ in 0..3 {
            assert!(Arc::ptr_eq(&a, &shared_name(&first)));
            assert!(Arc::ptr_eq(&b, &shared_name(&second)));
        }
    }

    #[test]
    fn every_name_comes_back_as_given_whatever_shares_its_slot() {
        // Far more names than slots: collisions replace each other, never mix.
        for round in 0..3 {
            for n in 0..(4 * NAME_SLOTS) {
                let name = format!("step-{n}");
                assert_eq!(&*shared_name(&name), name, "round {round}");
            }
        }
    }
}
