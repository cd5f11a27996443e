/**
 * The percentages k3 prints, one definition per format. Sizes and GB figures are units.ts's,
 * since plan's refusals print them too and plan cannot import report.
 */

/** part/whole with one decimal and no sign (the report writes "%"); 0 when there is no whole. */
export const pct = (part: number, whole: number): string => (whole > 0 ? (100 * part) / whole : 0).toFixed(1);

/** part/whole as "12.34%", two decimals and the sign: the tools' tables; "-" when there is no whole. */
export const percentText = (part: number, whole: number): string => (whole > 0 ? `${((100 * part) / whole).toFixed(2)}%` : "-");
