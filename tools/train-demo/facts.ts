/**
 * The fact table: about 180 simple facts, each with the questions that ask for it, an indirect
 * form for reasoning ("what colour the sky is"), and its one answer sentence. The facts prose
 * documents and the chat answers both read this one table, so they always agree.
 */
import { cap } from "./lexicon.ts";
import type { Random } from "./prng.ts";

export interface Fact {
  readonly topic: string;
  /** Direct questions; "COLOUR" is replaced by "colour" or "color". */
  readonly questions: readonly string[];
  /** Indirect question for reasoning: "what COLOUR the sky is". */
  readonly about: string;
  /** The answer, one sentence. */
  readonly sentence: string;
}

const facts: Fact[] = [];

function add(topic: string, questions: readonly string[], about: string, sentence: string): void {
  facts.push({ topic, questions, about, sentence });
}

// Colours: [subject as asked, verb, colour phrase].
const COLOUR_FACTS: readonly (readonly [string, "is" | "are", string])[] = [
  ["the sky", "is", "blue"], ["grass", "is", "green"], ["snow", "is", "white"], ["the sun", "is", "yellow"],
  ["a banana", "is", "yellow"], ["a lemon", "is", "yellow"], ["a carrot", "is", "orange"], ["a cherry", "is", "red"],
  ["a strawberry", "is", "red"], ["milk", "is", "white"], ["coal", "is", "black"], ["a frog", "is", "green"],
  ["a crow", "is", "black"], ["a pumpkin", "is", "orange"], ["a ripe tomato", "is", "red"], ["chocolate", "is", "brown"],
  ["a flamingo", "is", "pink"], ["a polar bear", "is", "white"], ["a zebra", "is", "black and white"],
  ["a panda", "is", "black and white"], ["an orange", "is", "orange"], ["a lime", "is", "green"], ["a plum", "is", "purple"],
  ["clouds", "are", "white or gray"], ["the sea", "is", "blue"], ["a fire truck", "is", "red"], ["a school bus", "is", "yellow"],
  ["a penguin", "is", "black and white"], ["an elephant", "is", "gray"], ["a ladybug", "is", "red with black spots"],
  ["a pig", "is", "pink"], ["an eggplant", "is", "purple"], ["a leaf in summer", "is", "green"], ["honey", "is", "golden"],
  ["a tiger", "is", "orange with black stripes"],
];
for (const [subject, verb, colour] of COLOUR_FACTS) {
  add("colour", [`What COLOUR ${verb} ${subject}?`, `What is the COLOUR of ${subject}?`, `Do you know what COLOUR ${subject} ${verb}?`, `Tell me the COLOUR of ${subject}.`],
    `what COLOUR ${subject} ${verb}`, `${cap(subject)} ${verb} ${colour}.`);
}

// Sounds: [animal, sound].
const SOUND_FACTS: readonly (readonly [string, string])[] = [
  ["cow", "moo"], ["dog", "woof"], ["cat", "meow"], ["duck", "quack"], ["sheep", "baa"], ["pig", "oink"], ["lion", "roar"],
  ["horse", "neigh"], ["owl", "hoot"], ["snake", "hiss"], ["bee", "buzz"], ["hen", "cluck"], ["frog", "croak"],
  ["mouse", "squeak"], ["wolf", "howl"], ["donkey", "bray"], ["bird", "tweet"], ["goose", "honk"],
];
for (const [animal, sound] of SOUND_FACTS) {
  const a = /^[aeiou]/.test(animal) ? "an" : "a";
  add("sound", [`What does ${a} ${animal} say?`, `What sound does ${a} ${animal} make?`, `What noise does ${a} ${animal} make?`],
    `what sound ${a} ${animal} makes`, `${cap(a)} ${animal} says ${sound}.`);
  add("sound", [`Which animal says ${sound}?`, `What animal says ${sound}?`, `Who says ${sound}?`],
    `which animal says ${sound}`, `${cap(a)} ${animal} says ${sound}.`);
}

// Food: [animals (plural), food].
const FOOD_FACTS: readonly (readonly [string, string])[] = [
  ["cows", "grass"], ["rabbits", "carrots and grass"], ["monkeys", "bananas and fruit"], ["pandas", "bamboo"],
  ["cats", "fish and meat"], ["dogs", "meat and dog food"], ["birds", "seeds and worms"], ["bees", "nectar from flowers"],
  ["horses", "hay and grass"], ["squirrels", "nuts and seeds"], ["koalas", "eucalyptus leaves"], ["sheep", "grass"],
  ["bears", "fish, berries and honey"], ["owls", "mice and insects"], ["frogs", "flies and other insects"],
  ["giraffes", "leaves from tall trees"], ["elephants", "grass, leaves and fruit"], ["penguins", "fish"],
  ["hens", "seeds and grain"], ["goats", "grass and leaves"], ["caterpillars", "leaves"], ["lions", "meat"],
  ["ducks", "plants, seeds and small bugs"], ["mice", "seeds and grain"],
];
for (const [animals, food] of FOOD_FACTS) {
  add("food", [`What do ${animals} eat?`, `What food do ${animals} eat?`, `Tell me what ${animals} eat.`, `What do ${animals} like to eat?`],
    `what ${animals} eat`, `${cap(animals)} eat ${food}.`);
}

// Homes: [animals (plural), where].
const HOME_FACTS: readonly (readonly [string, string])[] = [
  ["fish", "in water"], ["birds", "in nests"], ["bees", "in hives"], ["bears", "in dens and caves"], ["camels", "in the desert"],
  ["penguins", "in cold places with ice and snow"], ["monkeys", "in trees in the jungle"], ["cows", "on farms"],
  ["rabbits", "in burrows under the ground"], ["ants", "in anthills"], ["spiders", "in webs"], ["foxes", "in dens"],
  ["frogs", "near ponds and rivers"], ["whales", "in the sea"], ["polar bears", "in the cold Arctic"],
  ["lions", "on the grassy plains"], ["horses", "in stables and fields"], ["owls", "in trees"], ["beavers", "in lodges on rivers"],
  ["squirrels", "in trees"], ["moles", "in tunnels under the ground"], ["dolphins", "in the sea"],
];
for (const [animals, where] of HOME_FACTS) {
  add("home", [`Where do ${animals} live?`, `Where can you find ${animals}?`, `Tell me where ${animals} live.`],
    `where ${animals} live`, `${cap(animals)} live ${where}.`);
}

// Counts: [question, about, sentence].
const COUNT_FACTS: readonly (readonly [readonly string[], string, string])[] = [
  [["How many legs does a spider have?"], "how many legs a spider has", "A spider has eight legs."],
  [["How many legs does a dog have?"], "how many legs a dog has", "A dog has four legs."],
  [["How many legs does a bird have?"], "how many legs a bird has", "A bird has two legs."],
  [["How many legs does an insect have?"], "how many legs an insect has", "An insect has six legs."],
  [["How many arms does an octopus have?"], "how many arms an octopus has", "An octopus has eight arms."],
  [["How many legs does a snake have?"], "how many legs a snake has", "A snake has no legs."],
  [["How many legs does a cow have?"], "how many legs a cow has", "A cow has four legs."],
  [["How many legs does an ant have?"], "how many legs an ant has", "An ant has six legs."],
  [["How many legs does a chicken have?"], "how many legs a chicken has", "A chicken has two legs."],
  [["How many days are in a week?", "How many days does a week have?"], "how many days are in a week", "There are seven days in a week."],
  [["How many months are in a year?", "How many months does a year have?"], "how many months are in a year", "There are twelve months in a year."],
  [["How many hours are in a day?", "How many hours does a day have?"], "how many hours are in a day", "There are twenty four hours in a day."],
  [["How many minutes are in an hour?"], "how many minutes are in an hour", "There are sixty minutes in an hour."],
  [["How many seconds are in a minute?"], "how many seconds are in a minute", "There are sixty seconds in a minute."],
  [["How many fingers are on one hand?", "How many fingers do I have on one hand?"], "how many fingers are on one hand", "There are five fingers on one hand."],
  [["How many seasons are in a year?", "How many seasons are there?"], "how many seasons are in a year", "There are four seasons in a year."],
  [["How many sides does a triangle have?"], "how many sides a triangle has", "A triangle has three sides."],
  [["How many sides does a square have?"], "how many sides a square has", "A square has four sides."],
  [["How many wheels does a bicycle have?", "How many wheels does a bike have?"], "how many wheels a bicycle has", "A bicycle has two wheels."],
  [["How many wheels does a tricycle have?"], "how many wheels a tricycle has", "A tricycle has three wheels."],
  [["How many wheels does a car have?"], "how many wheels a car has", "A car has four wheels."],
  [["How many colours are in a rainbow?", "How many colors does a rainbow have?"], "how many colours are in a rainbow", "A rainbow has seven COLOURs."],
  [["How many eyes does a person have?"], "how many eyes a person has", "A person has two eyes."],
  [["How many days are in a year?"], "how many days are in a year", "There are three hundred and sixty five days in a year."],
];
for (const [questions, about, sentence] of COUNT_FACTS) add("count", questions, about, sentence);

// Babies: [animal, baby].
const BABY_FACTS: readonly (readonly [string, string])[] = [
  ["cat", "kitten"], ["dog", "puppy"], ["cow", "calf"], ["sheep", "lamb"], ["horse", "foal"], ["duck", "duckling"],
  ["frog", "tadpole"], ["hen", "chick"], ["bear", "cub"], ["lion", "cub"], ["goat", "kid"], ["kangaroo", "joey"],
  ["deer", "fawn"], ["pig", "piglet"], ["swan", "cygnet"], ["goose", "gosling"],
];
for (const [animal, baby] of BABY_FACTS) {
  add("baby", [`What is a baby ${animal} called?`, `What do you call a baby ${animal}?`, `What is the name for a baby ${animal}?`],
    `what a baby ${animal} is called`, `A baby ${animal} is called a ${baby}.`);
}

// Opposites, both ways.
const OPPOSITES: readonly (readonly [string, string])[] = [
  ["hot", "cold"], ["big", "small"], ["up", "down"], ["day", "night"], ["fast", "slow"], ["happy", "sad"], ["open", "closed"],
  ["wet", "dry"], ["light", "dark"], ["tall", "short"], ["full", "empty"], ["loud", "quiet"], ["hard", "soft"], ["in", "out"],
  ["left", "right"], ["early", "late"], ["push", "pull"], ["first", "last"], ["old", "new"], ["clean", "dirty"],
];
for (const [x, y] of OPPOSITES) {
  for (const [a, b] of [[x, y], [y, x]] as const) {
    add("opposite", [`What is the opposite of ${a}?`, `What is the opposite of the word ${a}?`, `Tell me the opposite of ${a}.`],
      `what the opposite of ${a} is`, `The opposite of ${a} is ${b}.`);
  }
}

// The world: [questions, about, sentence].
const WORLD_FACTS: readonly (readonly [readonly string[], string, string])[] = [
  [["Where does the sun rise?", "In which direction does the sun rise?"], "where the sun rises", "The sun rises in the east."],
  [["Where does the sun set?", "In which direction does the sun set?"], "where the sun sets", "The sun sets in the west."],
  [["What happens to water when it gets very cold?", "What does water turn into when it freezes?"], "what happens to water when it gets very cold", "Water turns into ice when it gets very cold."],
  [["What happens to ice when it gets warm?"], "what happens to ice when it gets warm", "Ice melts into water when it gets warm."],
  [["What do plants need to grow?", "What does a plant need to grow?"], "what plants need to grow", "Plants need water and sunlight to grow."],
  [["What do we see with?", "Which part of the body do we see with?"], "what we see with", "We see with our eyes."],
  [["What do we hear with?", "Which part of the body do we hear with?"], "what we hear with", "We hear with our ears."],
  [["What do we smell with?"], "what we smell with", "We smell with our nose."],
  [["What do we taste with?"], "what we taste with", "We taste with our tongue."],
  [["Is fire hot or cold?"], "whether fire is hot or cold", "Fire is very hot."],
  [["Where does rain come from?"], "where rain comes from", "Rain falls from the clouds."],
  [["When does the moon shine?", "When can we see the moon?"], "when the moon shines", "The moon shines at night."],
  [["What is bread made from?"], "what bread is made from", "Bread is made from flour."],
  [["Where does milk come from?"], "where milk comes from", "Milk comes from cows."],
  [["Who makes honey?", "What animal makes honey?"], "who makes honey", "Honey is made by bees."],
  [["Where do eggs come from?"], "where eggs come from", "Eggs come from hens."],
  [["Where does wool come from?"], "where wool comes from", "Wool comes from sheep."],
  [["When do leaves fall from the trees?", "In which season do leaves fall?"], "when leaves fall from the trees", "Leaves fall from the trees in autumn."],
  [["When does snow fall?", "In which season does it snow?"], "when snow falls", "Snow falls in winter."],
  [["What is the hottest season?", "Which season is the hottest?"], "which season is the hottest", "Summer is the hottest season."],
  [["What is the coldest season?", "Which season is the coldest?"], "which season is the coldest", "Winter is the coldest season."],
  [["When do flowers bloom?", "In which season do flowers bloom?"], "when flowers bloom", "Flowers bloom in spring."],
  [["What does the Earth go around?"], "what the Earth goes around", "The Earth goes around the sun."],
  [["What shape is the Earth?"], "what shape the Earth is", "The Earth is round."],
  [["What do birds have on their bodies?", "What covers a bird?"], "what covers a bird", "Birds are covered with feathers."],
  [["How do fish swim?", "What do fish use to swim?"], "how fish swim", "Fish swim with their fins and tails."],
  [["What is cheese made from?"], "what cheese is made from", "Cheese is made from milk."],
  [["What is butter made from?"], "what butter is made from", "Butter is made from cream."],
  [["When do the stars shine?", "When can we see the stars?"], "when the stars shine", "The stars shine at night."],
  [["Is sea water salty?", "What does sea water taste like?"], "whether sea water is salty", "Sea water is salty."],
  [["What does a caterpillar turn into?", "What does a caterpillar become?"], "what a caterpillar turns into", "A caterpillar turns into a butterfly."],
  [["What does a tadpole grow into?", "What does a tadpole become?"], "what a tadpole grows into", "A tadpole grows into a frog."],
  [["What do we breathe?"], "what we breathe", "We breathe air."],
  [["What gives us light in the day?"], "what gives us light in the day", "The sun gives us light in the day."],
  [["What do bees make?"], "what bees make", "Bees make honey."],
  [["What do cows give us?"], "what cows give us", "Cows give us milk."],
  [["What do you use an umbrella for?"], "what an umbrella is for", "An umbrella keeps you dry in the rain."],
  [["Why do we brush our teeth?"], "why we brush our teeth", "We brush our teeth to keep them clean and strong."],
  [["What do we wear on our feet?"], "what we wear on our feet", "We wear shoes and socks on our feet."],
  [["What is the biggest animal?", "Which animal is the biggest?"], "which animal is the biggest", "The blue whale is the biggest animal."],
  [["What is the tallest animal?", "Which animal is the tallest?"], "which animal is the tallest", "The giraffe is the tallest animal."],
  [["Which animal is the fastest on land?", "What is the fastest land animal?"], "which animal is the fastest on land", "The cheetah is the fastest animal on land."],
  [["Can penguins fly?"], "whether penguins can fly", "Penguins cannot fly, but they swim very well."],
  [["Where do apples grow?"], "where apples grow", "Apples grow on trees."],
];
for (const [questions, about, sentence] of WORLD_FACTS) add("world", questions, about, sentence);

export const FACTS: readonly Fact[] = facts;

export function fillSpelling(text: string, british: boolean): string {
  return text.replaceAll("COLOUR", british ? "colour" : "color");
}

/** A fact question as a user might type it. */
export function askFact(rng: Random, fact: Fact): { question: string; about: string } {
  const british = rng.chance(0.5);
  let question = fillSpelling(rng.pick(fact.questions), british);
  if (rng.chance(0.2)) question = `${rng.pick(["Hey, ", "Quick question: ", "Please tell me: ", "I want to know: "])}${question[0]!.toLowerCase()}${question.slice(1)}`;
  if (rng.chance(0.1)) question = question.toLowerCase();
  return { question, about: fillSpelling(fact.about, british) };
}

const FACT_INTROS: Record<string, readonly string[]> = {
  colour: ["Here are some colours.", "Things have many colours.", "Let us talk about colours."],
  sound: ["Animals make many sounds.", "Here are some animal sounds.", "Every animal has its own sound."],
  food: ["Animals eat many different foods.", "Here is what some animals eat.", "Let us learn what animals eat."],
  home: ["Animals live in many places.", "Here is where some animals live.", "Every animal has a home."],
  count: ["Here are some numbers to know.", "Let us count some things.", "Some simple facts about numbers."],
  baby: ["Baby animals have special names.", "Here are the names of some baby animals."],
  opposite: ["Some words have opposites.", "Here are some opposites."],
  world: ["Here are some facts about the world.", "Let us learn some simple facts.", "The world is full of interesting things."],
};

/** A facts prose document: an optional intro and 4 to 10 facts, mostly from one or two topics. */
export function factsDocument(rng: Random): string {
  const topics = [...new Set(FACTS.map((f) => f.topic))];
  const main = rng.pick(topics);
  const count = rng.int(4, 10);
  const chosen: Fact[] = [];
  const seen = new Set<string>();
  while (chosen.length < count) {
    const pool = rng.chance(0.7) ? FACTS.filter((f) => f.topic === main) : FACTS;
    const fact = rng.pick(pool);
    if (seen.has(fact.sentence)) {
      if (seen.size >= FACTS.filter((f) => f.topic === main).length) break;
      continue;
    }
    seen.add(fact.sentence);
    chosen.push(fact);
  }
  const sentences = chosen.map((f) => fillSpelling(f.sentence, rng.chance(0.5)));
  const intro = rng.chance(0.5) ? [rng.pick(FACT_INTROS[main] as readonly string[])] : [];
  const outro = rng.chance(0.2) ? [rng.pick(["Now you know a lot more!", "Learning is fun.", `That is all for now.`])] : [];
  const joined = [...intro, ...sentences, ...outro];
  return rng.chance(0.3) ? joined.join("\n") : joined.join(" ");
}
