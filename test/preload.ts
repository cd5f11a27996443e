// Runs before every test file: a fresh clone gets libk3 and dist/k3 built here.
import { ensureBuilt } from "../tools/build.ts";

ensureBuilt();
