//! Ctrl-C (and SIGTERM, which replicalab turns into it) during a native search: the search
//! runs without the GIL, so Python's handler cannot run until it returns. Every so many
//! steps a search calls `interrupted()`, which takes the GIL and runs the pending signal
//! handlers; a KeyboardInterrupt raised there ends the search (as a timeout) and is raised
//! again by the Python entry point when it returns (`take`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Steps between two looks at the signals (a bitmask: a power of two minus one).
pub const EVERY: u64 = 0xFFFF;

static POLL: OnceLock<fn() -> bool> = OnceLock::new();
static RAISED: AtomicBool = AtomicBool::new(false);

/// Install how to look at pending signals (the Python module does, at import).
pub fn install(poll: fn() -> bool) {
    let _ = POLL.set(poll);
}

/// Whether a signal handler raised (the search should stop); false when nothing is
/// installed (Rust tests).
pub fn interrupted() -> bool {
    if RAISED.load(Ordering::Relaxed) {
        return true;
    }
    let raised = POLL.get().is_some_and(|poll| poll());
    if raised {
        RAISED.store(true, Ordering::Relaxed);
    }
    raised
}

/// Whether a search was interrupted since the last call (and forget it).
pub fn take() -> bool {
    RAISED.swap(false, Ordering::Relaxed)
}
