/**
 * The word tables the generators draw from, and the small pieces of English grammar they need:
 * articles (a/an), capitals, verb forms, plurals, number words. Every word here is checked
 * against the dictionary at generation time (words.ts), so a typo fails the run loudly.
 */

export type Gender = "girl" | "boy";

/** Child names that are also dictionary words (lowercase), by gender. */
export const GIRL_NAMES: readonly string[] = [
  "Lily", "Rose", "Anna", "Daisy", "Ruby", "Luna", "Ivy", "Holly", "Poppy", "Hazel", "Olive", "Pearl", "Iris",
  "Violet", "Amber", "Jade", "Grace", "Hope", "Joy", "May", "Fern", "Willow", "Dawn", "Heather", "Jasmine",
  "Summer", "Autumn", "Ginger", "Penny", "Molly", "Dolly", "Sally", "Kitty", "Bonnie", "Misty", "Stella", "Clementine",
  "Crystal", "Coral", "Rosemary", "Primrose", "Marigold", "Lavender", "Sage", "Robin", "Wren", "Emma", "Cherry", "Tilly", "Meg",
];
export const BOY_NAMES: readonly string[] = [
  "Max", "Sam", "Ben", "Tom", "Jack", "Jake", "Bill", "Bob", "Mark", "Will", "Frank", "Grant", "Chase", "Hunter",
  "Cole", "Reed", "Rex", "Dean", "Lance", "Miles", "Mason", "Cooper", "Oscar", "Otto", "Buster",
  "Rocky", "Rusty", "Basil", "Jasper", "Clay", "Flint", "Colt", "Heath", "Guy", "Barney", "Eddy",
  "Duke", "Earl", "Hank", "Jimmy", "Joe", "Luke", "Nick", "Ray", "Ted", "Tony", "Victor", "Wade", "Warren", "Milo", "Noah", "Ollie",
];

/** Pet-style names for animals (any gender). */
export const ANIMAL_NAMES: readonly string[] = [
  "Spot", "Buddy", "Fluffy", "Patch", "Pepper", "Sunny", "Lucky", "Snowy", "Biscuit", "Button", "Peanut", "Muffin",
  "Honey", "Cookie", "Dot", "Bubbles", "Tiny", "Pip", "Nutmeg", "Maple", "Acorn", "Pebble", "Puddle", "Sparky",
  "Blossom", "Shadow", "Smoky", "Pumpkin", "Clover", "Toffee", "Fudge", "Sprout", "Twinkle", "Fuzzy", "Scout",
];

export interface Animal {
  readonly noun: string;
  readonly plural: string;
  /** Where it likes to be (for a home sentence). */
  readonly home: string;
  /** Something it does, past tense, ending a sentence: "hopped across the grass". */
  readonly doing: readonly string[];
  /** What it likes to eat (plural or mass noun). */
  readonly food: string;
}

export const ANIMALS: readonly Animal[] = [
  { noun: "fox", plural: "foxes", home: "in a den in the forest", doing: ["ran through the tall grass", "jumped over a log", "sniffed the cool air", "trotted along the stream"], food: "berries" },
  { noun: "rabbit", plural: "rabbits", home: "in a hole under a big tree", doing: ["hopped across the field", "wiggled its nose", "munched on a crunchy carrot", "dug a little hole"], food: "carrots" },
  { noun: "bunny", plural: "bunnies", home: "in a cozy burrow in the meadow", doing: ["hopped up and down", "nibbled a leaf", "twitched its long ears", "hid behind a bush"], food: "carrots" },
  { noun: "bear", plural: "bears", home: "in a cave on the mountain", doing: ["climbed a tree", "looked for honey", "scratched its back on a tree", "caught a fish in the river"], food: "honey" },
  { noun: "cat", plural: "cats", home: "in a warm house in the town", doing: ["chased a ball of string", "curled up in the sun", "licked its soft paws", "stretched and yawned"], food: "fish" },
  { noun: "dog", plural: "dogs", home: "in a little house with a red door", doing: ["wagged its tail", "ran after a stick", "dug a hole in the yard", "barked at a passing truck"], food: "bones" },
  { noun: "puppy", plural: "puppies", home: "in a basket by the fire", doing: ["chased its tail", "rolled in the grass", "licked everyone on the nose", "tugged at a sock"], food: "bones" },
  { noun: "kitten", plural: "kittens", home: "in a soft box in the kitchen", doing: ["played with a ball of yarn", "took a nap", "pounced on a leaf", "climbed into a basket"], food: "milk" },
  { noun: "mouse", plural: "mice", home: "in a tiny hole in the wall", doing: ["ran along the floor", "looked for cheese", "nibbled a piece of cheese", "scurried under the door"], food: "cheese" },
  { noun: "owl", plural: "owls", home: "in a hole in an old oak tree", doing: ["flew over the trees", "sat on a branch", "blinked its big round eyes", "hooted softly in the night"], food: "mice" },
  { noun: "bird", plural: "birds", home: "in a nest at the top of a tree", doing: ["sang a sweet song", "flew across the sky", "built a nest of twigs", "pecked at some crumbs"], food: "seeds" },
  { noun: "duck", plural: "ducks", home: "by the pond", doing: ["swam in the pond", "splashed in the water", "waddled to the water", "dipped its head under the water"], food: "bread" },
  { noun: "frog", plural: "frogs", home: "on a lily pad in the pond", doing: ["jumped into the water", "sat on a lily pad", "caught a fly with its tongue", "croaked a happy song"], food: "flies" },
  { noun: "pig", plural: "pigs", home: "on a farm near the hill", doing: ["rolled in the mud", "ran around the barn", "sniffed around for food", "snorted and wiggled its tail"], food: "apples" },
  { noun: "cow", plural: "cows", home: "on a big farm", doing: ["ate the green grass", "walked in the field", "swished its long tail", "lay down in the shade"], food: "grass" },
  { noun: "horse", plural: "horses", home: "in a barn on a farm", doing: ["ran across the field", "ate some hay", "trotted around the field", "shook its long mane"], food: "hay" },
  { noun: "lion", plural: "lions", home: "on the wide plains", doing: ["gave a loud roar", "lay in the sun", "shook its golden mane", "watched the plains from a rock"], food: "meat" },
  { noun: "tiger", plural: "tigers", home: "in the jungle", doing: ["walked through the jungle", "took a long nap", "crept through the tall grass", "splashed across a stream"], food: "meat" },
  { noun: "elephant", plural: "elephants", home: "near a big river", doing: ["sprayed water with its trunk", "walked slowly", "flapped its big ears", "picked up a log with its trunk"], food: "leaves" },
  { noun: "monkey", plural: "monkeys", home: "in the tall trees of the jungle", doing: ["swung from branch to branch", "ate a banana", "made funny faces", "jumped from tree to tree"], food: "bananas" },
  { noun: "squirrel", plural: "squirrels", home: "in a tall tree in the park", doing: ["ran up a tree", "hid a nut in the ground", "flicked its bushy tail", "cracked open an acorn"], food: "nuts" },
  { noun: "deer", plural: "deer", home: "in the quiet woods", doing: ["ran into the woods", "drank from the stream", "nibbled some tender leaves", "leaped over a fallen tree"], food: "leaves" },
  { noun: "turtle", plural: "turtles", home: "by the lake", doing: ["walked very slowly", "hid in its shell", "sat on a warm rock", "swam slowly across the pond"], food: "leaves" },
  { noun: "butterfly", plural: "butterflies", home: "in a garden full of flowers", doing: ["flew from flower to flower", "rested on a leaf", "fluttered its bright wings", "landed on a daisy"], food: "nectar" },
  { noun: "bee", plural: "bees", home: "in a hive near the garden", doing: ["buzzed around the flowers", "made sweet honey", "carried pollen to the hive", "danced in the air"], food: "nectar" },
  { noun: "ladybug", plural: "ladybugs", home: "on a big green leaf", doing: ["crawled up a flower", "opened its wings", "walked along a twig", "flew away home"], food: "tiny bugs" },
  { noun: "hen", plural: "hens", home: "in a coop on the farm", doing: ["laid an egg", "pecked at the ground", "scratched in the dirt", "sat on her nest"], food: "seeds" },
  { noun: "chick", plural: "chicks", home: "on a farm with its mother", doing: ["followed its mother", "said peep", "chirped for its mother", "hid under a wing"], food: "seeds" },
  { noun: "sheep", plural: "sheep", home: "on a green hill", doing: ["ate grass on the hill", "said baa", "grazed with the flock", "lay down in the soft grass"], food: "grass" },
  { noun: "lamb", plural: "lambs", home: "in a field on the farm", doing: ["jumped in the grass", "stayed close to its mother", "skipped after its mother", "bleated softly"], food: "grass" },
  { noun: "goat", plural: "goats", home: "on a rocky hill", doing: ["climbed up a big rock", "ate some weeds", "nibbled at a fence post", "jumped onto a rock"], food: "grass" },
  { noun: "wolf", plural: "wolves", home: "deep in the forest", doing: ["howled at the moon", "ran through the snow", "sniffed the cold wind", "ran with the pack"], food: "meat" },
  { noun: "penguin", plural: "penguins", home: "on the cold ice", doing: ["slid on its belly", "swam in the cold water", "waddled across the ice", "dove into the sea"], food: "fish" },
  { noun: "giraffe", plural: "giraffes", home: "on the wide plains", doing: ["ate leaves from a tall tree", "stretched its long neck", "bent down to drink", "looked over the tall trees"], food: "leaves" },
  { noun: "zebra", plural: "zebras", home: "on the grassy plains", doing: ["ran with its friends", "ate the tall grass", "swished its striped tail", "galloped across the plains"], food: "grass" },
  { noun: "panda", plural: "pandas", home: "in a bamboo forest", doing: ["ate some bamboo", "rolled down a hill", "climbed a small tree", "munched on some leaves"], food: "bamboo" },
  { noun: "koala", plural: "koalas", home: "in a tall tree", doing: ["hugged a branch", "slept all day", "yawned a big yawn", "held on tight to a branch"], food: "leaves" },
  { noun: "hedgehog", plural: "hedgehogs", home: "under a pile of leaves", doing: ["rolled into a ball", "looked for bugs", "sniffed the damp ground", "curled up for a nap"], food: "bugs" },
  { noun: "otter", plural: "otters", home: "by the river", doing: ["floated on its back", "played in the river", "cracked a shell on a stone", "slid down a muddy bank"], food: "fish" },
  { noun: "beaver", plural: "beavers", home: "in a lodge on the river", doing: ["cut down a small tree", "built a dam", "slapped its tail on the water", "carried a branch in its mouth"], food: "wood" },
  { noun: "raccoon", plural: "raccoons", home: "in a hollow log", doing: ["washed its food in the stream", "climbed a fence", "peeked out of a log", "looked for food at night"], food: "berries" },
  { noun: "snail", plural: "snails", home: "under a wet leaf", doing: ["moved very slowly", "hid in its shell", "left a shiny trail", "climbed up a flower pot"], food: "leaves" },
  { noun: "dinosaur", plural: "dinosaurs", home: "in a green valley", doing: ["stomped across the valley", "gave a big roar", "munched on tall ferns", "stretched its long neck"], food: "leaves" },
  { noun: "dragon", plural: "dragons", home: "in a cave on a high mountain", doing: ["flew over the hills", "blew a puff of smoke", "flapped its huge wings", "curled up on a pile of gold"], food: "apples" },
  { noun: "unicorn", plural: "unicorns", home: "in a magic forest", doing: ["ran across a rainbow", "shook its shiny mane", "galloped through the meadow", "sparkled in the sunlight"], food: "apples" },
  { noun: "whale", plural: "whales", home: "in the deep blue sea", doing: ["swam through the waves", "sang a long song", "blew water high into the air", "dove deep into the sea"], food: "fish" },
  { noun: "dolphin", plural: "dolphins", home: "in the warm sea", doing: ["jumped out of the water", "swam very fast", "played with the waves", "clicked and whistled"], food: "fish" },
  { noun: "seal", plural: "seals", home: "on a rock by the sea", doing: ["clapped its flippers", "swam in the waves", "barked from a rock", "rolled over in the sand"], food: "fish" },
  { noun: "crab", plural: "crabs", home: "on the sandy beach", doing: ["walked sideways", "hid under a rock", "waved its big claws", "dug into the wet sand"], food: "tiny fish" },
  { noun: "parrot", plural: "parrots", home: "in the jungle", doing: ["said hello", "flew to a high branch", "flapped its colorful wings", "repeated a funny word"], food: "seeds" },
  { noun: "swan", plural: "swans", home: "on the quiet lake", doing: ["swam across the lake", "spread its white wings", "tucked its head under its wing", "glided over the water"], food: "plants" },
  { noun: "goose", plural: "geese", home: "by the pond on the farm", doing: ["honked very loudly", "waddled to the pond", "flapped its wings", "chased a little dog"], food: "grass" },
  { noun: "camel", plural: "camels", home: "in the hot desert", doing: ["walked over the sand", "drank a lot of water", "knelt down to rest", "walked for many miles"], food: "plants" },
  { noun: "kangaroo", plural: "kangaroos", home: "on the dry plains", doing: ["hopped very high", "carried its baby", "boxed with a friend", "jumped over a bush"], food: "grass" },
  { noun: "mole", plural: "moles", home: "in a tunnel under the garden", doing: ["dug a long tunnel", "poked its nose out", "dug deep into the soil", "sniffed for worms"], food: "worms" },
  { noun: "badger", plural: "badgers", home: "in a burrow in the woods", doing: ["dug in the dirt", "walked in the moonlight", "sniffed along the path", "made a cozy bed of leaves"], food: "worms" },
];

export const ADJ_CHARACTER: readonly string[] = [
  "little", "small", "happy", "kind", "brave", "curious", "shy", "funny", "clever", "silly", "friendly", "gentle",
  "playful", "sleepy", "young", "quiet", "busy", "cheerful", "careful", "smart", "strong", "lazy",
  "grumpy", "proud", "lonely", "cute", "jolly", "bold", "sweet", "eager", "polite", "noisy", "merry", "helpful",
  "thoughtful", "lively", "honest", "wise", "hungry", "caring", "cheeky", "restless", "dreamy", "nervous", "gentle",
];

/** Adjectives for animals only. */
export const ADJ_ANIMAL: readonly string[] = ["fluffy", "tiny", "furry", "spotted", "striped", "fuzzy", "speedy", "chubby", "scruffy"];

/** Places with the preposition that goes before them. */
export interface Place {
  readonly at: string;
  readonly name: string;
  /** Things seen there, with an article: "a tall tree". */
  readonly sights: readonly string[];
}

export const PLACES: readonly Place[] = [
  { at: "in", name: "the park", sights: ["a big swing", "a tall slide", "a pond with ducks", "a bench under a tree", "a merry fountain", "kids flying kites"] },
  { at: "in", name: "the forest", sights: ["tall trees", "a little stream", "a mossy log", "red mushrooms", "a family of deer", "a woodpecker"] },
  { at: "in", name: "the woods", sights: ["an old oak tree", "a quiet path", "a pile of leaves", "a hollow log", "a little rabbit hole", "wild berries"] },
  { at: "in", name: "the garden", sights: ["pretty flowers", "a row of carrots", "a little fence", "a watering can", "a scarecrow", "ripe tomatoes"] },
  { at: "at", name: "the beach", sights: ["soft sand", "big waves", "shiny shells", "a red boat", "a sand castle", "seagulls"] },
  { at: "on", name: "the farm", sights: ["a red barn", "a big tractor", "many cows", "a muddy pen", "baby chicks", "a haystack"] },
  { at: "at", name: "the zoo", sights: ["a tall giraffe", "a sleepy lion", "funny monkeys", "a big elephant", "colorful parrots", "a sleepy bear"] },
  { at: "at", name: "school", sights: ["a big playground", "many desks", "a colorful map", "a box of crayons"] },
  { at: "by", name: "the lake", sights: ["blue water", "a small dock", "white swans", "green reeds", "a rowing boat", "fish jumping"] },
  { at: "by", name: "the river", sights: ["fast water", "smooth stones", "a wooden bridge", "a fishing boat", "a heron", "rushing water"] },
  { at: "by", name: "the pond", sights: ["green frogs", "lily pads", "a family of ducks", "little fish", "a dragonfly", "cattails"] },
  { at: "in", name: "the meadow", sights: ["yellow flowers", "tall grass", "busy bees", "a butterfly", "daisies", "a grasshopper"] },
  { at: "in", name: "the field", sights: ["golden wheat", "a scarecrow", "a big hay bale", "a flock of birds"] },
  { at: "on", name: "the hill", sights: ["a lone tree", "a view of the town", "soft green grass", "windy sky"] },
  { at: "in", name: "the village", sights: ["little houses", "a bakery", "a well", "a busy market"] },
  { at: "in", name: "the town", sights: ["busy streets", "a toy shop", "a clock tower", "a fountain"] },
  { at: "at", name: "the market", sights: ["fresh fruit", "colorful hats", "warm bread", "baskets of apples", "juicy melons", "a flower stall"] },
  { at: "at", name: "the library", sights: ["rows of books", "a cozy chair", "a big table", "picture books", "a sleepy cat", "a globe"] },
  { at: "at", name: "the playground", sights: ["a sandbox", "a merry slide", "monkey bars", "a seesaw"] },
  { at: "in", name: "the backyard", sights: ["a tree house", "a little pool", "a swing set", "a dog house"] },
  { at: "in", name: "the kitchen", sights: ["a warm oven", "a bowl of fruit", "a big pot", "fresh cookies"] },
  { at: "at", name: "the bakery", sights: ["fresh bread", "sweet cakes", "warm buns", "a tray of cookies"] },
  { at: "in", name: "the jungle", sights: ["huge leaves", "loud birds", "long vines", "a waterfall", "a parrot", "a sleepy sloth"] },
  { at: "on", name: "the island", sights: ["palm trees", "white sand", "a little hut", "blue water"] },
  { at: "at", name: "the museum", sights: ["old bones", "shiny gems", "big paintings", "a model of a ship", "a dinosaur skeleton", "a golden crown"] },
  { at: "in", name: "the orchard", sights: ["apple trees", "a ladder", "baskets of pears", "ripe plums"] },
  { at: "in", name: "the valley", sights: ["a winding stream", "green hills", "a little cottage", "wild flowers"] },
  { at: "on", name: "the mountain", sights: ["tall rocks", "white snow", "a narrow path", "a mountain goat", "an eagle", "a cold lake"] },
  { at: "at", name: "the toy shop", sights: ["shiny toy cars", "soft teddy bears", "a wooden train", "bright kites", "a jack in the box", "a rocking horse"] },
  { at: "in", name: "the snow", sights: ["a snowman", "icy trees", "a sled", "soft white snow", "icicles", "a frozen pond"] },
];

/** Things a character can own; `[noun, adjectives that fit]`. */
export const THINGS: readonly (readonly [string, readonly string[]])[] = [
  ["ball", ["red", "blue", "big", "bouncy", "shiny"]], ["kite", ["red", "yellow", "big", "colorful"]],
  ["doll", ["pretty", "soft", "little", "old"]], ["teddy bear", ["brown", "soft", "fluffy", "old"]],
  ["toy car", ["red", "fast", "little", "shiny"]], ["toy train", ["blue", "wooden", "long", "little"]],
  ["truck", ["yellow", "big", "red", "toy"]], ["book", ["new", "big", "favorite", "old"]],
  ["hat", ["red", "blue", "warm", "funny", "new"]], ["scarf", ["warm", "long", "green", "striped"]],
  ["blanket", ["soft", "warm", "blue", "cozy"]], ["balloon", ["red", "big", "yellow", "shiny"]],
  ["drum", ["little", "loud", "red", "new"]], ["whistle", ["shiny", "silver", "little", "loud"]],
  ["puzzle", ["big", "new", "hard", "colorful"]], ["robot", ["shiny", "little", "silver", "funny"]],
  ["boat", ["little", "wooden", "red", "toy"]], ["bike", ["new", "red", "blue", "fast"]],
  ["wagon", ["red", "little", "wooden", "old"]], ["shell", ["pink", "shiny", "pretty", "big"]],
  ["rock", ["smooth", "shiny", "round", "gray"]], ["feather", ["blue", "long", "soft", "white"]],
  ["basket", ["little", "wooden", "round", "brown"]], ["map", ["old", "big", "secret", "paper"]],
  ["key", ["golden", "little", "shiny", "old"]], ["ring", ["shiny", "golden", "little", "silver"]],
  ["bell", ["little", "golden", "shiny", "silver"]], ["lamp", ["little", "yellow", "bright", "old"]],
  ["clock", ["old", "round", "big", "little"]], ["picture", ["pretty", "big", "colorful", "new"]],
  ["umbrella", ["yellow", "big", "red", "purple"]], ["coat", ["warm", "blue", "new", "green"]],
  ["bucket", ["red", "little", "blue", "yellow"]], ["shovel", ["little", "red", "green", "blue"]],
  ["jar", ["glass", "big", "little", "empty"]], ["pillow", ["soft", "fluffy", "white", "big"]],
  ["crown", ["golden", "shiny", "little", "paper"]], ["wand", ["magic", "shiny", "little", "silver"]],
  ["coin", ["shiny", "golden", "old", "silver"]], ["marble", ["blue", "shiny", "glass", "green"]],
  ["necklace", ["pretty", "shiny", "pink", "golden"]], ["sweater", ["warm", "red", "soft", "new"]],
  ["backpack", ["blue", "new", "big", "green"]], ["flute", ["little", "silver", "wooden", "shiny"]],
  ["spoon", ["little", "silver", "wooden", "big"]], ["cup", ["blue", "little", "red", "yellow"]],
  ["jump rope", ["pink", "long", "new", "striped"]], ["spinning top", ["red", "wooden", "little", "shiny"]],
  ["paint box", ["new", "big", "colorful", "little"]], ["magnifying glass", ["big", "round", "old", "shiny"]],
  ["flashlight", ["little", "yellow", "bright", "blue"]], ["rocking horse", ["wooden", "old", "painted", "little"]],
  ["sailboat", ["little", "white", "toy", "blue"]], ["harmonica", ["shiny", "little", "silver", "old"]],
  ["music box", ["little", "old", "pretty", "wooden"]], ["toy rocket", ["silver", "shiny", "red", "fast"]],
  ["sticker book", ["new", "colorful", "big", "little"]], ["lunch box", ["blue", "red", "shiny", "new"]],
  ["pair of boots", ["red", "yellow", "new", "muddy"]], ["pair of mittens", ["warm", "red", "woolly", "soft"]],
  ["crayon box", ["new", "big", "colorful", "little"]], ["snow globe", ["little", "glass", "pretty", "shiny"]],
  ["toy boat", ["red", "little", "wooden", "blue"]], ["stuffed rabbit", ["soft", "white", "old", "fluffy"]],
];

export const FOODS: readonly string[] = [
  "apples", "bananas", "cookies", "cake", "bread", "cheese", "carrots", "honey", "soup", "pizza", "sandwiches",
  "candy", "ice cream", "berries", "cherries", "grapes", "corn", "peas", "nuts", "jam", "muffins", "pancakes",
  "lemonade", "juice", "rice", "noodles", "popcorn", "pears", "peaches", "plums", "oranges", "melon", "cupcakes",
  "pie", "strawberries", "toast", "eggs", "milk", "crackers", "pudding", "blueberries", "apricots", "waffles",
  "biscuits", "potatoes", "tomatoes", "cucumbers", "watermelon", "pretzels", "raisins", "buns", "yogurt", "oatmeal",
  "pickles", "dumplings", "chocolate", "fudge", "lollipops", "peanuts", "walnuts", "figs", "dates",
];

export const COLORS: readonly string[] = ["red", "blue", "green", "yellow", "orange", "purple", "pink", "brown", "black", "white", "gray"];

export const FEELINGS_GOOD: readonly string[] = ["happy", "glad", "excited", "proud", "joyful", "cheerful", "thankful"];
export const FEELINGS_BAD: readonly string[] = ["sad", "worried", "upset", "scared", "lonely", "unhappy", "afraid"];

export const TIME_OPENERS: readonly string[] = [
  "One day", "One sunny day", "One morning", "One sunny morning", "One afternoon", "One evening", "Late one afternoon",
  "One cold winter day", "One warm summer day", "One rainy day", "One windy day", "Early one morning", "One fine spring day",
  "One autumn day", "After breakfast", "After school", "On a bright morning", "On a quiet afternoon",
];

export const ADVERBS: readonly string[] = [
  "quickly", "slowly", "happily", "carefully", "softly", "loudly", "gently", "quietly", "bravely", "proudly", "kindly",
  "gladly", "sadly", "patiently",
];

/**
 * Verb forms: base, past, -ing, third person. Only the first word of a phrase is conjugated
 * ("look for the ball" -> "looked for the ball").
 */
const IRREGULAR_PAST: Record<string, string> = {
  run: "ran", swim: "swam", climb: "climbed", sing: "sang", draw: "drew", read: "read", build: "built", fly: "flew",
  dig: "dug", ride: "rode", hide: "hid", make: "made", go: "went", come: "came", see: "saw", find: "found", eat: "ate",
  drink: "drank", give: "gave", take: "took", get: "got", have: "had", think: "thought", say: "said", tell: "told",
  sit: "sat", stand: "stood", fall: "fell", feel: "felt", know: "knew", meet: "met", bring: "brought", buy: "bought",
  catch: "caught", throw: "threw", win: "won", lose: "lost", sleep: "slept", keep: "kept", leave: "left", hold: "held",
  blow: "blew", grow: "grew", swing: "swung", write: "wrote", begin: "began", wake: "woke", hear: "heard", put: "put",
  cut: "cut", shine: "shone", sweep: "swept", spin: "spun", slide: "slid", do: "did", be: "was", skate: "skated",
  bake: "baked", dance: "danced", make_: "made", wear: "wore", sell: "sold", send: "sent", spend: "spent", teach: "taught",
  light: "lit", feed: "fed", lead: "led", become: "became", forget: "forgot", understand: "understood", stick: "stuck",
  break: "broke", choose: "chose", shake: "shook", drive: "drove", bite: "bit", ring: "rang", sink: "sank", hang: "hung",
};
const DOUBLE_FINAL = new Set(["sled", "run", "swim", "dig", "hop", "skip", "sit", "win", "plan", "stop", "clap", "drop", "hug", "nap", "pat", "trip", "jog", "get", "put", "cut", "begin", "spin", "shop", "chat", "drum", "grab", "rub", "tap", "wag"]);

export function past(phrase: string): string {
  const [verb, ...rest] = phrase.split(" ");
  const v = verb as string;
  let p = IRREGULAR_PAST[v];
  if (p === undefined) {
    if (v.endsWith("e")) p = `${v}d`;
    else if (/[^aeiou]y$/.test(v)) p = `${v.slice(0, -1)}ied`;
    else if (DOUBLE_FINAL.has(v)) p = `${v}${v.at(-1)}ed`;
    else p = `${v}ed`;
  }
  return [p, ...rest].join(" ");
}

export function ing(phrase: string): string {
  const [verb, ...rest] = phrase.split(" ");
  const v = verb as string;
  let g: string;
  if (v === "be") g = "being";
  else if (v === "see") g = "seeing";
  else if (v.endsWith("ie")) g = `${v.slice(0, -2)}ying`;
  else if (v.endsWith("e") && !v.endsWith("ee")) g = `${v.slice(0, -1)}ing`;
  else if (DOUBLE_FINAL.has(v)) g = `${v}${v.at(-1)}ing`;
  else g = `${v}ing`;
  return [g, ...rest].join(" ");
}

export function third(phrase: string): string {
  const [verb, ...rest] = phrase.split(" ");
  const v = verb as string;
  let t: string;
  if (v === "have") t = "has";
  else if (v === "be") t = "is";
  else if (v === "do" || v === "go") t = `${v}es`;
  else if (/(s|sh|ch|x|z)$/.test(v)) t = `${v}es`;
  else if (/[^aeiou]y$/.test(v)) t = `${v.slice(0, -1)}ies`;
  else t = `${v}s`;
  return [t, ...rest].join(" ");
}

/** Activities a character likes (base form phrases). */
export const ACTIVITIES: readonly string[] = [
  "play outside", "run in the grass", "jump in puddles", "swim in the lake", "climb trees", "dance to music",
  "sing songs", "paint pictures", "draw with crayons", "read books", "build towers with blocks", "bake cookies",
  "fly a kite", "dig in the sand", "ride a bike", "hop on one foot", "skip rope", "explore the woods",
  "collect shells", "pick flowers", "watch the clouds", "look at the stars", "count the birds", "splash in the water",
  "slide down the slide", "swing on the swing", "play hide and seek", "sail little boats", "help in the garden",
  "plant seeds", "walk in the park", "make sand castles", "play with blocks", "chase butterflies", "play the drum",
  "listen to stories", "make mud pies", "roll down the hill", "feed the ducks", "play ball",
  "blow bubbles", "build forts out of pillows", "play dress up", "wade in the stream", "watch the sunset",
  "jump on the bed", "whistle a tune", "tell jokes", "play the piano", "bounce a ball", "pick berries", "visit the library",
  "play tag", "race toy cars", "make paper boats", "look for frogs", "climb the rocks", "skate on the ice", "sled down hills",
  "hunt for acorns", "gather pretty leaves", "make daisy chains", "paint with fingers", "play in the rain",
];

/** Goals for the try-and-succeed plot: [base phrase, why it was hard]. */
export const GOALS: readonly (readonly [string, readonly string[]])[] = [
  ["climb the big tree", ["the first branch was too high", "the bark was very slippery"]],
  ["fly a kite", ["there was no wind", "the string got tangled"]],
  ["swim across the pond", ["the water was cold", "the pond looked very big"]],
  ["reach the red apple at the top of the tree", ["the apple was too high", "the ladder was too short"]],
  ["build a tall tower of blocks", ["the tower kept falling down", "the blocks were wobbly"]],
  ["win the race in the park", ["the other runners were very fast", "the path was long"]],
  ["ride a bike without help", ["the bike was wobbly", "it was hard to keep going straight"]],
  ["make a big sand castle", ["the waves kept washing it away", "the sand was too dry"]],
  ["catch a fish in the river", ["the fish were too fast", "the fish did not bite"]],
  ["bake a cake", ["the first cake was flat", "the oven was too hot"]],
  ["jump over the puddle", ["the puddle was very wide", "the ground was slippery"]],
  ["find the biggest shell on the beach", ["the beach was very long", "the waves hid the shells"]],
  ["learn to whistle", ["no sound came out", "it was harder than it looked"]],
  ["paint a picture of the sea", ["the colors ran together", "the paper got wet"]],
  ["tie the laces of new shoes", ["the laces were very long", "the knot kept slipping"]],
  ["skate on the frozen pond", ["the ice was very slippery", "the skates felt strange"]],
  ["plant a sunflower taller than the fence", ["the seeds did not grow at first", "the birds ate the seeds"]],
  ["sing a song for the whole class", ["the words were hard to remember", "the class was very big"]],
  ["catch the bright red ball", ["the ball flew too high", "the ball kept bouncing away"]],
  ["count all the stars in the sky", ["there were too many stars", "the clouds kept hiding them"]],
  ["read a big book all alone", ["some words were very long", "the book had many pages"]],
  ["carry a big basket of apples home", ["the basket was very heavy", "the path went up a hill"]],
];

/** Problems a friend can have, with how to help: [problem sentence end, what they need, help]. */
export interface Trouble {
  /** Past tense, after the friend's name: "was stuck in a tree". */
  readonly state: string;
  /** The friend's words: "I am stuck and I cannot get down." */
  readonly line: string;
  /** The helper's action, past tense: "held out a long stick". */
  readonly help: string;
  readonly after: string;
}

export const TROUBLES: readonly Trouble[] = [
  { state: "was stuck high up in a tree", line: "I am stuck and I cannot get down.", help: "brought a long ladder", after: "climbed down safely" },
  { state: "had lost the way home", line: "I do not know the way home.", help: "showed the way back along the path", after: "got home before dark" },
  { state: "was very hungry", line: "I have not eaten all day.", help: "shared some food", after: "felt much better" },
  { state: "had no one to play with", line: "Nobody wants to play with me.", help: "asked the friend to play", after: "laughed and played all day" },
  { state: "had a broken toy", line: "My toy is broken.", help: "fixed the toy with some tape", after: "played with the toy again" },
  { state: "was cold and wet from the rain", line: "I am so cold.", help: "shared a warm blanket", after: "felt warm and dry" },
  { state: "could not find a lost ball", line: "I lost my ball.", help: "looked everywhere for the ball", after: "was happy to have the ball back" },
  { state: "had hurt a leg", line: "My leg hurts.", help: "helped the friend walk home", after: "rested and got better" },
  { state: "was scared of the dark", line: "It is so dark, and I am scared.", help: "brought a little lamp", after: "was not scared anymore" },
  { state: "could not reach the water", line: "I am thirsty, but the water is too far.", help: "brought a cup of water", after: "drank and said thank you" },
  { state: "had dropped all the apples", line: "All my apples fell on the ground.", help: "picked up the apples", after: "carried the basket home" },
  { state: "was stuck in the mud", line: "I am stuck in the mud.", help: "pulled the friend out of the mud", after: "washed off in the pond" },
  { state: "had a kite caught in a tree", line: "My kite is caught in the branches.", help: "shook the branch until the kite fell", after: "flew the kite again" },
  { state: "could not carry a heavy box", line: "This box is too heavy for me.", help: "helped carry the box", after: "put the box down at home" },
  { state: "had a flat tire on a bike", line: "My bike has a flat tire.", help: "pumped air into the tire", after: "rode away with a smile" },
  { state: "was sad because it was raining", line: "I wanted to play outside, but it is raining.", help: "played a fun game inside with the friend", after: "forgot all about the rain" },
  { state: "had spilled paint on a picture", line: "I spilled paint on my picture.", help: "turned the spill into a pretty flower", after: "loved the new picture" },
];

/** Things made together: [phrase, steps (past tense), result]. */
export const PROJECTS: readonly (readonly [string, readonly string[], string])[] = [
  ["bake cookies", ["mixed flour, sugar and butter in a big bowl", "rolled the dough into little round pieces", "put them in the warm oven"], "The cookies smelled sweet and tasted even better."],
  ["make a birthday card", ["folded a piece of paper", "drew a big red heart on the front", "wrote a kind message inside"], "Everyone smiled when they saw the card."],
  ["paint a picture", ["put on old shirts", "painted a blue sky and a yellow sun", "added green trees and a little house"], "They hung the picture on the wall."],
  ["build a sand castle", ["filled a bucket with wet sand", "made four tall towers", "dug a moat around the castle"], "It was the best castle on the beach."],
  ["plant a garden", ["dug small holes in the dirt", "put a seed in each hole", "watered the seeds every day"], "Soon little green plants grew up."],
  ["build a tree house", ["carried wood up the tree", "made a floor and four walls", "put a little roof on top"], "The tree house was a perfect place to read."],
  ["make a snowman", ["rolled a big ball of snow", "put a smaller ball on top", "gave it a carrot nose and a warm hat"], "The snowman looked very happy."],
  ["make soup", ["washed carrots and potatoes", "cut them into small pieces", "cooked them in a big pot"], "The soup was hot and very good."],
  ["make a bird house", ["cut a small door in a box", "painted the box green", "hung it on a branch"], "The next day a little bird moved in."],
  ["make a kite", ["tied two sticks together", "covered them with bright paper", "added a long tail and some string"], "The kite flew high in the wind."],
  ["make pancakes", ["cracked two eggs into a bowl", "stirred in milk and flour", "cooked the pancakes in a hot pan"], "They ate the pancakes with honey and berries."],
  ["build a fort", ["pulled the cushions off the sofa", "put a big blanket over two chairs", "filled the fort with pillows and books"], "It was the coziest fort in the whole world."],
  ["make lemonade", ["squeezed six yellow lemons", "added water and a little sugar", "poured it into tall glasses with ice"], "The lemonade was cold and sweet."],
  ["make a puppet show", ["made puppets out of old socks", "painted a little stage", "practiced a funny play"], "Everyone clapped at the end of the show."],
];

export const PARENTS: readonly (readonly [string, Gender])[] = [["mom", "girl"], ["dad", "boy"], ["grandma", "girl"], ["grandpa", "boy"]];

export const FEARS: readonly (readonly [string, string, string])[] = [
  // [what, why it is fine, brave act]
  ["the dark", "The dark is just the same room without the light.", "turned off the lamp and went to sleep"],
  ["thunder", "Thunder is just a loud noise from the clouds. It cannot hurt you.", "counted the seconds between the flashes"],
  ["the big dog next door", "He is a friendly dog. He just wants to play.", "gave the dog a pat on the head"],
  ["the deep water", "You can stay where the water is not deep, and I will be with you.", "put a foot in the water and then swam a little"],
  ["the tall slide", "The slide is safe, and I will wait for you at the bottom.", "went down the slide with a big smile"],
  ["the first day of school", "You will meet new friends and learn new things.", "walked into the classroom and said hello"],
  ["the noise in the attic", "It is only the wind in the old roof.", "went up to the attic with a lamp"],
  ["bees", "Bees are busy with the flowers. If you stay calm, they will leave you alone.", "sat still and watched the bees work"],
  ["the doctor", "The doctor is kind and wants to help you feel well.", "sat on the big chair and said hello to the doctor"],
  ["the wind", "The wind is just air moving. It makes the kites fly.", "went outside and flew a kite in the wind"],
  ["spiders", "Most spiders are small and shy. They help by eating flies.", "watched a little spider spin a web"],
  ["the loud train", "The train is loud, but it is taking people home.", "waved at the train as it went by"],
];

export function cap(text: string): string {
  return text.length === 0 ? text : text[0]!.toUpperCase() + text.slice(1);
}

/** "a" or "an" for the phrase that follows. */
export function article(phrase: string): string {
  const w = phrase.toLowerCase();
  if (/^(uni|use|usu|one|eu)/.test(w)) return "a";
  if (/^(hour|honest|honor)/.test(w)) return "an";
  return /^[aeiou]/.test(w) ? "an" : "a";
}

export function withArticle(phrase: string): string {
  return `${article(phrase)} ${phrase}`;
}

const ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
  "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"];
const TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];

/** 0..199 in words ("forty two"; the hyphen is left out so each part is a dictionary word). */
export function numberWord(n: number): string {
  if (n < 20) return ONES[n] as string;
  if (n < 100) return n % 10 === 0 ? (TENS[Math.floor(n / 10)] as string) : `${TENS[Math.floor(n / 10)]} ${ONES[n % 10]}`;
  const rest = n % 100;
  return rest === 0 ? `${ONES[Math.floor(n / 100)]} hundred` : `${ONES[Math.floor(n / 100)]} hundred and ${numberWord(rest)}`;
}

/** "a, b and c". */
export function list(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;
}
