"""A local `python` participant for tests: checks it sees the images, then lists and finishes."""

from __future__ import annotations

from roboswe.protocol.participant import DecisionRequest, Finish, ImagePart, ListFiles, Operation


class SeeingAgent:
    def __init__(self, finish_after: int = 1):
        self.finish_after = finish_after
        self.seen_images: list[int] = []

    def decide(self, request: DecisionRequest) -> Operation:
        refs = [p for t in request.conversation for p in t.parts if isinstance(p, ImagePart)]
        assert all(r.digest in request.images for r in refs), "every referenced image arrives with the request"
        self.seen_images.append(len(refs))
        calls = sum(len(t.tool_calls()) for t in request.conversation)
        return ListFiles() if calls < self.finish_after else Finish(reason=f"saw {len(refs)} image(s)")


class LoneSurrogateAgent:
    """Writes a file whose content is a lone surrogate (the decision is invalid), then finishes."""

    def decide(self, request: DecisionRequest) -> Operation:
        from roboswe.protocol.participant import WriteFile

        calls = sum(len(t.tool_calls()) for t in request.conversation)
        return WriteFile(path="a.py", content="\ud83d") if calls == 0 else Finish(reason="done")
