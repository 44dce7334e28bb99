"""Small talk and distractors between the facts of the update dev set (bench/data/make_updates.py)."""

# Generic small talk and distractors; {A} is the main speaker, {B} the friend.
FILLER = [
    [
        ("B", "Did you watch the match on Saturday?"),
        ("A", "Only the second half, what a comeback though."),
        ("B", "I nearly threw the remote at the screen in the first half."),
    ],
    [("A", "The weather has been so grey all week."), ("B", "Same here, I haven't seen the sun since Tuesday.")],
    [
        ("B", "My brother just moved to Glasgow for a new job at a shipping firm."),
        ("A", "Glasgow! Is he enjoying it?"),
        ("B", "He says the rent is half of what he paid before."),
    ],
    [
        ("A", "I tried baking sourdough again, it came out flat as a pancake."),
        ("B", "Maybe the starter needs more time."),
        ("A", "Probably, I was impatient as always."),
    ],
    [
        ("B", "Have you read anything good lately?"),
        ("A", "I'm halfway through a thriller my aunt lent me, it's gripping."),
        ("B", "Send me the title when you finish."),
    ],
    [
        ("B", "Work is crazy for me, we have an audit next month."),
        ("A", "Audits are the worst, good luck with it."),
        ("B", "Thanks, I'll need it."),
    ],
    [
        ("A", "My neighbour's kid is learning the trumpet."),
        ("B", "Oh no, every day?"),
        ("A", "Every single afternoon at four."),
    ],
    [("B", "We finally painted the hallway, a soft green."), ("A", "Send a photo, I bet it looks fresh.")],
    [
        ("A", "I went to a pottery class with my cousin, I made a wonky bowl."),
        ("B", "Wonky bowls have character!"),
        ("A", "That's what I told myself."),
    ],
    [
        ("B", "My sister bought a vintage Vespa, she rides it everywhere."),
        ("A", "So stylish, is it reliable?"),
        ("B", "Not at all, it breaks down every other week."),
    ],
    [
        ("A", "Did you see the new bakery that opened near the station?"),
        ("B", "Not yet, is it good?"),
        ("A", "The cinnamon buns are dangerous."),
    ],
    [
        ("B", "I started a language app streak, day thirty today."),
        ("A", "Nice, which language?"),
        ("B", "Italian, for the trip my parents keep talking about."),
    ],
    [
        ("A", "I cleaned out the garage over the weekend."),
        ("B", "Find anything interesting?"),
        ("A", "My old skateboard and a box of school reports."),
    ],
    [
        ("B", "Our team at work got a new manager, she seems nice."),
        ("A", "New managers always change everything at first."),
        ("B", "We'll see, so far so good."),
    ],
    [("A", "I've been trying to drink more water, I carry a big bottle now."), ("B", "Smart. I always forget.")],
    [
        ("B", "My parents are thinking about selling their house and moving to the coast."),
        ("A", "That sounds lovely for retirement."),
        ("B", "Mum wants a garden, Dad wants a boat."),
    ],
    [
        ("A", "Have you been to the new climbing wall downtown?"),
        ("B", "Once, my arms hurt for three days."),
        ("A", "That's how you know it worked."),
    ],
    [("B", "I'm so tired today, the baby next door cried all night."), ("A", "Poor you, and poor parents.")],
    [
        ("A", "I watched a documentary about octopuses last night."),
        ("B", "They're so clever, right?"),
        ("A", "One of them escaped its tank and came back before morning."),
    ],
    [
        ("B", "My flatmate is learning to cook, the smoke alarm goes off daily."),
        ("A", "At least he's trying!"),
        ("B", "I bought him a fire blanket as a joke."),
    ],
    [("A", "I finally fixed the squeaky door with some oil."), ("B", "The small victories.")],
    [
        ("B", "We're thinking of getting a dog, but our lease is strict."),
        ("A", "Maybe ask the landlord, some are flexible."),
        ("B", "Good idea, I'll email him."),
    ],
    [
        ("A", "I got a parking ticket outside the dentist, so annoying."),
        ("B", "How much?"),
        ("A", "Forty pounds for ten minutes late."),
    ],
    [
        ("B", "My cousin got engaged on a mountain top, very dramatic."),
        ("A", "Did she say yes right away?"),
        ("B", "She cried and said yes, the video is adorable."),
    ],
    [
        ("A", "I signed up for a charity quiz night with some friends."),
        ("B", "What's your team name?"),
        ("A", "Quiz Khalifa, obviously."),
    ],
    [
        ("B", "I bought new running shoes but they give me blisters."),
        ("A", "Break them in slowly, maybe short walks first."),
    ],
    [
        ("A", "The power went out for two hours yesterday."),
        ("B", "What did you do?"),
        ("A", "Played cards by candlelight, it was actually nice."),
    ],
    [
        ("B", "My boss wants us back in the office three days a week."),
        ("A", "How do you feel about it?"),
        ("B", "I miss the quiet of working from home."),
    ],
    [
        ("A", "I saw a fox in the garden this morning."),
        ("B", "A real fox? In the city?"),
        ("A", "Bold as anything, it stared right at me."),
    ],
    [
        ("B", "I'm hosting a board game night next Friday."),
        ("A", "Count me in if I'm free."),
        ("B", "I'll save you a seat."),
    ],
    [
        ("A", "I've been trying meditation apps before bed."),
        ("B", "Does it help?"),
        ("A", "Some nights, other nights I just think about lunch."),
    ],
    [
        ("B", "The supermarket changed its layout and I can't find anything."),
        ("A", "They do that to make you buy more."),
    ],
    [
        ("A", "My grandmother turned ninety on Sunday."),
        ("B", "Happy birthday to her! How did you celebrate?"),
        ("A", "A long lunch with the whole family, she danced."),
    ],
    [
        ("B", "I started volunteering at the food bank on Saturdays."),
        ("A", "That's great, how is it?"),
        ("B", "Busy, but the people there are lovely."),
    ],
    [
        ("A", "Do you have any podcast recommendations?"),
        ("B", "I like one about unsolved mysteries, very calming somehow."),
        ("A", "Calming mysteries, okay."),
    ],
    [
        ("B", "My friend from school is opening a cafe."),
        ("A", "Where?"),
        ("B", "Near the old cinema, opening day is soon."),
    ],
    [
        ("A", "The train was delayed an hour again this morning."),
        ("B", "Typical. Did they say why?"),
        ("A", "Leaves on the line, apparently."),
    ],
    [("B", "I've been knitting a scarf for my dad."), ("A", "He'll love it."), ("B", "If I finish it before summer.")],
    [("A", "I think I'm getting a cold."), ("B", "Lots of tea and an early night.")],
    [
        ("B", "Our office is moving to a new building across the river."),
        ("A", "Is it nicer?"),
        ("B", "Bigger windows, worse coffee."),
    ],
]
FILLER += [
    [
        ("B", "I spent the whole night untangling fairy lights."),
        ("A", "Is it that time of year already?"),
        ("B", "My mum starts decorating early."),
    ],
    [
        ("A", "The dentist says I grind my teeth at night."),
        ("B", "Stress, probably. Did they give you a guard?"),
        ("A", "Yes, it feels like a hockey mouthguard."),
    ],
    [
        ("B", "Our street is having a yard sale on Sunday."),
        ("A", "Selling anything?"),
        ("B", "A lamp nobody likes and a pile of DVDs."),
    ],
    [
        ("A", "I watched the sunrise from the hill behind the hospital."),
        ("B", "Early start! Was it worth it?"),
        ("A", "Pink sky, totally worth it."),
    ],
    [
        ("B", "The cat next door keeps sleeping on my windowsill."),
        ("A", "Free company!"),
        ("B", "He judges me when I eat cereal for dinner."),
    ],
    [
        ("A", "I lost my umbrella on the bus again."),
        ("B", "That's the third one this year, isn't it?"),
        ("A", "The fourth. I should buy them in bulk."),
    ],
    [
        ("B", "I'm trying to learn guitar from videos."),
        ("A", "How far have you got?"),
        ("B", "Three chords and very sore fingers."),
    ],
    [
        ("A", "My friend dragged me to a salsa class."),
        ("B", "And?"),
        ("A", "I stepped on everyone's toes, but it was fun."),
    ],
    [("B", "The bakery down my road sold out of croissants by eight."), ("A", "You have to be quick on weekends.")],
    [("A", "I repotted my basil and it's thriving."), ("B", "Pesto season!"), ("A", "That's the plan.")],
    [
        ("B", "I finally cancelled that streaming service I never use."),
        ("A", "Good, those add up."),
        ("B", "Saving ten a month now."),
    ],
    [
        ("A", "There was a hailstorm this afternoon, out of nowhere."),
        ("B", "In this season? Strange weather."),
        ("A", "The car park looked like it had snowed."),
    ],
    [
        ("B", "My niece taught me a card trick."),
        ("A", "Show me next time!"),
        ("B", "I'll need to practise first, I keep dropping the deck."),
    ],
    [
        ("A", "I tried the new Thai place on the corner."),
        ("B", "Spicy?"),
        ("A", "My eyes watered, but the curry was great."),
    ],
    [
        ("B", "I'm reorganising my bookshelves by colour."),
        ("A", "Pretty, but how will you find anything?"),
        ("B", "I won't, but it looks nice."),
    ],
    [
        ("A", "The charity shop had a sale of old books, I bought six."),
        ("B", "Six! Where will you put them?"),
        ("A", "On the floor, like the others."),
    ],
    [
        ("B", "We had a power cut during the quiz show final."),
        ("A", "No! Did you find out who won?"),
        ("B", "My aunt texted me the result."),
    ],
    [("A", "I'm making a photo album for my parents' anniversary."), ("B", "They'll cry."), ("A", "That's the goal.")],
    [
        ("B", "I accidentally dyed all my socks pink."),
        ("A", "A red shirt in the wash?"),
        ("B", "My one red shirt, yes."),
    ],
    [
        ("A", "The football club near me is looking for volunteers."),
        ("B", "Would you do it?"),
        ("A", "Maybe on Sunday mornings."),
    ],
    [
        ("B", "I finished a thousand piece puzzle, one piece missing."),
        ("A", "The worst feeling!"),
        ("B", "The dog probably ate it."),
    ],
    [
        ("A", "I've been sleeping badly, the street lights are so bright."),
        ("B", "Blackout curtains changed my life."),
        ("A", "I'll look for some."),
    ],
    [
        ("B", "My friend is running a half marathon for charity."),
        ("A", "I'll sponsor her, send me the link."),
        ("B", "She'll be thrilled."),
    ],
    [
        ("A", "The museum has a free exhibition about old maps."),
        ("B", "I'd love that, when does it end?"),
        ("A", "End of the month, I think."),
    ],
    [
        ("B", "I tried to fix my bike chain and got oil everywhere."),
        ("A", "Classic. Did you fix it?"),
        ("B", "Eventually, with a video and a lot of swearing."),
    ],
    [("A", "My uncle sent a box of apples from his orchard."), ("B", "Apple pie time!"), ("A", "Crumble, I'm lazy.")],
    [
        ("B", "The gym raised its prices again."),
        ("A", "Time to run in the park instead."),
        ("B", "Free and with ducks."),
    ],
    [
        ("A", "I went to a wedding fair with my cousin for fun."),
        ("B", "Free cake samples?"),
        ("A", "So many, I felt sick after."),
    ],
    [
        ("B", "My laptop fan sounds like a jet engine."),
        ("A", "Clean the vents, it helped mine."),
        ("B", "I'll try that tonight."),
    ],
    [
        ("A", "We played frisbee on the beach until sunset."),
        ("B", "Sounds perfect."),
        ("A", "Sand in everything, but perfect."),
    ],
]
