"""Online, multi-label topic clustering of scene vectors in arrival order.

Each topic keeps the running sum of its member scenes' vectors (float64, added in scene arrival order); its centroid is
that sum normalised. A new scene joins every topic whose centroid cosine is at least ``threshold`` (at most
``max_topics`` of them, the most similar first), or opens a new topic when none qualifies. Because the sums are added
in arrival order, rebuilding the state from stored memberships gives bit-identical centroids, so an incremental build
takes exactly the decisions a full build takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["JOIN_THRESHOLD", "MAX_TOPICS_PER_SCENE", "OnlineTopics", "TopicState"]

# Cosine between a scene's topic vector (the embedding of its keyphrases) and a topic centroid at which the scene
# joins the topic. Not derived from first principles: it was picked among 0.5 / 0.6 / 0.7 by looking at the topic
# sizes of ONE dev conversation (conv-26) with all-MiniLM-L6-v2 (0.5 put 37 of 53 scenes in one topic, 0.7 left most
# topics with one scene). It is a parameter of build_extractive and is recorded in the space's build state.
JOIN_THRESHOLD = 0.6
MAX_TOPICS_PER_SCENE = 3


@dataclass
class TopicState:
    id: str
    seq: int
    total: npt.NDArray[np.float64]
    members: list[str] = field(default_factory=list)

    @property
    def centroid(self) -> npt.NDArray[np.float64]:
        norm = float(np.linalg.norm(self.total))
        return self.total / norm if norm > 0 else self.total


class OnlineTopics:
    """The clustering state; feed scenes with :meth:`assign` in arrival order."""

    def __init__(self, threshold: float = JOIN_THRESHOLD, max_topics: int = MAX_TOPICS_PER_SCENE) -> None:
        if not -1.0 <= threshold <= 1.0 or max_topics < 1:
            raise ValueError("OnlineTopics needs -1 <= threshold <= 1 and max_topics >= 1")
        self.threshold = threshold
        self.max_topics = max_topics
        self.topics: list[TopicState] = []

    def restore(self, topic_id: str, seq: int, members: list[tuple[str, npt.NDArray[np.float32]]]) -> None:
        """Re-create a stored topic from its member scenes, given in arrival order."""
        if not members:
            raise ValueError(f"topic {topic_id} has no member scenes to restore from")
        total = np.zeros(members[0][1].shape[0], dtype=np.float64)
        for _, vector in members:
            total += vector.astype(np.float64)
        self.topics.append(TopicState(id=topic_id, seq=seq, total=total, members=[m for m, _ in members]))
        self.topics.sort(key=lambda t: t.seq)

    def assign(self, scene_id: str, vector: npt.NDArray[np.float32], new_topic_id: str) -> list[TopicState]:
        """Admit a scene; returns the topics it joined (a newly opened one carries ``new_topic_id``)."""
        v = vector.astype(np.float64)
        scored = [(float(t.centroid @ v), t.seq, t) for t in self.topics]
        chosen = [t for s, _, t in sorted(scored, key=lambda x: (-x[0], x[1])) if s >= self.threshold]
        chosen = chosen[: self.max_topics]
        if not chosen:
            topic = TopicState(id=new_topic_id, seq=len(self.topics), total=np.zeros_like(v))
            self.topics.append(topic)
            chosen = [topic]
        for topic in chosen:
            topic.total += v
            topic.members.append(scene_id)
        return chosen
