/**
 * Strict, ordered command-line parsing from one option table per command. citty renders the
 * usage text from the same table; this parser adds what citty leaves lenient: unknown options
 * and malformed values are usage errors (exit 2), and options apply in argv order so a later
 * option wins.
 */
import type { ArgsDef } from "citty";
import { argumentName, excerpt, quoteArgument, usageError } from "../errors.ts";

export interface OptionDef<Target> {
  /** Long name without dashes. */
  name: string;
  alias?: string;
  /** Shown in usage after the flag, e.g. "N" or "PATH"; present iff the option takes a value. */
  value?: string;
  description: string;
  /** Applies the option to the target; value options receive the raw text. Throws usage errors. */
  apply: (target: Target, raw: string, flag: string) => void;
}

export interface PositionalDef {
  name: string;
  description: string;
}

/** Info flags answered before anything else is checked (runtime.md 1.1 step 1). */
export type InfoFlag = "help" | "version" | "list-presets";

function findOption<T>(table: readonly OptionDef<T>[], arg: string): OptionDef<T> | undefined {
  if (arg.startsWith("--")) {
    const name = arg.slice(2).split("=", 1)[0];
    return table.find((o) => o.name === name);
  }
  if (/^-[^-]$/.test(arg)) return table.find((o) => o.alias === arg.slice(1));
  return undefined;
}

/**
 * The first info flag on the command line, skipping option values, so `--out --help` is not
 * mistaken for a request for help (a weakness of the original's scan).
 */
export function findInfoFlag<T>(args: readonly string[], table: readonly OptionDef<T>[], info: readonly InfoFlag[]): InfoFlag | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "--") return undefined;
    if (arg === "-h" && info.includes("help")) return "help";
    if (arg.startsWith("--") && info.includes(arg.slice(2) as InfoFlag)) return arg.slice(2) as InfoFlag;
    const option = findOption(table, arg);
    if (option?.value && !arg.includes("=")) i++;
  }
  return undefined;
}

/** Parses options in argv order into `target`; returns the positional arguments. */
export function parseOptions<T>(args: readonly string[], table: readonly OptionDef<T>[], target: T): string[] {
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith("-") || arg === "-") {
      positionals.push(arg);
      continue;
    }
    const option = findOption(table, arg);
    if (!option) throw usageError(`unknown option ${argumentName(arg)}`);
    const flag = `--${option.name}`;
    const inline = arg.startsWith("--") && arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : undefined;
    if (!option.value) {
      if (inline !== undefined) throw usageError(`${flag} takes no value`);
      option.apply(target, "", flag);
      continue;
    }
    const raw = inline ?? args[++i];
    if (raw === undefined) throw usageError(`${flag} needs a value (${option.value})`);
    option.apply(target, raw, flag);
  }
  return positionals;
}

/** The citty argument definitions for a table, so usage text is generated from it. */
export function cittyArgs<T>(positionals: readonly PositionalDef[], table: readonly OptionDef<T>[]): ArgsDef {
  const args: ArgsDef = {};
  for (const p of positionals) args[p.name] = { type: "positional", description: p.description, required: false };
  for (const o of table) {
    args[o.name] = o.value
      ? { type: "string", description: o.description, valueHint: o.value, ...(o.alias ? { alias: o.alias } : {}) }
      : { type: "boolean", description: o.description, ...(o.alias ? { alias: o.alias } : {}) };
  }
  return args;
}

/** Whole number within [min, max], or a usage error naming the flag. */
export function parseInteger(raw: string, flag: string, min: number, max: number): number {
  if (!/^[+-]?\d+$/.test(raw.trim())) throw usageError(`${flag} expects a whole number from ${min} to ${max}, got ${quoteArgument(raw)}`);
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw usageError(`${flag} must be from ${min} to ${max}, got ${argumentName(raw)}`);
  }
  return value;
}

/** Token ids separated by commas and/or spaces. */
export function parseIdList(raw: string, source: string): number[] {
  const parts = raw.split(/[\s,]+/).filter((p) => p.length > 0);
  if (parts.length === 0) throw usageError(`${source}: no prompt ids parsed`);
  return parts.map((part) => {
    if (!/^\d+$/.test(part)) throw usageError(`${source}: ${excerpt(part)} is not a token id (ids are whole numbers >= 0)`);
    const id = Number(part);
    if (!Number.isSafeInteger(id)) throw usageError(`${source}: token id ${excerpt(part)} is out of range`);
    return id;
  });
}
