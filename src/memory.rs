//! Giving freed heap memory back to the operating system.
//!
//! glibc's allocator keeps what a thread frees in that thread's arena for reuse, so the
//! resident size stays at its high-water mark after a burst (indexing a knowledge base, a load
//! peak): about 10 MB of the demo server's idle RSS was such free memory. [`release`] returns
//! it (`malloc_trim(0)`); it is called after work that allocates and frees a lot at once (an
//! index commit), never on the request path. Elsewhere than glibc it does nothing.

/// Returns the free pages of every malloc arena to the operating system. Takes about a
/// millisecond per few hundred MB of arenas; call it after bursts, not per request.
pub fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
