/** Number formats the reports share. */
import { bytesToGb } from "../units.ts";

export { formatBytes } from "../units.ts";

/** part/whole as a percentage with one decimal; 0 when there is no whole. */
export const pct = (part: number, whole: number): string => (whole > 0 ? (100 * part) / whole : 0).toFixed(1);

/** Bytes as GB with two decimals, without the unit. */
export const gb = (bytes: number): string => bytesToGb(bytes).toFixed(2);

/** A budget as people gave it in GB: no trailing zeros, no float noise (0.31, not 0.31000000000000005). */
export const budgetGb = (bytes: number): string => String(Number(bytesToGb(bytes).toPrecision(12)));
