/**
 * Short texts about k3 and Kimi K3, from the facts of the repository's README: one machine, the
 * always-on part in memory and the experts streamed from disk, the same tokens at every memory
 * budget, the commands. Each fact has several phrasings; the chat answers about k3 use the same
 * table, so the model hears one consistent story.
 */
import type { Random } from "./prng.ts";

export interface K3Fact {
  readonly key: string;
  readonly phrasings: readonly string[];
  /** Questions a user might ask whose answer is this fact. */
  readonly questions: readonly string[];
  /** Indirect question for reasoning. */
  readonly about: string;
}

export const K3_FACTS: readonly K3Fact[] = [
  {
    key: "what",
    phrasings: [
      "k3 is a program that runs Kimi K3 on one machine.",
      "k3 runs the Kimi K3 model on a single computer.",
      "k3 is an engine that lets one machine run Kimi K3.",
    ],
    questions: ["What is k3?", "What does k3 do?", "Can you tell me what k3 is?", "What is k3 for?"],
    about: "what k3 is",
  },
  {
    key: "size",
    phrasings: [
      "Kimi K3 is a very large model with 2.78 trillion parameters.",
      "Kimi K3 is a mixture of experts model with 2.78 trillion parameters, and its checkpoint is 1.56 terabytes.",
      "The Kimi K3 checkpoint is 1.56 terabytes on disk.",
    ],
    questions: ["How big is Kimi K3?", "How many parameters does Kimi K3 have?", "How large is the Kimi K3 checkpoint?"],
    about: "how big Kimi K3 is",
  },
  {
    key: "trunk",
    phrasings: [
      "k3 keeps only the always on part of the model in memory.",
      "The always on part, called the trunk, stays in memory, and the rest is read from disk.",
      "Only the trunk is kept in memory; the experts stay on disk until they are needed.",
    ],
    questions: ["What does k3 keep in memory?", "What is the trunk?", "Does k3 load the whole model into memory?"],
    about: "what k3 keeps in memory",
  },
  {
    key: "stream",
    phrasings: [
      "k3 streams the experts from disk as each token needs them.",
      "For every token, k3 reads the experts it needs from the disk.",
      "The experts are streamed from disk, so the model does not have to fit in memory.",
    ],
    questions: ["How does k3 run such a big model?", "Where are the experts kept?", "How can one machine run Kimi K3?"],
    about: "how k3 runs such a big model",
  },
  {
    key: "dial",
    phrasings: [
      "Memory is a dial: k3 runs with a small or a large memory budget.",
      "With more memory k3 is faster, and with less memory it is slower, but it still runs.",
      "You can give k3 a small memory budget or a large one.",
    ],
    questions: ["How much memory does k3 need?", "Can k3 run with little memory?", "What happens if I give k3 more memory?"],
    about: "how much memory k3 needs",
  },
  {
    key: "same",
    phrasings: [
      "k3 gives the same tokens at every memory budget.",
      "The output does not change with the memory budget: the tokens are exactly the same.",
      "A small budget and a large budget give the same tokens; only the speed changes.",
    ],
    questions: ["Does the memory budget change the answer?", "Are the tokens the same with less memory?", "Will a smaller budget give worse text?"],
    about: "whether the memory budget changes the tokens",
  },
  {
    key: "laptop",
    phrasings: [
      "With the laptop preset, k3 needs about eight gigabytes of memory.",
      "The laptop preset keeps three gigabytes of trunk and one gigabyte of experts in memory.",
      "On a machine with ten gigabytes of free memory, k3 can use the laptop preset.",
    ],
    questions: ["Can k3 run on a laptop?", "How much memory does the laptop preset use?", "Will k3 work on my laptop?"],
    about: "whether k3 can run on a laptop",
  },
  {
    key: "server",
    phrasings: [
      "On a big server, k3 can keep almost all of the trunk in memory and run faster.",
      "The server preset uses about one hundred and twenty eight gigabytes of memory.",
    ],
    questions: ["How fast is k3 on a big server?", "What is the server preset?"],
    about: "how k3 runs on a big server",
  },
  {
    key: "chat",
    phrasings: [
      "With k3 chat, you can talk to the model in a terminal.",
      "k3 chat shows the reasoning of the model and then its answer.",
      "In k3 chat, the model thinks first and then answers.",
    ],
    questions: ["What is k3 chat?", "How do I talk to the model?", "What does k3 chat do?"],
    about: "what k3 chat does",
  },
  {
    key: "serve",
    phrasings: [
      "k3 serve starts a server that speaks the chat completions protocol.",
      "With k3 serve, other programs can send chat requests to the model over the network.",
      "k3 serve also has a chat page you can open in a web browser.",
    ],
    questions: ["What is k3 serve?", "What does k3 serve do?", "Can other programs talk to k3?"],
    about: "what k3 serve does",
  },
  {
    key: "demo",
    phrasings: [
      "k3 demo runs a tiny model that is built into k3.",
      "The demo needs nothing to download: the tiny model is inside the program.",
      "k3 demo takes a prompt and writes a short continuation.",
    ],
    questions: ["What is k3 demo?", "What does the demo do?", "Do I need to download anything for the demo?"],
    about: "what k3 demo does",
  },
  {
    key: "doctor",
    phrasings: [
      "k3 doctor checks whether the machine can run Kimi K3.",
      "k3 doctor looks at the memory, the disk and the processor and says which preset fits.",
    ],
    questions: ["What does k3 doctor do?", "How do I know if my machine can run Kimi K3?"],
    about: "what k3 doctor does",
  },
  {
    key: "download",
    phrasings: [
      "k3 download fetches the checkpoint, and it can resume if it stops.",
      "k3 verify checks every byte of the checkpoint after the download.",
    ],
    questions: ["How do I get the model?", "What does k3 download do?", "How do I check the download?"],
    about: "how to get the model",
  },
  {
    key: "one",
    phrasings: [
      "k3 is one executable file.",
      "Users need only one file to run k3.",
      "k3 is written in TypeScript and Zig, and the numeric kernels are in Zig.",
    ],
    questions: ["What is k3 written in?", "What do I need to install to use k3?"],
    about: "what k3 is made of",
  },
  {
    key: "think",
    phrasings: [
      "Kimi K3 is a thinking model: it reasons before it answers.",
      "The model first writes its reasoning and then its answer.",
    ],
    questions: ["Does Kimi K3 think before it answers?", "What is the reasoning part?"],
    about: "whether Kimi K3 thinks before it answers",
  },
  {
    key: "greedy",
    phrasings: [
      "By default k3 decodes greedily, so the same prompt gives the same text.",
      "k3 picks the most likely token unless you ask it to sample.",
    ],
    questions: ["Does k3 give the same answer every time?", "How does k3 pick the next token?"],
    about: "how k3 picks the next token",
  },
  {
    key: "state",
    phrasings: [
      "k3 can save its state to a file and resume later.",
      "A saved state lets k3 continue a run exactly where it stopped.",
    ],
    questions: ["Can k3 stop and continue later?", "What is a state file?"],
    about: "whether k3 can stop and continue later",
  },
  {
    key: "spec",
    phrasings: [
      "With speculative decoding, k3 guesses a few tokens and checks them all at once.",
      "Speculative decoding makes k3 faster, and the tokens stay the same.",
    ],
    questions: ["What is speculative decoding?", "How can k3 go faster?"],
    about: "what speculative decoding is",
  },
  {
    key: "moonshot",
    phrasings: [
      "Kimi K3 is made by Moonshot.",
      "The Kimi models come from Moonshot.",
    ],
    questions: ["Who made Kimi K3?", "Who makes the Kimi models?"],
    about: "who made Kimi K3",
  },
];

/** The demo's default prompt starts many k3 documents. */
export const K3_OPENING = "Kimi K3 runs on one machine.";

const OPENINGS: readonly string[] = [
  K3_OPENING, K3_OPENING, K3_OPENING, "k3 runs Kimi K3 on one machine.", "Here is how k3 works.", "Kimi K3 is a big model, but k3 runs it on one machine.",
  "Let me tell you about k3.", "k3 is a small program for a very big model.",
];

/** Facts that follow the opening well, in a natural order. */
const ORDER = ["what", "size", "trunk", "stream", "dial", "same", "laptop", "server", "think", "greedy", "chat", "serve", "demo", "doctor", "download", "one", "state", "spec", "moonshot"];

/** A paragraph: an opening (often the demo's prompt), then 3 to 7 facts in a sensible order. */
export function aboutK3Document(rng: Random): string {
  const opening = rng.pick(OPENINGS);
  const count = rng.int(3, 7);
  const keys = rng.sample(ORDER, count).sort((a, b) => ORDER.indexOf(a) - ORDER.indexOf(b));
  const sentences = [opening];
  for (const key of keys) {
    if (key === "what" && opening.includes("one machine")) continue;
    const fact = K3_FACTS.find((f) => f.key === key) as K3Fact;
    const phrasing = rng.pick(fact.phrasings);
    if (!sentences.includes(phrasing)) sentences.push(phrasing);
  }
  if (rng.chance(0.3)) sentences.push(rng.pick(["That is why one machine is enough.", "It is a simple idea that works well.", "So you can run a very big model at home."]));
  return sentences.join(" ");
}
