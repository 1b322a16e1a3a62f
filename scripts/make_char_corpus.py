"""Write the character-level text corpus shipped as src/data/samples/char_corpus.txt.

About 420 kB of English prose written by this script from small grammars and word lists, for
the character-level masked model and the judge that tells real text from corrupted text
(`data=char_diffusion`, src/recipes/char_diffusion/windows.py). It is generated rather than collected, so
the repository can ship it and training needs no download. Six genres give it strong,
learnable regularities of spelling, agreement, punctuation, dates, numbers and money, while
the random choice of words keeps filling a masked span of a few characters a real task:

- a ship's log: daily entries with wind, sail, noon position, sightings and crew;
- a village almanac: a paragraph a month on rain, the glass, sun, moon, garden and farm;
- a cookbook: recipes with quantities and steps;
- a naturalist's notes on birds, flowers and butterflies;
- letters between recurring characters of the village;
- a market ledger whose sales, expenses and money in hand add up (pounds, shillings, pence).

Paragraphs of 3 to 8 sentences are separated by a blank line; the text is printable ASCII.
Deterministic (a fixed seed, the standard library only): run `python scripts/make_char_corpus.py`.
"""

from __future__ import annotations

import datetime
import math
import random
import re
import string
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "data" / "samples" / "char_corpus.txt"
SEED = 1841
TARGET_BYTES = 420_000
ALLOWED = set(string.ascii_letters + string.digits + " .,;:'\"-()?!\n")
DAY = datetime.timedelta(days=1)


def _table(text: str) -> list[list[str]]:
    """The records of a table written one a line, with fields separated by '|'."""
    return [line.split("|") for line in text.strip().splitlines()]


def _words(text: str) -> dict[str, list[str]]:
    """Word lists written as 'name: choice|choice' lines; a name may take several lines, and
    an indented line goes on with the last choice above it."""
    words: dict[str, list[str]] = {}
    name = ""
    for line in text.strip().splitlines():
        if line.startswith("  "):
            more = line.strip().split("|")
            words[name][-1] += " " + more[0]
            words[name] += more[1:]
        elif line and not line.startswith("#"):
            name, _, choices = line.partition(": ")
            words.setdefault(name, []).extend(choices.split("|"))
    return words


# The grammar: {name} takes a choice of WORDS[name] (or a slot the genre sets), itself filled
# in turn; {a_name} adds the article; {4-9} is a number, {n4-9} one in words, {o4-9} an ordinal.
WORDS = _words("""
months: January|February|March|April|May|June|July|August|September|October|November|December
weekdays: Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday
numbers: no|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen
first: John|William|George|Henry|Edward|Robert|James|Samuel|Walter|Arthur|Daniel|Joseph|Isaac
wfirst: Mary|Ann|Jane|Sarah|Emma|Alice|Hannah|Rose|Susan|Martha|Esther|Phoebe
surname: Barlow|Pike|Harlow|Fenwick|Thorne|Marsh|Whitlock|Penrose|Dunmore|Tucker|Sayer|Cole
man: {first} {surname}
woman: {wfirst} {surname}
farm: Home Farm|Mill Farm|Bramble Farm|Upper Hollow|Crossways|Long Acre|Rook's End|Church Farm
town: Fenbridge|Wickham|Stoke Ferris|Netherby|Marlow Cross
temper: mild|cold|wet|dry|windy|fair|grey|bright|raw|stormy|showery|changeable|dull|soft
point: north|north-east|east|south-east|south|south-west|west|north-west
event: fair on the green|ploughing match at {farm}|club walk|harvest supper at {farm}|sale at {farm}
event: flower show in the rectory garden|bell-ringers' dinner|cricket match against {town}
# The ship's log.
compass: north|north-north-east|north-east|east-north-east|east|east-south-east|south-east
compass: south-south-east|south|south-south-west|south-west|west-south-west|west|west-north-west
compass: north-west|north-north-west
forces: calm|light air|light breeze|gentle breeze|moderate breeze|fresh breeze|strong breeze
forces: near gale|gale|strong gale|storm
shorten: we took in the topgallant sails|we double-reefed the topsails|we furled the mainsail
shorten: we close-reefed the main topsail and sent down the royal yards|we handed the flying jib
spread: we shook out the reefs|we set the royals|we made all plain sail|we set the studding sails
spread: we loosed the topgallant sails|we set the main topmast staysail
trim: we kept her on her course|we trimmed the yards|we braced the yards round|we tacked ship
bell: one bell|two bells|three bells|four bells|five bells|six bells|seven bells|eight bells
watch: first watch|middle watch|morning watch|forenoon watch|afternoon watch
sky: Fine clear weather|The sky overcast and the air raw|Thick and rainy weather|A thick fog
sky: Squalls of hail and sleet|Hazy weather and a watery sun|Cloudy weather and a falling glass
sky: Passing showers and bright intervals|Heavy, driving rain|A hard, bright sky and a cold wind
sea: a long swell from the {quarter}|a short, steep sea|a heavy sea running|a smooth sea
sea: a confused cross sea|a moderate sea and some spray over the bows|a low swell and no sea
quarter: northward|southward|eastward|westward
craft: brig|schooner|barque|sloop|frigate|fishing lugger|full-rigged ship|revenue cutter|packet
bearing: on the lee bow|on the weather beam|hull down to windward|two points on the starboard bow
bearing: far astern|on the larboard quarter|right ahead|on the lee quarter
rank: seaman|ordinary seaman|boatswain|cook|ship's boy|second mate|sailmaker|carpenter's mate
mishap: was put on the sick list with a fever|returned to duty after {n2-6} days ill
mishap: cut his hand badly and was excused duty|fell from the fore yard and broke his arm
mishap: lost his grog for {n2-5} days for sleeping in his watch|complains of the toothache
task: mending the foresail|tarring down the rigging|scraping the decks|setting up the backstays
task: overhauling the cables|painting the boats|picking oakum|making spun yarn|airing the sails
sight: a shoal of porpoises playing about the bows|a whale blowing {bearing}|much weed afloat
sight: the loom of land {bearing}|a turtle asleep on the water|a great flock of gulls astern
log: {sky} in the {watch}, with {sea}.
log: At noon the latitude by observation was {lat} north and the longitude by account {lon} west.
log: Run since yesterday noon, {miles} miles on a course {course}.
log: At {bell} we sighted {a_craft} {bearing}, standing to the {quarter}.
log: At {bell} spoke the {other}, {3-40} days out from {other_from} and bound home,
  all well on board.
log: {man}, {rank}, {mishap}.
log: Employed the {gang} in {tasks}.
log: The carpenter sounded the well and found {4-30} inches of water; the pumps sucked
  after {5-40} minutes.
log: Opened a cask of {store}, number {3-60}, and found it {state}.
log: At {bell} in the {watch} we saw {sight}.
gang: watch|people|idlers|starboard watch|larboard watch
store: beef|pork|bread|peas|flour|rum
state: sound|short of weight|much decayed|in good order|sweet and sound
# The almanac.
time_to: It is time to|Now is the time to|Do not forget to|Take the first dry day to
sow_time: as soon as the soil works well|after the next rain|in the second week
sow_time: while the weather holds|early in the month
sow_where: in a warm border|in drills a foot apart|on a sheltered bed|under a hand-light|thinly
alm_open: {month} {year} came in {temper} and went out {temper}.
alm_open: {month} {year} was {a_temper} month on the whole, with the wind mostly {point}.
alm_open: The first days of {month} {year} were {temper} and the last {temper}.
alm: Rain fell on {n3-13} days, {1-4}.{1-9} inches in all (the most on the {o1-28}).
alm: The glass stood highest at 30.{10-65} inches on the {o1-14} and lowest at 29.{10-95}
  on the {o15-28}.
alm: The {event} was held on the {o1-28}, {event_end}.
alm: {saying_intro}, "{saying}"
alm: {man} of {farm} {news}.
event_end: and the weather held fine|though rain spoiled the afternoon
event_end: and the band played until dark
event_end: and {man} won the prize for his {prize}|and a great many people came in from {town}
prize: marrows|onions|honey|ewes|roses|cheese|hunter
news: took a swarm of bees from his orchard hedge on the {o1-28}|has dug a well {20-60} feet deep
news: has planted {n3-12} young apple trees|caught a pike of {5-19} pounds in the mill pond
news: has built a new cart shed on the road to {town}|has bought a grey mare at {town} fair
saying_intro: The old people say|As the shepherds have it|Remember the saying
saying_intro: They say in these parts
saying: Red sky at night, shepherd's delight; red sky in the morning, shepherd's warning.
saying: Rain before seven, fine before eleven.|A cold April the barn will fill.
saying: When the wind is in the east, it is neither good for man nor beast.
saying: March comes in like a lion and goes out like a lamb.|Clear moon, frost soon.
saying: Ne'er cast a clout till May be out.|So many fogs in March, so many frosts in May.
saying: Mackerel sky and mares' tails make lofty ships carry low sails.
saying: When the oak is before the ash, then you will only get a splash.
saying: Evening red and morning grey will set the traveller on his way.
saying: Onion skins very thin, mild winter coming in.|A swarm of bees in May is worth a load of hay.
# The cookbook: the steps of each dish, and how a recipe ends.
fruits_kind: apple|plum|damson|gooseberry|cherry|pear|blackberry|currant|quince|apricot
vegetables_kind: onion|leek|potato|carrot|turnip|parsnip|mushroom|shallot
style: plain|good|rich|country|family|cheap|quick|old-fashioned|farmhouse|Sunday|homely
take: Take|You will want|For this you need|Have ready
vessel: pie dish|deep basin|buttered dish|shallow dish|earthen pan
pot: stewpan|earthen jar|iron pot|covered jar|deep saucepan
oven: slow|moderate|brisk|quick|hot|steady
herb: thyme|parsley|sage|bay|marjoram|mint|savory
sieve: hair sieve|fine sieve|wire sieve|coarse sieve
tart1: Rub the butter into the flour with {tool} and mix it to a stiff paste with
  {n2-5} spoonfuls of {water}
tart1: Chop the butter small into the flour with {tool}, add {n2-5} tablespoons of {water}
  and knead it lightly
water: cold water|iced water|milk and water|water with a squeeze of lemon
tart2: Line {a_vessel} with the paste, fill it with the {fruits} and strew the sugar over them
tart2: Lay the {fruits} in {a_vessel}, sweeten them and cover them with the paste
tart3: Bake it in {a_oven} oven for {mins} minutes
tart3: Bake it for {mins} minutes, until the paste is {browned}
browned: golden|lightly browned|crisp|pale gold
spice: nutmeg|ginger|cinnamon|mace|mixed spice|salt
platter: hot dish|warm plate|large platter|deep dish|china dish
pudding1: Chop the suet very fine, mix it with the flour and a pinch of {spice}, and bind it
  with {eggs} and {n2-5} spoonfuls of milk
pudding1: Rub the suet into the flour with a pinch of {spice}, beat in {eggs} and add
  {n2-5} spoonfuls of cold water
pudding2: Line {a_vessel} with the paste, fill it with the {fruits} and sugar and put on
  a lid of paste
pudding2: Roll out the paste to the thickness of {thickness}, spread the {fruits} and sugar
  on it and roll it up, pinching the ends
pudding3: Tie a floured cloth over it, boil it in {a_pot} for {hours} and turn it out on {a_platter}
pudding3: Steam it for {hours} and turn it out on {a_platter}
thickness: half an inch|a quarter of an inch|a penny|a crown piece
crumble1: Lay the {fruits} in {a_vessel} with {n2-5} tablespoons of water and half the sugar
crumble1: Put the {fruits} into {a_vessel} and sprinkle them with a little of the sugar
crumble2: Rub the butter into the flour with {tool} until it looks like {crumbs}, then add
  the rest of the sugar
crumble2: Work the flour, butter and sugar together with {tool} until they look like {crumbs}
crumbs: coarse crumbs|fine breadcrumbs|rough gravel|oatmeal
tool: your fingers|a fork|two knives|the tips of your fingers
crumble3: Spread the crumbs over the {fruits} and bake in {a_oven} oven for {mins} minutes
crumble3: Cover the fruit thickly with the crumbs and bake it for {mins} minutes, until it
  is {browned}
fool1: Stew the {fruits} with the sugar and {n2-5} tablespoons of water until they are soft
fool1: Simmer the {fruits} gently with the sugar for {n5-12} minutes in {a_pot}
fool2: Rub the {fruits} through {a_sieve} and leave the pulp to cool in the {cool}
fool2: Press the stewed {fruits} through {a_sieve} and set the pulp by in the {cool}
cool: larder|dairy|cellar|coolest corner of the pantry
fool3: Stir the cream into the {fruit} pulp a little at a time and serve it {chilled}
fool3: Whip the cream, fold it into the {fruit} pulp and serve it {chilled}
chilled: very cold|the same day|in glasses|with sponge biscuits|with thin wafers
cake1: Beat the butter and sugar in {a_bowl} with {beater} for {n5-12} minutes, then beat in
  the eggs one at a time
cake1: Cream the butter with the sugar in {a_bowl} for {n5-12} minutes and add the eggs well beaten
cake2: Stir in the flour and the {fruits}, {cut}, with a little milk if the mixture is stiff
cake2: Add the flour by degrees and then the {fruits}, {cut}
cut: cut small|stoned and chopped|well washed|picked over|halved
cake3: Pour it into {a_tin} and bake it in {a_oven} oven for {mins} minutes
cake3: Bake it in {a_tin} for {mins} minutes in {a_oven} oven, until a skewer comes out clean
beater: a wooden spoon|a fork|your hand|a broad knife
bowl: warm basin|large bowl|earthen pan|mixing bowl
tin: buttered tin|lined cake tin|round tin|square tin|loaf tin
stew1: Cut the {meat} into neat pieces and roll them in flour seasoned with {seasoning}
stew1: Cut up the {meat}, dust the pieces with flour and fry them brown in {fat} over {a_fire} fire
seasoning: salt and pepper|pepper and a little mace|salt and a grate of nutmeg|salt and cayenne
fire: quick|gentle|clear|brisk|low
fat: a little dripping|hot lard|butter|bacon fat
stew2: Lay the pieces in {a_pot} with the {vegs}, sliced thick
stew2: Put the {vegs} into {a_pot}, with the {meat} on top
stew3: Pour on the water with a bunch of {herb}, cover closely and simmer for {hours}
stew3: Add the water, season with {herb} and let it stew gently for {hours}, skimming it
  now and then
pie1: {stew1}
pie2: Lay the pieces in {a_vessel} with the {vegs}, sliced, and pour in the water with
  a little {herb}
pie3: Cover it with the paste, brush it with milk and bake it in {a_oven} oven for {mins} minutes
pie3: Put on a crust of paste, make a hole in the middle and bake it for {mins} minutes
  in {a_oven} oven
soup1: Slice the {vegs} and fry them in the butter for {n5-10} minutes without letting them brown
soup1: Cut the {vegs} small and sweat them in the butter in {a_pot}
soup2: Add the {meat} and the stock, and simmer for {hours}
soup2: Pour on the stock with the {meat} and a sprig of {herb}, and simmer it for {hours}
soup3: Rub the soup through {a_sieve}, season it and serve it {hot}
soup3: Take out the {meat}, skim off the fat and send the soup to table {hot}
hot: very hot|with toasted bread|with a little cream stirred in|with sippets of fried bread
end: This {dish} will serve {n4-10} people at {meal}.|Enough for {n4-10} at {meal}, with {with}.
end: The {dish} is best eaten {when}, with {with}.
meal: dinner|supper|a harvest dinner|a family dinner|a Sunday dinner
when: warm|cold|the next day|as soon as it is made
sweet: cream|custard|a little brown sugar|fresh milk|a glass of sweet wine
savoury: boiled potatoes|crusty bread|mashed turnips|pickled cabbage|a glass of cider
# The naturalist's notes.
haunt_water: on the mill pond|along the brook below the church|in the reed beds by the mere
haunt_field: on the stubble at {farm}|over the water meadows|along the hedges of Long Acre
haunt_wood: in Hanger Wood|among the beeches on the hill|in the oak coppice at {farm}
haunt_garden: in the rectory garden|about the churchyard|in the orchard at {farm}
doing: feeding busily|sitting quite still|flying low over the ground|preening in the sun
doing: bathing in the shallows|searching for food|perched on a dead branch
doings: calling to one another|chasing one another|keeping close together|{doing}
daytime: this morning|at noon|towards dusk|after the rain|at first light|in the evening
weather: Wind {point}, {temper}, {wx}.|{temper}, the wind {point}, {wx}.
wx: with showers|cloudy|sunny|a little mist at dawn|a heavy dew|thunder in the afternoon
note: {n2-13} {birds} {haunt}, {doings}.
note: {a_bird} was {doing} {haunt} for {n2-13} minutes {daytime}.
note: The {bird} {haunt} was known at once by {looks}, and I heard its call, {call}, {daytime}.
note: I counted {n3-13} {birds} {haunt} ({count_note}).
note: {a_bird} flew past {haunt}, carrying {carry}.
note: Heard {a_bird} {haunt} {daytime}, {heard}.
count_note: more than last year|fewer than last year|most of them young birds|all keeping together
carry: a stick|a beakful of moss|a green caterpillar|a white feather|a long straw
heard: the first this year|though none was seen|for the best part of an hour|calling over and over
flower_note: The {flower} has been in flower {where} since the {o1-28}; its {colour} blossoms
  are {plenty} this year.
flower_note: Gathered {n3-13} {flowers} {where} for the schoolroom table, {colour} and fresh.
plenty: early|late|plentiful|few|fine|small
fly_note: Saw {a_butterfly} on the wing near {farm}, the {o1-6} this season.
fly_note: {a_butterfly} came to the flowers in the rectory garden {daytime}.
butterfly: brimstone|orange tip|peacock|red admiral|small tortoiseshell|meadow brown|common blue
# The letters.
womenfolk: Mother|little Lucy|Mrs. Tucker|Susan Barlow|Rose Whitlock|Mrs. Dunmore|Cousin Jane
menfolk: Father|Uncle Walter|old Mr. Pike|James Marsh|Arthur Penrose|Peter Hale|young Tom Marsh
someone: {womenfolk}|{menfolk}
buyer: Mrs. Fenwick|Mr. Hale|the Crown inn|Dr. Crane's cook|Mrs. Dunmore|Susan Barlow
buyer: a dealer from the town|the rectory kitchen|old Mr. Pike|Mrs. Tucker|the miller's wife
opening: thank you for your letter of|I was so glad of your letter of|many thanks for yours of
letter: {person} has had {ailment} since {weekday}, but Dr. Crane says {he} will soon be
  about again.
letter: We have had {temper} weather all week, and the {crop} in the garden {crop_state}.
letter: Could you send me {want} from {town}, if you go there before {weekday}?
letter: Have you heard from Thomas since the {ship} sailed for {port} on {sailed}?
letter: {person} sends {his} love, and asks whether you will come to us at {feast} by the
  {conveyance}.
letter: Butter is {butter} a pound at {town} market, and eggs {eggs} the dozen.
letter: How I wish you could have seen {someone} at the {event} on {weekday}!
letter: I hope to come to you by the {conveyance} on {later}, if the roads allow.
letter: Mr. Hale preached on {text} on Sunday, {sunday}, and at {length} length.
letter: {man} has taken the cottage by {farm} and means to {plan} there.
letter: They say that {woman} is to be married to {man} at {feast}, though nobody has been told so.
letter: The new curate, Mr. {surname}, dined with us on {weekday}; he is {curate}.
letter: I have finished the {work} for {someone}, {work_done}.
close: {send} {someone}, and believe me {ever} {closing}.
send: Give my love to|Remember me kindly to|Pray remember me to|My best love to|Kind remembrances to
ever: ever|always|as ever|now and always
ailment: a cold|a sore throat|the rheumatism|a low fever|a sprained ankle|the toothache|a cough
crop: potatoes|onions|peas|beans|cabbages|leeks|carrots|gooseberries|strawberries
crop_state: are doing well|have suffered|are late|are the best for years|are eaten by slugs
want: two yards of blue ribbon|a pound of good tea|some darning wool|a pair of gloves|a thimble
want: six yards of calico|a bottle of camphor|some seed of the white lupin|a new prayer book
feast: Easter|Whitsun|Michaelmas|Christmas|Lady Day|harvest
conveyance: coach|carrier|morning coach|market cart
text: patience|the prodigal son|the sower|charity|the lost sheep|the good Samaritan|idleness
length: great|some|merciful|unusual
plan: keep bees|open a school|keep a few pigs|set up as a shoemaker|grow watercress
curate: very young and very shy|a great walker|fond of botany|a little deaf|an excellent singer
work_done: and I think it will do|and I hope it will please|at last
work_done: though the colour is not quite right
work: blue shawl|patchwork quilt|sampler|pair of cuffs|christening cap
""")
MONTHS, WEEKDAYS, NUMBERS = WORDS["months"], WORDS["weekdays"], WORDS["numbers"]
SHIPS = _table("""
brig|Swallow|Thomas Ashby|Bristol|Lisbon|salt fish and woollen cloth
barque|Good Intent|Daniel Harlow|Liverpool|Madeira|hardware and coals
schooner|Prudence|Samuel Penrose|Falmouth|Cadiz|pilchards in hogsheads
brig|Northern Star|Robert Whitlock|Hull|Oporto|bar iron and earthenware
barque|Hesperus|Walter Dunmore|London|the Azores|general cargo and mails
""")
POINTS, FORCES = WORDS["compass"], WORDS["forces"]
SUNRISE = (485, 442, 380, 310, 258, 225, 240, 283, 335, 385, 440, 482)  # minutes, mid-month
SUNSET = (980, 1035, 1085, 1140, 1190, 1230, 1220, 1170, 1105, 1040, 980, 955)
GARDEN = _table("""
broad beans;early peas in pots|prune the apple trees;dig over the vacant ground;mend the bean poles
broad beans;early peas;shallots|top-dress the asparagus bed;plant rhubarb crowns;clear the ditches
onions;parsnips;early carrots;lettuces|plant the early potatoes;weed the strawberries;stake the peas
carrots;beetroot;radishes;summer cabbages|earth up the potatoes;sow the lawn;thin the onions
runner beans;marrows;kidney beans|plant out the leeks;keep the hoe going;net the currant bushes
lettuces;turnips;endive|stake the tall flowers;water the beds at evening;stop cutting the asparagus
spring cabbages;winter spinach|bud the roses;dry the herbs;pick the peas every day
spring onions;winter lettuces|take strawberry runners;ripen the onions in the sun;gather the plums
cabbages for spring;corn salad|lift the potatoes;store the apples;clean the frames
broad beans;garlic|lift the carrots and beetroot;plant the fruit trees;sweep up the leaves
broad beans;early peas|dig the heavy ground;cover the rhubarb;mend the fences
mustard and cress in a box|order the seeds;turn the manure heap;look over the stored apples
""")
FARM = _table("""
12 1 2|{man} is threshing the barley at {farm}, and {n2-6} men are kept at it
2 3 4|lambing began at {farm} on the {o1-28}; {20-60} ewes have lambed, with {n3-12} pairs of twins
3 10 11|the ploughing at {farm} was finished on the {o1-28}, {20-90} acres in all
6 7|haymaking began at {farm} on the {o1-28}, and {n3-9} loads were carried in a single day
8 9|the last load of wheat was carried at {farm} on the {o1-28}, {n3-9} days after the first
11 12 1|{man} killed his pig on the {o1-28}; it weighed {9-22} score
4 5|the cows at {farm} were turned out to grass on the {o1-28}
9 10|the apples at {farm} were gathered on the {o1-28}, {n3-12} bushels from the old orchard
""")
# name, unit ('-' counts the animal), quantity range
MEATS = _table("""
mutton|pound|1|3
beef|pound|1|3
veal|pound|1|2
pork|pound|1|2
bacon|pound|1|1
rabbit|-|1|2
chicken|-|1|1
pigeon|-|2|4
""")
DISHES = {  # the ingredients of each dish, as name:low:high:unit, a unit '-' counting the item
    "tart": "flour:6:10:ounce butter:3:5:ounce sugar:2:4:ounce {fruit}:1:2:pound",
    "pudding": "flour:6:8:ounce suet:3:4:ounce sugar:2:4:ounce egg:1:3:- {fruit}:1:2:pound",
    "crumble": "{fruit}:1:2:pound flour:4:6:ounce butter:2:4:ounce sugar:3:5:ounce",
    "fool": "{fruit}:1:2:pound sugar:3:6:ounce cream:1:2:pint",
    "cake": "flour:8:12:ounce butter:4:6:ounce sugar:4:6:ounce egg:2:4:- {fruit}:1:1:pound",
    "stew": "{meat} {veg}:2:6:- flour:1:2:ounce water:1:3:pint",
    "pie": "{meat} {veg}:2:5:- flour:6:8:ounce butter:3:4:ounce water:1:1:pint",
    "soup": "{veg}:3:6:- {meat} butter:1:2:ounce stock:2:4:pint",
}
BIRDS = _table("""
heron|water|a long neck, grey back and black crest|a harsh croak|four pale blue eggs
kingfisher|water|a blaze of blue and chestnut|a shrill whistle|six glossy white eggs
moorhen|water|a red forehead and white flashes under the tail|a loud, bubbling call|eight buff eggs
reed warbler|water|a plain brown back and a pale throat|a chattering, repeated song|four green eggs
lapwing|field|a green sheen on the back and a wispy crest|a wild, wheezing cry|four olive eggs
skylark|field|its streaked back and short crest|a song poured out high overhead|three grey eggs
yellowhammer|field|a bright yellow head|a little-bit-of-bread-and-no-cheese|four scribbled eggs
kestrel|field|its habit of hovering with a fanned tail|a sharp kee-kee-kee|five rusty red eggs
nuthatch|wood|a blue-grey back and a black stripe through the eye|a loud whistle|six white eggs
green woodpecker|wood|a green back and a crimson crown|a laughing yaffle|five white eggs
jay|wood|its pinkish body and the blue bars of the wing|a harsh scream|five olive eggs
tawny owl|wood|its round face and dark eyes|a long, quavering hoot|two round white eggs
robin|garden|its orange breast|a thin, wistful song|five white eggs freckled with red
wren|garden|its cocked tail and small size|a song far too loud for so small a bird|six white eggs
song thrush|garden|its spotted breast|a song with each phrase said twice|four blue eggs
swallow|garden|its long tail streamers|a sweet twittering|five white eggs spotted with red
goldfinch|garden|a red face and gold wing bars|a liquid, tinkling twitter|five pale eggs
""")
FLOWERS = _table("""
primrose|pale yellow|on the banks of the lane|3|5
celandine|glossy yellow|under the hedges|2|4
bluebell|deep blue|in Hanger Wood|4|5
cowslip|yellow|in the dry pasture by the mill|4|5
marsh marigold|golden|in the wet ditches|3|5
dog rose|pink and white|along the hedges|6|7
meadowsweet|creamy white|by the brook|6|8
foxglove|purple|in the clearings of the wood|6|7
honeysuckle|cream and gold|over the churchyard wall|6|9
knapweed|purple|on the dry banks|7|9
harebell|pale blue|on the common|7|9
""")
CORRESPONDENTS = _table("""
My dear Margaret|your loving sister, Ellen
Dearest Ellen|your affectionate sister, Margaret
My dear niece|your loving aunt, Harriet Fenwick
My dear aunt|your grateful niece, Ellen
My dearest Henry|your loving wife, Margaret
""")
# name, unit, price range in pence, quantity range
GOODS = _table("""
butter|pound|9|14|2|14
cheese|pound|5|9|2|12
egg|dozen|7|12|1|8
honey|jar|6|10|1|4
cream|pint|6|9|1|4
apples|peck|10|18|1|3
potatoes|bushel|24|36|1|2
fowl|each|18|30|1|3
duck|each|20|34|1|2
bacon|pound|6|9|2|8
""")
# what the farm pays for on market day, and the range in pence
COSTS = _table("""
stall rent|4|8
toll at the bridge|1|3
carting|9|18
dinner at the Crown|8|14
a new basket|10|18
mending the cart wheel|18|36
the boy's wages|6|12
""")


def _a(phrase: str) -> str:
    """The phrase after its indefinite article, 'a' or 'an'."""
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _join(items: list[str], sep: str = ", ", last: str = " and ") -> str:
    """Items as an English list: 'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else sep.join(items[:-1]) + last + items[-1]


def _plural(word: str) -> str:
    """The regular English plural of a noun."""
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + ("es" if word.endswith(("s", "sh", "ch", "x", "o")) else "s")


def _ordinal(n: int) -> str:
    """12 -> '12th', 22 -> '22nd'."""
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _date(day: datetime.date) -> str:
    """A date as 'the 12th of March'."""
    return f"the {_ordinal(day.day)} of {MONTHS[day.month - 1]}"


def _count(n: int) -> str:
    """A number in words up to thirteen, in digits above."""
    return NUMBERS[n] if n < len(NUMBERS) else str(n)


def _money(pence: int) -> str:
    """An amount of money as '9d.', '4s. 6d.' or '1l. 0s. 5d.'."""
    pounds, shillings, rest = pence // 240, pence % 240 // 12, pence % 12
    if pounds:
        return f"{pounds}l. {shillings}s. {rest}d."
    return f"{shillings}s. {rest}d." if shillings else f"{rest}d."


def _fill(rng: random.Random, text: str, slots: dict[str, str]) -> str:
    """The template with every {name}, {a_name} and {low-high} filled in (see WORDS)."""

    def pick(match: re.Match[str]) -> str:
        article, name = match.groups()
        if "-" in name:
            low, high = (int(part) for part in name.lstrip("no").split("-"))
            value = {"n": _count, "o": _ordinal}.get(name[0], str)(rng.randint(low, high))
        else:
            value = _fill(rng, slots[name] if name in slots else rng.choice(WORDS[name]), slots)
        return _a(value) if article else value

    return re.sub(r"\{(a_)?([no]?\d+-\d+|\w+)\}", pick, text)


def _paragraph(rng: random.Random, sentences: list[str], slots: dict[str, str]) -> str:
    """The templates filled in and joined, each sentence with a capital first letter."""
    filled = (_fill(rng, sentence, slots) for sentence in sentences)
    return " ".join(sentence[0].upper() + sentence[1:] for sentence in filled)


def ship_log(rng: random.Random, day: datetime.date) -> list[str]:
    """Consecutive daily entries of one ship's log: wind, sail, position, sightings and crew."""
    kind, name, master, home, port, cargo = ship = rng.choice(SHIPS)
    wind, force, course = rng.randrange(16), rng.randint(2, 6), rng.randrange(16)
    lat, lon = rng.randint(35 * 60, 50 * 60), rng.randint(6 * 60, 24 * 60)
    sailed, paragraphs = day - rng.randint(2, 20) * DAY, []
    for number in range(rng.randint(3, 7)):
        turn, shift = rng.choice(("backed", "veered", "held")), rng.randint(1, 3)
        wind = (wind + {"backed": -shift, "veered": shift, "held": 0}[turn]) % 16
        new = min(10, max(1, force + rng.choice((-2, -1, 0, 1, 1, 2))))
        change = (new > force) - (new < force)
        trend = ("blew", "freshened to", rng.choice(("eased to", "fell to")))[change]
        sail = ("trim", "shorten", "spread")[(new >= 7) - (new <= 4)]
        force, course = new, (course + rng.randint(-1, 1)) % 16
        miles = max(12, force * rng.randint(12, 22) - (80 if force >= 9 else 0))
        lat = min(55 * 60, max(30 * 60, lat + round(miles * math.cos(course * math.pi / 8))))
        east = miles * math.sin(course * math.pi / 8) / math.cos(lat / 3438)
        lon = min(30 * 60, max(2 * 60, lon - round(east)))
        other = rng.choice([row for row in SHIPS if row != ship])
        slots = {
            "wind": f"{'held in' if turn == 'held' else turn + ' to'} the {POINTS[wind]}",
            "force": f"{trend} {_a(FORCES[force])}",
            "lat": f"{lat // 60} degrees {lat % 60} minutes",
            "lon": f"{lon // 60} degrees {lon % 60} minutes",
            "miles": str(miles),
            "course": POINTS[course],
            "other": f"{other[0]} {other[1]} of {other[3]}, Captain {other[2].split()[1]}",
            "other_from": other[4],
            "tasks": _join(rng.sample(WORDS["task"], rng.randint(1, 3))),
        }
        sentences = [
            f"On {_date(day)} the wind {{wind}} and {{force}}; {{{sail}}} at {{bell}} "
            "in the {watch}."
        ]
        if number == 0:
            sentences.insert(
                0,
                f"Log of the {kind} {name}, {master} master, from {home} towards {port} with "
                f"{cargo}; sailed on {_date(sailed)} {sailed.year}.",
            )
        sentences += rng.sample(WORDS["log"], rng.randint(2, 6 - len(sentences)))
        if rng.random() < 0.3:
            days_out = _ordinal((day - sailed).days)
            sentences.append(
                f"So ends the {days_out} day out from {home}, the wind {POINTS[wind]}."
            )
        paragraphs.append(_paragraph(rng, sentences, slots))
        day += DAY
    return paragraphs


def almanac(rng: random.Random, day: datetime.date) -> list[str]:
    """Notes of the village almanac, a paragraph a month: weather, sun, moon, garden and farm."""
    paragraphs, year, month = [], day.year, day.month - 1
    for _ in range(rng.randint(3, 6)):
        sowings, tasks = (part.split(";") for part in GARDEN[month])
        sown = _join(rng.sample(sowings, min(2, len(sowings))))
        date, full, following = rng.randint(1, 28), rng.randint(1, 28), (month + 1) % 12
        rise, sets = (
            round(times[month] + (times[following] - times[month]) * (date - 15) / 30)
            for times in (SUNRISE, SUNSET)
        )
        notes = [
            f"On the {_ordinal(date)} the sun rises at {rise // 60}:{rise % 60:02d} and sets at "
            f"{sets // 60 - 12}:{sets % 60:02d}, so the day is {(sets - rise) // 60} hours and "
            f"{(sets - rise) % 60} minutes long.",
            f"The moon is full on the {_ordinal(full)} of {MONTHS[month]} at {rng.randint(1, 12)} "
            f"o'clock, and new on the {_ordinal(full + 14 if full <= 14 else full - 14)}.",
            f"In the garden, sow {sown} {{sow_where}} {{sow_time}}.",
            "{time_to} " + _join(rng.sample(tasks, 2)) + ".",
        ]
        notes += rng.sample(WORDS["alm"], 3)
        notes += [f"{t}." for months, t in FARM if str(month + 1) in months.split()]
        if month in (10, 11, 0, 1, 2):
            notes.append("There were {n2-12} nights of frost, the hardest on the {o1-28}.")
        slots = {"month": MONTHS[month], "year": str(year)}
        sentences = ["{alm_open}"] + rng.sample(notes, rng.randint(3, 6))
        paragraphs.append(_paragraph(rng, sentences, slots))
        year, month = year + (month == 11), following
    return paragraphs


def _ingredient(rng: random.Random, spec: str) -> tuple[str, int]:
    """'flour:6:10:ounce' as ('8 ounces of flour', 8); a unit '-' counts the item itself."""
    name, low, high, unit = spec.split(":")
    n = rng.randint(int(low), int(high))
    if unit == "-":
        return f"{_count(n)} {name if n == 1 else _plural(name)}", n
    return f"{n} {unit if n == 1 else _plural(unit)} of {name}", n


def recipes(rng: random.Random, day: datetime.date) -> list[str]:
    """A few recipes of the cookbook, each a title, its ingredients, its steps and an ending."""
    paragraphs = []
    for _ in range(rng.randint(3, 5)):
        dish = rng.choice(list(DISHES))
        fruit, veg = rng.choice(WORDS["fruits_kind"]), rng.choice(WORDS["vegetables_kind"])
        meat, unit, low, high = rng.choice(MEATS)
        specs = DISHES[dish].replace("{fruit}", _plural(fruit)).replace("{veg}", veg)
        specs = specs.replace("{meat}", f"{meat}:{low}:{high}:{unit}").split()
        items = [_ingredient(rng, spec) for spec in specs]
        count = {spec.split(":")[0]: n for spec, (_, n) in zip(specs, items, strict=True)}
        savoury = "{meat}" in DISHES[dish]
        title = f"{meat} and {veg} {dish}" if savoury else f"{fruit} {dish}"
        title = f"{veg} soup with {meat}" if dish == "soup" else title
        slots = {
            "dish": dish,
            "fruit": fruit,
            "fruits": _plural(fruit),
            "vegs": _plural(veg),
            "meat": _plural(meat) if unit == "-" and count.get(meat, 1) > 1 else meat,
            "eggs": "the egg" if count.get("egg") == 1 else "the eggs",
            "mins": str(rng.randrange(15, 75, 5)),
            "hours": rng.choice(("an hour", "two hours", "three hours", "four hours")),
            "with": "{savoury}" if savoury else "{sweet}",
        }
        sentences = [
            f"To make {{a_style}} {title}.",
            "{take} " + _join([t for t, _ in items]) + ".",
        ]
        sentences += [f"{{{dish}{step}}}." for step in (1, 2, 3)] + ["{end}"]
        paragraphs.append(_paragraph(rng, sentences, slots))
    return paragraphs


def field_notes(rng: random.Random, day: datetime.date) -> list[str]:
    """Dated entries of a naturalist's notebook on birds, flowers, butterflies and weather."""
    paragraphs = []
    for _ in range(rng.randint(3, 6)):
        day += rng.randint(1, 6) * DAY
        bird, kind, looks, call, eggs = rng.choice(BIRDS)
        slots = {"bird": bird, "birds": _plural(bird), "looks": looks, "call": call}
        slots["haunt"] = "{haunt_" + kind + "}"
        notes = list(WORDS["note"])
        if 4 <= day.month <= 6:
            notes.append(f"Found {_a(bird)}'s nest {{haunt}}, with {eggs}.")
        flowers = [row for row in FLOWERS if int(row[3]) <= day.month <= int(row[4])]
        if flowers:
            flower, slots["colour"], slots["where"] = rng.choice(flowers)[:3]
            slots.update(flower=flower, flowers=_plural(flower))
            notes += WORDS["flower_note"]
        if 4 <= day.month <= 9:
            notes += WORDS["fly_note"]
        sentences = [f"{_date(day)} {day.year}.", "{weather}"]
        paragraphs.append(_paragraph(rng, sentences + rng.sample(notes, rng.randint(2, 4)), slots))
    return paragraphs


def letters(rng: random.Random, day: datetime.date) -> list[str]:
    """Letters between the sisters Ellen and Margaret, their aunt and Henry, one a paragraph."""
    paragraphs = []
    for _ in range(rng.randint(3, 5)):
        day += rng.randint(2, 9) * DAY
        greeting, closing = rng.choice(CORRESPONDENTS)
        he = rng.choice(("he", "she"))
        person = rng.choice(WORDS["menfolk" if he == "he" else "womenfolk"])
        his = "his" if he == "he" else "her"
        ship, sent = SHIPS[0], day - rng.randint(2, 9) * DAY  # Thomas Ashby's brig
        slots = {"person": person, "he": he, "his": his, "closing": closing}
        slots.update(ship=ship[1], port=ship[4], sailed=_date(day - rng.randint(10, 60) * DAY))
        slots.update(weekday=WEEKDAYS[sent.weekday()], later=_date(day + rng.randint(5, 30) * DAY))
        slots.update(butter=_money(rng.randint(9, 14)), eggs=_money(rng.randint(7, 12)))
        slots["sunday"] = _date(day - (day.weekday() + 1) * DAY)
        first = (
            f"{greeting}, {{opening}} the {_ordinal(sent.day)}, which came on "
            f"{WEEKDAYS[day.weekday()]}."
        )
        sentences = [first] + rng.sample(WORDS["letter"], rng.randint(2, 6)) + ["{close}"]
        paragraphs.append(_paragraph(rng, sentences, slots))
    return paragraphs


def ledger(rng: random.Random, day: datetime.date) -> list[str]:
    """Weeks of a farm's market ledger whose sales, costs and money in hand add up."""
    day += (3 - day.weekday()) % 7 * DAY  # market day is a Thursday
    farm, town = rng.choice(WORDS["farm"]), rng.choice(WORDS["town"])
    in_hand = rng.randint(240, 2400)  # pence
    paragraphs = []
    for number in range(rng.randint(3, 5)):
        sentences = [f"Market day at {town}, Thursday, {_date(day)} {day.year}."]
        if number == 0:
            sentences.insert(0, f"Accounts of {farm}, with {_money(in_hand)} brought forward.")
        takings = 0
        buyers = rng.sample(WORDS["buyer"], rng.randint(2, 3))
        for buyer in buyers:
            sales, subtotal = [], 0
            for name, unit, low, high, few, many in rng.sample(GOODS, rng.randint(1, 3)):
                n, price = rng.randint(int(few), int(many)), rng.randint(int(low), int(high))
                if unit == "each":
                    what = f"{n} {name if n == 1 else _plural(name)} at {_money(price)} each"
                elif unit == "dozen":
                    what = f"{n} dozen {_plural(name)} at {_money(price)} the dozen"
                else:
                    measure = unit if n == 1 else _plural(unit)
                    what = f"{n} {measure} of {name} at {_money(price)} the {unit}"
                sales.append(f"{what}, {_money(n * price)}")
                subtotal += n * price
            tail = f"; {_money(subtotal)} in all" if len(sales) > 1 else ""
            sentences.append(f"Sold to {buyer} {_join(sales, '; ', '; and ')}{tail}")
            takings += subtotal
        costs = [
            (name, rng.randint(int(low), int(high)))
            for name, low, high in rng.sample(COSTS, rng.randint(2, 3))
        ]
        spent = sum(cost for _, cost in costs)
        paid = _join([f"{name}, {_money(cost)}" for name, cost in costs], "; ", "; and ")
        tail = f"; {_money(spent)} in all"
        in_hand += takings - spent
        verdict = "cleared" if takings >= spent else "lost"
        sentences += [
            f"Paid out for {paid}{tail}",
            f"Took {_money(takings)} from {_count(len(buyers))} customers and {verdict} "
            f"{_money(abs(takings - spent))} on the day, leaving {_money(in_hand)} in hand.",
        ]
        paragraphs.append(" ".join(s if s.endswith(".") else s + "." for s in sentences))
        day += 7 * DAY
    return paragraphs


GENRES = (ship_log, almanac, recipes, field_notes, letters, ledger)


def corpus(seed: int = SEED, target: int = TARGET_BYTES) -> str:
    """The whole corpus: sections of random genres, at dates moving on, until target bytes."""
    rng = random.Random(seed)
    day, paragraphs, size = datetime.date(1841, 3, 1), [], 0
    while size < target:
        for paragraph in rng.choice(GENRES)(rng, day):
            paragraphs.append(paragraph)
            size += len(paragraph) + 2
        day += rng.randint(5, 30) * DAY
    return "\n\n".join(paragraphs) + "\n"


def sentences(text: str) -> list[str]:
    """The sentences of the text: split after . ? ! before a capital, but not after Mr. or Dr."""
    split = r'(?:(?<=[.?!])|(?<=[.?!]"))(?<!Mr\.)(?<!Mrs\.)(?<!Dr\.)\s+(?=[A-Z"])'
    return [s for para in text.split("\n\n") for s in re.split(split, para.strip())]


def main() -> None:
    """Write the corpus, check its characters and print its statistics."""
    text = corpus()
    assert set(text) <= ALLOWED, set(text) - ALLOWED
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="ascii")
    every = sentences(text)
    repeated = sum(n - 1 for n in Counter(every).values()) / len(every)
    words = set(re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower()))
    paragraphs = text.count("\n\n") + 1
    print(f"{OUT}: {len(text)} bytes, {paragraphs} paragraphs, {len(every)} sentences")
    print(f"{len(words)} distinct words; {repeated:.1%} of the sentences repeat an earlier one")


if __name__ == "__main__":
    main()
