"""Word banks and filler chats for the LongMemEval generator (:mod:`tmem.eval.longmemeval.synth`).

The filler sessions stand in for the official file's ShareGPT / UltraChat sessions and simulated small talk: a user
asks for help on a topic, the assistant answers at length, the user follows up. Every text is assembled from the
banks below by a seeded ``random.Random``, so a seed gives the same file on every machine and Python version.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

Turn = dict[str, object]


@dataclass(frozen=True)
class Topic:
    """One subject of filler chats: what users ask, the things they ask about, what the assistant advises."""

    name: str
    asks: tuple[str, ...]
    things: tuple[str, ...]
    advice: tuple[str, ...]


TOPICS: tuple[Topic, ...] = (
    Topic(
        "cooking",
        (
            "I'm trying to get better at {thing}. Any tips for a beginner?",
            "What's a good way to make {thing} on a weeknight without much time?",
            "Can you walk me through {thing} step by step?",
        ),
        ("homemade pasta", "a vegetable curry", "sourdough bread", "roast chicken", "miso soup", "a lemon tart"),
        (
            "Start with {thing} at a lower heat than you think; patience does more than any special tool.",
            "Prepare every ingredient before you turn on the stove, so nothing burns while you chop.",
            "Taste as you go and adjust the salt at the end, because flavours concentrate while {thing} cooks.",
            "A heavy pan spreads the heat evenly, which matters a lot for {thing}.",
            "If you have leftovers, {thing} usually keeps for two or three days in a sealed container.",
        ),
    ),
    Topic(
        "travel planning",
        (
            "I'm planning a trip to {thing} next spring. What should I not miss?",
            "How many days would you recommend for {thing}?",
            "What's the best way to get around in {thing} on a budget?",
        ),
        ("Lisbon", "Kyoto", "the Scottish Highlands", "Mexico City", "Vancouver Island", "the Amalfi Coast"),
        (
            "Most visitors find that {thing} rewards slow days more than a packed schedule.",
            "Book the popular sights early, since tickets in {thing} often sell out weeks ahead in high season.",
            "Public transport passes are usually cheaper than single tickets if you stay longer than three days.",
            "Try to plan one unstructured afternoon; some of the best moments happen when you wander.",
            "Check the local holidays before you book, because opening hours change a lot around them.",
        ),
    ),
    Topic(
        "programming",
        (
            "I keep getting confused by {thing} in Python. Can you explain it simply?",
            "What's the cleanest way to use {thing} in a small project?",
            "Could you show me an example of {thing} and when it is a bad idea?",
        ),
        ("decorators", "async functions", "list comprehensions", "dataclasses", "context managers", "generators"),
        (
            "Think of {thing} as a tool for one job; when code needs a long explanation, a plain function is clearer.",
            "Write a tiny test first, then change one thing at a time until the behaviour makes sense.",
            "The official documentation has short examples of {thing} that are worth typing out by hand.",
            "Keep functions small and name them after what they return, which makes {thing} easier to follow.",
            "Profiling before optimising saves a lot of time, because the slow part is rarely where you expect.",
        ),
    ),
    Topic(
        "fitness",
        (
            "I want to start {thing} but I have a bad knee. How should I begin?",
            "How often should I do {thing} each week to see progress?",
            "What should I eat before {thing} in the morning?",
        ),
        ("running", "strength training", "swimming", "cycling", "yoga", "rowing"),
        (
            "Begin {thing} with short sessions and add about ten percent per week, which keeps injuries away.",
            "Rest days are part of training; your body adapts while it recovers, not while you exercise.",
            "A light snack with some carbohydrates an hour before {thing} helps most people feel stronger.",
            "Good form matters more than weight or speed, so consider one session with a coach.",
            "Track how you feel as well as the numbers; sleep and stress change performance a lot.",
        ),
    ),
    Topic(
        "gardening",
        (
            "My {thing} keep dying on the balcony. What am I doing wrong?",
            "When is the right time to plant {thing} in a temperate climate?",
            "How do I keep pests away from {thing} without chemicals?",
        ),
        ("tomatoes", "basil plants", "succulents", "strawberries", "lavender bushes", "pepper plants"),
        (
            "Most balcony problems come from watering; {thing} prefer deep watering less often.",
            "Check the drainage holes of your pots, because standing water rots the roots quickly.",
            "Companion plants such as marigolds keep many insects away from {thing}.",
            "Morning sun with some afternoon shade suits {thing} better than a full day of harsh light.",
            "A thin layer of mulch keeps the soil moist and cool during hot weeks.",
        ),
    ),
    Topic(
        "personal finance",
        (
            "How should I think about {thing} if I just started my first job?",
            "Is {thing} worth it for someone in their thirties?",
            "Can you explain {thing} like I'm new to money stuff?",
        ),
        ("an emergency fund", "index funds", "a monthly budget", "paying off a student loan", "a retirement account"),
        (
            "Automating the transfer on payday makes {thing} happen without relying on willpower.",
            "Low fees compound over decades, so compare costs before anything else.",
            "Write down your spending for one month; the numbers usually surprise people.",
            "It helps to separate short-term savings from long-term investments in different accounts.",
            "None of this is personal financial advice, but {thing} is a common first step for many people.",
        ),
    ),
    Topic(
        "history",
        (
            "Can you give me a short overview of {thing}?",
            "What were the main causes of {thing}?",
            "Why do historians still argue about {thing}?",
        ),
        ("the Silk Road trade", "the printing press", "the fall of Constantinople", "the Meiji Restoration"),
        (
            "Historians usually describe {thing} as the result of several slow changes rather than one event.",
            "Trade routes, new technology and politics all played a part, and their weight is still debated.",
            "Primary sources from the period are patchy, which leaves room for different interpretations.",
            "A good starting book gives the big picture first and the details of {thing} afterwards.",
            "Museums often have free online collections with documents from the time.",
        ),
    ),
    Topic(
        "writing",
        (
            "I'm stuck on {thing}. How do I get unstuck?",
            "Could you give me feedback on how to approach {thing}?",
            "What's a good routine for {thing} when I only have evenings free?",
        ),
        ("a cover letter", "my short story", "a wedding speech", "a blog post about my hobby", "a grant proposal"),
        (
            "Write a messy first draft of {thing} quickly and only edit once the whole shape is on the page.",
            "Reading the text aloud shows clumsy sentences faster than reading it silently.",
            "Cut the first paragraph; many drafts only start to say something in the second one.",
            "Set a small daily target, such as two hundred words, so {thing} moves forward every evening.",
            "Ask one trusted reader for a single improvement rather than a full review.",
        ),
    ),
)

FOLLOW_UPS = (
    "Thanks, that helps. What would you do differently if you were in my place?",
    "Interesting. Is there a common mistake people make with this?",
    "Could you summarise that in a few bullet points?",
    "That makes sense. How long does it usually take to see results?",
    "Great. Are there any good resources you'd point me to?",
    "Okay, and what if I only have half an hour a day?",
)
OPENERS = ("Good question!", "Happy to help.", "Sure.", "That's a great thing to work on.", "Of course.")
CLOSERS = (
    "Let me know how it goes.",
    "Feel free to ask if anything is unclear.",
    "I hope that gives you a good starting point.",
    "Good luck, and enjoy the process.",
)

FIRST_NAMES = ("Maya", "Luca", "Priya", "Tomas", "Aisha", "Jonah", "Elena", "Kenji", "Sofia", "Omar", "Freya", "Ravi")
PETS = ("cat", "dog", "rabbit", "parrot", "hamster", "tortoise")
CITIES = ("Denver", "Porto", "Osaka", "Leeds", "Austin", "Tallinn", "Perth", "Bologna", "Halifax", "Valencia")
STORES = ("Target", "a flea market", "IKEA", "an outlet mall", "a small boutique downtown", "Costco", "Etsy")
OBJECTS = ("a standing desk", "a road bike", "a coffee grinder", "a pair of hiking boots", "a sewing machine")
HOBBIES = (
    ("photography", "night-sky photography with a wide-angle lens"),
    ("baking", "laminated pastries like croissants"),
    ("hiking", "long ridge hikes with little elevation loss"),
    ("board games", "cooperative strategy games"),
    ("reading", "Scandinavian crime novels"),
    ("music", "learning jazz standards on the piano"),
)
COLLECTIBLES = (
    ("plants", "bought", "a"),
    ("books", "read", "a"),
    ("concerts", "went to", "a"),
    ("museum visits", "made", "a"),
    ("cakes", "baked", "a"),
)


def pick(rng: random.Random, options: tuple[str, ...]) -> str:
    return options[rng.randrange(len(options))]


def assistant_reply(rng: random.Random, topic: Topic, thing: str, sentences: int) -> str:
    """A multi-sentence answer on ``topic`` about ``thing``: opener, ``sentences`` pieces of advice, closer."""
    advice = list(topic.advice)
    rng.shuffle(advice)
    body = [a.format(thing=thing) for a in (advice * (1 + sentences // len(advice)))[:sentences]]
    return " ".join([pick(rng, OPENERS), *body, pick(rng, CLOSERS)])


def chat_turns(
    rng: random.Random, topic: Topic, turns: int, sentences: tuple[int, int], *, labelled: bool
) -> list[Turn]:
    """A user-assistant chat of ``turns`` turns (user first) on ``topic``; ``labelled`` adds ``has_answer: false``."""
    thing = pick(rng, topic.things)
    out: list[Turn] = []
    for i in range(turns):
        if i % 2 == 0:
            text = pick(rng, topic.asks).format(thing=thing) if i == 0 else pick(rng, FOLLOW_UPS)
            out.append({"role": "user", "content": text})
        else:
            out.append({"role": "assistant", "content": assistant_reply(rng, topic, thing, rng.randint(*sentences))})
        if labelled:
            out[-1]["has_answer"] = False
    return out


def filler_id(rng: random.Random, n: int) -> str:
    """An id shaped like the official filler ids (``sharegpt_<code>_<n>``, ``ultrachat_<number>``, ``<hex>_<n>``)."""
    style = n % 3
    if style == 0:
        code = "".join(rng.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(7))
        return f"sharegpt_{code}_{n % 4}"
    if style == 1:
        return f"ultrachat_{rng.randrange(100000, 999999)}"
    return f"{rng.getrandbits(32):08x}_{1 + n % 3}"
