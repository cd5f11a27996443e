//! How a kernel function becomes an entry point, derived from its Zig signature alone.
//!
//! A kernel is declared once, as a function in its operator file listed in table.zig's
//! `entries`. Its signature says everything the boundary needs:
//! - a pointer parameter is required unless its type is optional (`?[*]f32`: nullable);
//! - a `usize` is a size or count and crosses the C ABI as u32 (every dimension of the ABI is
//!   32 bits); u32, u64 and f32 cross as themselves; an `enum(u32)` crosses as its code and is
//!   checked on the way in;
//! - it returns `Error!void`, or `Error!u64`: a count (bad MXFP4 scale bytes, non-finite
//!   weights, FLOPs) the entry point delivers through one more, trailing, out parameter.
//! From that, table.zig builds the variant table (one C-callable function per kernel, errors as
//! `Result` codes), zig/abi.zig the `k3_<name>` exports (nullable everywhere, null and unknown
//! codes refused as bad_argument), and zig/abi_gen.zig the bun:ffi declarations TypeScript
//! loads: three views of one declaration.
const std = @import("std");
const common = @import("common.zig");

/// An entry point's outcome in the variant table (zig/abi.zig maps it to a status code).
pub const Result = enum(u32) { ok = 0, bad_argument = 1, out_of_memory = 2 };

pub fn result(r: common.Error!void) Result {
    r catch |err| return switch (err) {
        error.BadArgument => .bad_argument,
        error.OutOfMemory => .out_of_memory,
    };
    return .ok;
}

fn info(comptime f: anytype) std.builtin.Type.Fn {
    return @typeInfo(@TypeOf(f)).@"fn";
}

/// Whether `f` returns a count (`Error!u64`) rather than nothing (`Error!void`).
pub fn counts(comptime f: anytype) bool {
    const R = info(f).return_type orelse @compileError("a kernel's return type must be concrete");
    return switch (@typeInfo(R).error_union.payload) {
        void => false,
        u64 => true,
        else => @compileError("a kernel returns Error!void or Error!u64"),
    };
}

/// The kernel's own parameter types, in order.
pub fn params(comptime f: anytype) []const type {
    const ps = info(f).params;
    var out: [ps.len]type = undefined;
    for (ps, 0..) |p, i| out[i] = p.type orelse @compileError("a kernel's parameters must be concrete");
    const final = out;
    return &final;
}

/// The parameters of the variant-table entry: the kernel's, then `*u64` for a count.
pub fn tableParams(comptime f: anytype) []const type {
    return params(f) ++ (if (counts(f)) [_]type{*u64} else [_]type{});
}

/// How one kernel parameter crosses the C ABI (rules in this file's header).
pub fn abiType(comptime T: type) type {
    return switch (@typeInfo(T)) {
        .pointer => ?T,
        .optional => T,
        .@"enum" => |e| e.tag_type,
        .int => if (T == usize) u32 else T,
        .float => T,
        else => @compileError("no C ABI rule for the kernel parameter type " ++ @typeName(T)),
    };
}

/// The parameters of the `k3_<name>` export: each kernel parameter as `abiType` says, then a
/// nullable `*u64` for a count.
pub fn abiParams(comptime f: anytype) []const type {
    const ps = params(f);
    var out: [ps.len]type = undefined;
    for (ps, 0..) |T, i| out[i] = abiType(T);
    const final = out;
    return &final ++ (if (counts(f)) [_]type{?*u64} else [_]type{});
}

/// The C function type taking `ps` and returning `R`.
pub fn CFn(comptime ps: []const type, comptime R: type) type {
    var list: [ps.len]std.builtin.Type.Fn.Param = undefined;
    for (ps, 0..) |T, i| list[i] = .{ .is_generic = false, .is_noalias = false, .type = T };
    const final = list;
    return @Type(.{ .@"fn" = .{ .calling_convention = .c, .is_generic = false, .is_var_args = false, .return_type = R, .params = &final } });
}

/// A C-callable function of the parameters `ps` whose body is `body(arguments as a tuple)`.
/// Zig builds a function of a reflected arity only by naming its parameters, hence the cases;
/// no kernel has more than 13 parameters plus its count.
pub fn cFunction(comptime ps: []const type, comptime R: type, comptime body: anytype) *const CFn(ps, R) {
    const A = std.meta.Tuple(ps);
    const P = struct {
        fn t(comptime i: usize) type {
            return if (i < ps.len) ps[i] else void;
        }
    };
    return switch (ps.len) {
        0 => &struct {
            fn c() callconv(.c) R {
                return body(A{});
            }
        }.c,
        1 => &struct {
            fn c(a0: P.t(0)) callconv(.c) R {
                return body(A{a0});
            }
        }.c,
        2 => &struct {
            fn c(a0: P.t(0), a1: P.t(1)) callconv(.c) R {
                return body(A{ a0, a1 });
            }
        }.c,
        3 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2)) callconv(.c) R {
                return body(A{ a0, a1, a2 });
            }
        }.c,
        4 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3 });
            }
        }.c,
        5 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4 });
            }
        }.c,
        6 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4), a5: P.t(5)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4, a5 });
            }
        }.c,
        7 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4), a5: P.t(5), a6: P.t(6)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4, a5, a6 });
            }
        }.c,
        8 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4), a5: P.t(5), a6: P.t(6), a7: P.t(7)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4, a5, a6, a7 });
            }
        }.c,
        9 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4), a5: P.t(5), a6: P.t(6), a7: P.t(7), a8: P.t(8)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4, a5, a6, a7, a8 });
            }
        }.c,
        10 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4), a5: P.t(5), a6: P.t(6), a7: P.t(7), a8: P.t(8), a9: P.t(9)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4, a5, a6, a7, a8, a9 });
            }
        }.c,
        11 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4), a5: P.t(5), a6: P.t(6), a7: P.t(7), a8: P.t(8), a9: P.t(9), a10: P.t(10)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 });
            }
        }.c,
        12 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4), a5: P.t(5), a6: P.t(6), a7: P.t(7), a8: P.t(8), a9: P.t(9), a10: P.t(10), a11: P.t(11)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 });
            }
        }.c,
        13 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4), a5: P.t(5), a6: P.t(6), a7: P.t(7), a8: P.t(8), a9: P.t(9), a10: P.t(10), a11: P.t(11), a12: P.t(12)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12 });
            }
        }.c,
        14 => &struct {
            fn c(a0: P.t(0), a1: P.t(1), a2: P.t(2), a3: P.t(3), a4: P.t(4), a5: P.t(5), a6: P.t(6), a7: P.t(7), a8: P.t(8), a9: P.t(9), a10: P.t(10), a11: P.t(11), a12: P.t(12), a13: P.t(13)) callconv(.c) R {
                return body(A{ a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13 });
            }
        }.c,
        else => @compileError("a kernel with more than 14 C parameters: add a case"),
    };
}

/// The variant-table entry of kernel `f`: calls it, stores a count, returns `Result`.
pub fn tableEntry(comptime f: anytype) *const CFn(tableParams(f), Result) {
    const n = params(f).len;
    return cFunction(tableParams(f), Result, struct {
        fn body(args: std.meta.Tuple(tableParams(f))) Result {
            if (comptime !counts(f)) return result(@call(.auto, f, args));
            var head: std.meta.Tuple(params(f)) = undefined;
            inline for (0..n) |i| head[i] = args[i];
            args[n].* = @call(.auto, f, head) catch |err| return result(err);
            return .ok;
        }
    }.body);
}

fn sample(x: [*]const f32, y: ?[*]f32, n: usize, code: enum(u32) { a = 0, b = 1 }) common.Error!u64 {
    if (n == 0) return error.BadArgument;
    if (y) |out| out[0] = x[0];
    return n + @intFromEnum(code);
}

test "the derived views of a kernel's signature" {
    try std.testing.expect(counts(sample));
    const abi = abiParams(sample);
    try std.testing.expectEqual(@as(usize, 5), abi.len);
    try std.testing.expect(abi[0] == ?[*]const f32 and abi[1] == ?[*]f32 and abi[2] == u32 and abi[3] == u32 and abi[4] == ?*u64);
    const entry = tableEntry(sample);
    const x = [_]f32{7};
    var y = [_]f32{0};
    var n: u64 = 0;
    try std.testing.expectEqual(Result.ok, entry(&x, &y, 3, .b, &n));
    try std.testing.expectEqual(@as(u64, 4), n);
    try std.testing.expectEqual(@as(f32, 7), y[0]);
    try std.testing.expectEqual(Result.bad_argument, entry(&x, null, 0, .a, &n));
}
