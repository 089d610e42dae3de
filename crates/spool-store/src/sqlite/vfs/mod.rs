//! `spool-wal`: the platform's own VFS, with a commit's WAL frames written
//! in one system call instead of two per frame.
//!
//! SQLite writes each WAL frame as two `pwrite`s, its 24-byte header and
//! its page: ~2.5 µs a frame on a 2-core VM, against ~0.8 µs a frame when
//! a commit's frames go out in one write. A one-item `add_items` commits
//! ~6 frames, 16 concurrent ones ~120 (`docs/internals/log.md`, "Writing"). This VFS opens
//! every file through the default VFS and leaves all of them alone but the
//! WAL, whose writes go through a [`coalesce::Coalescer`]: writes that
//! continue one another wait in a buffer, and go out as one write when a
//! commit frame is complete, or before anything else is done with the file.
//! The rules that keep SQLite correct are in `coalesce.rs`.
//!
//! Only the writer's connection opens the store through it: the others
//! never write the WAL. The database file and its shared memory are the
//! default VFS's own objects, so locks and the WAL index are shared with
//! every other connection to the file as before.
//!
//! Safety: every `unsafe extern "C"` function here is called by SQLite
//! only, with the VFS registered here and the file objects its `xOpen`
//! filled in; SQLite calls a file's methods from one thread at a time.
#![allow(unsafe_code)]

mod coalesce;

use std::ffi::{CStr, c_char, c_int, c_void};
use std::mem::{align_of, size_of};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

use coalesce::Coalescer;

/// The name the VFS is registered under.
const NAME: &CStr = c"spool-wal";

/// Registers the VFS (once per process) and gives its name, or `None` if
/// SQLite has no default VFS to build it on; the caller then opens the
/// file with the default VFS.
pub(crate) fn name() -> Option<&'static CStr> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    REGISTERED.get_or_init(register).then_some(NAME)
}

/// The default VFS's file object is placed after ours in the memory
/// SQLite gives `xOpen`, at this offset.
const REAL_AT: usize = size_of::<WalFile>().next_multiple_of(align_of::<u64>());

/// Builds the VFS on the default one and registers it (not as the default).
fn register() -> bool {
    // SAFETY: the default VFS SQLite gives is a valid object that outlives
    // the process's connections; the VFS registered here is leaked, so it
    // does too. Called once (`name`).
    unsafe {
        let base = ffi::sqlite3_vfs_find(ptr::null());
        if base.is_null() {
            return false;
        }
        // The base's optional methods are offered only where it has them.
        let b = &*base;
        let vfs = Box::new(ffi::sqlite3_vfs {
            iVersion: b.iVersion.min(2),
            szOsFile: REAL_AT as c_int + b.szOsFile,
            mxPathname: b.mxPathname,
            pNext: ptr::null_mut(),
            zName: NAME.as_ptr(),
            pAppData: base.cast(),
            xOpen: Some(open),
            xDelete: b.xDelete.and(Some(delete)),
            xAccess: b.xAccess.and(Some(access)),
            xFullPathname: b.xFullPathname.and(Some(full_pathname)),
            xDlOpen: b.xDlOpen.and(Some(dl_open)),
            xDlError: b.xDlError.and(Some(dl_error)),
            xDlSym: b.xDlSym.and(Some(dl_sym)),
            xDlClose: b.xDlClose.and(Some(dl_close)),
            xRandomness: b.xRandomness.and(Some(randomness)),
            xSleep: b.xSleep.and(Some(sleep)),
            xCurrentTime: b.xCurrentTime.and(Some(current_time)),
            xGetLastError: b.xGetLastError.and(Some(get_last_error)),
            xCurrentTimeInt64: b.xCurrentTimeInt64.and(Some(current_time_int64)),
            xSetSystemCall: None,
            xGetSystemCall: None,
            xNextSystemCall: None,
        });
        // Leaked: SQLite holds the pointer for as long as the process runs.
        ffi::sqlite3_vfs_register(Box::into_raw(vfs), 0) == ffi::SQLITE_OK
    }
}

/// The VFS this one is built on.
unsafe fn base(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
    unsafe { (*vfs).pAppData.cast() }
}

/// A WAL file opened through this VFS: SQLite's file object (first, as
/// SQLite requires), the default VFS's file object it wraps, and the
/// writes waiting to go out.
#[repr(C)]
struct WalFile {
    file: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    writes: Coalescer,
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // Version 1: no shared memory and no memory map; SQLite uses both on
    // the database file only.
    iVersion: 1,
    xClose: Some(wal_close),
    xRead: Some(wal_read),
    xWrite: Some(wal_write),
    xTruncate: Some(wal_truncate),
    xSync: Some(wal_sync),
    xFileSize: Some(wal_file_size),
    xLock: Some(wal_lock),
    xUnlock: Some(wal_unlock),
    xCheckReservedLock: Some(wal_check_reserved_lock),
    xFileControl: Some(wal_file_control),
    xSectorSize: Some(wal_sector_size),
    xDeviceCharacteristics: Some(wal_device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
    unsafe {
        let base = base(vfs);
        let Some(base_open) = (*base).xOpen else {
            return ffi::SQLITE_CANTOPEN;
        };
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            // Not the WAL: the default VFS's own file object, in the memory
            // SQLite sized for ours (which is larger).
            return base_open(base, name, file, flags, out_flags);
        }
        let real = file.cast::<u8>().add(REAL_AT).cast::<ffi::sqlite3_file>();
        (*real).pMethods = ptr::null();
        let rc = base_open(base, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            if let Some(close) = (*real).pMethods.as_ref().and_then(|m| m.xClose) {
                close(real);
            }
            (*file).pMethods = ptr::null();
            return rc;
        }
        ptr::write(
            file.cast::<WalFile>(),
            WalFile {
                file: ffi::sqlite3_file {
                    pMethods: &WAL_METHODS,
                },
                real,
                writes: Coalescer::default(),
            },
        );
        ffi::SQLITE_OK
    }
}

/// The wrapped file and its methods.
unsafe fn parts<'a>(
    file: *mut ffi::sqlite3_file,
) -> (
    &'a mut WalFile,
    *mut ffi::sqlite3_file,
    &'a ffi::sqlite3_io_methods,
) {
    // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
    unsafe {
        let wal = &mut *file.cast::<WalFile>();
        let real = wal.real;
        (wal, real, &*(*real).pMethods)
    }
}

/// Writes to the wrapped file, for the [`Coalescer`].
fn sink(
    real: *mut ffi::sqlite3_file,
    methods: &ffi::sqlite3_io_methods,
) -> impl FnMut(&[u8], i64) -> c_int + '_ {
    move |data, offset| match methods.xWrite {
        // SAFETY: `real` is the wrapped file, open; `data` outlives the
        // call, and is shorter than `c_int::MAX` (`coalesce::CAPACITY`).
        Some(write) => unsafe { write(real, data.as_ptr().cast(), data.len() as c_int, offset) },
        None => ffi::SQLITE_IOERR_WRITE,
    }
}

/// Sends the waiting writes to the wrapped file.
unsafe fn flush(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
    unsafe {
        let (wal, real, methods) = parts(file);
        wal.writes.flush(&mut sink(real, methods))
    }
}

unsafe extern "C" fn wal_write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
    unsafe {
        let (wal, real, methods) = parts(file);
        let data = std::slice::from_raw_parts(data.cast::<u8>(), amount as usize);
        wal.writes.write(data, offset, &mut sink(real, methods))
    }
}

unsafe extern "C" fn wal_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
    unsafe {
        let flushed = flush(file);
        let (_, real, methods) = parts(file);
        let closed = match methods.xClose {
            Some(close) => close(real),
            None => ffi::SQLITE_IOERR_CLOSE,
        };
        ptr::drop_in_place(file.cast::<WalFile>());
        (*file).pMethods = ptr::null();
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            closed
        }
    }
}

/// A method that sends the waiting writes first, then forwards.
macro_rules! flushed_then {
    ($name:ident, $method:ident ( $($arg:ident : $ty:ty),* )) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
            unsafe {
                let rc = flush(file);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
                let (_, real, methods) = parts(file);
                match methods.$method {
                    Some(method) => method(real $(, $arg)*),
                    None => ffi::SQLITE_IOERR,
                }
            }
        }
    };
}

/// A method that needs nothing sent first; `$missing` is its result if
/// the wrapped file lacks it.
macro_rules! forwarded {
    ($name:ident, $method:ident ( $($arg:ident : $ty:ty),* ), $missing:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
            unsafe {
                let (_, real, methods) = parts(file);
                match methods.$method {
                    Some(method) => method(real $(, $arg)*),
                    None => $missing,
                }
            }
        }
    };
}

flushed_then!(wal_read, xRead(data: *mut c_void, amount: c_int, offset: ffi::sqlite3_int64));
flushed_then!(wal_sync, xSync(flags: c_int));
flushed_then!(wal_file_size, xFileSize(size: *mut ffi::sqlite3_int64));
flushed_then!(wal_file_control, xFileControl(op: c_int, arg: *mut c_void));
forwarded!(wal_lock, xLock(level: c_int), ffi::SQLITE_IOERR_LOCK);
forwarded!(wal_unlock, xUnlock(level: c_int), ffi::SQLITE_IOERR_UNLOCK);
forwarded!(wal_check_reserved_lock, xCheckReservedLock(out: *mut c_int), ffi::SQLITE_IOERR_CHECKRESERVEDLOCK);
forwarded!(wal_sector_size, xSectorSize(), 4096);
forwarded!(wal_device_characteristics, xDeviceCharacteristics(), 0);

unsafe extern "C" fn wal_truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
    unsafe {
        let rc = flush(file);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let (wal, real, methods) = parts(file);
        wal.writes.truncated(size);
        match methods.xTruncate {
            Some(truncate) => truncate(real, size),
            None => ffi::SQLITE_IOERR_TRUNCATE,
        }
    }
}

/// A VFS method forwarded to the base VFS as it is. It is offered only
/// where the base has it (`register`); `$missing` stands in otherwise.
macro_rules! vfs_forwarded {
    ($name:ident, $method:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)?, $missing:expr) => {
        unsafe extern "C" fn $name(vfs: *mut ffi::sqlite3_vfs $(, $arg: $ty)*) $(-> $ret)? {
            // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
            unsafe {
                let base = base(vfs);
                match (*base).$method {
                    Some(method) => method(base $(, $arg)*),
                    None => $missing,
                }
            }
        }
    };
}

vfs_forwarded!(delete, xDelete(name: *const c_char, sync_dir: c_int) -> c_int, ffi::SQLITE_IOERR_DELETE);
vfs_forwarded!(access, xAccess(name: *const c_char, flags: c_int, out: *mut c_int) -> c_int, ffi::SQLITE_IOERR_ACCESS);
vfs_forwarded!(full_pathname, xFullPathname(name: *const c_char, n: c_int, out: *mut c_char) -> c_int, ffi::SQLITE_CANTOPEN);
vfs_forwarded!(dl_open, xDlOpen(name: *const c_char) -> *mut c_void, ptr::null_mut());
vfs_forwarded!(dl_error, xDlError(n: c_int, out: *mut c_char), ());
vfs_forwarded!(dl_close, xDlClose(handle: *mut c_void), ());
vfs_forwarded!(randomness, xRandomness(n: c_int, out: *mut c_char) -> c_int, 0);
vfs_forwarded!(sleep, xSleep(micros: c_int) -> c_int, 0);
vfs_forwarded!(current_time, xCurrentTime(out: *mut f64) -> c_int, ffi::SQLITE_ERROR);
vfs_forwarded!(get_last_error, xGetLastError(n: c_int, out: *mut c_char) -> c_int, 0);
vfs_forwarded!(current_time_int64, xCurrentTimeInt64(out: *mut ffi::sqlite3_int64) -> c_int, ffi::SQLITE_ERROR);

type DlSymbol = unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char);

unsafe extern "C" fn dl_sym(
    vfs: *mut ffi::sqlite3_vfs,
    handle: *mut c_void,
    symbol: *const c_char,
) -> Option<DlSymbol> {
    // SAFETY: SQLite calls this with the objects this VFS made (see the module doc).
    unsafe {
        let base = base(vfs);
        (*base).xDlSym.and_then(|sym| sym(base, handle, symbol))
    }
}

#[cfg(test)]
mod tests;
