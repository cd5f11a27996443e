/** The demo model shipped in assets/demo and its torch-made fixture (test/fixtures/demo). */
import { resolve } from "node:path";

export const demoDir = resolve(import.meta.dir, "../../assets/demo");
