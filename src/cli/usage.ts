/** Usage text, rendered by citty from the same option tables the parser uses. */
import { defineCommand, renderUsage } from "citty";
import pkg from "../../package.json" with { type: "json" };
import { argumentName, usageError } from "../errors.ts";
import { emit } from "../report/log.ts";
import { cittyArgs, findInfoFlag, parseOptions, type OptionDef, type PositionalDef } from "./args.ts";

export const version = pkg.version;

export interface CommandInfo<T> {
  name: string;
  description: string;
  positionals: readonly PositionalDef[];
  options: readonly OptionDef<T>[];
}

const ansi = /\u001B\[[0-9;]*m/g;

export async function usageText<T>(command: CommandInfo<T>, subcommands: readonly { name: string; description: string }[] = []): Promise<string> {
  const definition = defineCommand({
    meta: { name: command.name, version, description: command.description },
    args: cittyArgs(command.positionals, command.options),
    ...(subcommands.length > 0
      ? { subCommands: Object.fromEntries(subcommands.map((s) => [s.name, defineCommand({ meta: { name: s.name, description: s.description } })])) }
      : {}),
  });
  // citty pads every column, the last one too: trailing blanks are trimmed.
  const text = (await renderUsage(definition)).replace(/[ \t]+$/gm, "");
  return `${process.stdout.isTTY ? text : text.replace(ansi, "")}\n`;
}

/**
 * A subcommand's arguments: with --help its usage is printed and undefined returned; otherwise
 * the options are parsed into `target` and the positionals returned, refusing more of them than
 * the command declares.
 */
export async function parseCommandArgs<T>(args: readonly string[], command: CommandInfo<T>, target: T): Promise<string[] | undefined> {
  if (findInfoFlag(args, command.options, ["help"])) {
    emit(await usageText(command));
    return undefined;
  }
  const positionals = parseOptions(args, command.options, target);
  const extra = positionals[command.positionals.length];
  if (extra !== undefined) throw usageError(`unexpected argument ${argumentName(extra)}`);
  return positionals;
}
