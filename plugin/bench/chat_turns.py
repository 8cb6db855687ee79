"""Long chat turns for the ingest benchmark: LongMemEval-style assistant answers, generated.

LongMemEval's histories are user and assistant turns of a few hundred word pieces each, longer
than the 256 the bundled model keeps. ``long_turns`` writes such turns from templates (a user's
question, then an assistant's answer of several tips about it), deterministic for a seed and
all distinct, of at least ``min_words`` words each (about 1.3 word pieces a word): every one
fills the model's 256 pieces, as a real imported history's long turns do.
"""

from __future__ import annotations

import random

__all__ = ["long_turns"]

_TOPICS = (
    "a weekend trip to Lisbon", "training for a half marathon", "repotting my fiddle-leaf fig",
    "a budget for the kitchen renovation", "learning to bake sourdough", "a chess opening",
    "the move to a flat in Berlin", "a birthday party for my daughter", "a job interview",
    "my grandmother's photo albums", "a camping trip in the Highlands", "a vegan dinner party",
    "switching to a standing desk", "a thesis draft on river ecology", "piano practice",
    "adopting a rescue dog", "a knitting pattern for a cardigan", "night shifts at the hospital",
)  # fmt: skip
_ASKS = (
    "Can you help me plan {topic}?", "What should I keep in mind about {topic}?",
    "I'm a bit stuck with {topic}; any advice?", "How would you approach {topic}?",
    "My partner and I keep arguing about {topic}. What do you suggest?",
)  # fmt: skip
_OPENINGS = (
    "Of course! {topic} is very doable with a little structure, so here is how I would go "
    "about it, step by step.",
    "Great question. People often underestimate {topic}, so let me walk you through the parts "
    "that matter most.",
    "Happy to help with {topic}. Below are a few ideas, roughly in the order I would try them.",
)  # fmt: skip
_TIPS = (
    "Start by writing down what you already have and what you still need, because a short list "
    "makes the gaps obvious and keeps you from buying things twice.",
    "Set aside a fixed time each week, even if it is only half an hour, since steady progress "
    "beats one exhausting weekend followed by a month of nothing.",
    "Ask someone who has done it before; a ten-minute conversation often saves hours of "
    "searching forums and second-guessing every small decision.",
    "Keep a simple notebook or a note on your phone with the date, what you tried and how it "
    "went, so that patterns show up after a few weeks.",
    "Budget about twenty percent more time and money than you expect, because something always "
    "takes longer, and the buffer keeps the whole plan from feeling like a failure.",
    "Break the big goal into three or four milestones and celebrate each one, which sounds "
    "silly but really does help motivation on the harder days.",
    "Check the weather, the opening hours and any bookings a few days ahead, and have a backup "
    "option ready in case the first choice falls through.",
    "Do not try to change everything at once; pick the one change with the biggest effect, get "
    "comfortable with it, and only then add the next one.",
    "If you feel anxious about it, that is completely normal; naming the specific worry often "
    "shrinks it, and you can plan around something concrete.",
    "Look for a local group or class, because learning alongside other people is more fun and "
    "you get feedback you would never think to ask for.",
    "Take photos before and after each stage, which helps you remember what you changed and "
    "is surprisingly encouraging when progress feels slow.",
    "Make sure you rest properly, drink enough water and eat something decent beforehand, since "
    "being tired makes every small setback feel much bigger than it is.",
)  # fmt: skip
_CLOSINGS = (
    "Let me know how it goes, and tell me if you want me to turn this into a checklist.",
    "If you share a bit more about your constraints, I can tailor these suggestions further.",
    "Good luck, and feel free to come back with questions once you have started.",
)  # fmt: skip


def long_turns(count: int, *, seed: int = 0, min_words: int = 210) -> list[str]:
    """``count`` distinct user-then-assistant chat turns of at least ``min_words`` words."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < count:
        topic = rng.choice(_TOPICS)
        parts = [
            f"User: {rng.choice(_ASKS).format(topic=topic)} (note {len(out) + 1})",
            "Assistant: " + rng.choice(_OPENINGS).format(topic=topic[0].upper() + topic[1:]),
        ]
        tips = rng.sample(_TIPS, len(_TIPS))
        words = sum(len(part.split()) for part in parts)
        for number, tip in enumerate(tips, start=1):
            if words >= min_words:
                break
            parts.append(f"{number}. {tip}")
            words += len(parts[-1].split())
        parts.append(rng.choice(_CLOSINGS))
        text = " ".join(parts)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out
