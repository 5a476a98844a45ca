//! Child processes that must not outlive EndoTwin: a video decoder (`ENDOTWIN_FFMPEG` may be a
//! wrapper script whose own child holds the pipe) runs in a process group of its own, which
//! is killed when EndoTwin is interrupted or terminated (SIGINT, SIGTERM, SIGHUP), and whose
//! leader the kernel kills when EndoTwin dies any other way (`PR_SET_PDEATHSIG`). Round 6 N55:
//! a hung decoder's `sleep 1000` stayed after `timeout` or Ctrl-C ended EndoTwin.

use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

/// Process groups being watched (0: a free slot). A fixed array: the signal handler may
/// read it (atomics only, no locks or allocation there).
static GROUPS: [AtomicI32; 16] = [const { AtomicI32::new(0) }; 16];

/// Makes `cmd` start in a process group of its own (so [`kill_group`] stops what it started
/// too) that dies with EndoTwin.
pub fn own_group(cmd: &mut Command) -> &mut Command {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: getpid before the fork; prctl and getppid are async-signal-safe syscalls
        // with no memory effects, run between fork and exec.
        let parent = unsafe { libc::getpid() };
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // EndoTwin ended between the fork and the prctl: nothing to decode for.
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("EndoTwin has ended"));
                }
                Ok(())
            });
        }
    }
    cmd
}

/// While held, the process group led by the child `pid` (started with [`own_group`]) is
/// killed if EndoTwin is interrupted or terminated. Dropped once the child is reaped.
pub struct Watched(Option<usize>);

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            GROUPS[slot].store(0, Ordering::SeqCst);
        }
    }
}

/// Watches the group of child `pid` (see [`Watched`]); with every slot taken (16 decoders at
/// once) the group is still killed by its timeout, only not on a signal.
pub fn watch(pid: u32) -> Watched {
    install_handlers();
    let Ok(pid) = i32::try_from(pid) else {
        return Watched(None);
    };
    let slot = GROUPS.iter().position(|g| {
        g.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    Watched(slot)
}

#[cfg(unix)]
extern "C" fn on_signal(signal: libc::c_int) {
    for g in &GROUPS {
        let pid = g.load(Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: kill(2) is async-signal-safe; the group is a child's not yet reaped.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    // Then end as the signal would have: its default action, raised again.
    // SAFETY: signal(2) and raise(3) are async-signal-safe.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

fn install_handlers() {
    #[cfg(unix)]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                // SAFETY: the handler only reads atomics and calls async-signal-safe functions.
                unsafe {
                    libc::signal(signal, on_signal as *const () as libc::sighandler_t);
                }
            }
        });
    }
}

/// Kills the process group led by `child` ([`own_group`]), then `child` itself.
pub fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) has no memory effects. `child` leads its own group (own_group) and is
        // not reaped yet, so the group id is still its and names no other process's group.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}
