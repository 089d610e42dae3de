//! Confining the current process (the sandbox helper, just before it
//! `exec`s the command). Everything here must run while the process has a
//! single thread: a user namespace cannot be entered by a threaded
//! process, and Landlock and seccomp apply to the calling thread (and what
//! it `exec`s).

use std::collections::BTreeMap;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use nix::libc;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::{Gid, Uid};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::{SandboxPolicy, Unavailable};

/// The newest Landlock ABI whose rights this code was written and tested
/// against. Older kernels get what they support (best effort); a kernel
/// without Landlock is refused by [`probe`] and by [`enter`].
const ABI_VETTED: ABI = ABI::V6;

/// Device files any command may write or use: the bit bucket, terminals.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

#[derive(Debug, thiserror::Error)]
pub enum EnterError {
    #[error("{0}")]
    Unavailable(#[from] Unavailable),
    #[error(
        "cannot make {path} read-only: {step} failed ({errno}); protected paths need a mount \
         namespace, which an unprivileged user gets through a user namespace"
    )]
    Protect {
        path: String,
        step: &'static str,
        errno: nix::errno::Errno,
    },
    #[error("cannot apply the Landlock rules: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("cannot install the network filter: {0}")]
    Seccomp(String),
}

/// Whether this kernel can run the sandbox: Landlock must be there and
/// enabled. Cheap and side-effect free (it creates a ruleset and drops it).
pub fn probe() -> Result<(), Unavailable> {
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|ruleset| ruleset.create());
    match created {
        Ok(_) => Ok(()),
        Err(error) => Err(Unavailable(format!(
            "this kernel does not offer Landlock ({error}); it needs Linux 5.13 or newer with \
             Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and `landlock` in the lsm= boot list)"
        ))),
    }
}

/// Confines the calling process as `policy` says. After it returns, the
/// process (and whatever it `exec`s) can write only beneath the writable
/// roots, not at all to the protected paths, and without the network
/// unless allowed. There is no way back.
pub fn enter(policy: &SandboxPolicy) -> Result<(), EnterError> {
    if !policy.protected.is_empty() {
        protect(&policy.protected)?;
    }
    landlock_rules(policy)?;
    if !policy.network {
        network_filter()?;
    }
    Ok(())
}

/// Bind-mounts each protected path read-only over itself, in a mount
/// namespace of this process's own (so nothing outside sees it).
fn protect(paths: &[std::path::PathBuf]) -> Result<(), EnterError> {
    let fail = |path: &Path, step| {
        let path = path.display().to_string();
        move |errno| EnterError::Protect { path, step, errno }
    };
    let first = &paths[0];
    let uid = Uid::current();
    let gid = Gid::current();
    if uid.is_root() {
        unshare(CloneFlags::CLONE_NEWNS).map_err(fail(first, "unshare(CLONE_NEWNS)"))?;
    } else {
        // The uid and gid map to themselves: the command stays who it is,
        // it only gains the right to rearrange its own mounts.
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
            .map_err(fail(first, "unshare(CLONE_NEWUSER | CLONE_NEWNS)"))?;
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|e| {
                fail(first, "writing the user namespace's id maps")(nix::errno::Errno::from_raw(
                    e.raw_os_error().unwrap_or(libc::EIO),
                ))
            })
        };
        write("/proc/self/setgroups", "deny".to_owned())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    }
    // Changes made here must not travel back to the parent namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(fail(first, "making the mounts private"))?;
    for path in paths {
        mount(
            Some(path.as_path()),
            path.as_path(),
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(fail(path, "bind mount"))?;
        // A remount in a user namespace must keep the flags the mount
        // already has (nosuid, nodev, …), or the kernel refuses it.
        let kept = statvfs(path.as_path())
            .map(|stat| locked_flags(stat.flags()))
            .map_err(fail(path, "statvfs"))?;
        mount(
            None::<&str>,
            path.as_path(),
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | kept,
            None::<&str>,
        )
        .map_err(fail(path, "read-only remount"))?;
    }
    Ok(())
}

fn locked_flags(flags: FsFlags) -> MsFlags {
    let mut out = MsFlags::empty();
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if flags.contains(fs) {
            out |= ms;
        }
    }
    out
}

fn landlock_rules(policy: &SandboxPolicy) -> Result<(), EnterError> {
    let abi = ABI_VETTED;
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(abi))?;
    if !policy.network {
        // TCP bind/connect (Landlock ABI 4); the syscall filter below
        // covers every other family and older kernels.
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    let status = ruleset
        .scope(Scope::from_all(abi))?
        .create()?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(DEVICES, AccessFs::from_all(abi)))?
        .add_rules(path_beneath_rules(
            &policy.writable,
            AccessFs::from_all(abi),
        ))?
        .restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(probe()
            .err()
            .unwrap_or_else(|| {
                Unavailable("the kernel accepted the Landlock rules but enforces none".to_owned())
            })
            .into());
    }
    Ok(())
}

/// `socket(2)` for anything but Unix sockets fails with EPERM, and so does
/// `io_uring_setup(2)` (io_uring can open and connect sockets itself).
fn network_filter() -> Result<(), EnterError> {
    let seccomp = |e: seccompiler::BackendError| EnterError::Seccomp(e.to_string());
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(seccomp)?;
    let rules = BTreeMap::from([
        (
            libc::SYS_socket,
            vec![SeccompRule::new(vec![not_unix]).map_err(seccomp)?],
        ),
        (libc::SYS_io_uring_setup, Vec::new()),
    ]);
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| EnterError::Seccomp(e.to_string()))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(seccomp)?;
    let program: BpfProgram = filter.try_into().map_err(seccomp)?;
    seccompiler::apply_filter(&program).map_err(|e| EnterError::Seccomp(e.to_string()))
}
