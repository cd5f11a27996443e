/**
 * Arithmetic: sums and differences of numbers below 100, always correct. The text documents are
 * short lists of lines ("12 plus 7 is 19."); the chat answers reuse `Sum`.
 */
import { numberWord } from "./lexicon.ts";
import type { Random } from "./prng.ts";

export interface Sum {
  readonly a: number;
  readonly b: number;
  readonly op: "plus" | "minus";
  readonly result: number;
}

/** a op b with a, b in [0, 99]; a difference never goes below zero. */
export function randomSum(rng: Random, max = 99): Sum {
  const op = rng.chance(0.5) ? "plus" : "minus";
  let a = rng.int(0, max);
  let b = rng.int(0, max);
  if (rng.chance(0.4)) b = rng.int(0, 10);
  if (op === "minus" && b > a) [a, b] = [b, a];
  return { a, b, op, result: op === "plus" ? a + b : a - b };
}

export function symbol(op: Sum["op"]): string {
  return op === "plus" ? "+" : "-";
}

/** One line in one of several fixed shapes. */
function line(rng: Random, s: Sum, shape: number): string {
  switch (shape) {
    case 0: return `${s.a} ${s.op} ${s.b} is ${s.result}.`;
    case 1: return `${s.a} ${symbol(s.op)} ${s.b} = ${s.result}`;
    case 2: return `What is ${s.a} ${s.op} ${s.b}? It is ${s.result}.`;
    case 3: return s.a < 200 && s.b < 200 && s.result < 200 ? `${numberWord(s.a)} ${s.op} ${numberWord(s.b)} is ${numberWord(s.result)}.`.replace(/^./, (c) => c.toUpperCase()) : `${s.a} ${s.op} ${s.b} is ${s.result}.`;
    case 4: return s.op === "plus" ? `If you have ${s.a} and add ${s.b}, you get ${s.result}.` : `If you have ${s.a} and take away ${s.b}, you have ${s.result} left.`;
    default: return `${s.a} ${s.op} ${s.b} equals ${s.result}.`;
  }
}

/** A small document: 3 to 10 lines, mostly in one shape, sometimes with a title line. */
export function arithmeticDocument(rng: Random): string {
  const count = rng.int(3, 10);
  const shape = rng.int(0, 5);
  const small = rng.chance(0.3);
  const lines: string[] = [];
  if (rng.chance(0.2)) lines.push(rng.pick(["Let us do some sums.", "Practice with numbers:", "Adding and taking away:", "Some simple sums:"]));
  for (let i = 0; i < count; i++) {
    const s = randomSum(rng, small ? 10 : 20);
    lines.push(line(rng, s, rng.chance(0.8) ? shape : rng.int(0, 5)));
  }
  return lines.join(rng.chance(0.8) ? "\n" : " ");
}
