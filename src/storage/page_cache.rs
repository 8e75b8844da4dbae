//! Keeps the files RocksDB writes in the page cache.
//!
//! RocksDB's `SstFileWriter` tells the kernel to drop the file it writes from the page cache
//! (`posix_fadvise(.., POSIX_FADV_DONTNEED)` after every megabyte and when it finishes), and
//! RocksDB's C API has no switch for it. Sluice writes every large epoch with it (an ingested
//! commit, see [`Store::commit`](crate::storage::store::Store::commit)) and reads those rows
//! again soon: a view created over a CDC table just copied read the copy's last files back from
//! the disk, and took twice as long as over the same files cached (docs/benchmarks-history.md, "A write
//! buffer indexed only once read; ingested files kept in the page cache").
//!
//! So this process answers that advice itself: it defines `posix_fadvise`, which the linker
//! binds RocksDB's calls to instead of the C library's, ignores `POSIX_FADV_DONTNEED`, and passes
//! any other advice to the kernel unchanged. What stays cached is the kernel's to reclaim when
//! memory runs short, as for any file read or written, and it is not part of the process's
//! resident memory. The one exception Sluice makes itself, with [`drop_cached`]: a CDC
//! snapshot's files, which are merged into the table's lasting files as soon as it finishes.

use std::ffi::{c_int, c_long};

/// `off_t` on 64-bit Linux.
#[allow(non_camel_case_types)]
type off_t = i64;

/// `POSIX_FADV_DONTNEED` on Linux.
const POSIX_FADV_DONTNEED: c_int = 4;

/// The number of the `fadvise64` system call.
#[cfg(target_arch = "x86_64")]
const SYS_FADVISE64: c_long = 221;
#[cfg(target_arch = "aarch64")]
const SYS_FADVISE64: c_long = 223;

unsafe extern "C" {
    /// The C library's generic system call.
    fn syscall(number: c_long, ...) -> c_long;
    /// Where the C library leaves a failed call's error number.
    fn __errno_location() -> *mut c_int;
}

/// `posix_fadvise(3)`, but for `POSIX_FADV_DONTNEED`, which succeeds and does nothing.
///
/// # Safety
///
/// None beyond the system call's: it takes a file descriptor and numbers, and touches no memory.
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fadvise(
    fd: c_int,
    offset: off_t,
    len: off_t,
    advice: c_int,
) -> c_int {
    if advice == POSIX_FADV_DONTNEED {
        return 0;
    }
    // SAFETY: the system call behind the C library's `posix_fadvise` on 64-bit Linux, with the
    // same arguments in the same order.
    let done = unsafe { syscall(SYS_FADVISE64, fd as c_long, offset, len, advice as c_long) };
    if done < 0 {
        // Like the C library's: the error number is returned, not left in `errno`.
        // SAFETY: the calling thread's `errno`, which the failed call just set.
        unsafe { *__errno_location() }
    } else {
        0
    }
}

/// Drops the pages of the file at `path` from the page cache, as far as they are written back:
/// the kernel's `POSIX_FADV_DONTNEED`, which [`posix_fadvise`] withholds from RocksDB. For files
/// Sluice knows are read once more at most, soon merged into others (see
/// [`Store::defer_level0_merges`](crate::storage::store::Store::defer_level0_merges)).
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn drop_cached(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path)?;
    let fd = file.as_raw_fd() as c_long;
    // SAFETY: the system call on a file descriptor this function holds open, over the whole
    // file (offset 0, length 0); it touches no memory.
    let done = unsafe {
        syscall(SYS_FADVISE64, fd, 0 as c_long, 0 as c_long, POSIX_FADV_DONTNEED as c_long)
    };
    match done {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Elsewhere the page cache keeps the file.
#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub fn drop_cached(_path: &std::path::Path) -> std::io::Result<()> {
    Ok(())
}
