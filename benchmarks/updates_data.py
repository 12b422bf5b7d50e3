"""Conversations with knowledge updates, and their gold (pure functions, no storage).

Used by ``benchmarks/updates_quality.py`` and its tests.  Each conversation
is one citizen: two speakers talking over ten monthly sessions, stored as
N1 memories (one per turn, ``description`` = ``"<speaker>: <text>"``,
``extra["speaker"]``), mixing

* **filler** turns: chat that states no single-valued fact;
* **updates**: a statement of an attribute, and a later one that changes it
  (where someone lives, where and as what they work, their car, phone,
  boss/landlord/doctor..., favourites, relationship status, age, when an
  appointment is, the state of a ticket).  Each is a *change* ("we moved to
  Berlin": gold type ``reality_changed``), a *correction* ("sorry, I
  misspoke: ..."; ``discovered_false``) or a *negation* ("I no longer work
  at X"; ``reality_changed``).  Some are **late arrivals**: the earlier
  statement reaches the memory in a later ``ingest`` call than its
  successor (the later-dated one still wins).  Each update has a question
  ("Where does Ada live now?"), the gold current memory and the gold
  outdated memory;
* **distractors**: a statement and a later one that looks like an update
  but is not: another person ("my sister lives in Rome", "Tom moved to
  Oslo"), a hypothetical ("thinking about moving to Oslo"), the quoted past
  ("I used to live in Paris", "back in 2013 I worked at IBM"), a restatement
  of the same value, or a thing that holds many values ("I love pizza",
  later "I love sushi too").  Neither memory is ever outdated.

Gold: a memory is outdated iff it is the earlier memory of an update; every
other memory (fillers, distractors, the current side of updates) must stay
current.

Tune / test split
-----------------
Every phrasing list (templates, questions, fillers) and every vocabulary
(names, cities, companies, roles, cars, ...) is split in two disjoint halves
by position: even positions are ``tune``, odd positions ``test``; numbers
come from disjoint ranges (ages 20-38 / 41-69, ticket numbers 100-499 /
500-999, years even / odd).  ``--split tune`` generates from the tune
half only, ``--split test`` (the default everywhere) from the test half
only.  Whoever tunes the update judge does so on ``tune``; numbers are
reported on ``test``, so no phrasing or name of a reported conversation was
ever seen while tuning.

``python benchmarks/updates_data.py [--split tune|test] [--seed N]
[--citizens N] [--show N]`` prints the counts (and the first N
conversations in full).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

SPLITS = ("tune", "test")
SPLIT_HELP = ("which half of the phrasings and vocabularies to generate from: every template list and "
              "vocabulary is split by position (even: tune, odd: test; numbers from disjoint ranges), so the "
              "two halves share no phrasing and no name; tune the update judge on 'tune' only, report 'test' "
              "(default: %(default)s)")

KINDS = ("change", "correction", "negation")
GOLD_TYPE = {"change": "reality_changed", "correction": "discovered_false", "negation": "reality_changed"}
DISTRACTOR_KINDS = ("other_person", "hypothetical", "past", "restate", "multi_valued")

SESSIONS = 10
UPDATES_PER_SPEAKER = 6
DISTRACTORS_PER_SPEAKER = 5
FILLERS = 60
LATE_SHARE = 0.2  # of updates whose earlier statement arrives after its successor
START = datetime(2023, 1, 9, 18, 0, tzinfo=timezone.utc)


# -- vocabularies (split by position: even -> tune, odd -> test) -------------------------------

VOCAB: dict[str, list[str]] = {
    "speaker": ["Ada", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas",
                "Keiko", "Lars", "Mira", "Nils", "Olga", "Pablo", "Quinn", "Rosa", "Sven", "Tamar",
                "Umar", "Vera", "Wim", "Xenia", "Yusuf", "Zoe", "Amara", "Bastien", "Celine", "Darius",
                "Edith", "Florin"],
    "other": ["Tom", "Anna", "Marek", "Lucia", "Ravi", "Helga", "Jamal", "Sofia", "Oskar", "Priya",
              "Emil", "Nadia", "Felipe", "Ingrid", "Kofi", "Leonie"],
    "person": ["Maria Keller", "David Okafor", "Julia Brandt", "Samuel Ortiz", "Hannah Weiss", "Victor Lindqvist",
               "Claire Dubois", "Mateo Rossi", "Laura Novak", "Peter Haas", "Amelie Roux", "Jonah Price",
               "Sara Lindgren", "Omar Haddad", "Nina Petrova", "Carl Jensen"],
    "relative": ["sister", "brother", "cousin", "best friend", "neighbour", "aunt", "uncle", "colleague",
                 "roommate", "mom", "dad", "flatmate"],
    "city": ["Lyon", "Berlin", "Oslo", "Porto", "Vienna", "Krakow", "Seville", "Utrecht", "Gothenburg", "Bologna",
             "Leeds", "Tallinn", "Ghent", "Valencia", "Zurich", "Dublin", "Bordeaux", "Munich", "Helsinki",
             "Naples", "Bristol", "Riga", "Antwerp", "Bilbao"],
    "company": ["Siemens", "Spotify", "Bosch", "Zalando", "Philips", "Ericsson", "Airbus", "Nokia", "Decathlon",
                "Adyen", "Booking", "Ikea", "Lufthansa", "Heineken", "Carrefour", "Danone", "Vodafone",
                "Michelin", "Novartis", "Unilever"],
    "role": ["data analyst", "software engineer", "product manager", "team lead", "designer", "QA engineer",
             "staff engineer", "sales manager", "project manager", "research scientist", "accountant",
             "consultant", "support engineer", "marketing lead", "data engineer", "engineering manager"],
    "car": ["Toyota Corolla", "Honda Civic", "Volkswagen Golf", "Ford Focus", "Tesla Model 3", "Mazda 3",
            "Kia Niro", "Skoda Octavia", "Renault Clio", "Peugeot 208", "Volvo XC40", "Subaru Outback",
            "Hyundai Kona", "Nissan Leaf", "Fiat Panda", "BMW 3 Series"],
    "phone": ["Pixel 7", "iPhone 13", "Galaxy S21", "Fairphone 4", "OnePlus 9", "Xperia 5", "Pixel 6a",
              "iPhone SE", "Galaxy A54", "Nothing Phone", "Moto G84", "iPhone 15"],
    "noun": ["boss", "manager", "landlord", "doctor", "coach", "team lead", "dentist", "therapist",
             "piano teacher", "mentor", "accountant", "tutor"],
    "fav_category": ["band", "book", "film", "dish", "board game", "TV show", "podcast", "sport",
                     "painter", "video game"],
    "status": ["single", "engaged", "married", "divorced", "in a relationship", "dating someone", "separated",
               "seeing someone"],
    "event": ["dentist appointment", "parent-teacher meeting", "car service", "team offsite", "yoga class",
              "haircut", "vet appointment", "piano lesson", "budget review", "job interview", "physio session",
              "book club meeting", "eye exam", "flat viewing", "quarterly planning", "design review"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "March 3rd",
            "April 9th", "May 12th", "June 20th", "July 8th", "August 17th", "September 5th", "October 22nd",
            "November 14th"],
    "thing": ["ticket", "issue", "PR", "order", "bug", "case", "request", "task"],
    "state": ["blocked", "on hold", "resolved", "fixed", "in progress", "pending", "done", "completed",
              "open", "stalled", "closed", "finished", "cancelled", "abandoned"],
    "food": ["pizza", "sushi", "ramen", "tacos", "curry", "dumplings", "paella", "falafel", "pho", "lasagna",
             "pierogi", "risotto", "burritos", "dim sum"],
    "hobby": ["climbing", "knitting", "running", "pottery", "chess", "gardening", "cycling", "baking",
              "photography", "swimming", "birdwatching", "woodworking"],
    "language": ["Spanish", "German", "Italian", "Japanese", "Portuguese", "Dutch", "Polish", "Turkish",
                 "Korean", "Greek"],
    "activity": ["a long walk", "a movie night", "a board game evening", "a picnic", "a bike ride",
                 "a museum visit", "a bake-off", "a karaoke night", "a hike", "a swim", "a concert",
                 "a pottery class"],
}
# Values of each favourite category (the categories are split, so their values are too).
FAVOURITES: dict[str, list[str]] = {
    "band": ["Radiohead", "Arctic Monkeys", "Daft Punk", "Fleetwood Mac", "The Beatles", "Massive Attack"],
    "book": ["Middlemarch", "Dune", "Beloved", "Stoner", "Pachinko", "Solaris"],
    "film": ["Spirited Away", "Alien", "Amelie", "Heat", "Parasite", "Casablanca"],
    "dish": ["Moussaka", "Pad Thai", "Goulash", "Shakshuka", "Bibimbap", "Ratatouille"],
    "board game": ["Catan", "Carcassonne", "Azul", "Wingspan", "Ticket to Ride", "Terraforming Mars"],
    "TV show": ["The Wire", "Succession", "Fleabag", "Dark", "Severance", "Mad Men"],
    "podcast": ["Radiolab", "Serial", "Hardcore History", "Reply All", "Freakonomics", "Criminal"],
    "sport": ["tennis", "handball", "rugby", "volleyball", "basketball", "cricket"],
    "painter": ["Vermeer", "Hokusai", "Klimt", "Turner", "Kahlo", "Hopper"],
    "video game": ["Hades", "Celeste", "Zelda", "Portal", "Outer Wilds", "Stardew Valley"],
}
# Values that say the same thing ("fixed" after "resolved" is no update): an update's two values come from
# different groups, and a task starts from a state that is not finished.
SAME_MEANING: dict[str, str] = {
    **dict.fromkeys(("resolved", "fixed", "done", "completed", "closed", "finished"), "done"),
    **dict.fromkeys(("blocked", "on hold", "stalled"), "blocked"),
    **dict.fromkeys(("in progress", "pending", "open"), "open"),
    **dict.fromkeys(("cancelled", "abandoned"), "cancelled"),
    **dict.fromkeys(("divorced", "separated"), "apart"),
    **dict.fromkeys(("in a relationship", "dating someone", "seeing someone"), "together"),
}
# Numbers: disjoint ranges per split (inclusive).
AGES = {"tune": (20, 38), "test": (41, 69)}
TICKETS = {"tune": (100, 499), "test": (500, 999)}
YEARS = {"tune": [2006, 2008, 2010, 2012, 2014, 2016], "test": [2005, 2007, 2009, 2011, 2013, 2015]}


# -- phrasings (split by position: even -> tune, odd -> test) ----------------------------------
# {a}: the earlier value, {b}: the later (or the distractor's) value, {x}: the instance (category, event,
# thing, noun), {name}: the speaker (questions), {rel}: a relative, {other}: another person's name,
# {year}: a year.  A template's first letter is capitalised after formatting; "a" before a vowel becomes "an".


@dataclass(frozen=True)
class Family:
    """One kind of single-valued attribute and every phrasing of it."""

    name: str
    values: str  # vocabulary of {a}/{b} ("fav" for the category's own values, "age", "state")
    instance: str | None  # vocabulary of {x}, or None
    base: tuple[str, ...]
    change: tuple[str, ...]
    correction: tuple[str, ...]
    negation: tuple[str, ...]
    question: tuple[str, ...]
    other_person: tuple[str, ...] = ()
    hypothetical: tuple[str, ...] = ()
    past: tuple[str, ...] = ()
    restate: tuple[str, ...] = ()


FAMILIES: tuple[Family, ...] = (
    Family(
        "residence", "city", None,
        base=("I live in {a}, close to the river.", "I'm based in {a} these days.",
              "My flat is in {a}, ten minutes from the station.", "I live in {a} with my two cats.",
              "Home for me is {a}, we live right in the centre.", "We live in {a}, in a small place near the park.",
              "I've been living in {a} for about three years.", "Our apartment is in {a}, on the top floor."),
        change=("We moved to {b} last week, still surrounded by boxes.", "Big news: I relocated to {b} for good.",
                "I've moved to {b}, the flat in {a} belongs to someone else now.",
                "We finally moved to {b} in the spring.", "I live in {b} now, we left {a} in the summer.",
                "Just finished moving to {b}, the new neighbourhood is great.",
                "We packed up everything and moved to {b}.", "New address: I'm living in {b} since last month."),
        correction=("Sorry, I misspoke earlier: I live in {b}, not {a}.",
                    "Actually I was wrong when I said {a}, I live in {b}.",
                    "Turns out I typed {a} by mistake, my home is in {b}.",
                    "Correction to what I said before: I'm based in {b}, not in {a}.",
                    "My bad, I never lived in {a}; I live in {b}.",
                    "I mixed up the cities earlier, I actually live in {b}, not {a}."),
        negation=("I don't live in {a} anymore.", "I no longer live in {a}, the lease ran out.",
                  "We're not in {a} any more, we moved out in May.", "I no longer have a place in {a}."),
        question=("Where does {name} live now?", "Which city is {name} living in?",
                  "Where is {name}'s home these days?", "What city does {name} currently live in?"),
        other_person=("My {rel} lives in {b}.", "{other} lives in {b}, we visit her often.",
                      "My {rel} just moved to {b}.", "{other} moved to {b} last month.",
                      "{other} is based in {b} now.", "My {rel} has been living in {b} for ages."),
        hypothetical=("If I moved to {b} I'd finally learn the language.", "I'm thinking about moving to {b}.",
                      "Maybe we'll move to {b} someday.", "Would I live in {b}? Probably not, too cold.",
                      "I might move to {b} if the job works out.", "We're considering a move to {b} next year."),
        past=("I used to live in {b} when I was a student.", "Back in {year} I lived in {b}.",
              "Years ago we lived in {b} for a while.", "In {year} I was living in {b}.",
              "I grew up in {b}, by the way.", "As a kid I lived in {b}."),
        restate=("Still in {a}, and still loving it.", "I live in {a}, like I said, it's quiet.",
                 "Life in {a} is treating me well.", "Autumn in {a} is beautiful, I love living here."),
    ),
    Family(
        "employer", "company", None,
        base=("I work at {a} on the data team.", "I'm working for {a} these days.",
              "My job is at {a}, mostly backend stuff.", "I work for {a}, the commute is fine.",
              "I've been at {a} for two years now.", "I'm employed at {a}, in their logistics group.",
              "I work at {a}, we ship a release every month.", "At {a}, where I work, Fridays are quiet."),
        change=("I switched jobs, I work at {b} now.", "I joined {b} last month, leaving {a} was hard.",
                "I started at {b} on the first of the month.", "Got a job at {b}, so long {a}!",
                "I left {a} and I'm working for {b} now.", "New job: I'm at {b} since April.",
                "I took a job with {b}, my last day at {a} was Friday.", "I've moved over to {b}, new team, new badge."),
        correction=("Sorry, I said {a} before but I actually work at {b}.", "My mistake, I work for {b}, not {a}.",
                    "Turns out I mixed them up: my employer is {b}, not {a}.",
                    "I was wrong earlier, it's {b} I work for, not {a}.",
                    "Correction: I work at {b}. {a} is our client.", "I misspoke before, my job is at {b}, not {a}."),
        negation=("I no longer work at {a}.", "I quit my job at {a} yesterday.",
                  "I don't work for {a} anymore.", "I left {a} last Friday, taking a break for now."),
        question=("Where does {name} work now?", "Who is {name}'s employer?",
                  "Which company does {name} work for?", "What company is {name} at these days?"),
        other_person=("My {rel} works at {b}.", "{other} got a job at {b}.", "My {rel} just joined {b}.",
                      "{other} works for {b}, she loves it.", "{other} switched to {b} recently.",
                      "My {rel} is employed at {b}."),
        hypothetical=("I might apply at {b} if the hiring freeze ends.", "Thinking about applying to {b}.",
                      "If {b} made me an offer I'd consider it.", "Maybe I'll interview at {b} next year.",
                      "I could see myself working at {b} one day.", "I wonder whether {b} is hiring."),
        past=("Back in {year} I worked at {b}.", "I used to work for {b} before all this.",
              "Years ago I had an internship at {b}.", "When I was a student I worked at {b} part-time.",
              "In {year} I was working for {b}.", "I worked at {b} once, a long time ago."),
        restate=("Another long week at {a}.", "Work at {a} is busy as usual.", "I'm still at {a}, nothing new there.",
                 "The canteen at {a} got better, I work there and I'm happy."),
    ),
    Family(
        "role", "role", None,
        base=("I work as a {a} at the moment.", "My title is {a}.", "I'm a {a} on my team.",
              "My job title is {a}, for now.", "I work as a {a} in a small team.", "My role is {a}."),
        change=("I got promoted to {b} last month!", "I'm a {b} now, they changed my title.",
                "I became a {b} after the reorg.", "My title changed to {b} this week.",
                "Since the reorg I work as a {b}.", "I was promoted to {b}, no more {a} work for me."),
        correction=("Sorry, I said {a} but my title is actually {b}.", "I was wrong, my role is {b}, not {a}.",
                    "Turns out my official title is {b}, not {a}.", "Correction: I work as a {b}, not a {a}.",
                    "I misspoke, I'm a {b}, not a {a}.", "My mistake, my job title is {b}."),
        negation=("I'm not a {a} anymore.", "I no longer work as a {a}.", "I don't work as a {a} any more.",
                  "I'm no longer a {a}, I stepped down."),
        question=("What is {name}'s job title now?", "What does {name} work as?",
                  "What is {name}'s role at work?", "What position does {name} hold now?"),
        other_person=("My {rel} works as a {b}.", "{other} got promoted to {b}.", "{other} is a {b} now.",
                      "My {rel} became a {b}."),
        hypothetical=("I'd love to become a {b} one day.", "If I became a {b} I'd have less time to code.",
                      "Maybe I'll apply for the {b} position.", "I'm considering a move to {b} work."),
        past=("I used to work as a {b}.", "Back in {year} I was a {b}.", "Years ago I worked as a {b}.",
              "In {year} I was working as a {b}."),
        restate=("Being a {a} keeps me busy.", "As a {a}, I spend a lot of time in meetings.",
                 "Still a {a}, still enjoying it.", "Work as a {a} was hectic this week."),
    ),
    Family(
        "car", "car", None,
        base=("My car is a {a}.", "I drive a {a}, it's pretty reliable.", "Our car is an old {a}.",
              "I have a {a}, bought it used.", "My car is a {a}, silver.", "We drive a {a} most days."),
        change=("I sold the {a}, my car is now a {b}.", "We traded in the {a} for a {b}.",
                "I drive a {b} now, the {a} is gone.", "Picked up my new car yesterday, a {b}!",
                "The {a} finally died, so now I drive a {b}.", "We replaced the {a} with a {b} last month."),
        correction=("Oops, my car is a {b}, not a {a}, I always mix those up.",
                    "I was wrong, it's a {b} I drive, not a {a}.",
                    "Turns out the car is a {b}; I said {a} by mistake.", "Correction: my car is a {b}, not a {a}.",
                    "I misspoke earlier, I drive a {b}.", "My mistake, our car is a {b}, not a {a}."),
        negation=("I don't have the {a} anymore.", "I no longer own the {a}.", "The {a} isn't mine any more.",
                  "I no longer drive the {a}, I take the train."),
        question=("What car does {name} drive now?", "What is {name}'s car?",
                  "Which car does {name} have now?", "What kind of car does {name} own?"),
        other_person=("My {rel} drives a {b}.", "{other}'s car is a {b}.", "{other} just bought a {b}.",
                      "My {rel}'s car is a {b}."),
        hypothetical=("If I had the money I'd buy a {b}.", "I'm thinking about getting a {b}.",
                      "Maybe my next car will be a {b}.", "I might test drive a {b} this weekend."),
        past=("I used to drive a {b}.", "Back in {year} my car was a {b}.", "My first car was a {b}.",
              "In {year} I drove a {b}."),
        restate=("The {a} needed new tyres, but it's running fine.", "Still driving the {a}, no complaints.",
                 "Washed the {a} today, it looks new.", "Took the {a} to the coast, what a drive."),
    ),
    Family(
        "phone", "phone", None,
        base=("My phone is a {a}.", "I'm on a {a}, the battery is fine.", "I use a {a} as my phone.",
              "My phone's a {a}, a bit scratched."),
        change=("I got a new phone, a {b}; the {a} is in a drawer.", "My phone is now a {b}.",
                "I switched to a {b}, the {a} was too slow.", "Upgraded to a {b} last week."),
        correction=("Sorry, my phone is a {b}, not a {a}.", "I was wrong, I have a {b}, not a {a}.",
                    "Turns out my phone is a {b}, I misread the box.", "Correction, it's a {b}, not a {a}."),
        negation=("I don't use the {a} anymore.", "The {a} is no longer my phone."),
        question=("What phone does {name} use now?", "What is {name}'s phone?",
                  "Which phone does {name} have these days?", "What phone is {name} using currently?"),
        other_person=("My {rel}'s phone is a {b}.", "{other} has a {b}.", "{other} just got a {b}.",
                      "My {rel} uses a {b}."),
        hypothetical=("Maybe I'll get a {b} next.", "If the {b} gets cheaper I'll buy one.",
                      "I'm thinking about a {b}.", "I might switch to a {b} someday."),
        past=("I used to have a {b}.", "Back in {year} my phone was a {b}.", "My old phone was a {b}.",
              "Years ago I had a {b}."),
        restate=("My {a} is still going strong.", "The {a} takes great photos.", "Still using the {a}.",
                 "Dropped my {a} again, it survived."),
    ),
    Family(
        "person", "person", "noun",
        base=("My {x} is {a}.", "{a} is my {x}, very easy to get along with.", "I have a great {x}: {a}.",
              "My {x} is called {a}.", "{a} is my {x} these days.", "My {x}? That's {a}."),
        change=("My new {x} is {b}, {a} moved on.", "I have a new {x}: {b}.",
                "{b} took over as my {x} this month.", "We got a new {x}, {b}, since {a} left.",
                "{b} is my {x} now.", "I switched to a new {x}, {b}."),
        correction=("Sorry, my {x} is {b}, not {a}; I mixed up the names.", "I was wrong, {b} is my {x}, not {a}.",
                    "Turns out my {x} is {b}, {a} is someone else.", "Correction: my {x} is {b}.",
                    "I misspoke, my {x} is {b}, not {a}.", "My mistake: {b} is my {x}."),
        negation=("{a} isn't my {x} anymore.", "{a} is no longer my {x}.", "I don't have {a} as my {x} any more.",
                  "{a} stopped being my {x} last month."),
        question=("Who is {name}'s {x} now?", "Who is {name}'s current {x}?", "Who does {name} have as {x}?",
                  "What is the name of {name}'s {x}?"),
        other_person=("My {rel}'s {x} is {b}.", "{other}'s {x} is {b}.", "{other} has {b} as {x}.",
                      "My {rel} got a new {x}, {b}."),
        hypothetical=("If {b} became my {x} I'd be thrilled.", "Maybe {b} will be my {x} next year.",
                      "I wish {b} could be my {x}.", "I might ask {b} to be my {x}."),
        past=("My {x} used to be {b}.", "Back in {year} my {x} was {b}.", "Years ago {b} was my {x}.",
              "In {year} I had {b} as {x}."),
        restate=("Had a good chat with {a}, my {x}.", "{a} is still my {x}, thankfully.",
                 "My {x} {a} says hi.", "Saw {a}, my {x}, at the market."),
    ),
    Family(
        "favourite", "fav", "fav_category",
        base=("My favourite {x} is {a}.", "{a} is my favourite {x}, hands down.",
              "My all-time favourite {x} is {a}.", "Right now my favorite {x} is {a}.",
              "My favorite {x}? {a}, easily.", "If you ask me, {a} is the best {x}, my favourite."),
        change=("My favourite {x} is {b} these days, I've gone off {a}.", "New favourite {x}: {b}!",
                "{b} has become my favourite {x}.", "I changed my mind, my favourite {x} is now {b}.",
                "These days my favorite {x} is {b}.", "{b} replaced {a} as my favourite {x}."),
        correction=("Actually I was wrong, my favourite {x} is {b}, not {a}.",
                    "Turns out I misremembered: {b} is my favourite {x}.",
                    "Correction, my favorite {x} is {b}; {a} is second.",
                    "Sorry, I misspoke, my favourite {x} is {b}.",
                    "My bad, it's {b} that's my favourite {x}, not {a}.",
                    "I said {a} but I meant {b}: that's my favourite {x}."),
        negation=("{a} isn't my favourite {x} anymore.", "{a} is no longer my favourite {x}.",
                  "I don't think of {a} as my favourite {x} any more.", "{a} stopped being my favourite {x}."),
        question=("What is {name}'s favourite {x} now?", "Which {x} does {name} like best these days?",
                  "What is {name}'s favorite {x}?", "What {x} does {name} currently love most?"),
        other_person=("My {rel}'s favourite {x} is {b}.", "{other}'s favourite {x} is {b}.",
                      "{other} says {b} is the best {x}.", "My {rel} loves {b}, her favourite {x}."),
        hypothetical=("If I had to pick again, maybe {b} would be my favourite {x}.",
                      "{b} might become my favourite {x}.", "Maybe {b} will grow on me.",
                      "I could see {b} becoming my favourite {x}."),
        past=("As a kid my favourite {x} was {b}.", "My favourite {x} used to be {b}.",
              "Back in {year} my favourite {x} was {b}.", "Years ago {b} was my favourite {x}."),
        restate=("{a} is still my favourite {x}.", "Nothing beats {a}, my favourite {x}.",
                 "Revisited {a} last night, still my favourite {x}.", "{a} remains my favourite {x}."),
    ),
    Family(
        "relationship", "status", None,
        base=("I'm {a} at the moment.", "I am {a}, for what it's worth.", "Relationship-wise, I'm {a}.",
              "For the record, I'm {a}.", "I'm {a}, and happy that way.", "Me? I'm {a}."),
        change=("Life update: I'm {b} now.", "Big news, I'm {b} now!", "Since last month I'm {b}.",
                "Things changed, I'm {b} these days.", "As of this spring I'm {b}.", "I'm {b} now, it's a new chapter."),
        correction=("Sorry, I said {a} earlier, but I'm {b}.", "I misspoke, I'm {b}, not {a}.",
                    "Correction: I'm {b}, not {a}.", "Turns out I explained it wrong: I'm {b}.",
                    "I was wrong to say {a}, I'm {b}.", "My mistake, I'm {b}, not {a}."),
        negation=("I'm not {a} anymore.", "I'm no longer {a}.", "I am not {a} any more.",
                  "I'm no longer {a}, that's over."),
        question=("What is {name}'s relationship status now?", "Is {name} single, engaged or married now?",
                  "What is {name}'s current relationship status?", "Is {name} in a relationship these days?"),
        other_person=("My {rel} is {b} now.", "{other} is {b}.", "{other} has been {b} for a year.",
                      "My {rel} is {b}, finally."),
        hypothetical=("If I were {b} I'd travel less.", "Maybe I'll be {b} by next year, who knows.",
                      "I might be {b} soon.", "I wonder what being {b} would be like."),
        past=("I used to be {b}.", "Back in {year} I was {b}.", "Years ago I was {b}.", "In {year} I was {b}."),
        restate=("Still {a}, nothing new there.", "I'm {a}, like I told you.", "Being {a} suits me.",
                 "Yes, still {a}."),
    ),
    Family(
        "age", "age", None,
        base=("I'm {a} years old.", "I'm {a}, if you can believe it.", "I am {a} this year.", "I'm {a} now.",
              "I'm {a}, for the record.", "At {a}, I'm the oldest in my team."),
        change=("I turned {b} on Saturday!", "Just turned {b}, feeling old.", "I'm {b} now, birthday was yesterday.",
                "I turned {b} last week, we had cake.", "Happy birthday to me, I'm {b} now.", "Officially {b} as of today."),
        correction=("Sorry, I'm {b}, not {a}; I always lose count.", "Turns out I'm {b}, not {a}, I checked.",
                    "I was wrong, I'm {b}.", "Correction: I'm {b}, not {a}.",
                    "I misspoke, I'm {b} years old.", "My mistake, I'm {b}, not {a}."),
        negation=(),
        question=("How old is {name} now?", "What is {name}'s age?", "How old is {name} these days?",
                  "What age is {name} now?"),
        other_person=("My {rel} is {b}.", "{other} just turned {b}.", "{other} is {b} years old.",
                      "My {rel} turned {b}."),
        hypothetical=("If I were {b} again I'd travel more.", "Maybe at {b} I'll retire.",
                      "I'd love to be {b} again.", "Imagine being {b} again."),
        past=("When I was {b} I lived abroad.", "Back in {year} I was {b}.", "I was {b} when I met my best friend.",
              "At {b} I learned to drive."),
        restate=("Being {a} has its perks.", "I'm {a}, still young at heart.", "{a} and counting.",
                 "At {a}, I need more sleep."),
    ),
    Family(
        "schedule", "day", "event",
        base=("The {x} is on {a}.", "My {x} is set for {a}.", "I booked the {x} for {a}.",
              "The {x} is scheduled for {a}.", "Got the {x} on {a}.", "Don't let me forget: the {x} is on {a}."),
        change=("The {x} got moved to {b}.", "They rescheduled the {x} to {b}.",
                "The {x} is on {b} now, {a} didn't work for them.", "Heads up, the {x} was pushed to {b}.",
                "The {x} moved from {a} to {b}.", "They changed the {x} to {b}."),
        correction=("I was wrong about the {x}, it's on {b}, not {a}.",
                    "Turns out the {x} is on {b}; I misread the email.", "My mistake, the {x} is on {b}, not {a}.",
                    "Correction: the {x} is on {b}.", "Sorry, I mixed up the dates, the {x} is on {b}.",
                    "I misspoke, the {x} is on {b}, not {a}."),
        negation=("The {x} is cancelled, it's not happening on {a} anymore.", "No more {x} on {a}, it got cancelled.",
                  "The {x} on {a} is off.", "The {x} isn't on {a} any more, it was cancelled."),
        question=("When is {name}'s {x}?", "What day is {name}'s {x} now?", "When is the {x} scheduled?",
                  "On which day is {name}'s {x}?"),
        other_person=("My {rel}'s {x} is on {b}.", "{other}'s {x} is on {b}.", "{other} has her {x} on {b}.",
                      "My {rel} booked a {x} for {b}."),
        hypothetical=("If the {x} moved to {b} I could make it.", "Maybe they'll move the {x} to {b}.",
                      "I might ask to move the {x} to {b}.", "Would {b} work for the {x}? Not sure."),
        past=("Back in {year} the {x} was always on {b}.", "The {x} used to be on {b}.",
              "Years ago the {x} was on {b}.", "In {year} the {x} was on {b}."),
        restate=("Reminder to myself, the {x} is on {a}.", "Still on for the {x} on {a}.",
                 "The {x} on {a} is confirmed.", "Looking forward to the {x} on {a}."),
    ),
    Family(
        "task", "state", "thing",
        base=("{x} is {a}.", "Quick update: {x} is {a}.", "{x} is {a}, waiting on the vendor.",
              "Status of {x}: {a}.", "Right now {x} is {a}.", "{x} is {a} as of this morning."),
        change=("{x} is {b} now.", "Good news, {x} is finally {b}.", "{x} is {b} since this morning.",
                "Update: {x} changed to {b}.", "{x} went from {a} to {b}.", "{x} is {b} at last."),
        correction=("My mistake, {x} was never {a}, it's {b}.", "I was wrong about {x}: it's {b}, not {a}.",
                    "Turns out {x} is {b}; the board showed it wrong.", "Correction: {x} is {b}.",
                    "Sorry, I misread it, {x} is {b}, not {a}.", "I misspoke, {x} is {b}."),
        negation=("{x} isn't {a} anymore.", "{x} is no longer {a}.", "{x} is not {a} any more.",
                  "{x}: no longer {a}."),
        question=("What is the status of {x}?", "Is {x} done yet?", "Where does {x} stand now?",
                  "What state is {x} in?"),
        other_person=("{other}'s {y} is {b}.", "My {rel}'s {y} is {b}.", "{y} is {b}.",
                      "{other} says {y} is {b}."),
        hypothetical=("If {x} were {b} we could ship on Friday.", "Maybe {x} will be {b} by the end of the week.",
                      "{x} might be {b} soon.", "I hope {x} is {b} by Monday."),
        past=("{x} used to be {b} before the rollback.", "Back in {year} {x} was {b}.",
              "Years ago a ticket like {x} was {b} for months.", "In {year} {x} was {b}."),
        restate=("{x} is still {a}.", "No change: {x} is {a}.", "{x} remains {a}.", "As before, {x} is {a}."),
    ),
)

# Things that hold many values: a later value is no update (distractors only).
MULTI: tuple[tuple[str, str, str], ...] = (
    # (vocabulary, first statement, later statement)
    ("food", "I love {a}.", "I love {b} too."),
    ("food", "I really like {a}.", "I also really like {b}."),
    ("hobby", "I enjoy {a} on weekends.", "I've also been enjoying {b} lately."),
    ("hobby", "I do {a} twice a week.", "I started doing {b} too."),
    ("language", "I speak {a}.", "I speak {b} as well."),
    ("language", "I'm learning {a}.", "I've started learning {b} too."),
    ("food", "{a} is one of my comfort foods.", "{b} is another comfort food of mine."),
    ("hobby", "I'm into {a} these days.", "Also into {b} now."),
)

FILLERS_TEXT: tuple[str, ...] = (
    "How was your weekend?", "Ha, that's hilarious.", "The weather has been so grey lately.",
    "I made {food} for dinner, turned out better than expected.", "Did you see the game last night?",
    "Oh no, I hope you feel better soon.", "That sounds like a plan.", "We went on {activity} on Sunday.",
    "I've been reading a lot before bed.", "Traffic this morning was awful.",
    "Can you believe it's already {month}?", "Thanks for the recommendation, I loved it.",
    "I'm so tired today, didn't sleep well.", "We should grab coffee soon.", "That's a great photo!",
    "I tried a new recipe with {food}, it was a mess.", "My plants are finally growing again.",
    "The neighbours had a party until two in the morning.", "Long day, I'm just glad it's over.",
    "I found a nice little bakery around the corner.", "We had {activity} planned but it rained.",
    "Funny, I was just thinking about you.", "I laughed so hard at that video you sent.",
    "Let me know how it goes!", "That's wonderful news, congratulations!",
    "I spent the afternoon cleaning the kitchen.", "The train was late again, of course.",
    "Do you have any podcast recommendations?", "I finally fixed the squeaky door.",
    "I'm trying to drink more water.", "We ordered {food} and watched a documentary.",
    "That museum exhibit was better than I expected.", "I can't stop listening to that song.",
    "Sorry for the late reply, busy week.", "I went for {activity} to clear my head.",
    "Honestly, same here.", "Good luck tomorrow, you'll do great.", "The sunset yesterday was unreal.",
    "I'm craving {food} right now.", "My sister sent me the funniest meme.", "I need a holiday.",
    "We played cards until midnight.", "Happy {month}! Any plans?", "My knee hurts after {activity}.",
    "I burned the toast again.", "I keep forgetting to call the plumber.",
    "That's such a good idea.", "How's your family doing?", "I binge-watched a whole series yesterday.",
    "I'll send you the link later.", "Wow, that's a lot to take in.", "I'm making {food} for friends on Saturday.",
)
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def half(items: Sequence[Any], split: str) -> list[Any]:
    """The ``split`` half of a list: even positions for tune, odd for test."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return list(items[0 if split == "tune" else 1::2])


def vocabulary(split: str) -> dict[str, list[str]]:
    """Every vocabulary's ``split`` half (favourite values follow their category's split)."""
    out = {name: half(words, split) for name, words in VOCAB.items()}
    for category in out["fav_category"]:
        out[f"fav:{category}"] = list(FAVOURITES[category])
    out["month"] = list(MONTHS)  # months only date fillers ("Happy May!"): shared, never a value
    return out


PHRASING_FIELDS = ("base", "change", "correction", "negation", "question", "other_person", "hypothetical", "past",
                   "restate")


def phrasings(split: str) -> dict[str, list[str]]:
    """Every phrasing list's ``split`` half, keyed ``<family>.<field>``, plus ``multi`` and ``filler``."""
    out = {f"{f.name}.{fld}": half(getattr(f, fld), split) for f in FAMILIES for fld in PHRASING_FIELDS}
    out["multi"] = [f"{v}|{a}|{b}" for v, a, b in half(MULTI, split)]
    out["filler"] = half(FILLERS_TEXT, split)
    return out


# -- generated data -------------------------------------------------------------------------


@dataclass(frozen=True)
class Said:
    """One generated turn (one memory)."""

    node_id: str
    speaker: str
    text: str
    when: datetime
    batch: int  # the ingest call it arrives in (its session, or later for a late arrival)
    role: str  # filler, update_old, update_new, distractor_base, distractor

    @property
    def description(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass(frozen=True)
class Update:
    """A gold update: ``new_id`` replaces ``old_id``."""

    old_id: str
    new_id: str
    speaker: str
    family: str
    kind: str  # change, correction, negation
    late: bool  # the older statement arrives in a later ingest call than the newer one
    question: str

    @property
    def gold_type(self) -> str:
        return GOLD_TYPE[self.kind]


@dataclass(frozen=True)
class Distractor:
    """Two memories that look like an update and are not one."""

    base_id: str
    other_id: str
    speaker: str
    family: str
    kind: str


@dataclass
class Conversation:
    citizen_id: str
    speakers: tuple[str, str]
    said: list[Said] = field(default_factory=list)  # in arrival order
    updates: list[Update] = field(default_factory=list)
    distractors: list[Distractor] = field(default_factory=list)

    @property
    def outdated_ids(self) -> set[str]:
        """The gold: memories a later memory replaces."""
        return {u.old_id for u in self.updates}

    def by_id(self) -> dict[str, Said]:
        return {s.node_id: s for s in self.said}

    def batches(self) -> list[list[Said]]:
        """The turns of each ingest call, in arrival order."""
        out: dict[int, list[Said]] = {}
        for s in self.said:
            out.setdefault(s.batch, []).append(s)
        return [out[b] for b in sorted(out)]

    def memories(self) -> list[list[Any]]:
        """MemoryNodes for ``memory.ingest``, one list per ingest call."""
        return [memory_nodes(batch, self.citizen_id) for batch in self.batches()]


def memory_nodes(said: Sequence[Said], citizen_id: str) -> list[Any]:
    """MemoryNodes of turns, as the LoCoMo benchmark stores turns (name = description = "<speaker>: <text>")."""
    from llama_consciousness.schema import MemoryNode

    return [MemoryNode(
        node_id=s.node_id, level="N1", citizen_id=citizen_id, node_type="Memory",
        name=s.description, description=s.description, energy=0.5, confidence=0.8,
        valid_at=s.when, created_at=s.when, goal="converse", mindstate="conversation",
        emotion_vector={"engagement": 0.5}, extra={"speaker": s.speaker},
    ) for s in said]


# -- generation -----------------------------------------------------------------------------

_AN = re.compile(r"\b([Aa]) (?=[AEIOUaeiou])")


def _finish(text: str) -> str:
    text = _AN.sub(lambda m: m.group(1) + "n ", text)
    return text[:1].upper() + text[1:]


class _Draw:
    """Draws from one split's vocabularies and phrasings with one random generator."""

    def __init__(self, rng: random.Random, split: str) -> None:
        self.rng = rng
        self.split = split
        self.vocab = vocabulary(split)
        self.phrases = phrasings(split)

    def word(self, name: str, avoid: Sequence[str] = ()) -> str:
        choices = [w for w in self.vocab[name] if w not in avoid]
        return self.rng.choice(choices)

    def phrase(self, key: str) -> str:
        return self.rng.choice(self.phrases[key])

    def values(self, family: Family, instance: str | None) -> tuple[str, str]:
        """Two different values of a family (the earlier one first)."""
        if family.values == "age":
            lo, hi = AGES[self.split]
            a = self.rng.randint(lo + 1, hi - 1)
            return str(a), str(a + 1)
        name = f"fav:{instance}" if family.values == "fav" else family.values
        a = self.word(name, avoid=[w for w, g in SAME_MEANING.items() if g == "done"] if name == "state" else ())
        group = SAME_MEANING.get(a, a)
        return a, self.word(name, avoid=[w for w in self.vocab[name] if SAME_MEANING.get(w, w) == group])

    def ticket(self, used: set[int]) -> int:
        lo, hi = TICKETS[self.split]
        while True:
            n = self.rng.randint(lo, hi)
            if n not in used:
                used.add(n)
                return n


def _fill(template: str, **values: str) -> str:
    return _finish(template.format(**values))


def generate(seed: int = 0, citizens: int = 8, split: str = "test", *, sessions: int = SESSIONS,
             updates_per_speaker: int = UPDATES_PER_SPEAKER, distractors_per_speaker: int = DISTRACTORS_PER_SPEAKER,
             fillers: int = FILLERS, late_share: float = LATE_SHARE, prefix: str = "upd") -> list[Conversation]:
    """``citizens`` conversations from the ``split`` half, the same for the same arguments."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    if sessions < 3:
        raise ValueError("at least 3 sessions")
    rng = random.Random(f"{seed}:{split}")
    draw = _Draw(rng, split)
    speakers = draw.vocab["speaker"]
    out = []
    for c in range(citizens):
        pair = tuple(rng.sample(speakers, 2))
        out.append(_conversation(draw, f"{prefix}-{split}-{seed}-{c:03d}", pair, sessions, updates_per_speaker,
                                 distractors_per_speaker, fillers, late_share, c))
    return out


def _scenario_texts(draw: _Draw, sc: dict[str, Any], others: Sequence[str], tickets: set[int]) -> tuple[str, str, str]:
    """(earlier text, later text, question or "") of one scenario."""
    rng = draw.rng
    fam: Family = sc["family"]
    inst = sc["instance"]
    if sc["kind"] == "multi_valued":
        vocab, t1, t2 = rng.choice(half(MULTI, draw.split))
        v1 = draw.word(vocab)
        return _fill(t1, a=v1), _fill(t2, b=draw.word(vocab, avoid=[v1])), ""
    a, b = draw.values(fam, inst)
    common = {"x": inst or "", "rel": draw.word("relative"), "other": rng.choice(others),
              "year": str(rng.choice(YEARS[draw.split])), "name": sc["speaker"]}
    if fam.name == "task":
        common["y"] = f"{draw.word('thing')} #{draw.ticket(tickets)}"  # another thing altogether
    base = _fill(draw.phrase(f"{fam.name}.base"), a=a, b=b, **common)
    later = _fill(draw.phrase(f"{fam.name}.{sc['kind']}"), a=a, b=b, **common)
    question = _fill(draw.phrase(f"{fam.name}.question"), **common) if sc["update"] else ""
    return base, later, question


def _conversation(draw: _Draw, citizen: str, speakers: tuple[str, str], sessions: int, n_updates: int,
                  n_distractors: int, n_fillers: int, late_share: float, index: int) -> Conversation:
    rng = draw.rng
    conv = Conversation(citizen, speakers)  # type: ignore[arg-type]
    # planned[session] = list of (speaker, text, role, key, batch); key ties a scenario's two memories
    planned: dict[int, list[dict[str, Any]]] = {s: [] for s in range(sessions)}
    tickets: set[int] = set()
    scenarios: list[dict[str, Any]] = []
    others = [o for o in draw.vocab["other"]]

    for speaker in speakers:
        # each speaker's attribute instances, each used by one scenario only
        slots: list[tuple[Family, str | None]] = []
        for fam in FAMILIES:
            if fam.instance is None:
                slots.append((fam, None))
            elif fam.instance == "thing":
                slots += [(fam, f"{draw.word('thing')} #{draw.ticket(tickets)}") for _ in range(3)]
            else:
                slots += [(fam, inst) for inst in rng.sample(draw.vocab[fam.instance],
                                                               min(3, len(draw.vocab[fam.instance])))]
        rng.shuffle(slots)
        chosen = slots[:n_updates + n_distractors]
        # kinds in fixed shares (changes half, corrections 30%, negations 20%), distractor kinds in turn
        n_change, n_correction = round(0.5 * n_updates), round(0.3 * n_updates)
        update_kinds = ([KINDS[0]] * n_change + [KINDS[1]] * n_correction
                        + [KINDS[2]] * (n_updates - n_change - n_correction))
        offset = rng.randrange(len(DISTRACTOR_KINDS))
        distractor_kinds = [DISTRACTOR_KINDS[(i + offset) % len(DISTRACTOR_KINDS)] for i in range(n_distractors)]
        rng.shuffle(update_kinds)
        for i, (fam, inst) in enumerate(chosen):
            if i < n_updates:
                kind = update_kinds[i] if getattr(fam, update_kinds[i]) else "change"
                late = rng.random() < late_share and kind != "negation"
                scenarios.append({"speaker": speaker, "family": fam, "instance": inst, "kind": kind, "late": late,
                                  "update": True})
            else:
                kind = distractor_kinds[i - n_updates]
                scenarios.append({"speaker": speaker, "family": fam, "instance": inst, "kind": kind,
                                  "late": False, "update": False})

    seen: set[str] = set()
    for key, sc in enumerate(scenarios):
        speaker = sc["speaker"]
        first = rng.randint(0, sessions - 3 if sc["late"] else sessions - 2)
        second = rng.randint(first + 1, sessions - 2 if sc["late"] else sessions - 1)
        for _attempt in range(50):  # two texts no other turn of the conversation has
            texts = _scenario_texts(draw, sc, others, tickets)
            if not {speaker + texts[0], speaker + texts[1]} & seen and texts[0] != texts[1]:
                break
        seen.update((speaker + texts[0], speaker + texts[1]))
        if sc["update"]:
            sc["question"] = texts[2]
            # a late arrival: the older statement comes in a later ingest call than its successor
            old_batch = rng.randint(second + 1, sessions - 1) if sc["late"] else first
            roles = ("update_old", "update_new")
        else:
            old_batch = first
            roles = ("distractor_base", "distractor")
        planned[first].append({"speaker": speaker, "text": texts[0], "role": roles[0], "key": key,
                               "batch": old_batch})
        planned[second].append({"speaker": speaker, "text": texts[1], "role": roles[1], "key": key,
                                "batch": second})

    # fillers: spread over the sessions, never the same text twice in a conversation
    for _ in range(n_fillers):
        for _attempt in range(50):
            speaker = rng.choice(speakers)
            text = _fill(draw.phrase("filler"), food=draw.word("food"), activity=draw.word("activity"),
                         month=draw.word("month"))
            if speaker + text not in seen:
                seen.add(speaker + text)
                break
        else:
            continue
        s = rng.randrange(sessions)
        planned[s].append({"speaker": speaker, "text": text, "role": "filler", "key": None, "batch": s})

    # times: session s on day 30*s (+ a few days), turns a minute apart in a shuffled order
    start = START + timedelta(days=7 * index)
    ids: dict[tuple[int, str], str] = {}
    arrivals: list[tuple[int, int, Said]] = []
    for s in range(sessions):
        items = planned[s]
        rng.shuffle(items)
        when0 = start + timedelta(days=30 * s + rng.randint(0, 5))
        for t, item in enumerate(items):
            said = Said(f"{citizen}:S{s + 1}:{t + 1}", item["speaker"], item["text"],
                        when0 + timedelta(minutes=t), item["batch"], item["role"])
            if item["key"] is not None:
                ids[(item["key"], item["role"])] = said.node_id
            # late arrivals go at a random position of their later batch
            order = t if item["batch"] == s else rng.randint(0, 10_000)
            arrivals.append((item["batch"], order if item["batch"] == s else 1_000_000 + order, said))
    arrivals.sort(key=lambda x: (x[0], x[1]))
    conv.said = [a[2] for a in arrivals]

    for key, sc in enumerate(scenarios):
        if sc["update"]:
            conv.updates.append(Update(ids[(key, "update_old")], ids[(key, "update_new")], sc["speaker"],
                                       sc["family"].name, sc["kind"], sc["late"], sc["question"]))
        else:
            conv.distractors.append(Distractor(ids[(key, "distractor_base")], ids[(key, "distractor")],
                                               sc["speaker"], sc["family"].name, sc["kind"]))
    return conv


# -- command line -------------------------------------------------------------------------


def load_written(path: str | Path) -> list[Conversation]:
    """Conversations written by people, not generated (``updates_conversations_dev.json``): a JSON list of
    ``{"speakers", "sessions": [{"date", "turns": [{"speaker", "text"}]}], "updates": [{"old": [s, t],
    "new": [s, t], "question", "kind"}], "distractors": [{"base", "other", "kind"}]}``; one ingest call per
    session, turns a minute apart."""
    import json

    out: list[Conversation] = []
    for ci, c in enumerate(json.loads(Path(path).read_text(encoding="utf-8"))):
        conv = Conversation(citizen_id=f"written{ci}", speakers=tuple(c["speakers"]))
        role = {tuple(u["old"]): "update_old" for u in c["updates"]}
        role.update({tuple(u["new"]): "update_new" for u in c["updates"]})
        for d in c["distractors"]:
            role.setdefault(tuple(d["base"]), "distractor_base")
            role.setdefault(tuple(d["other"]), "distractor")
        ids: dict[tuple[int, int], str] = {}
        for si, session in enumerate(c["sessions"]):
            day = datetime.fromisoformat(session["date"]).replace(tzinfo=timezone.utc)
            for ti, turn in enumerate(session["turns"]):
                ids[(si, ti)] = f"written{ci}:{si}:{ti}"
                conv.said.append(Said(ids[(si, ti)], turn["speaker"], turn["text"], day + timedelta(minutes=ti), si,
                                      role.get((si, ti), "filler")))
        speaker = {ids[k]: c["sessions"][k[0]]["turns"][k[1]]["speaker"] for k in ids}
        for u in c["updates"]:
            new = ids[tuple(u["new"])]
            conv.updates.append(Update(ids[tuple(u["old"])], new, speaker[new], "written", u["kind"], False,
                                       u["question"]))
        for d in c["distractors"]:
            base = ids[tuple(d["base"])]
            conv.distractors.append(Distractor(base, ids[tuple(d["other"])], speaker[base], "written", d["kind"]))
        out.append(conv)
    return out


def describe(convs: Sequence[Conversation]) -> str:
    """Counts: memories, updates by kind (late ones), distractors by kind."""
    memories = sum(len(c.said) for c in convs)
    updates = [u for c in convs for u in c.updates]
    distractors = [d for c in convs for d in c.distractors]
    by_kind = {k: sum(1 for u in updates if u.kind == k) for k in KINDS}
    by_dis = {k: sum(1 for d in distractors if d.kind == k) for k in DISTRACTOR_KINDS}
    return (f"{len(convs)} conversations, {memories} memories; {len(updates)} updates ("
            + ", ".join(f"{k} {n}" for k, n in by_kind.items())
            + f"; {sum(u.late for u in updates)} late arrivals); {len(distractors)} distractors ("
            + ", ".join(f"{k} {n}" for k, n in by_dis.items()) + ")")


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("Tune / test split\n-----------------\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=SPLITS, default="test", help=SPLIT_HELP)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--citizens", type=int, default=8)
    parser.add_argument("--show", type=int, default=0, help="print the first N conversations in full")
    args = parser.parse_args(argv)
    convs = generate(args.seed, args.citizens, args.split)
    print(describe(convs))
    for conv in convs[:args.show]:
        print(f"\n## {conv.citizen_id} ({' & '.join(conv.speakers)})")
        for batch_no, batch in enumerate(conv.batches()):
            print(f"-- ingest call {batch_no + 1}")
            for s in batch:
                print(f"  {s.node_id:<28} {s.when:%Y-%m-%d} {s.role:<16} {s.description}")
        for u in conv.updates:
            print(f"  UPDATE {u.kind}{' (late)' if u.late else ''} {u.old_id} -> {u.new_id}: {u.question}")
        for d in conv.distractors:
            print(f"  DISTRACTOR {d.kind}: {d.base_id}, {d.other_id}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
