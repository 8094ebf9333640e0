//! Giving freed heap memory back to the operating system.
//!
//! glibc's allocator keeps what a thread frees in that thread's arena for reuse, so the
//! resident size stays at its high-water mark after a burst (indexing a knowledge base, a load
//! peak). Two things return it:
//!
//! - [`configure`], at start, fixes the allocator's trim and mmap thresholds. glibc raises both
//!   by itself each time a large block is freed (up to 32 and 64 MB): after tantivy freed its
//!   indexing buffers, a thread arena's free top stayed resident, 5–10 MB of the demo server's
//!   idle RSS after its first start, which `malloc_trim` does not touch (it trims only the main
//!   arena's top). Fixed thresholds keep each arena's free top under [`TRIM_THRESHOLD`].
//! - [`release`] (`malloc_trim(0)`) returns the free pages inside every arena; it is called after
//!   work that allocates and frees a lot at once (an index commit), never on the request path.
//!
//! Elsewhere than glibc both do nothing.

/// Bytes of free memory at the top of an arena above which `free` returns it to the operating
/// system (glibc's `M_TRIM_THRESHOLD`; its starting default is 128 KiB).
pub const TRIM_THRESHOLD: i32 = 1 << 20;

/// Allocations of at least this many bytes get their own mapping, unmapped when freed (glibc's
/// `M_MMAP_THRESHOLD`; starting default 128 KiB). The request path allocates far less at a
/// time; indexing and uploads allocate more, rarely.
pub const MMAP_THRESHOLD: i32 = 1 << 20;

/// Fixes the allocator's thresholds (see the module documentation). Call it once, first thing
/// in `main`. Measured with `benches/cpu_ab.sh`: no change in CPU per completion or per history
/// write.
pub fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's parameters; it has no preconditions.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// Returns the free pages of every malloc arena to the operating system. Takes about a
/// millisecond per few hundred MB of arenas; call it after bursts, not per request.
pub fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
