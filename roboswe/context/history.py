"""Keeping the active history a request every provider accepts, whatever the trial loop did.

Two repairs the context policy applies where the request is assembled:

- Every tool call gets a result before the next request. When an operation ends for an
  infrastructure reason, the model's call is in the history without an answer; every
  provider refuses a history like that (Anthropic: tool_use without tool_result, OpenAI:
  no tool output for a function call, Gemini: unpaired function responses), and the
  retained conversation would carry it into every later request of the series. The call
  is answered with an error result saying what happened.
- Images stay within the provider's per-request limit (Anthropic 100 per request for
  200k-context models, 600 otherwise). The oldest images are replaced by a placeholder
  text, in batches down to three quarters of the limit, so the request prefix changes
  only once per batch rather than on every new observation.
"""

from __future__ import annotations

import msgspec
import structlog

from roboswe.protocol.participant import ImagePart, TextPart, ToolResultPart, Turn

log = structlog.get_logger()

UNANSWERED = (
    "No result: this operation did not complete because the harness failed while running it "
    "(an infrastructure failure outside your control; the trial was ended as incomplete). "
    "Its effects, if any, are unknown; check the workspace before relying on it."
)
LOW_WATER = 0.75  # after a drop, at most this share of the limit is left as images


def unanswered_calls(previous: Turn | None, following: Turn | None) -> list[str]:
    """Call ids of `previous` (an assistant turn) that `following` does not answer."""
    if previous is None or previous.role != "assistant":
        return []
    answered = {r.call_id for r in following.tool_results()} if following is not None and following.role == "user" else set()
    return [c.call_id for c in previous.tool_calls() if c.call_id not in answered]


def answer_turn(previous: Turn, call_ids: list[str]) -> Turn:
    """The user turn answering `previous`'s unanswered calls with an error result each."""
    log.warning("unanswered_tool_calls_answered", turn=previous.id, calls=call_ids)
    parts = [ToolResultPart(call_id=c, text=UNANSWERED, is_error=True) for c in call_ids]
    return Turn(id=f"{previous.id}/unanswered", role="user", parts=parts, trial=previous.trial)


def image_count(turn: Turn) -> int:
    return sum(1 if isinstance(p, ImagePart) else len(p.images) if isinstance(p, ToolResultPart) else 0 for p in turn.parts)


def placeholder(image: ImagePart, limit: int) -> str:
    return (f"[image {image.camera} ({image.digest[:12]}) removed from this request: the provider takes at most "
            f"{limit} images per request, so the oldest images are left out]")


def without_images(turn: Turn, limit: int) -> Turn:
    """The turn with each image replaced by a placeholder text (results keep their text)."""
    parts: list = []
    for p in turn.parts:
        match p:
            case ImagePart():
                parts.append(TextPart(text=placeholder(p, limit)))
            case ToolResultPart(images=ims) if ims:
                note = "\n".join(placeholder(im, limit) for im in ims)
                parts.append(msgspec.structs.replace(p, text=f"{p.text}\n{note}" if p.text else note, images=[]))
            case _:
                parts.append(p)
    return msgspec.structs.replace(turn, parts=parts)


class ImageLimit:
    """Which turns' images are left out of requests; decided once per batch, kept stable."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.dropped: set[str] = set()  # ids of turns whose images are replaced by placeholders
        self.dropped_images = 0

    def apply(self, turns: list[Turn]) -> tuple[list[Turn], list[str]]:
        """The turns as sent, and the ids of turns newly stripped of their images by this call."""
        if self.limit is None:
            return turns, []
        kept = sum(image_count(t) for t in turns if t.id not in self.dropped)
        newly: list[str] = []
        if kept > self.limit:
            target = int(self.limit * LOW_WATER)
            for t in turns:  # oldest first; the newest turn's images always stay
                if kept <= target or t is turns[-1]:
                    break
                n = image_count(t)
                if n and t.id not in self.dropped:
                    self.dropped.add(t.id)
                    self.dropped_images += n
                    kept -= n
                    newly.append(t.id)
            log.info("images_left_out", limit=self.limit, turns=len(newly), kept=kept, total_dropped=self.dropped_images)
        out = [without_images(t, self.limit) if t.id in self.dropped and image_count(t) else t for t in turns]
        return out, newly

    def statistics(self) -> tuple[int, int]:
        return len(self.dropped), self.dropped_images
