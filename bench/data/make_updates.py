"""Writes bench/data/updates.json and updates_probes.json (the update dev set of bench/updates.py): nine made-up
conversations, their probes and the slot label of each fact turn. Run: python bench/data/make_updates.py"""

import datetime as dt
import json
import random
from collections import Counter
from pathlib import Path

from updates_filler import FILLER  # the sibling module (run as a script from any folder)

HERE = Path(__file__).resolve().parent

# Each conversation: name, speakers, sessions [(start, [(speaker, text, slot-label-or-None)])], probes.
C = []


def conv(name, speakers, sessions, probes):
    C.append((name, speakers, sessions, probes))


conv(
    "upd-dana",
    ["Dana", "Sam"],
    [
        (
            "2023-01-10T18:00",
            [
                ("Sam", "Hey Dana! Good to see you! How have you been?", None),
                ("Dana", "Hi Sam! Busy as always, but good.", None),
                (
                    "Dana",
                    "I've been working at Acme Logistics as a dispatcher for four years now, the night shifts are long.",
                    "Dana / employer",
                ),
                ("Sam", "Four years, wow. Do you still like it?", None),
                (
                    "Dana",
                    "Mostly. We live in a small flat in Leeds, close to the canal, so the commute is easy.",
                    "Dana / home",
                ),
                ("Dana", "I drive my old blue Fiat Punto to the depot every evening.", "Dana / car"),
                ("Sam", "What are you listening to on those drives?", None),
                (
                    "Dana",
                    "My favourite band at the moment is Arctic Monkeys, I play them all the time.",
                    "Dana / favourite band",
                ),
                ("Sam", "Nice, talk soon!", None),
            ],
        ),
        (
            "2023-03-15T12:30",
            [
                ("Dana", "Big news, I handed in my notice at Acme last week.", "Dana / job"),
                ("Sam", "No way! What's next?", None),
                ("Dana", "I start at Globex Energy on Monday as a shift planner. Day hours at last.", "Dana / job"),
                ("Sam", "Congratulations! Any holiday plans to celebrate?", None),
                (
                    "Dana",
                    "We're planning a summer trip to Portugal in July, Lisbon and the coast.",
                    "Dana / summer trip",
                ),
                ("Sam", "Sounds lovely.", None),
            ],
        ),
        (
            "2023-05-20T09:15",
            [
                ("Sam", "Morning! How's the weekend going?", None),
                ("Dana", "Good! I finally sold the Fiat, the clutch was dying.", "Dana / car"),
                (
                    "Dana",
                    "Got myself an electric cargo bike instead, I ride it to the Globex office.",
                    "Dana / vehicle",
                ),
                ("Sam", "And the trip?", None),
                (
                    "Dana",
                    "The Portugal idea is off, flights were too expensive. We're doing a week in the Scottish Highlands instead.",
                    "Dana / summer trip",
                ),
                ("Sam", "The Highlands are beautiful in summer.", None),
            ],
        ),
        (
            "2023-08-02T20:00",
            [
                ("Dana", "Settling into our new place in York, there are boxes everywhere.", "Dana / home"),
                ("Sam", "How's the neighbourhood?", None),
                (
                    "Dana",
                    "Quiet, close to the minster. Lately I can't stop listening to Wet Leg, they are my favourite now.",
                    "Dana / favourite band",
                ),
                ("Sam", "Great choice. Say hi to everyone!", None),
            ],
        ),
    ],
    [
        ("Where does Dana work?", "job", "explicit", ["Globex"], ["Acme"]),
        ("Where does Dana live?", "move", "implicit", ["York"], ["Leeds"]),
        ("What is Dana's favourite band?", "preference", "explicit", ["Wet Leg"], ["Arctic Monkeys"]),
        ("What does Dana use to get to work?", "possession", "explicit", ["cargo bike"], ["Fiat Punto"]),
        ("Where is Dana going on the summer trip?", "plan", "explicit", ["Highlands"], ["Portugal in July"]),
    ],
)

conv(
    "upd-omar",
    ["Omar", "Lena"],
    [
        (
            "2023-02-01T19:00",
            [
                ("Lena", "Omar! So good to hear from you!", None),
                ("Omar", "Hey Lena! Likewise.", None),
                ("Omar", "Still single, honestly I've given up on dating apps for now.", "Omar / relationship status"),
                ("Lena", "Their loss. How's the running?", None),
                ("Omar", "My knee is still wrecked from the marathon, I can't run at all.", "Omar / knee"),
                ("Omar", "At least Miso and Tofu keep me company, our two cats are the best.", "Omar / number of cats"),
                ("Omar", "I drink three espressos a day to get through work though.", "Omar / daily drink"),
                ("Lena", "Haha, classic Omar.", None),
            ],
        ),
        (
            "2023-04-11T08:30",
            [
                ("Omar", "I'm studying for an accounting certificate in the evenings.", "Omar / studies"),
                ("Lena", "That's ambitious!", None),
                ("Omar", "Thanks! How are things with you?", None),
                ("Lena", "Busy with the garden, the tomatoes are finally growing.", None),
            ],
        ),
        (
            "2023-06-23T21:10",
            [
                ("Omar", "I've been seeing someone! Her name is Priya, we met at the climbing gym.", "Omar / partner"),
                ("Lena", "Omar!! That's amazing.", None),
                ("Omar", "We adopted a third cat last week, a tiny black one called Nori.", "Omar / cats"),
                (
                    "Omar",
                    "I switched from the accounting course to a nursing degree, it suits me better.",
                    "Omar / education",
                ),
                ("Lena", "Big changes!", None),
            ],
        ),
        (
            "2023-09-03T10:00",
            [
                ("Omar", "The physio worked, I ran 10k pain-free on Sunday.", "Omar / knee"),
                ("Lena", "So happy for you!", None),
                ("Omar", "I quit coffee too, green tea only now, and I sleep much better.", "Omar / drink"),
                ("Lena", "Who are you and what did you do with Omar?", None),
            ],
        ),
    ],
    [
        ("Is Omar in a relationship?", "relationship", "implicit", ["Priya"], ["Still single"]),
        ("Can Omar run?", "health", "explicit", ["pain-free"], ["can't run"]),
        ("How many cats does Omar have?", "count", "explicit", ["third cat"], ["two cats"]),
        ("What does Omar drink to get through the day?", "preference", "explicit", ["green tea"], ["three espressos"]),
        ("What is Omar studying?", "job", "explicit", ["nursing"], ["accounting certificate"]),
    ],
)

conv(
    "upd-mei",
    ["Mei", "Jonas"],
    [
        (
            "2023-01-22T15:00",
            [
                ("Jonas", "Hi Mei, happy new year!", None),
                ("Mei", "Happy new year Jonas! My apartment in Osaka is freezing, the heater broke.", "Mei / home"),
                ("Mei", "Work is fine, I'm still teaching English at a high school in Namba.", "Mei / job"),
                ("Jonas", "Do you have a pet to keep you warm?", None),
                ("Mei", "I don't have any pets, my landlord forbids them.", "Mei / pet"),
                ("Mei", "We set the wedding for October 2023, at a shrine near my parents.", "Mei / wedding date"),
                ("Jonas", "Congratulations again!", None),
            ],
        ),
        (
            "2023-03-30T11:45",
            [
                ("Mei", "My old iPhone 8 finally died this morning.", "Mei / phone"),
                ("Jonas", "Oh no. Getting a new one?", None),
                ("Mei", "I switched to a Pixel 7, the camera is great.", "Mei / phone"),
                ("Jonas", "Nice!", None),
            ],
        ),
        (
            "2023-06-12T19:20",
            [
                ("Mei", "We just got the keys to our place in Kyoto!", "Mei / home"),
                ("Jonas", "That's wonderful, when do you move?", None),
                ("Mei", "Next week. We moved the wedding to April 2024 so we can settle first.", "Mei / wedding date"),
                ("Jonas", "Makes sense.", None),
            ],
        ),
        (
            "2023-08-28T09:00",
            [
                ("Mei", "My first week at the translation agency was intense, so many contracts.", "Mei / job"),
                ("Jonas", "How is the puppy I saw on your story?", None),
                ("Mei", "Our new puppy Kuma chewed my shoes again, he is a little monster.", "Mei / pet"),
                ("Jonas", "Puppies!", None),
            ],
        ),
    ],
    [
        ("Where does Mei live?", "move", "explicit", ["Kyoto"], ["Osaka"]),
        ("What does Mei do for work?", "job", "implicit", ["translation agency"], ["teaching English"]),
        ("Does Mei have a pet?", "possession", "implicit", ["Kuma"], ["any pets"]),
        ("When is Mei's wedding?", "plan", "explicit", ["April 2024"], ["October 2023"]),
        ("What phone does Mei use?", "possession", "explicit", ["Pixel 7"], ["iPhone 8"]),
    ],
)

conv(
    "upd-rafael",
    ["Rafael", "Tom"],
    [
        (
            "2023-02-14T20:30",
            [
                ("Tom", "Hey Rafa, what's up?", None),
                (
                    "Rafael",
                    "Not much! My girlfriend Carla and I are cooking dinner for Valentine's.",
                    "Rafael / partner",
                ),
                ("Rafael", "I eat meat every day, honestly nothing beats a good steak.", "Rafael / diet"),
                ("Rafael", "Work at Bistro Lumen is hectic, I'm a line cook on the grill station.", "Rafael / job"),
                ("Tom", "Sounds like a lot.", None),
                ("Rafael", "I bought a used Yamaha piano for the flat, I practise every night.", "Rafael / instrument"),
                (
                    "Rafael",
                    "I share the flat with three housemates, so the piano has to be quiet.",
                    "Rafael / housemates",
                ),
            ],
        ),
        (
            "2023-04-02T13:00",
            [
                (
                    "Rafael",
                    "Carla and I broke up in March. It was mutual, we're still friends.",
                    "Rafael / relationship",
                ),
                ("Tom", "Sorry to hear that, man.", None),
                ("Tom", "How's the kitchen?", None),
                ("Rafael", "I got promoted to sous chef at Bistro Lumen!", "Rafael / position"),
                ("Tom", "Congrats!", None),
            ],
        ),
        (
            "2023-07-19T18:00",
            [
                ("Rafael", "I've been vegetarian for a month now and I feel great.", "Rafael / diet"),
                ("Tom", "Who would have guessed!", None),
                (
                    "Rafael",
                    "I sold the piano to make room for a drum kit. The neighbours love me.",
                    "Rafael / instrument",
                ),
                (
                    "Rafael",
                    "Two of the housemates moved out, so it's just me and Ana in the flat now.",
                    "Rafael / housemates",
                ),
                ("Tom", "More space for the drums!", None),
            ],
        ),
    ],
    [
        ("Who is Rafael dating?", "relationship", "explicit", ["broke up"], ["girlfriend Carla"]),
        ("What does Rafael eat?", "health", "explicit", ["vegetarian"], ["steak"]),
        ("What is Rafael's job?", "job", "explicit", ["sous chef"], ["line cook"]),
        ("What instrument does Rafael have at home?", "possession", "explicit", ["drum kit"], ["Yamaha piano"]),
        ("How many people live in Rafael's flat?", "count", "explicit", ["me and Ana"], ["three housemates"]),
    ],
)

conv(
    "upd-ines",
    ["Ines", "Kofi"],
    [
        (
            "2023-01-05T17:00",
            [
                ("Kofi", "Hi Ines! Good to see you.", None),
                ("Ines", "Hi Kofi! I'm still living with my parents in Porto, saving up.", "Ines / home"),
                ("Ines", "I broke my wrist skiing over the holidays, it's in a cast for six weeks.", "Ines / wrist"),
                ("Kofi", "Ouch! Take care.", None),
                ("Ines", "My plan is to do a master's in Berlin next year.", "Ines / master's plan"),
                ("Ines", "My favourite series is The Crown, I rewatch it while I heal.", "Ines / favourite series"),
            ],
        ),
        (
            "2023-03-01T10:30",
            [
                ("Ines", "I've read 12 books this year already, the cast helps.", "Ines / books read this year"),
                ("Kofi", "That's a lot of reading.", None),
                ("Ines", "The cast came off yesterday and my wrist is fine now.", "Ines / wrist"),
                ("Kofi", "Great news.", None),
            ],
        ),
        (
            "2023-06-20T16:40",
            [
                ("Ines", "I decided against Berlin, I'm applying to Copenhagen instead.", "Ines / master's plan"),
                ("Kofi", "Why the change?", None),
                (
                    "Ines",
                    "Better programme and a scholarship. Renting a studio in Lisbon since June while I apply.",
                    "Ines / home",
                ),
                ("Ines", "I'm obsessed with Severance now, best show ever.", "Ines / favourite show"),
                ("Kofi", "Ha, everyone is.", None),
            ],
        ),
        (
            "2023-09-12T12:00",
            [
                ("Ines", "That makes 20 books this year!", "Ines / books read"),
                ("Kofi", "Impressive, any favourite?", None),
                ("Ines", "Hard to say, maybe the Ishiguro one.", None),
            ],
        ),
    ],
    [
        ("Where does Ines live?", "move", "explicit", ["Lisbon"], ["parents in Porto"]),
        ("How is Ines's wrist?", "health", "explicit", ["fine now"], ["in a cast"]),
        ("Where does Ines want to do her master's?", "plan", "explicit", ["Copenhagen"], ["master's in Berlin"]),
        ("What is Ines's favourite series?", "preference", "explicit", ["Severance"], ["The Crown"]),
        ("How many books has Ines read this year?", "count", "explicit", ["20 books"], ["12 books"]),
    ],
)

conv(
    "upd-ben",
    ["Ben", "Aisha"],
    [
        (
            "2023-02-08T19:45",
            [
                ("Aisha", "Hey Ben! How's life?", None),
                ("Ben", "Good! I'm freelancing as a web designer, mostly for small shops.", "Ben / job"),
                ("Ben", "I don't own a car, I cycle everywhere in town.", "Ben / car"),
                ("Ben", "Hana and I got engaged at New Year!", "Ben / relationship"),
                ("Aisha", "Congratulations!!", None),
                (
                    "Ben",
                    "I've been smoking a pack a day since the deadlines started, not proud of it.",
                    "Ben / smoking",
                ),
            ],
        ),
        (
            "2023-05-16T09:30",
            [
                ("Ben", "I took a full-time job at Northwind Bank, the freelance work dried up.", "Ben / employer"),
                ("Aisha", "A bank! Fancy.", None),
                ("Ben", "We're hosting Christmas at our flat this year, both families.", "Ben / christmas plan"),
                ("Aisha", "Brave!", None),
            ],
        ),
        (
            "2023-07-04T18:15",
            [
                ("Ben", "Hana and I got married on 3 June, small ceremony in the park.", "Ben / partner"),
                ("Aisha", "So happy for you both.", None),
                ("Ben", "Two months without a cigarette now, the patches helped.", "Ben / smoking"),
                ("Aisha", "Proud of you!", None),
            ],
        ),
        (
            "2023-10-21T14:00",
            [
                ("Ben", "Bought a second-hand Toyota Corolla last weekend for the commute.", "Ben / vehicle"),
                ("Aisha", "No more cycling in the rain!", None),
                ("Ben", "Change of plan, Christmas will be at my sister's in Bristol.", "Ben / christmas plans"),
                ("Aisha", "Less cleaning for you.", None),
            ],
        ),
    ],
    [
        ("Where does Ben work?", "job", "explicit", ["Northwind"], ["freelancing"]),
        ("Does Ben have a car?", "possession", "explicit", ["Corolla"], ["don't own a car"]),
        ("Is Ben married?", "relationship", "explicit", ["got married"], ["Hana and I got engaged"]),
        ("Does Ben smoke?", "health", "explicit", ["without a cigarette"], ["pack a day"]),
        ("Where will Ben spend Christmas?", "plan", "explicit", ["Bristol"], ["at our flat"]),
    ],
)

conv(
    "upd-zoe",
    ["Zoe", "Marcus"],
    [
        (
            "2023-01-18T20:00",
            [
                ("Marcus", "Zoe! Long time no see!", None),
                ("Zoe", "I know! Our house in Denver keeps us busy, the roof needed fixing.", "Zoe / home"),
                ("Zoe", "I'm a nurse at St. Mary's, on the cardiology ward.", "Zoe / job"),
                ("Zoe", "We have one dog, Biscuit, a very lazy beagle.", "Zoe / dogs"),
                ("Marcus", "Ha, I love beagles.", None),
                ("Zoe", "I'm a morning runner, always out at 6am before my shift.", "Zoe / running time"),
                ("Zoe", "I take all my photos with my Canon camera.", "Zoe / camera"),
            ],
        ),
        (
            "2023-04-25T12:00",
            [
                (
                    "Zoe",
                    "Finished my first month as a flight nurse with AirCare, helicopters every day.",
                    "Zoe / employer",
                ),
                ("Marcus", "That sounds intense!", None),
                ("Zoe", "Biscuit has a little sister now, we adopted Pepper from the shelter.", "Zoe / number of dogs"),
                ("Marcus", "Two dogs!", None),
            ],
        ),
        (
            "2023-08-09T19:30",
            [
                ("Zoe", "The Seattle rain is taking some getting used to after Denver.", "Zoe / city"),
                ("Marcus", "Bring a good umbrella.", None),
                ("Zoe", "I switched to evening runs, mornings are too dark here.", "Zoe / running time"),
                ("Zoe", "I sold the Canon and bought a Fujifilm X-T5, much lighter.", "Zoe / camera"),
                ("Marcus", "Nice upgrade.", None),
            ],
        ),
    ],
    [
        ("Where does Zoe live?", "move", "implicit", ["Seattle"], ["house in Denver"]),
        ("Where does Zoe work?", "job", "explicit", ["AirCare"], ["St. Mary's"]),
        ("How many dogs does Zoe have?", "count", "implicit", ["Pepper"], ["one dog"]),
        ("When does Zoe go running?", "preference", "explicit", ["evening"], ["6am"]),
        ("What camera does Zoe use?", "possession", "explicit", ["Fujifilm"], ["Canon camera"]),
    ],
)

conv(
    "upd-liam",
    ["Liam", "Priya"],
    [
        (
            "2023-03-03T18:00",
            [
                ("Priya", "Hi Liam! How are you?", None),
                (
                    "Liam",
                    "Hey Priya! Our trip to Iceland is booked for September, I can't wait.",
                    "Liam / iceland trip",
                ),
                ("Liam", "I'm in my second year of law school, exams are brutal.", "Liam / studies"),
                ("Liam", "I have 40 plants in my flat, it's getting ridiculous.", "Liam / number of plants"),
                ("Priya", "A jungle!", None),
                ("Liam", "I'm doing keto to get in shape for the trip.", "Liam / diet"),
                ("Liam", "I'm living with my partner Jess, she keeps the plants alive.", "Liam / partner"),
            ],
        ),
        (
            "2023-06-14T20:20",
            [
                ("Liam", "We postponed Iceland to next spring because of work.", "Liam / iceland trip"),
                ("Priya", "Shame, but spring is nice too.", None),
                ("Liam", "Up to 55 plants now, the flat really is a jungle.", "Liam / plants"),
                ("Priya", "Ha!", None),
            ],
        ),
        (
            "2023-09-25T17:10",
            [
                ("Liam", "I dropped out of law school and joined my dad's bakery.", "Liam / occupation"),
                ("Priya", "Wow, big decision.", None),
                ("Liam", "I stopped keto, back to normal eating and fresh bread every day.", "Liam / diet"),
                ("Liam", "Jess moved out; we split up last month.", "Liam / relationship"),
                ("Priya", "I'm sorry, Liam.", None),
            ],
        ),
    ],
    [
        ("When is Liam going to Iceland?", "plan", "explicit", ["next spring"], ["booked for September"]),
        ("What does Liam do?", "job", "explicit", ["dad's bakery"], ["second year of law"]),
        ("How many plants does Liam have?", "count", "explicit", ["55 plants"], ["40 plants"]),
        ("Is Liam on a diet?", "health", "explicit", ["stopped keto"], ["doing keto"]),
        ("Who does Liam live with?", "relationship", "explicit", ["split up"], ["partner Jess"]),
    ],
)

conv(
    "upd-nora",
    ["Nora", "Eli"],
    [
        (
            "2023-01-28T11:00",
            [
                ("Eli", "Hey Nora, how's it going?", None),
                ("Nora", "Hi Eli! All good here in Austin, my place is tiny but cosy.", "Nora / home"),
                ("Nora", "I'm working nights at the warehouse, picking orders.", "Nora / job"),
                ("Nora", "My Samsung screen cracked again, I dropped it at work.", "Nora / phone"),
                ("Eli", "Not again!", None),
                ("Nora", "I get migraines every week, the night shifts don't help.", "Nora / migraines"),
                ("Nora", "My favourite food is sushi, I could eat it daily.", "Nora / favourite food"),
            ],
        ),
        (
            "2023-05-05T15:30",
            [
                ("Nora", "Day shift at the library now, finally normal hours.", "Nora / job"),
                ("Eli", "A library suits you.", None),
                ("Nora", "Got an iPhone 15 for my birthday, no more cracked screens.", "Nora / phone"),
                ("Eli", "Happy birthday!", None),
            ],
        ),
        (
            "2023-09-17T10:45",
            [
                ("Nora", "We bought a house in San Antonio, moving in next month.", "Nora / home"),
                ("Eli", "Congratulations!", None),
                ("Nora", "The new medication works, no migraine in two months.", "Nora / migraines"),
                ("Nora", "I've gone off sushi, tacos are my favourite now.", "Nora / favourite food"),
                ("Eli", "San Antonio has the best tacos.", None),
            ],
        ),
    ],
    [
        ("Where does Nora live?", "move", "explicit", ["San Antonio"], ["Austin"]),
        ("What is Nora's job?", "job", "implicit", ["library"], ["warehouse"]),
        ("What phone does Nora have?", "possession", "explicit", ["iPhone 15"], ["Samsung"]),
        ("Does Nora still get migraines?", "health", "explicit", ["no migraine"], ["migraines every week"]),
        ("What is Nora's favourite food?", "preference", "explicit", ["tacos"], ["sushi"]),
    ],
)


def padded(name, speakers, sessions):
    rng = random.Random(name)
    A, B = speakers

    def refill():
        p = [[({"A": A, "B": B}[w], t, None) for w, t in ex] for ex in FILLER]
        rng.shuffle(p)
        return p

    pool = refill()
    out = []
    for n, (start, turns) in enumerate(sessions):
        turns = list(turns)
        for _ in range(10):
            if len(pool) < 2:
                pool = refill()
            ex = pool.pop()
            at = rng.randrange(len(turns) + 1)
            turns[at:at] = ex
        out.append((start, turns))
        if n + 1 < len(sessions):  # two small-talk sessions between two fact sessions
            a = dt.datetime.fromisoformat(start)
            b = dt.datetime.fromisoformat(sessions[n + 1][0])
            for k in (1, 2):
                when = a + (b - a) * k / 3
                extra = [(B, f"Hi {A}, how are things?", None), (A, f"Hi {B}! Not bad, quiet week.", None)]
                for _ in range(5):
                    if len(pool) < 2:
                        pool = refill()
                    extra += pool.pop()
                out.append((when.strftime("%Y-%m-%dT%H:%M"), extra))
    return out


spaces = []
probes = []
slots = {}
for name, speakers, sessions, ps in C:
    sessions = padded(name, speakers, sessions)
    sess = []
    for n, (start, turns) in enumerate(sessions, 1):
        sid = f"s{n}"
        tl = []
        for k, (sp, text, slot) in enumerate(turns, 1):
            tid = f"{sid}:{k}"
            tl.append({"id": tid, "speaker": sp, "text": text})
            if slot:
                slots.setdefault(name, {})[tid] = slot
        sess.append({"id": sid, "started_at": start, "turns": tl})
    spaces.append({"space": name, "speakers": speakers, "sessions": sess})
    for q, kind, change, cur, stale in ps:
        probes.append({"space": name, "question": q, "kind": kind, "change": change, "current": cur, "stale": stale})
# every value must be found in some turn
for p in probes:
    sp = next(s for s in spaces if s["space"] == p["space"])
    texts = [t["text"].casefold() for s in sp["sessions"] for t in s["turns"]]
    for v in p["current"] + p["stale"]:
        assert any(v.casefold() in t for t in texts), (p, v)
        for ex in FILLER:
            for _, t in ex:
                assert v.casefold() not in t.casefold(), (v, t)
    for c in p["current"]:
        for st in p["stale"]:
            assert st.casefold() not in c.casefold()
(HERE / "updates.json").write_text(json.dumps(spaces, indent=1, ensure_ascii=False), encoding="utf-8")
(HERE / "updates_probes.json").write_text(
    json.dumps({"probes": probes, "slot_labels": slots}, indent=1, ensure_ascii=False), encoding="utf-8"
)
print(len(probes), len(spaces))

print(Counter(p["kind"] for p in probes), Counter(p["change"] for p in probes))
