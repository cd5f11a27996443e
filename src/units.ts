/**
 * Units at the edges. Inside, sizes are bytes; people see 1000-based sizes with two decimals
 * (B KB MB GB TB, as the original engine prints them) and give budgets in GB.
 */
export const bytesPerGb = 1e9;

export function formatBytes(bytes: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(2)} ${units[unit]}`;
}

export const gbToBytes = (gb: number): number => gb * bytesPerGb;
export const bytesToGb = (bytes: number): number => bytes / bytesPerGb;

/** Bytes as GB with two decimals, without the unit: the figure beside "GB" in every message. */
export const formatGb = (bytes: number): string => bytesToGb(bytes).toFixed(2);

/** A budget as people gave it in GB: no trailing zeros, no float noise (0.31, not 0.31000000000000005). */
export const budgetGb = (bytes: number): string => String(Number(bytesToGb(bytes).toPrecision(12)));
