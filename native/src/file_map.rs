//! A file's bytes, mapped read-only rather than copied: a history of 10^6 transactions is
//! ~350 MB, and reading it into a buffer costs a zeroed allocation and a copy of every
//! page (about a fifth of `check`'s time at that size); mapping shares the page cache.

use std::fs::File;
use std::ops::Deref;
use std::os::unix::io::AsRawFd;

/// The bytes of a file: a private read-only mapping, or (an empty file, a file that
/// cannot be mapped) a buffer read whole.
pub enum FileBytes {
    Mapped { ptr: *mut libc::c_void, len: usize },
    Read(Vec<u8>),
}

// the mapping is read-only and owned: it may move between threads
unsafe impl Send for FileBytes {}
unsafe impl Sync for FileBytes {}

impl FileBytes {
    /// Map (or read) the file at `path`.
    pub fn open(path: &str) -> std::io::Result<FileBytes> {
        let f = File::open(path)?;
        let len = f.metadata()?.len() as usize;
        if len > 0 {
            // SAFETY: a fresh private read-only mapping of `len` bytes of an open file;
            // checked for failure; unmapped once in Drop. A file truncated while mapped
            // would fault, as with any reader of a file being rewritten under it.
            let ptr = unsafe {
                libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ,
                           libc::MAP_PRIVATE | libc::MAP_POPULATE, f.as_raw_fd(), 0)
            };
            if ptr != libc::MAP_FAILED {
                unsafe { libc::madvise(ptr, len, libc::MADV_SEQUENTIAL) };
                return Ok(FileBytes::Mapped { ptr, len });
            }
        }
        std::fs::read(path).map(FileBytes::Read)
    }
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            // SAFETY: the mapping is live and `len` bytes long until Drop
            FileBytes::Mapped { ptr, len } => unsafe {
                std::slice::from_raw_parts(*ptr as *const u8, *len)
            },
            FileBytes::Read(v) => v,
        }
    }
}

impl Drop for FileBytes {
    fn drop(&mut self) {
        if let FileBytes::Mapped { ptr, len } = *self {
            unsafe { libc::munmap(ptr, len) };
        }
    }
}
