/**
 * Where a JSON text stops being valid, as "line:column". JSON.parse in JavaScriptCore says what
 * went wrong but not where, and a refusal must name the line (runtime.md 1.5: one line naming the
 * file). This scanner runs only after JSON.parse has already failed, so it favours brevity.
 */

/** 1-based line and column of `offset` in `text`. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 0x0a) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

/** Offset of the first syntax error in `text`, or -1 if it is valid JSON. */
export function jsonErrorOffset(text: string): number {
  let p = 0;
  const fail = (): never => {
    throw p;
  };
  const ws = (): void => {
    while (p < text.length && " \t\r\n".includes(text[p] as string)) p++;
  };
  const literal = (word: string): void => {
    if (!text.startsWith(word, p)) fail();
    p += word.length;
  };
  const string = (): void => {
    if (text[p] !== '"') fail();
    p++;
    for (;;) {
      if (p >= text.length) fail();
      const c = text.charCodeAt(p);
      if (c === 0x22) {
        p++;
        return;
      }
      if (c < 0x20) fail();
      if (c === 0x5c) {
        p++;
        const e = text[p];
        if (e === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(p + 1, p + 5))) fail();
          p += 5;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) p++;
        else fail();
      } else p++;
    }
  };
  const number = (): void => {
    const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(p, p + 400));
    if (match === null) fail();
    p += (match as RegExpExecArray)[0].length;
  };
  const value = (depth: number): void => {
    if (depth > 512) fail();
    ws();
    const c = text[p];
    if (c === "{") {
      p++;
      ws();
      if (text[p] === "}") {
        p++;
        return;
      }
      for (;;) {
        ws();
        string();
        ws();
        if (text[p] !== ":") fail();
        p++;
        value(depth + 1);
        ws();
        if (text[p] === ",") p++;
        else if (text[p] === "}") {
          p++;
          return;
        } else fail();
      }
    } else if (c === "[") {
      p++;
      ws();
      if (text[p] === "]") {
        p++;
        return;
      }
      for (;;) {
        value(depth + 1);
        ws();
        if (text[p] === ",") p++;
        else if (text[p] === "]") {
          p++;
          return;
        } else fail();
      }
    } else if (c === '"') string();
    else if (c === "t") literal("true");
    else if (c === "f") literal("false");
    else if (c === "n") literal("null");
    else number();
  };
  try {
    value(0);
    ws();
    if (p < text.length) fail();
    return -1;
  } catch (thrown) {
    if (typeof thrown === "number") return thrown;
    throw thrown;
  }
}
