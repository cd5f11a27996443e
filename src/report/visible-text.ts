/**
 * Model text as a terminal shows it: C0 and C1 control characters (and DEL), except newline and
 * tab, become visible escapes (`\x1b`), so what a model writes cannot move the cursor, recolour,
 * retitle or otherwise drive the terminal. For human-readable output only; JSON output keeps the
 * text as generated (JSON escapes controls itself).
 */
export function visibleText(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}
