/**
 * Children's stories from a grammar: a cast (a child or an animal, a friend, sometimes a parent),
 * a place, one of ten plots (a lost thing, a hard goal, a friend in trouble, sharing, a fear, making
 * something, a trip, rain, a birthday, a new friend), dialogue in quotes, and an ending. Past
 * tense, simple sentences; the cast keeps its names and pronouns through the story.
 */
import {
  ACTIVITIES, ADJ_ANIMAL, ADJ_CHARACTER, ADVERBS, ANIMAL_NAMES, ANIMALS, BOY_NAMES, cap, FEARS, FEELINGS_BAD, FEELINGS_GOOD, FOODS,
  GIRL_NAMES, GOALS, ing, list, PARENTS, past, PLACES, PROJECTS, THINGS, TIME_OPENERS, TROUBLES, withArticle,
  type Animal, type Gender, type Place,
} from "./lexicon.ts";
import type { Random } from "./prng.ts";

export interface Character {
  /** First mention: "a little girl named Lily", "a brave fox named Max", "a little fox". */
  readonly intro: string;
  /** Later mentions: "Lily", "Max", "the fox". */
  readonly ref: string;
  readonly he: string;
  readonly his: string;
  readonly him: string;
  /** "girl", "boy", or the animal's noun. */
  readonly noun: string;
  readonly animal: Animal | undefined;
  readonly gender: Gender;
  readonly named: boolean;
}

function pronouns(gender: Gender): { he: string; his: string; him: string } {
  return gender === "girl" ? { he: "she", his: "her", him: "her" } : { he: "he", his: "his", him: "him" };
}

export interface CastOptions {
  readonly animal?: Animal;
  readonly name?: string;
  readonly gender?: Gender;
  readonly child?: boolean;
}

const usedNames = (chars: readonly Character[]): Set<string> => new Set(chars.map((c) => c.ref));

export function makeCharacter(rng: Random, avoid: readonly Character[], options: CastOptions = {}): Character {
  const taken = usedNames(avoid);
  const takenAnimals = new Set(avoid.map((c) => c.animal?.noun));
  const gender: Gender = options.gender ?? (rng.chance(0.5) ? "girl" : "boy");
  const child = options.child ?? (options.animal === undefined && rng.chance(0.55));
  const adj = rng.pick(child ? ADJ_CHARACTER : [...ADJ_CHARACTER, ...ADJ_ANIMAL]);
  const p = pronouns(gender);
  if (child) {
    let name = options.name;
    while (name === undefined || (taken.has(name) && options.name === undefined)) name = rng.pick(gender === "girl" ? GIRL_NAMES : BOY_NAMES);
    const noun = gender;
    return { intro: `${withArticle(`${adj} ${noun}`)} named ${name}`, ref: name, ...p, noun, animal: undefined, gender, named: true };
  }
  let animal = options.animal;
  while (animal === undefined || (takenAnimals.has(animal.noun) && options.animal === undefined)) animal = rng.pick(ANIMALS);
  const named = options.name !== undefined || rng.chance(0.6);
  if (!named) {
    return { intro: withArticle(`${adj} ${animal.noun}`), ref: `the ${animal.noun}`, ...p, noun: animal.noun, animal, gender, named: false };
  }
  let name = options.name;
  while (name === undefined || (taken.has(name) && options.name === undefined)) name = rng.pick(ANIMAL_NAMES);
  const called = rng.pick(["named", "called"]);
  return { intro: `${withArticle(`${adj} ${animal.noun}`)} ${called} ${name}`, ref: name, ...p, noun: animal.noun, animal, gender, named: true };
}

/** A line of dialogue with its speaker, in one of the usual shapes. */
function say(rng: Random, who: Character, line: string, verb?: string): string {
  const question = line.endsWith("?");
  const exclaim = line.endsWith("!");
  const v = verb ?? (question ? "asked" : exclaim ? rng.pick(["said", "shouted", "cried"]) : rng.pick(["said", "said", "said", "whispered"]));
  if (rng.chance(0.25) && !question) return `${cap(who.ref)} ${v}, "${line}"`;
  const quoted = question || exclaim ? line : `${line.slice(0, -1)},`;
  const how = !question && verb === undefined && rng.chance(0.15) ? ` ${rng.pick(exclaim ? ["happily", "loudly", "proudly"] : ADVERBS.filter((a) => a !== "sadly" && a !== "loudly"))}` : "";
  return `"${quoted}" ${v} ${who.ref}${how}.`;
}

function thingPhrase(rng: Random): { noun: string; phrase: string } {
  const [noun, adjs] = rng.pick(THINGS);
  return { noun, phrase: `${rng.pick(adjs)} ${noun}` };
}

function openerSentences(rng: Random, mc: Character, ctx: { timeUsed: boolean }, doingAllowed: boolean): string[] {
  const out: string[] = [];
  const form = rng.int(0, doingAllowed ? 4 : 3);
  if (form === 4) ctx.timeUsed = true;
  if (form === 0) out.push(`Once upon a time, there was ${mc.intro}.`);
  else if (form === 1) out.push(`There once was ${mc.intro}.`);
  else if (form === 2) out.push(`Once upon a time, ${mc.intro} lived ${mc.animal ? mc.animal.home : rng.pick(CHILD_HOMES)}.`);
  else if (form === 3) out.push(`${cap(mc.intro)} lived ${mc.animal ? mc.animal.home : rng.pick(CHILD_HOMES)}.`);
  else out.push(`${rng.pick(mc.animal ? ANIMAL_TIME_OPENERS : TIME_OPENERS)}, ${mc.intro} was ${ing(rng.pick(ACTIVITIES))}.`);
  if (form <= 1 && rng.chance(0.6)) out.push(`${cap(mc.he)} lived ${mc.animal ? mc.animal.home : `with ${mc.his} ${rng.pick(["mom and dad", "family", "grandma", "big sister", "little brother"])}`}.`);
  if (form !== 4 && rng.chance(0.7)) {
    const acts = rng.sample(ACTIVITIES, 2);
    out.push(rng.chance(0.5)
      ? `${cap(mc.ref)} loved to ${acts[0]}.`
      : `${cap(mc.he)} liked to ${acts[0]} and ${acts[1]}.`);
  }
  return out;
}

function endingSentences(rng: Random, mc: Character, friend: Character | undefined, moral: string | undefined): string[] {
  const out: string[] = [];
  const who = friend ? `${cap(mc.ref)} and ${friend.ref}` : cap(mc.ref);
  const they = friend ? "they" : mc.he;
  const options = [
    () => `From that day on, ${friend ? `${mc.ref} and ${friend.ref} were best friends` : `${mc.ref} was always ${rng.pick(FEELINGS_GOOD)}`}.`,
    () => `${who} played together until the sun went down.`,
    () => `${cap(mc.ref)} was very ${rng.pick(FEELINGS_GOOD)}.`,
    () => `That night, ${mc.ref} went to bed with a big smile.`,
    () => `It was the best day ever.`,
    () => `${cap(they)} went home ${rng.pick(["tired but happy", friend ? "with happy hearts" : "with a happy heart", "singing a happy song"])}.`,
    () => `${rng.pick(["The stars came out", "The moon rose over the hills", "Night fell softly"])}, and ${friend ? `${mc.ref} and ${friend.ref}` : mc.ref} ${friend ? "said good night" : "smiled"}.`,
    () => `It was a day ${mc.ref} would never forget.`,
  ];
  const fns = friend ? options : [options[0], options[2], options[3], options[4], options[5]];
  out.push((rng.pick(fns) as () => string)());
  if (moral !== undefined && rng.chance(0.5)) out.push(`${cap(mc.ref)} learned that ${moral}.`);
  if (out[0]?.startsWith(`${cap(who)} played`) !== true && friend && rng.chance(0.2)) out.push(`${who} played together until the sun went down.`);
  return out;
}

const CHILD_HOMES: readonly string[] = [
  "in a small house near the park", "in a little house by the sea", "in a big house on a hill", "in a cozy house near the woods",
  "in a little town", "on a farm with many animals", "in a yellow house on a quiet street", "in a small village near the mountains",
  "in a tall building in the city", "in a little cottage by the lake",
];

/** What a character can be doing anywhere. */
const DOING_ANYWHERE: readonly string[] = [
  "playing", "walking", "singing a song", "playing ball", "looking for bugs", "picking flowers", "having a picnic",
  "running around", "playing a game", "reading a book", "humming a tune", "looking at the clouds",
];

const OUTDOORS = new Set(["the park", "the forest", "the woods", "the garden", "the beach", "the farm", "the zoo", "the lake",
  "the river", "the pond", "the meadow", "the field", "the hill", "the jungle", "the island", "the orchard", "the valley",
  "the mountain", "the backyard"]);

const ANIMAL_TIME_OPENERS = TIME_OPENERS.filter((t) => !t.includes("school") && !t.includes("breakfast"));

/** Plots that already start with a time and what the character was doing (no such opener before them). */
const SCENE_START_PLOTS = new Set(["trouble", "rain", "share", "snow", "dream", "visit"]);
/** Plots a scene sentence fits into after their first sentence. */
const SCENE_PLOTS = new Set(["trouble", "share", "trip", "rain", "treasure", "magic", "race", "friend", "goal"]);

/** Short sentences that set a scene. */
const SCENES: readonly string[] = [
  "The sun was warm and the sky was blue.", "A soft wind blew through the trees.", "Birds sang in the trees above them.",
  "The air smelled of fresh flowers.", "White clouds floated slowly across the sky.", "The grass was green and soft.",
  "Bees buzzed from flower to flower.", "A little stream bubbled nearby.", "The leaves were red, orange and yellow.",
  "It was a perfect day to be outside.", "Butterflies danced in the warm air.", "The world was quiet and calm.",
  "The morning was cool and fresh.", "Tiny drops of dew sparkled on the grass.", "The tall trees swayed gently in the breeze.",
  "A rooster crowed far away.", "The sky was pink and orange as the sun rose.", "The path was covered with crunchy leaves.",
  "Far away, a bell rang in the village.", "The pond shone like a mirror.", "Fluffy clouds looked like sheep in the sky.",
  "The flowers nodded their heads in the wind.", "Somewhere, a woodpecker tapped on a tree.", "The air was crisp and cold.",
  "Everything smelled like rain and earth.", "The sunlight made the water sparkle.", "Crickets chirped in the grass.",
  "A squirrel chattered from a branch.", "The hills were covered with golden wheat.", "The warm sand felt nice under their feet.",
]

/** "a tall slide" -> "the tall slide"; "soft sand" -> "the soft sand". */
function definite(phrase: string): string {
  return /^(a|an) /.test(phrase) ? phrase.replace(/^(a|an) /, "the ") : `the ${phrase}`;
}

interface Context {
  /** A time opener the first time, then a word that moves the story on. */
  when(): string;
}

type Plot = (rng: Random, mc: Character, place: Place, ctx: Context) => { body: string[]; friend: Character | undefined; moral: string | undefined };

const lostThing: Plot = (rng, mc, place, ctx) => {
  const thing = thingPhrase(rng);
  const friend = makeCharacter(rng, [mc]);
  const body: string[] = [];
  body.push(`${cap(mc.ref)} had ${withArticle(thing.phrase)} that ${mc.he} loved very much.`);
  body.push(`${ctx.when()}, ${mc.ref} could not find ${mc.his} ${thing.noun}.`);
  const spots = rng.sample(["under the bed", "in the garden", "behind the door", "in the toy box", "under the table", "by the window", `${place.at} ${place.name}`], 2);
  body.push(`${cap(mc.he)} looked ${spots[0]} and ${spots[1]}, but it was not there.`);
  if (rng.chance(0.6)) body.push(`${cap(mc.ref)} felt ${rng.pick(FEELINGS_BAD)}.`);
  body.push(`Then ${friend.intro} came by.`);
  body.push(say(rng, friend, rng.pick(["Why are you sad?", "What is wrong?", "Are you okay?", "Why do you look so sad?"])));
  body.push(say(rng, mc, `I lost my ${thing.noun}.`, rng.pick(["said", "replied", "said sadly"])));
  if (rng.chance(0.7)) body.push(say(rng, friend, rng.pick(["I will help you look for it.", "Do not worry. We can find it together.", "Let us look for it together."])));
  const found = rng.pick(["under a pile of leaves", "behind a big rock", "next to the old tree", "under the sofa", "in the tall grass", "inside a box", "near the pond"]);
  body.push(`They looked and looked. At last, ${friend.ref} found the ${thing.noun} ${found}.`);
  if (rng.chance(0.7)) body.push(say(rng, mc, rng.pick(["Thank you so much!", "Thank you, you are a good friend!", "You found it! Thank you!"])));
  return { body, friend, moral: rng.pick(["friends help each other", "it is good to ask for help", "a good friend is a great thing to have"]) };
};

const hardGoal: Plot = (rng, mc, _place, ctx) => {
  const [goal, hard] = rng.pick(GOALS);
  const why = rng.pick(hard);
  const body: string[] = [];
  body.push(`${ctx.when()}, ${mc.ref} had a big plan.`);
  body.push(`${cap(mc.he)} wanted to ${goal}.`);
  body.push(`${cap(mc.he)} tried, but ${why}.`);
  const helped = rng.chance(0.5);
  let friend: Character | undefined;
  if (helped) {
    friend = makeCharacter(rng, [mc]);
    body.push(`${cap(friend.intro)} saw ${mc.ref} and came over.`);
    body.push(say(rng, friend, "Can I help you?"));
    body.push(say(rng, mc, rng.pick(["Yes, please!", "Yes, thank you!", "Oh yes, please help me!"])));
    body.push(`Together, they tried again, and this time ${mc.ref} did it.`);
  } else {
    body.push(`${cap(mc.ref)} did not give up.`);
    body.push(say(rng, mc, rng.pick(["I will try again.", "I can do it!", "One more time!"]), "said"));
    body.push(`${cap(mc.he)} tried again and again, and at last ${mc.he} ${past(goal)}.`);
  }
  body.push(`${cap(mc.ref)} felt so ${rng.pick(FEELINGS_GOOD)}.`);
  return { body, friend, moral: helped ? "friends make hard things easy" : rng.pick(["you should never give up", "trying again is the way to win", "practice makes things easier"]) };
};

const friendInTrouble: Plot = (rng, mc, place, ctx) => {
  const trouble = rng.pick(TROUBLES);
  const friend = makeCharacter(rng, [mc]);
  const body: string[] = [];
  body.push(`${ctx.when()}, ${mc.ref} was ${rng.pick(DOING_ANYWHERE)} ${place.at} ${place.name}.`);
  body.push(`${cap(mc.he)} saw ${friend.intro} who ${trouble.state}.`);
  body.push(say(rng, mc, rng.pick(["What is wrong?", "Are you okay?", "Can I help you?", "Why are you crying?"])));
  body.push(say(rng, friend, trouble.line));
  if (rng.chance(0.6)) body.push(say(rng, mc, rng.pick(["Do not worry, I will help you.", "I know what to do.", "I can help!"])));
  body.push(`${cap(mc.ref)} ${trouble.help.replace("the friend", friend.ref).replace("the toy", `${friend.his} toy`).replace("the ball", `${friend.his} ball`)}.`);
  body.push(`Soon ${friend.ref} ${trouble.after.replace("the toy", `${friend.his} toy`).replace("the ball", `${friend.his} ball`)}.`);
  body.push(say(rng, friend, rng.pick(["Thank you for helping me!", "You are so kind!", "Thank you, friend!"])));
  return { body, friend, moral: rng.pick(["being kind makes everyone happy", "it is good to help others", "a kind heart makes new friends"]) };
};

const sharing: Plot = (rng, mc, place, ctx) => {
  const food = rng.pick(FOODS);
  const friend = makeCharacter(rng, [mc]);
  const body: string[] = [];
  const what = rng.chance(0.5) ? `some ${food}` : `a big bag of ${food}`;
  body.push(`${ctx.when()}, ${mc.ref} had ${what} ${place.at} ${place.name}.`);
  body.push(`${cap(friend.intro)} came by and looked at the ${food}.`);
  body.push(say(rng, friend, `Can I have some ${food}?`));
  if (rng.chance(0.5)) {
    body.push(`At first, ${mc.ref} did not want to share.`);
    body.push(`Then ${mc.he} saw that ${friend.ref} was ${rng.pick(["sad", "hungry", "lonely"])}.`);
  }
  body.push(say(rng, mc, rng.pick(["Yes, we can share.", "Here, you can have half.", "Of course! Let us eat together."])));
  body.push(`${cap(mc.ref)} and ${friend.ref} ate the ${food} together.`);
  if (rng.chance(0.6)) body.push(`The ${food} tasted ${rng.pick(["even better", "very sweet", "so good"])} when they shared.`);
  return { body, friend, moral: rng.pick(["sharing is caring", "sharing makes everyone happy", "it is fun to share with a friend"]) };
};

const fear: Plot = (rng, mc, _place, ctx) => {
  const [what, why, brave] = rng.pick(FEARS);
  const [parent] = rng.pick(PARENTS);
  const grown = mc.animal ? `${mc.his} ${rng.pick(["mother", "father"])}` : `${mc.his} ${parent}`;
  const body: string[] = [];
  body.push(`${cap(mc.ref)} was afraid of ${what}.`);
  body.push(`${ctx.when()}, ${mc.ref} told ${grown} about it.`);
  body.push(say(rng, mc, `I am scared of ${what}.`));
  body.push(`${cap(grown)} gave ${mc.him} a big hug.`);
  body.push(`"Do not be scared," said ${grown}. "${why}"`);
  body.push(`${cap(mc.ref)} took a deep breath and ${brave}.`);
  body.push(`${cap(mc.he)} was not afraid anymore.`);
  if (rng.chance(0.5)) body.push(say(rng, mc, rng.pick(["I was brave!", "I did it!", "It was not so scary after all!"])));
  return { body, friend: undefined, moral: rng.pick(["being brave feels good", "it helps to talk about a fear", "many scary things are not so scary"]) };
};

const making: Plot = (rng, mc, _place, ctx) => {
  const [project, steps, result] = rng.pick(PROJECTS);
  const friend = rng.chance(0.5) ? makeCharacter(rng, [mc]) : undefined;
  const [parent] = rng.pick(PARENTS);
  const helper = friend ? friend.ref : mc.animal ? `${mc.his} ${rng.pick(["mother", "father"])}` : `${mc.his} ${parent}`;
  const body: string[] = [];
  if (friend) body.push(`${cap(mc.ref)} had a friend, ${friend.intro}.`);
  body.push(`${ctx.when()}, ${mc.ref} and ${helper} decided to ${project}.`);
  body.push(`First, they ${steps[0]}.`);
  body.push(`Then they ${steps[1]}.`);
  body.push(`${rng.pick(["Finally", "At last", "After that"])}, they ${steps[2]}.`);
  body.push(result);
  if (rng.chance(0.6)) body.push(say(rng, mc, rng.pick(["We make a good team!", "That was so much fun!", "Can we do it again tomorrow?"])));
  return { body, friend, moral: rng.pick(["working together is fun", "making things with love is the best", "good things take time"]) };
};

const trip: Plot = (rng, mc, _place, ctx) => {
  const place = rng.pick(PLACES.filter((p) => p.name !== "school" && p.name !== "the kitchen"));
  const [parent] = rng.pick(PARENTS);
  const grown = mc.animal ? `${mc.his} ${rng.pick(["mother", "father", "family"])}` : `${mc.his} ${parent}`;
  const sights = rng.sample(place.sights, 3);
  const body: string[] = [];
  body.push(`${ctx.when()}, ${mc.ref} went to ${place.name} with ${grown}.`);
  body.push(`${cap(mc.he)} was very ${rng.pick(["excited", "happy", "curious"])}.`);
  body.push(`At ${place.name}, ${mc.he} saw ${list(sights.slice(0, 2).map((s) => s))}.`);
  const animal = rng.pick(ANIMALS);
  if (OUTDOORS.has(place.name) && rng.chance(0.6)) body.push(`${cap(withArticle(animal.noun))} ${rng.pick(animal.doing)}.`);
  const favorite = definite(sights[2] as string);
  body.push(`${cap(mc.ref)} liked ${favorite} best of all.`);
  body.push(say(rng, mc, rng.pick([`Look at ${favorite}!`, `Can we come back tomorrow?`, `This is the best place!`])));
  body.push(`When the sun went down, they went home.`);
  if (rng.chance(0.5)) body.push(`That night, ${mc.ref} dreamed about ${place.name}.`);
  return { body, friend: undefined, moral: undefined };
};

const rain: Plot = (rng, mc, place, ctx) => {
  const friend = makeCharacter(rng, [mc]);
  const shelter = rng.pick(["under a big tree", "into an old barn", "under a bridge", "into a little cave", "under a big leaf"]);
  const body: string[] = [];
  body.push(`${rng.pick(["One sunny day", "One warm afternoon", "One morning"])}, ${mc.ref} was ${rng.pick(DOING_ANYWHERE)} ${place.at} ${place.name}.`);
  body.push(`Suddenly, dark clouds filled the sky, and it began to rain.`);
  body.push(`${cap(mc.ref)} ran ${shelter}.`);
  body.push(`There ${mc.he} met ${friend.intro}, who was hiding from the rain too.`);
  body.push(say(rng, friend, rng.pick(["Hello! Do you want to wait with me?", "Hello! Are you wet too?", "Come in, there is room for two!"])));
  body.push(`They talked and laughed while the rain fell.`);
  body.push(`Soon the rain stopped, and a big rainbow filled the sky.`);
  if (rng.chance(0.6)) body.push(`${cap(mc.ref)} and ${friend.ref} jumped in the puddles ${rng.pick(["happily", "merrily", "with big smiles", "and laughed"])}.`);
  return { body, friend, moral: rng.pick(["a rainy day can bring a new friend", "good things can come after rain"]) };
};

const birthday: Plot = (rng, mc, _place, ctx) => {
  const friend = makeCharacter(rng, [mc]);
  const gift = thingPhrase(rng);
  const food = rng.pick(["cake", "cupcakes", "cookies", "pie", "ice cream"]);
  const body: string[] = [];
  body.push(`${cap(mc.ref)} had a good friend, ${friend.intro}.`);
  body.push(`${ctx.when()}, ${friend.ref} was having a birthday party.`);
  body.push(`${cap(mc.ref)} wanted to give ${friend.ref} a special gift.`);
  body.push(`${cap(mc.he)} ${rng.chance(0.5) ? "made" : "found"} ${withArticle(gift.phrase)} and wrapped it in ${rng.pick(["red", "blue", "shiny", "pretty"])} paper.`);
  body.push(`At the party, there was ${food === "cake" || food === "pie" || food === "ice cream" ? `a lot of ${food}` : `a plate of ${food}`}.`.replace("a lot of cake", "a big cake"));
  body.push(`${cap(mc.ref)} gave the gift to ${friend.ref}.`);
  body.push(say(rng, friend, rng.pick([`${cap(withArticle(gift.phrase))}! I love it!`, "Thank you! This is the best gift!", "Wow, thank you so much!"])));
  body.push(`Everyone sang a happy song and ate ${food}.`);
  return { body, friend, moral: rng.pick(["giving is as fun as getting", "a gift from the heart is the best gift"]) };
};

const newFriend: Plot = (rng, mc, place, ctx) => {
  const friend = makeCharacter(rng, [mc]);
  const body: string[] = [];
  const newPlace = mc.animal ? "a new part of the forest" : "a new town";
  body.push(`${cap(mc.ref)} and ${mc.his} family moved to ${newPlace}.`);
  body.push(`${cap(mc.he)} did not know anyone there, and ${mc.he} felt ${rng.pick(["shy", "lonely", "a little sad"])}.`);
  body.push(`${ctx.when()}, ${mc.ref} went ${place.name === "school" ? "to school" : `to ${place.name}`}.`);
  body.push(`${cap(friend.intro)} walked up and said hello.`);
  body.push(say(rng, friend, rng.pick(["Do you want to play with me?", "Are you new here?", "What is your name?"])));
  body.push(say(rng, mc, `I am ${mc.named ? mc.ref : `a ${mc.noun}`}. I would like to play.`, "said"));
  body.push(`They spent the whole day together and ${past(rng.pick(ACTIVITIES))}.`);
  body.push(`${cap(mc.ref)} was not ${rng.pick(["shy", "lonely", "sad"])} anymore.`);
  return { body, friend, moral: rng.pick(["a friendly hello can change a day", "new places can bring new friends"]) };
};

const picnic: Plot = (rng, mc, _place, ctx) => {
  const friend = makeCharacter(rng, [mc]);
  const place = rng.pick(PLACES.filter((p) => OUTDOORS.has(p.name)));
  const foods = rng.sample(FOODS, 3);
  const body: string[] = [];
  body.push(`${ctx.when()}, ${mc.ref} and ${friend.intro} went on a picnic ${place.at} ${place.name}.`);
  body.push(`They packed ${list(foods)} in a big basket.`);
  body.push(`They spread a ${rng.pick(["red", "blue", "checkered", "soft", "big"])} blanket on the grass and sat down.`);
  body.push(`${rng.pick(SCENES)}`);
  const visitor = rng.pick(ANIMALS.filter((a) => a.noun !== mc.animal?.noun && a.noun !== friend.animal?.noun));
  body.push(`Then ${withArticle(rng.pick(["hungry", "little", "curious", "tiny"]) + " " + visitor.noun)} came to the blanket and looked at the food.`);
  body.push(say(rng, friend, rng.pick([`Look, ${withArticle(visitor.noun)} wants to eat with us!`, "Should we give it some food?", `Hello, little ${visitor.noun}!`])));
  body.push(`${cap(mc.ref)} gave the ${visitor.noun} some ${visitor.food === foods[0] ? foods[0] : rng.pick(foods)}.`);
  body.push(`The ${visitor.noun} ${rng.pick(visitor.doing)} and then went away.`);
  return { body, friend, moral: rng.pick(["sharing is caring", "a picnic is more fun with friends"]) };
};

const treasure: Plot = (rng, mc, place, ctx) => {
  const friend = rng.chance(0.6) ? makeCharacter(rng, [mc]) : undefined;
  const who = friend ? `${mc.ref} and ${friend.ref}` : mc.ref;
  const they = friend ? "they" : mc.he;
  const marks = rng.sample(["a big rock", "an old tree", "a little bridge", "a red gate", "a tall fence", "a small hill", "a stone wall", "a sleepy pond"], 2);
  const prize = rng.pick(["a box of shiny coins", "a bag of colorful marbles", "an old golden key", "a jar of sweet candy", "a book of fairy tales", "a little silver bell"]);
  const body: string[] = [];
  if (friend) body.push(`${cap(mc.ref)} had a friend, ${friend.intro}.`);
  body.push(`${ctx.when()}, ${who} found an old map ${place.at} ${place.name}.`);
  body.push(`The map showed a path and a big X.`.replace(" and a big X", " to a secret treasure"));
  body.push(`${cap(they)} followed the path past ${marks[0]} and ${marks[1]}.`);
  if (friend) body.push(say(rng, friend, rng.pick(["Are we close?", "I think it is here!", "Look, there is the spot!"])));
  body.push(`At the end of the path, ${they} dug a small hole in the ground.`);
  body.push(`Inside the hole, ${they} found ${prize}!`);
  body.push(say(rng, mc, rng.pick(["We found the treasure!", "I cannot believe it!", "This is amazing!"])));
  return { body, friend, moral: friend ? rng.pick(["adventures are better with a friend", "a friend is the best treasure"]) : "adventures can start anywhere" };
};

const magic: Plot = (rng, mc, place, ctx) => {
  const item = rng.pick(["stone", "shell", "feather", "leaf", "acorn", "button", "pebble", "flower"]);
  const color = rng.pick(["blue", "golden", "silver", "purple", "green", "pink"]);
  const power = rng.pick([
    ["made flowers grow wherever it went", "Flowers began to grow all around"],
    ["could talk", "\"Hello,\" said a tiny voice from the ITEM"],
    ["glowed in the dark", "The ITEM began to glow with a soft light"],
    ["made things float", "A little rock floated up into the air"],
    ["made it snow", "Soft white snow began to fall from the sky"],
  ] as const);
  const body: string[] = [];
  body.push(`${ctx.when()}, ${mc.ref} found a ${color} ${item} ${place.at} ${place.name}.`);
  body.push(`It was not a normal ${item}.`);
  body.push(`When ${mc.he} held it, something strange happened.`);
  body.push(`${power[1].replace("ITEM", item)}.`);
  body.push(`${cap(mc.ref)} was ${rng.pick(["surprised", "amazed", "very surprised"])}. It was a magic ${item} that ${power[0]}!`);
  body.push(say(rng, mc, rng.pick(["This is so much fun!", "What a wonderful thing!", "I will keep it safe!"])));
  body.push(`${cap(mc.he)} put the ${item} in ${mc.his} pocket and ran home to show ${mc.his} ${rng.pick(["family", "friends", "mother", "father"])}.`);
  return { body, friend: undefined, moral: undefined };
};

const race: Plot = (rng, mc, _place, ctx) => {
  const friend = makeCharacter(rng, [mc]);
  const finish = rng.pick(["the big oak tree", "the end of the field", "the top of the hill", "the old bridge", "the red barn"]);
  const mcWins = rng.chance(0.5);
  const winner = mcWins ? mc : friend;
  const loser = mcWins ? friend : mc;
  const body: string[] = [];
  body.push(`${ctx.when()}, ${mc.ref} met ${friend.intro}.`);
  body.push(say(rng, friend, `Let us have a race to ${finish}!`));
  body.push(`${cap(mc.ref)} and ${friend.ref} stood side by side.`);
  body.push(`"Ready, set, go!" they shouted, and off they ran.`);
  body.push(`${cap(loser.ref)} ran fast at first, but then ${loser.he} ${rng.pick(["stopped to rest", "tripped over a stick", "stopped to look at a butterfly"])}.`);
  body.push(`${cap(winner.ref)} kept going ${rng.pick(["slowly and steadily", "as fast as possible", "without stopping"])} and reached ${finish} first.`);
  body.push(say(rng, loser, rng.pick(["Good race!", "You won! Well done!", "That was fun! Let us race again tomorrow."])));
  return { body, friend, moral: rng.pick(["slow and steady can win the race", "having fun is more important than winning", "a good friend is happy for you"]) };
};

const chores: Plot = (rng, mc, _place, ctx) => {
  const [parent, parentGender] = rng.pick(PARENTS);
  const mother = rng.chance(0.5);
  const grown = mc.animal ? `${mc.his} ${mother ? "mother" : "father"}` : `${mc.his} ${parent}`;
  const grownHe = (mc.animal ? mother : parentGender === "girl") ? "she" : "he";
  const jobs = rng.sample(["washed the dishes", "swept the floor", "folded the clothes", "watered the plants", "fed the cat", "picked up the toys", "made the bed", "set the table", "wiped the windows", "carried the bags"], 3);
  const treat = rng.pick(FOODS);
  const body: string[] = [];
  body.push(`${ctx.when()}, ${grown} was very busy.`);
  body.push(say(rng, mc, rng.pick(["Can I help you?", "What can I do to help?", "Let me help you!"])));
  body.push(`${cap(grown)} smiled. "Yes, please," ${grownHe} said.`);
  body.push(`${cap(mc.ref)} ${jobs[0]} and ${jobs[1]}.`);
  body.push(`Then ${mc.he} ${jobs[2]}.`);
  body.push(`When everything was done, the house looked ${rng.pick(["clean and bright", "neat and tidy", "very nice"])}.`);
  body.push(`${cap(grown)} gave ${mc.ref} some ${treat} as a thank you.`);
  return { body, friend: undefined, moral: rng.pick(["helping at home feels good", "many hands make light work"]) };
};

const snowDay: Plot = (rng, mc, _place, ctx) => {
  const friend = makeCharacter(rng, [mc]);
  const acts = rng.sample(["built a big snowman", "made snow angels", "rode a sled down the hill", "threw snowballs", "made a snow fort", "caught snowflakes on their tongues"], 3);
  const body: string[] = [];
  body.push(`${rng.pick(["One cold morning", "One winter morning", "Early one winter day"])}, ${mc.ref} looked out of the window.`);
  body.push(`Everything was white! Snow had fallen all night.`);
  body.push(`${cap(mc.ref)} put on ${mc.his} warm ${rng.pick(["coat", "boots", "hat", "scarf"])} and ran outside.`);
  body.push(`${cap(friend.intro)} was already playing in the snow.`);
  body.push(say(rng, friend, rng.pick(["Come and play with me!", "Do you want to build a snowman?", "Is this not wonderful?"])));
  body.push(`Together, they ${acts[0]} and ${acts[1]}.`);
  if (rng.chance(0.6)) body.push(`Then they ${acts[2]}.`);
  body.push(`When they were cold, they went inside and drank ${rng.pick(["hot milk", "warm cocoa", "hot soup"])}.`);
  return { body, friend, moral: rng.pick(["a snowy day is a happy day with a friend", "winter can be lots of fun"]) };
};

const DREAMS: readonly (readonly [string, readonly string[]])[] = [
  ["flew up to the moon", ["The moon was soft and white like cheese.", "The stars twinkled all around.", "The earth looked small and blue."]],
  ["sailed a big ship across the sea", ["Dolphins jumped beside the ship.", "The waves were tall and blue.", "A friendly whale sang a song."]],
  ["rode a dragon over the mountains", ["The dragon had shiny green scales.", "The wind blew through the clouds.", "The villages below looked like toys."]],
  ["walked into a land made of candy", ["The trees were made of lollipops.", "The river was full of chocolate.", "The houses had roofs of cookies."]],
  ["swam deep under the sea", ["Colorful fish swam past.", "A turtle waved hello.", "There was a castle made of shells."]],
  ["became a tiny ant in the grass", ["Each blade of grass was as tall as a tree.", "A drop of water was as big as a ball.", "A friendly ladybug gave a ride."]],
];

const dream: Plot = (rng, mc, _place, ctx) => {
  const [trip, sights] = rng.pick(DREAMS);
  const seen = rng.sample(sights, 2);
  const body: string[] = [];
  body.push(`${ctx.when()}, ${mc.ref} was very tired after a long day.`.replace(/^(Then|Soon|After a while|Later that day), /, "That night, "));
  body.push(`${cap(mc.he)} curled up in ${mc.animal ? "a cozy spot" : "bed"} and fell fast asleep.`);
  body.push(`In ${mc.his} dream, ${mc.he} ${trip}.`);
  body.push(...seen);
  body.push(say(rng, mc, rng.pick(["This is wonderful!", "I never want to wake up!", "What a magical place!"])));
  body.push(`In the morning, ${mc.ref} woke up with a big smile.`);
  if (rng.chance(0.6)) body.push(`${cap(mc.he)} told ${mc.his} ${mc.animal ? "friends" : rng.pick(["mom", "dad", "family"])} all about the dream.`);
  return { body, friend: undefined, moral: undefined };
};

const gardenPlot: Plot = (rng, mc, _place, ctx) => {
  const plant = rng.pick(["sunflower", "pumpkin", "tomato plant", "bean plant", "rose bush", "carrot", "strawberry plant", "apple tree"]);
  const grown = mc.animal ? `${mc.his} ${rng.pick(["mother", "father", "grandma"])}` : `${mc.his} ${rng.pick(["mom", "dad", "grandma", "grandpa"])}`;
  const body: string[] = [];
  body.push(`${ctx.when()}, ${grown} gave ${mc.ref} a tiny seed.`);
  body.push(say(rng, mc, "What will it grow into?"));
  body.push(`"Plant it and see," said ${grown}.`);
  body.push(`${cap(mc.ref)} planted the seed in the garden and watered it every day.`);
  body.push(`At first nothing happened, and ${mc.ref} felt ${rng.pick(["impatient", "a little sad", "worried"])}.`);
  body.push(`Then one morning, a little green sprout came out of the ground.`);
  body.push(`It grew bigger and bigger until it was ${withArticle(plant)}${plant.endsWith("tree") || plant.endsWith("flower") ? " as tall as the fence" : " with many leaves"}.`);
  body.push(say(rng, mc, rng.pick([`Look at my ${plant}!`, "I grew it all by myself!", "It was worth the wait!"])));
  return { body, friend: undefined, moral: rng.pick(["good things take time", "patience makes things grow"]) };
};

const visit: Plot = (rng, mc, _place, ctx) => {
  const who = mc.animal ? rng.pick(["grandma", "grandpa", "aunt", "uncle"]) : rng.pick(["grandma", "grandpa", "aunt", "uncle"]);
  const home = rng.pick(["a farm in the country", "a little house by the sea", "a cabin in the woods", "a cottage on a hill"]);
  const acts = rng.sample(["fed the chickens", "picked apples from the trees", "baked bread in the old oven", "walked along the beach", "looked at old photos", "played cards by the fire", "went fishing in the lake", "read stories under a tree"], 2);
  const food = rng.pick(FOODS);
  const body: string[] = [];
  body.push(`${ctx.when()}, ${mc.ref} went to visit ${mc.his} ${who}.`);
  body.push(`${cap(mc.his)} ${who} lived in ${home}.`);
  body.push(`"Welcome!" said ${mc.his} ${who}, with a big hug.`);
  body.push(`Together they ${acts[0]} and ${acts[1]}.`);
  body.push(`For dinner, there was warm soup and ${food}.`.replace(" and soup.", " and bread."));
  body.push(say(rng, mc, rng.pick(["I love it here!", "Can I stay one more day?", "This is the best visit ever!"])));
  if (rng.chance(0.5)) body.push(`When it was time to go, ${mc.ref} gave ${mc.his} ${who} a big hug and waved goodbye.`);
  return { body, friend: undefined, moral: rng.pick(["family is very special", "time with family is a gift"]) };
};

export const PLOTS: readonly (readonly [string, Plot])[] = [
  ["lost", lostThing], ["goal", hardGoal], ["trouble", friendInTrouble], ["share", sharing], ["fear", fear],
  ["make", making], ["trip", trip], ["rain", rain], ["birthday", birthday], ["friend", newFriend],
  ["picnic", picnic], ["treasure", treasure], ["magic", magic], ["race", race], ["chores", chores], ["snow", snowDay],
  ["dream", dream], ["garden", gardenPlot], ["visit", visit],
];

export interface StoryOptions extends CastOptions {
  readonly minSentences?: number;
  readonly maxSentences?: number;
  readonly plot?: string;
}

/** One story: sentences joined by spaces, 4 to 12 sentences unless the options narrow it. */
export function story(rng: Random, options: StoryOptions = {}): string {
  return storyWithCast(rng, options).text;
}

/** A story and its main character and friend (for follow-up questions in chats). */
export function storyWithCast(rng: Random, options: StoryOptions = {}): { text: string; mc: Character; friend: Character | undefined } {
  const min = options.minSentences ?? 4;
  const max = options.maxSentences ?? 12;
  let tries = 0;
  for (;;) {
    const mc = makeCharacter(rng, [], options);
    const place = rng.chance(0.8) ? rng.pick(PLACES.filter((p) => OUTDOORS.has(p.name))) : rng.pick(PLACES);
    const [plotName, plot] = options.plot !== undefined ? (PLOTS.find(([name]) => name === options.plot) as readonly [string, Plot]) : rng.pick(PLOTS);
    const state = { timeUsed: false };
    const opener = openerSentences(rng, mc, state, !SCENE_START_PLOTS.has(plotName));
    const ctx: Context = {
      when: () => {
        if (!state.timeUsed) {
          state.timeUsed = true;
          return rng.pick(mc.animal ? ANIMAL_TIME_OPENERS : TIME_OPENERS);
        }
        return rng.pick(["Then", "Later that day", "After a while", "Soon"]);
      },
    };
    const { body, friend, moral } = plot(rng, mc, place, ctx);
    // Sometimes a scene after the plot's first sentence (outdoor plots only).
    if (OUTDOORS.has(place.name) && SCENE_PLOTS.has(plotName) && rng.chance(0.35)) body.splice(1, 0, rng.pick(SCENES));
    const ending = endingSentences(rng, mc, friend, moral);
    // Too long: keep one opener and one ending sentence; the plot itself is never cut (a cut
    // plot leaves its problem unsolved). Still too long: another draw, and after many draws
    // the limit gives (a plot forced by the options may need more sentences).
    let sentences = [...opener, ...body, ...ending];
    if (sentences.length > max) sentences = [...opener.slice(0, 1), ...body, ...ending.slice(0, 1)];
    if (++tries > 40 && sentences.length >= min) return { text: sentences.join(" "), mc, friend };
    if (sentences.length >= min && sentences.length <= max) return { text: sentences.join(" "), mc, friend };
  }
}
