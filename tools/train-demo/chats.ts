/**
 * Conversations as OpenAI chat-completions request bodies, the last message being the ideal
 * assistant reply: greetings and who-are-you, sums, stories on request, facts from the fact
 * table, questions about k3, small word tasks, and a few tool calls. Every assistant turn has
 * reasoning in the style "The user asks ... I should ..." (dropped by the renderer when the
 * request turns thinking off) and a non-empty answer (except a tool-calling turn, whose content
 * is empty as in chat.md vector D).
 */
import { K3_FACTS } from "./about-k3.ts";
import { randomSum, symbol, type Sum } from "./arithmetic.ts";
import { askFact, FACTS, fillSpelling, type Fact } from "./facts.ts";
import { ANIMALS, BOY_NAMES, cap, GIRL_NAMES, list, type Animal } from "./lexicon.ts";
import type { Random } from "./prng.ts";
import { storyWithCast, type Character } from "./stories.ts";

export interface ToolCallJson {
  readonly id: string;
  readonly type: "function";
  readonly function: { readonly name: string; readonly arguments: string };
}

export interface Message {
  readonly role: "system" | "user" | "assistant" | "tool";
  readonly content: string;
  readonly reasoning_content?: string;
  readonly tool_calls?: readonly ToolCallJson[];
  readonly tool_call_id?: string;
}

export interface ChatBody {
  readonly messages: Message[];
  readonly tools?: readonly unknown[];
  readonly reasoning_effort?: "low" | "high";
  readonly thinking?: { readonly type: "disabled" };
}

export interface ChatDoc {
  readonly body: ChatBody;
  /** The first exchange's category (greeting, identity, sum, story, fact, k3, task, tool). */
  readonly category: string;
  /** User turns in the conversation. */
  readonly turns: number;
}

type Effort = "low" | "high" | "max" | "off";

interface Exchange {
  readonly user: string;
  /** Reasoning sentences; low effort keeps the first and the last. */
  readonly reasoning: readonly string[];
  readonly answer: string;
  readonly category: string;
  /** What a follow-up can build on. */
  readonly memory?: { readonly sum?: number; readonly storyCast?: { mc: Character; friend: Character | undefined }; readonly subject?: string };
}

function reasoningText(sentences: readonly string[], effort: Effort): string {
  if (effort === "low" && sentences.length > 2) return [sentences[0], sentences.at(-1)].join(" ");
  return sentences.join(" ");
}

// ---- greetings and identity ------------------------------------------------------------------

const GREETINGS = ["Hello!", "Hi!", "Hi there!", "Hello", "Hey!", "Good morning!", "Good evening!", "Hello, how are you?", "Hi, how are you today?", "Hey, what is up?", "Good afternoon!", "Hello there!", "Hi Kimi!", "Hello Kimi, how are you?"];

function greeting(rng: Random): Exchange {
  const user = rng.pick(GREETINGS);
  const asksHow = /how are you|what is up/i.test(user);
  const hello = rng.pick(["Hello!", "Hi!", "Hello there!", "Hi there!"]);
  const offer = rng.pick(["How can I help you today?", "What would you like to talk about?", "What can I do for you?", "Would you like a story, a fact or a sum?", "Ask me anything simple, and I will do my best."]);
  const answer = asksHow ? `${hello} I am doing well, thank you. ${offer}` : `${hello} ${offer}`;
  const reasoning = asksHow
    ? ["The user says hello and asks how I am.", "I should greet them back, say I am fine and offer to help."]
    : [rng.pick(["The user says hello.", "The user is greeting me.", "This is a greeting."]), rng.pick(["I should greet them back and offer to help.", "I should say hello and ask what they need."])];
  return { user, reasoning, answer, category: "greeting" };
}

const IDENTITY: readonly (readonly [readonly string[], string, () => string])[] = [
  [["Who are you?", "What are you?", "Tell me about yourself.", "Who am I talking to?", "Introduce yourself, please."], "who I am",
    () => "I am Kimi, a small model running on k3. I can tell short stories, answer simple questions and do simple sums."],
  [["What is your name?", "Do you have a name?", "What should I call you?"], "what my name is",
    () => "My name is Kimi. I am a small model running on k3."],
  [["What can you do?", "How can you help me?", "What are you good at?"], "what I can do",
    () => "I can tell short stories, answer simple questions about animals and the world, and add or subtract small numbers."],
  [["Are you a robot?", "Are you a person?", "Are you human?"], "whether I am a person",
    () => "I am not a person. I am Kimi, a small language model running on k3."],
  [["Where do you run?", "What computer are you running on?", "Where do you live?"], "where I run",
    () => "I run on k3, on one machine. I am a tiny model, so I do not need much memory."],
];

function identity(rng: Random): Exchange {
  const [questions, about, answer] = rng.pick(IDENTITY);
  const user = rng.pick(questions);
  const reasoning = [`The user asks ${about}.`, rng.pick(["I am Kimi, a small model running on k3.", "I am Kimi, and I run on k3."]), "I should answer in a friendly way."];
  return { user, reasoning, answer: answer(), category: "identity" };
}

// ---- sums -----------------------------------------------------------------------------------

const COUNTABLE = ["apples", "cookies", "pears", "oranges", "cupcakes", "muffins", "plums", "peaches", "eggs", "crackers", "balloons", "marbles", "stickers", "books", "shells", "pencils", "crayons", "stones"];

function sumQuestion(rng: Random, s: Sum): { user: string; story: string | undefined } {
  const sym = symbol(s.op);
  if (rng.chance(0.2) && (s.op === "minus" || s.b > 0)) {
    const thing = rng.pick(COUNTABLE);
    const name = rng.pick([...GIRL_NAMES, ...BOY_NAMES]);
    const user = s.op === "plus"
      ? rng.pick([`I have ${s.a} ${thing} and I get ${s.b} more. How many ${thing} do I have now?`, `${name} has ${s.a} ${thing}. ${cap(rng.pick(["she", "he"]))} finds ${s.b} more. How many ${thing} are there now?`])
      : rng.pick([`I have ${s.a} ${thing} and I give away ${s.b}. How many ${thing} do I have left?`, `There are ${s.a} ${thing} in a box. ${name} takes ${s.b}. How many are left?`]);
    return { user, story: thing };
  }
  const forms = s.op === "plus"
    ? [`What is ${s.a} plus ${s.b}?`, `What is ${s.a} ${sym} ${s.b}?`, `Can you add ${s.a} and ${s.b}?`, `How much is ${s.a} plus ${s.b}?`, `${s.a} + ${s.b} = ?`, `Please add ${s.a} and ${s.b}.`, `What do you get if you add ${s.a} and ${s.b}?`, `what is ${s.a}+${s.b}`]
    : [`What is ${s.a} minus ${s.b}?`, `What is ${s.a} ${sym} ${s.b}?`, `Can you subtract ${s.b} from ${s.a}?`, `How much is ${s.a} minus ${s.b}?`, `${s.a} - ${s.b} = ?`, `Please take ${s.b} away from ${s.a}.`, `What do you get if you take ${s.b} from ${s.a}?`, `what is ${s.a}-${s.b}`];
  return { user: rng.pick(forms), story: undefined };
}

function sumExchange(rng: Random): Exchange {
  const s = randomSum(rng, 20);
  const { user, story } = sumQuestion(rng, s);
  const verb = s.op === "plus" ? `add ${s.a} and ${s.b}` : `take ${s.b} away from ${s.a}`;
  const reasoning = [
    rng.pick([`The user wants to ${verb}.`, `The user asks me to ${verb}.`, `This is a simple sum: ${s.a} ${s.op} ${s.b}.`]),
    `${s.a} ${s.op} ${s.b} is ${s.result}.`,
    rng.pick(["I should give the answer.", "I should say the answer clearly.", "I will give the result."]),
  ];
  let answer: string;
  if (story !== undefined) answer = s.op === "plus" ? `${s.a} plus ${s.b} is ${s.result}, so there are ${s.result} ${story}.` : `${s.a} minus ${s.b} is ${s.result}, so ${s.result} ${story} are left.`;
  else answer = rng.pick([`${s.a} ${s.op} ${s.b} is ${s.result}.`, `The answer is ${s.result}.`, `${s.a} ${symbol(s.op)} ${s.b} = ${s.result}`, `${s.a} ${s.op} ${s.b} equals ${s.result}.`]);
  return { user, reasoning, answer, category: "sum", memory: { sum: s.result } };
}

function sumFollowUp(rng: Random, previous: number): Exchange {
  const b = rng.int(1, 20);
  const plus = rng.chance(0.6) || previous < b;
  const result = plus ? previous + b : previous - b;
  const user = plus
    ? rng.pick([`Now add ${b} to that.`, `And if I add ${b} more?`, `What if we add ${b}?`, `Add ${b} to the answer.`])
    : rng.pick([`Now take away ${b}.`, `And if I take away ${b}?`, `Subtract ${b} from that.`, `What if we take ${b} away?`]);
  const op = plus ? "plus" : "minus";
  const reasoning = [`The last answer was ${previous}.`, `${previous} ${op} ${b} is ${result}.`, "I should give the new answer."];
  return { user, reasoning, answer: `${previous} ${op} ${b} is ${result}.`, category: "sum", memory: { sum: result } };
}

// ---- stories --------------------------------------------------------------------------------

const TOPICS: readonly (readonly [string, string])[] = [
  ["friendship", "friend"], ["sharing", "share"], ["being brave", "fear"], ["a birthday", "birthday"], ["a snowy day", "snow"],
  ["a treasure hunt", "treasure"], ["a race", "race"], ["a picnic", "picnic"], ["a rainy day", "rain"], ["something lost", "lost"],
  ["helping at home", "chores"], ["magic", "magic"], ["never giving up", "goal"], ["helping others", "trouble"], ["a trip", "trip"],
];

function storyExchange(rng: Random, maxSentences = 10, subjectHint?: Animal): Exchange {
  const form = rng.int(0, 9);
  let user: string;
  let subject: string;
  let options: Parameters<typeof storyWithCast>[1] = { maxSentences, minSentences: 4 };
  const lead = rng.pick(["Tell me a short story about", "Can you tell me a story about", "Write a short story about", "Please tell me a story about", "I want a story about", "Tell me a story about", "Could you write a little story about"]);
  const end = /^(Can|Could)/.test(lead) ? "?" : ".";
  if (form <= 3 || subjectHint) {
    const animal = subjectHint ?? rng.pick(ANIMALS);
    subject = rng.chance(0.5) ? `a ${animal.noun}`.replace(/^a ([aeiou])/, "an $1") : `a ${rng.pick(["little", "brave", "funny", "kind", "small"])} ${animal.noun}`;
    user = `${lead} ${subject}${end}`;
    options = { ...options, animal };
  } else if (form <= 5) {
    const girl = rng.chance(0.5);
    const name = rng.pick(girl ? GIRL_NAMES : BOY_NAMES);
    subject = `a ${girl ? "girl" : "boy"} named ${name}`;
    user = `${lead} ${subject}${end}`;
    options = { ...options, child: true, name, gender: girl ? "girl" : "boy" };
  } else if (form <= 7) {
    const [topic, plot] = rng.pick(TOPICS);
    subject = topic;
    user = `${lead} ${topic}${end}`;
    options = { ...options, plot };
  } else {
    subject = "anything";
    user = rng.pick(["Tell me a story.", "Can you tell me a bedtime story?", "I want to hear a story.", "Tell me a short story, please.", "Do you know any stories?"]);
  }
  if (rng.chance(0.1)) user = user.toLowerCase();
  const { text, mc, friend } = storyWithCast(rng, options);
  const reasoning = subject === "anything"
    ? ["The user wants a story but does not say what it should be about.", `I can tell a story about ${mc.named ? `${mc.intro.replace(/^an? \w+ /, "a ")}` : mc.intro}.`.replace(/ (named|called) \w+\.$/, "."), "I should keep it short and give it a happy ending."]
    : [rng.pick([`The user wants a short story about ${subject}.`, `The user asks for a story about ${subject}.`]), rng.pick(["I should write a simple story with a happy ending.", "I will tell a short, simple story.", "I should keep it short and kind."])];
  const answer = rng.chance(0.25) ? `${rng.pick(["Here is a short story.", "Here is a story for you.", "Sure!", "Of course!"])}\n\n${text}` : text;
  return { user, reasoning, answer, category: "story", memory: { storyCast: { mc, friend } } };
}

function storyFollowUp(rng: Random, cast: { mc: Character; friend: Character | undefined }): Exchange {
  const { mc, friend } = cast;
  const form = rng.int(0, 2);
  if (form === 0 && mc.named) {
    const noun = mc.animal ? mc.noun : mc.gender;
    return {
      user: rng.pick([`What was the name of the ${noun} in the story?`, `What was the ${noun} called?`, `Who was the story about?`]),
      reasoning: [`The user asks about the story I told.`, `The main character was ${mc.intro}.`, "I should give the name."],
      answer: `The story was about ${mc.intro}.`,
      category: "story",
    };
  }
  if (form === 1 && friend !== undefined) {
    return {
      user: rng.pick(["Who was the friend in the story?", "Who else was in the story?", "Was there a friend in the story?"]),
      reasoning: ["The user asks about the other character in my story.", `It was ${friend.intro}.`, "I should answer simply."],
      answer: `${cap(mc.ref)} met ${friend.intro}.`,
      category: "story",
    };
  }
  return {
    user: rng.pick(["I liked that story!", "That was a nice story.", "Thank you for the story!", "Wow, I loved it."]),
    reasoning: ["The user liked the story.", "I should thank them and offer another one."],
    answer: rng.pick(["Thank you! I am glad you liked it. Do you want another story?", "I am happy you liked it! I can tell you another one any time.", "You are welcome! Stories are fun to share."]),
    category: "story",
  };
}

// ---- facts ----------------------------------------------------------------------------------

function factExchange(rng: Random, fact: Fact = rng.pick(FACTS)): Exchange {
  const { question, about } = askFact(rng, fact);
  const british = question.includes("colour") ? true : question.includes("color") ? false : rng.chance(0.5);
  const sentence = fillSpelling(fact.sentence, british);
  const known = sentence[0]!.toLowerCase() + sentence.slice(1);
  const keepCapital = /^(The Earth|The blue|The giraffe|The cheetah|The sun|The moon|The stars)/.test(sentence) ? sentence.replace(/^The/, "the") : known;
  const reasoning = [
    rng.pick([`The user asks ${about}.`, `The user wants to know ${about}.`, `This is a question about ${about}.`]),
    rng.pick([`I know that ${keepCapital}`, `${sentence}`]),
    rng.pick(["I should answer in one short sentence.", "I should say that simply.", "I will answer clearly."]),
  ];
  const answer = rng.chance(0.8) ? sentence : `${rng.pick(["Good question! ", "Sure! ", "That is easy! "])}${sentence}`;
  return { user: question, reasoning, answer, category: "fact", memory: { subject: fact.topic } };
}

// ---- k3 -------------------------------------------------------------------------------------

function k3Exchange(rng: Random): Exchange {
  const fact = rng.pick(K3_FACTS);
  const user = rng.pick(fact.questions);
  const phrasings = rng.sample(fact.phrasings, rng.chance(0.5) ? 2 : 1);
  const reasoning = [rng.pick([`The user asks ${fact.about}.`, `The user wants to know ${fact.about}.`])];
  if (rng.chance(0.5)) reasoning.push(rng.pick(["I know this because I run on k3.", "I can answer from what I know about k3."]));
  reasoning.push(rng.pick(["I should explain it simply.", "I should keep the answer short.", "A short answer is best."]));
  return { user, reasoning, answer: phrasings.join(" "), category: "k3" };
}

// ---- small word tasks -----------------------------------------------------------------------

const RHYMES: Record<string, readonly string[]> = {
  cat: ["hat", "bat", "mat", "rat"], dog: ["log", "fog", "frog", "jog"], sun: ["fun", "run", "bun", "one"], bee: ["tree", "sea", "key", "knee"],
  cake: ["lake", "bake", "snake", "make"], ball: ["tall", "wall", "fall", "call"], star: ["car", "jar", "far", "bar"], red: ["bed", "bread", "head", "fed"],
  boat: ["coat", "goat", "float", "note"], moon: ["spoon", "soon", "noon", "tune"], day: ["play", "say", "way", "hay"], fish: ["dish", "wish", "swish"],
};

const GROUPS: readonly (readonly [string, readonly string[]])[] = [
  ["animals that live on a farm", ["cows", "pigs", "sheep", "hens", "horses", "goats", "ducks"]],
  ["animals that live in the sea", ["whales", "dolphins", "fish", "crabs", "seals", "octopuses"]],
  ["fruits", ["apples", "bananas", "oranges", "pears", "grapes", "cherries", "plums"]],
  ["colours", ["red", "blue", "green", "yellow", "purple", "orange", "pink"]],
  ["animals that can fly", ["birds", "bees", "butterflies", "owls", "bats", "ducks"]],
  ["things in the sky", ["the sun", "the moon", "stars", "clouds", "birds", "a rainbow"]],
  ["vegetables", ["carrots", "peas", "potatoes", "corn", "beans", "tomatoes"]],
  ["things you can find at the beach", ["sand", "shells", "waves", "crabs", "rocks", "seaweed"]],
  ["toys", ["a ball", "a kite", "a doll", "a teddy bear", "blocks", "a toy train"]],
  ["animals with four legs", ["dogs", "cats", "cows", "horses", "lions", "elephants"]],
];

function taskExchange(rng: Random): Exchange {
  const form = rng.int(0, 6);
  if (form === 0) {
    const sentence = rng.pick(FACTS).sentence.replace("COLOUR", "colour");
    const user = rng.pick([`Repeat after me: ${sentence}`, `Please say this back to me: ${sentence}`, `Can you repeat this? ${sentence}`]);
    return { user, reasoning: ["The user wants me to repeat a sentence.", "I should say it back exactly."], answer: sentence, category: "task" };
  }
  if (form === 1) {
    const name = rng.pick([...GIRL_NAMES, ...BOY_NAMES]);
    return {
      user: rng.pick([`Say hello to my friend ${name}.`, `My friend ${name} is here. Say hi!`, `Can you greet my friend ${name}?`]),
      reasoning: [`The user wants me to greet their friend ${name}.`, "I should say hello in a friendly way."],
      answer: rng.pick([`Hello, ${name}! It is nice to meet you.`, `Hi, ${name}! I hope you are having a good day.`, `Hello, ${name}! Welcome!`]),
      category: "task",
    };
  }
  if (form === 2) {
    const word = rng.pick(Object.keys(RHYMES));
    const rhymes = rng.sample(RHYMES[word] as readonly string[], 3);
    return {
      user: rng.pick([`Give me three words that rhyme with ${word}.`, `What rhymes with ${word}?`, `Tell me some words that rhyme with ${word}.`]),
      reasoning: [`The user wants words that rhyme with ${word}.`, `Words like ${list(rhymes)} end with the same sound.`, "I should list them."],
      answer: `Here are three words that rhyme with ${word}: ${list(rhymes)}.`,
      category: "task",
    };
  }
  if (form === 3) {
    const [group, members] = rng.pick(GROUPS);
    const picked = rng.sample(members, 3);
    return {
      user: rng.pick([`Name three ${group}.`, `Can you name three ${group}?`, `Tell me three ${group}.`]),
      reasoning: [`The user wants three ${group}.`, `Some examples are ${list(picked)}.`, "I should list three of them."],
      answer: `${cap(list(picked))}.`,
      category: "task",
    };
  }
  if (form === 4) {
    const start = rng.int(1, 20);
    const end = start + rng.int(3, 9);
    const nums = Array.from({ length: end - start + 1 }, (_, i) => String(start + i));
    return {
      user: rng.pick([`Count from ${start} to ${end}.`, `Can you count from ${start} to ${end}?`, `Please count from ${start} up to ${end}.`]),
      reasoning: [`The user wants me to count from ${start} to ${end}.`, "I should list each number in order."],
      answer: `${nums.join(", ")}.`,
      category: "task",
    };
  }
  if (form === 5) {
    const n = rng.int(0, 98);
    const before = rng.chance(0.5);
    return {
      user: before ? rng.pick([`What number comes before ${n + 1}?`, `Which number is just before ${n + 1}?`]) : rng.pick([`What number comes after ${n}?`, `What is the next number after ${n}?`]),
      reasoning: before ? [`The user asks which number comes before ${n + 1}.`, `${n + 1} minus 1 is ${n}.`, "I should answer."] : [`The user asks which number comes after ${n}.`, `${n} plus 1 is ${n + 1}.`, "I should answer."],
      answer: before ? `${n} comes before ${n + 1}.` : `${n + 1} comes after ${n}.`,
      category: "task",
    };
  }
  const a = rng.int(0, 99);
  let b = rng.int(0, 99);
  if (a === b) b = (b + 7) % 100;
  const bigger = Math.max(a, b);
  const smaller = Math.min(a, b);
  const askBig = rng.chance(0.5);
  const yesNo = rng.chance(0.5);
  let user: string;
  let answer: string;
  if (yesNo) {
    user = askBig ? `Is ${a} bigger than ${b}?` : `Is ${a} smaller than ${b}?`;
    const yes = askBig ? a > b : a < b;
    answer = yes ? `Yes, ${a} is ${askBig ? "bigger" : "smaller"} than ${b}.` : `No, ${a} is ${askBig ? "smaller" : "bigger"} than ${b}.`;
  } else {
    user = askBig ? `Which is bigger, ${a} or ${b}?` : `Which is smaller, ${a} or ${b}?`;
    answer = askBig ? `${bigger} is bigger than ${smaller}.` : `${smaller} is smaller than ${bigger}.`;
  }
  return { user, reasoning: [`The user wants to compare ${a} and ${b}.`, `${bigger} is bigger than ${smaller}.`, "I should answer clearly."], answer, category: "task" };
}

function thanks(rng: Random): Exchange {
  const bye = rng.chance(0.4);
  return bye
    ? { user: rng.pick(["Bye!", "Goodbye!", "See you later!", "Bye, Kimi!", "Good night!"]), reasoning: ["The user is saying goodbye.", "I should say goodbye kindly."], answer: rng.pick(["Goodbye! Have a nice day!", "Bye! It was nice talking to you.", "See you later!", "Good night! Sleep well."]), category: "greeting" }
    : { user: rng.pick(["Thank you!", "Thanks!", "Thanks a lot.", "Thank you very much!", "Great, thanks!"]), reasoning: ["The user says thank you.", "I should say they are welcome."], answer: rng.pick(["You are welcome!", "You are welcome! I am happy to help.", "Any time! Do you have another question?", "Glad I could help!"]), category: "greeting" };
}

// ---- tools ----------------------------------------------------------------------------------

const TOOL_WEATHER = {
  type: "function",
  function: { name: "get_weather", description: "Get the weather in a city.", parameters: { type: "object", properties: { city: { type: "string", description: "The city" } }, required: ["city"] } },
};
const TOOL_ADD = {
  type: "function",
  function: { name: "add_numbers", description: "Add two numbers.", parameters: { type: "object", properties: { first: { type: "number" }, second: { type: "number" } }, required: ["first", "second"] } },
};
const TOOL_TIME = {
  type: "function",
  function: { name: "get_time", description: "Get the time in a city.", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
};
const ALL_TOOLS = [TOOL_WEATHER, TOOL_ADD, TOOL_TIME] as const;

export const CITIES: readonly string[] = ["Paris", "Berlin", "Bath", "Reading", "Nice", "Phoenix", "Buffalo", "Split", "Cork", "Derby", "Hull", "Bristol", "Lima", "Boston", "York", "Vienna", "Florence", "Victoria", "Wellington"];
const WEATHER = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "stormy"];

interface ToolPlan {
  readonly tools: readonly unknown[];
  readonly messages: Message[];
  readonly category: string;
}

/** One user question answered through a tool: call, result, answer (or only the call). */
function toolConversation(rng: Random, effort: Effort, callId: string, stopAtCall: boolean): ToolPlan {
  const which = rng.int(0, 2);
  const needed = ALL_TOOLS[which] as (typeof ALL_TOOLS)[number];
  const extra = rng.sample(ALL_TOOLS.filter((t) => t !== needed), rng.int(0, 2));
  const tools = rng.sample([needed, ...extra], 1 + extra.length);
  const think = (sentences: string[]): Partial<Message> => (effort === "off" ? {} : { reasoning_content: reasoningText(sentences, effort) });
  let user: string;
  let args: Record<string, unknown>;
  let result: string;
  let callReasoning: string[];
  let finalReasoning: string[];
  let answer: string;
  if (which === 0) {
    const city = rng.pick(CITIES);
    const weather = rng.pick(WEATHER);
    const temp = weather === "snowy" ? rng.int(-5, 2) : rng.int(5, 32);
    user = rng.pick([`What is the weather like in ${city}?`, `Is it raining in ${city}?`, `How is the weather in ${city} today?`, `Can you check the weather in ${city}?`, `Do I need an umbrella in ${city} today?`]);
    args = { city };
    result = JSON.stringify({ city, weather, temperature: temp });
    callReasoning = [`The user asks about the weather in ${city}.`, "I cannot know the weather by myself.", `I should call the get_weather tool with the city ${city}.`];
    finalReasoning = [`The tool says it is ${weather} in ${city} and ${temp} degrees.`, "I should tell the user."];
    const umbrella = /umbrella|raining/.test(user) ? (weather === "rainy" || weather === "stormy" ? " Yes, you will need an umbrella." : " You will not need an umbrella.") : "";
    answer = `It is ${weather} in ${city} today, and the temperature is ${temp} degrees.${umbrella}`;
  } else if (which === 1) {
    const a = rng.int(100, 9999);
    const b = rng.int(100, 9999);
    user = rng.pick([`What is ${a} plus ${b}?`, `Can you add ${a} and ${b}?`, `Please add ${a} and ${b}.`, `What is ${a} + ${b}?`]);
    args = { first: a, second: b };
    result = JSON.stringify({ result: a + b });
    callReasoning = [`The user wants to add ${a} and ${b}.`, "These are big numbers.", "I should call the add_numbers tool to get the sum right."];
    finalReasoning = [`The tool says the sum is ${a + b}.`, "I should give the answer."];
    answer = `${a} plus ${b} is ${a + b}.`;
  } else {
    const city = rng.pick(CITIES);
    const h = rng.int(0, 23);
    const m = rng.int(0, 59);
    const time = `${String(h).padStart(2, "0")}:${String(m).padStart(2, "0")}`;
    user = rng.pick([`What time is it in ${city}?`, `Can you tell me the time in ${city}?`, `What is the time in ${city} right now?`]);
    args = { city };
    result = JSON.stringify({ city, time });
    callReasoning = [`The user asks for the time in ${city}.`, `I should call the get_time tool with the city ${city}.`];
    finalReasoning = [`The tool says it is ${time} in ${city}.`, "I should tell the user."];
    answer = `It is ${time} in ${city} right now.`;
  }
  const name = needed.function.name;
  const messages: Message[] = [
    { role: "user", content: user },
    { role: "assistant", content: "", ...think([`The user said: "${user}"`, ...callReasoning]), tool_calls: [{ id: callId, type: "function", function: { name, arguments: JSON.stringify(args) } }] },
  ];
  if (!stopAtCall) {
    messages.push({ role: "tool", tool_call_id: callId, content: result });
    messages.push({ role: "assistant", content: answer, ...think(finalReasoning) });
  }
  return { tools, messages, category: "tool" };
}

// ---- conversations --------------------------------------------------------------------------

const SYSTEM_PROMPTS = [
  "You are Kimi, a helpful assistant.", "You are a friendly assistant. Keep your answers short.", "You are Kimi. Answer in simple words.",
  "You are talking to a child. Use simple words.", "You are a helpful and kind assistant.", "Be brief and friendly.",
];

function firstExchange(rng: Random): Exchange {
  return rng.weighted<() => Exchange>([
    [() => greeting(rng), 6], [() => identity(rng), 7], [() => sumExchange(rng), 16], [() => storyExchange(rng), 26],
    [() => factExchange(rng), 27], [() => k3Exchange(rng), 10], [() => taskExchange(rng), 8],
  ])();
}

function followUp(rng: Random, previous: Exchange, last: boolean): Exchange {
  const memory = previous.memory;
  const r = rng.next();
  if (previous.category === "greeting" && previous.user.startsWith("Bye")) return firstExchange(rng);
  if (memory?.sum !== undefined && r < 0.5) return sumFollowUp(rng, memory.sum);
  if (memory?.storyCast !== undefined && r < 0.6) return storyFollowUp(rng, memory.storyCast);
  if (last && r > 0.75) return thanks(rng);
  // A second story would make the conversation long: only short exchanges after a story.
  if (memory?.storyCast !== undefined) return rng.weighted<() => Exchange>([[() => factExchange(rng), 2], [() => sumExchange(rng), 1], [() => thanks(rng), 1]])();
  // A new question (not a second hello).
  const next = rng.weighted<() => Exchange>([
    [() => identity(rng), 5], [() => sumExchange(rng), 16], [() => storyExchange(rng, 8), 20],
    [() => factExchange(rng), 30], [() => k3Exchange(rng), 12], [() => taskExchange(rng), 10],
  ])();
  return next;
}

function chooseEffort(rng: Random): Effort {
  return rng.weighted<Effort>([["max", 70], ["low", 7.5], ["high", 7.5], ["off", 15]]);
}

function bodyFor(effort: Effort, messages: Message[], tools?: readonly unknown[]): ChatBody {
  return {
    ...(tools !== undefined ? { tools } : {}),
    messages,
    ...(effort === "low" || effort === "high" ? { reasoning_effort: effort } : {}),
    ...(effort === "off" ? { thinking: { type: "disabled" as const } } : {}),
  };
}

/**
 * The reasoning opens by quoting the user's message word for word: a small model learns to copy
 * a span it has just seen (the quote) far sooner than to fetch one slot (which animal, which
 * numbers) across the prompt, and the rest of the reasoning and the answer then copy from the
 * quote. Without it, a model trained as long answered "What do cows eat?" with what dogs eat.
 */
function assistant(ex: Exchange, effort: Effort): Message {
  if (effort === "off") return { role: "assistant", content: ex.answer };
  const quoted = ex.user.length <= 120 && !ex.user.includes("\n") ? [`The user said: "${ex.user}"`] : [];
  return { role: "assistant", content: ex.answer, reasoning_content: reasoningText([...quoted, ...ex.reasoning], effort) };
}

/** One conversation: 75% single-turn, 25% two or three turns; about 5% use tools. */
export function conversation(rng: Random, index: number): ChatDoc {
  const effort = chooseEffort(rng);
  const system = rng.chance(0.2) ? rng.pick(SYSTEM_PROMPTS) : undefined;
  const messages: Message[] = system !== undefined ? [{ role: "system", content: system }] : [];
  if (rng.chance(0.05)) {
    if (rng.chance(0.2)) {
      // Tools declared but not needed: the assistant answers directly.
      const ex = rng.chance(0.5) ? greeting(rng) : factExchange(rng);
      messages.push({ role: "user", content: ex.user }, assistant(ex, effort));
      return { body: bodyFor(effort, messages, rng.sample(ALL_TOOLS, rng.int(1, 3))), category: "tool-unused", turns: 1 };
    }
    const plan = toolConversation(rng, effort, `call_${index % 1000}_${rng.int(1, 99)}`, rng.chance(0.4));
    messages.push(...plan.messages);
    return { body: bodyFor(effort, messages, plan.tools), category: plan.category, turns: 1 };
  }
  const turns = rng.chance(0.25) ? rng.int(2, 3) : 1;
  let ex = firstExchange(rng);
  const category = ex.category;
  for (let t = 0; t < turns; t++) {
    if (t > 0) ex = followUp(rng, ex, t === turns - 1);
    messages.push({ role: "user", content: ex.user }, assistant(ex, effort));
  }
  return { body: bodyFor(effort, messages), category, turns };
}

/** Every text a conversation's generator wrote (for the dictionary check): messages, tool calls, declarations. */
export function conversationTexts(doc: ChatDoc): string[] {
  const out: string[] = [];
  for (const m of doc.body.messages) {
    out.push(m.content);
    if (m.reasoning_content !== undefined) out.push(m.reasoning_content);
    for (const call of m.tool_calls ?? []) out.push(call.function.name, call.function.arguments, call.id);
  }
  if (doc.body.tools !== undefined) out.push(JSON.stringify(doc.body.tools));
  return out;
}
