#!/usr/bin/env bun
/** Entry point of the k3 executable. */
import { main } from "./cli/main.ts";

process.exitCode = await main(process.argv.slice(2));
