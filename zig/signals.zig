//! SIGINT and SIGTERM as a flag instead of an immediate end. The forward pass and the pack run
//! synchronously on the JavaScript thread, so a JavaScript signal listener would not run until
//! they finish; this handler only records the signal, and TypeScript polls it between layers,
//! steps and chunks, then unwinds normally: temporaries removed, no results written, exit
//! 128 + signal. The handler resets itself (SA_RESETHAND): a second signal ends the process at
//! once, as if k3 were stuck.
const std = @import("std");
const posix = std.posix;

/// The first signal that arrived, 0 while none has.
var pending = std.atomic.Value(i32).init(0);

fn record(signal: i32) callconv(.c) void {
    _ = pending.cmpxchgStrong(0, signal, .seq_cst, .seq_cst);
}

/// Installs the handler for SIGINT and SIGTERM. Interrupted system calls restart (SA_RESTART):
/// reads and writes in flight finish, and the poll that follows them stops the work.
pub fn watch() void {
    // Windows (the untested build) has no sigaction: there Ctrl-C ends k3 at once, as before.
    if (@import("builtin").os.tag == .windows) return;
    const action = posix.Sigaction{
        .handler = .{ .handler = record },
        .mask = posix.empty_sigset,
        .flags = posix.SA.RESTART | posix.SA.RESETHAND,
    };
    posix.sigaction(posix.SIG.INT, &action, null);
    posix.sigaction(posix.SIG.TERM, &action, null);
}

/// The signal number recorded since `watch`, or 0.
pub fn pendingSignal() i32 {
    return pending.load(.seq_cst);
}

test "a recorded signal is the first one, and stays" {
    record(posix.SIG.TERM);
    record(posix.SIG.INT);
    try std.testing.expectEqual(@as(i32, posix.SIG.TERM), pendingSignal());
    pending.store(0, .seq_cst);
}
