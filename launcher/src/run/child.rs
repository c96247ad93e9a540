//! The program as a child process: started with the signals the launcher gets forwarded to it,
//! and its end passed on as the launcher's own.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

/// The child's pid, for the signal handler (0 = none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);

const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Only async-signal-safe calls here. si_code <= 0: sent by kill/sigqueue/tgkill to the
    // launcher; > 0 (SI_KERNEL): the terminal signalled the whole process group, the child
    // included.
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let code = unsafe { (*info).si_code };
    let pid = CHILD.load(Ordering::SeqCst);
    if code <= 0 && pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

fn signal_set(sigs: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before sigaddset uses it.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn mask(how: libc::c_int, sigs: &[libc::c_int]) {
    let set = signal_set(sigs);
    // SAFETY: a valid set; the launcher is single-threaded.
    unsafe {
        libc::sigprocmask(how, &set, std::ptr::null_mut());
    }
}

/// Forward the signals, except those the launcher was started with ignored (`nohup`, a
/// background job of a non-interactive shell): the program inherited them ignored too.
fn install_forwarding() {
    for sig in FORWARDED {
        // SAFETY: a zeroed sigaction with a valid handler and flags.
        unsafe {
            let mut old = std::mem::zeroed::<libc::sigaction>();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut sa = std::mem::zeroed::<libc::sigaction>();
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                forward;
            sa.sa_sigaction = handler as libc::sighandler_t;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Die of `sig`, as the program did, so the launcher's status is the program's.
fn die_of_signal(sig: libc::c_int) -> ! {
    // SAFETY: plain libc calls on the launcher's own process.
    unsafe {
        // No core dump of the launcher for the program's SIGSEGV/SIGABRT/SIGQUIT.
        let mut rl = std::mem::zeroed::<libc::rlimit>();
        if libc::getrlimit(libc::RLIMIT_CORE, &mut rl) == 0 {
            rl.rlim_cur = 0;
            libc::setrlimit(libc::RLIMIT_CORE, &rl);
        }
        libc::signal(sig, libc::SIG_DFL);
    }
    mask(libc::SIG_UNBLOCK, &[sig]);
    // SAFETY: as above.
    unsafe {
        libc::kill(libc::getpid(), sig);
    }
    // A signal whose default action is not to terminate: end with the shell's convention.
    std::process::exit(128 + sig)
}

/// Starts `command` with `env` added to the launcher's environment. Signals that come before
/// the child's pid is known wait (blocked) until it is, then go to the child.
pub(super) fn spawn(command: &[OsString], env: Vec<(&'static str, OsString)>) -> io::Result<Child> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]).envs(env);

    // The child unblocks the signals between fork and exec (std does not always reset the
    // mask: its posix_spawn path keeps the parent's); exec resets the handlers, installed
    // only after.
    mask(libc::SIG_BLOCK, &FORWARDED);
    // SAFETY: only async-signal-safe calls (sigemptyset, sigprocmask) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut empty = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut empty);
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            mask(libc::SIG_UNBLOCK, &FORWARDED);
            return Err(e);
        }
    };
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    install_forwarding();
    mask(libc::SIG_UNBLOCK, &FORWARDED);
    Ok(child)
}

/// The program could not be started: say why and exit as a shell would (127: not found).
pub(super) fn exit_cannot_run(program: &OsStr, e: &io::Error) -> ! {
    let (why, code) = match e.kind() {
        io::ErrorKind::NotFound => ("command not found".to_owned(), 127),
        io::ErrorKind::PermissionDenied => ("permission denied".to_owned(), 126),
        _ => (e.to_string(), 126),
    };
    cuprof_analysis::io::console::eprint_line(&format!(
        "cuprof: cannot run {}: {why}",
        program.to_string_lossy()
    ));
    std::process::exit(code);
}

/// End like the program: its exit code, or death by the same signal.
pub(super) fn exit_like(status: ExitStatus) -> ! {
    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    if let Some(sig) = status.signal() {
        die_of_signal(sig);
    }
    std::process::exit(1)
}
