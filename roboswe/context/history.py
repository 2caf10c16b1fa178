"""Keeping the active history a request every provider accepts, whatever the trial loop did.

Two repairs the context policy applies where the request is assembled:

- Every tool call gets a result before the next request. When an operation ends for an
  infrastructure reason, the model's call is in the history without an answer; every
  provider refuses a history like that (Anthropic: tool_use without tool_result, OpenAI:
  no tool output for a function call, Gemini: unpaired function responses), and the
  retained conversation would carry it into every later request of the series. The call
  is answered with an error result saying what happened.
- Images stay within the provider's per-request limits: a count (Anthropic 100 per request
  for 200k-context models, 600 otherwise) and request bytes (Anthropic 32 MB, Gemini 20 MB
  inline; base64 makes an image 4/3 of its size). Before either is reached the oldest
  images are replaced by a placeholder text, in batches down to three quarters of the
  limit, so the request prefix changes only once per batch rather than on every new
  observation.
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
IMAGE_SHARE_OF_BYTES = 0.75  # images may fill this share of the request byte limit (text, tools, framing: the rest)


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


def turn_images(turn: Turn) -> list[ImagePart]:
    out: list[ImagePart] = []
    for p in turn.parts:
        if isinstance(p, ImagePart):
            out.append(p)
        elif isinstance(p, ToolResultPart):
            out += p.images
    return out


def placeholder(image: ImagePart, limits: str) -> str:
    return (f"[image {image.camera} ({image.digest[:12]}) removed from this request: the provider takes at most "
            f"{limits} per request, so the oldest images are left out]")


def without_images(turn: Turn, limit: str) -> Turn:
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

    def __init__(self, limit: int | None, max_bytes: int | None = None):
        self.limit = limit
        # Base64 image bytes a request may carry (None: no byte limit).
        self.max_bytes = int(max_bytes * IMAGE_SHARE_OF_BYTES) if max_bytes else None
        self.dropped: set[str] = set()  # ids of turns whose images are replaced by placeholders
        self.dropped_images = 0

    def _size(self, turn: Turn, sizes: dict[str, int]) -> tuple[int, int]:
        ims = turn_images(turn)
        return len(ims), sum(4 * ((sizes.get(i.digest, 0) + 2) // 3) for i in ims)

    def apply(self, turns: list[Turn], sizes: dict[str, int] | None = None) -> tuple[list[Turn], list[str]]:
        """The turns as sent, and the ids of turns newly stripped of their images by this call;
        `sizes` maps image digests to their encoded sizes (for the byte limit)."""
        if self.limit is None and self.max_bytes is None:
            return turns, []
        sizes = sizes or {}
        count_cap = self.limit if self.limit is not None else float("inf")
        byte_cap = self.max_bytes if self.max_bytes is not None else float("inf")
        kept = bytes_kept = 0
        for t in turns:
            if t.id not in self.dropped:
                n, b = self._size(t, sizes)
                kept, bytes_kept = kept + n, bytes_kept + b
        newly: list[str] = []
        if kept > count_cap or bytes_kept > byte_cap:
            for t in turns:  # oldest first; the newest turn's images always stay
                if (kept <= count_cap * LOW_WATER and bytes_kept <= byte_cap * LOW_WATER) or t is turns[-1]:
                    break
                n, b = self._size(t, sizes)
                if n and t.id not in self.dropped:
                    self.dropped.add(t.id)
                    self.dropped_images += n
                    kept, bytes_kept = kept - n, bytes_kept - b
                    newly.append(t.id)
            log.info("images_left_out", limit=self.limit, max_bytes=self.max_bytes, turns=len(newly), kept=kept,
                     kept_bytes=bytes_kept, total_dropped=self.dropped_images)
        out = [without_images(t, self.describe()) if t.id in self.dropped and image_count(t) else t for t in turns]
        return out, newly

    def describe(self) -> str:
        limits = [f"{self.limit} images"] if self.limit is not None else []
        if self.max_bytes is not None:
            limits.append(f"{self.max_bytes / IMAGE_SHARE_OF_BYTES / 1e6:.0f} MB")
        return " and ".join(limits)

    def statistics(self) -> tuple[int, int]:
        return len(self.dropped), self.dropped_images
